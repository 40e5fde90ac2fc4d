/* What the C test programs share: the byte a tagged page holds at an
   offset, the byte of a dataspace written with a seed, and failing with a message (on stdout, and in a marker file for a
   child that outlives its parent). Included by one source file each. */
#ifndef PAGEPILOT_TEST_CHECK_H
#define PAGEPILOT_TEST_CHECK_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((unused)) static unsigned char page_byte(unsigned tag, unsigned page,
                                                   unsigned off) {
    uint32_t x = (uint32_t)page * 0x9E3779B1u ^ (uint32_t)off * 0x85EBCA77u ^
                 (uint32_t)tag * 0xC2B2AE3Du;
    return (unsigned char)(x ^ (x >> 15));
}

/* Byte `i` of a dataspace written with `seed` (persistent.c, far.c; the
 * Rust side of the persistent test computes it too, reading NAME.pages). */
__attribute__((unused)) static unsigned char byte_at(uint64_t seed, size_t i) {
    uint64_t x = (seed ^ (uint64_t)(i / 8)) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    return (unsigned char)(x >> (8 * (i % 8)));
}

/* "child: " in a forked process, so that its messages are told apart. */
static const char *who = "";
/* Set in a child that outlives its parent: a failure also lands there. */
static const char *fail_marker = NULL;

static void write_marker(const char *path, const char *text) {
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL) return;
    fputs(text, f);
    fclose(f);
    rename(tmp, path);
}

static void fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

static void fail(const char *file, int line, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char full[1200];
    snprintf(full, sizeof full, "FAIL %s%s:%d: %s\n", who, file, line, msg);
    fputs(full, stdout);
    fflush(stdout);
    if (fail_marker != NULL) write_marker(fail_marker, full);
    exit(1);
}

#define CHECK(cond, ...)                                    \
    do {                                                    \
        if (!(cond)) fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

#endif
