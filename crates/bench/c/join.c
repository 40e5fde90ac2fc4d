/* HiPEC's nested-loops join (section 5.3) through the C API, as a user would
 * write it: the outer table is mapped with pp_map_file(path, 0, budget_bytes,
 * policy) and no other option, then scanned `loops` times, once per tuple of
 * the 4 KB inner table, counting key matches.
 *
 * The same workload as crates/bench/src/workload.rs (Workload::Join): the
 * table of 64-byte tuples written by crates/bench/src/datafile.rs, tuple i
 * holding its key i % 1024 in bytes 0..8; inner tuple j's key is
 * (j % 64) * (1024 / 64).
 *
 * Usage: pp-join-c PATH BUDGET_BYTES POLICY LOOPS
 * Prints one line of JSON: {"elapsed_ns":..,"matches":..,"len":..,
 * "bytes_read":..,"stats":{pp_stats_json}}. Exit status 2 on bad arguments,
 * 1 when mapping, reading statistics or unmapping fails.
 *
 * `pagepilot bench join` runs it for its "defaults (C API)" rows
 * (crates/bench/src/cjoin.rs); scripts/pagepilot builds it as
 * target/release/pp-join-c. Not "pagepilot-...": the library takes threads
 * named so for its own, and a main thread of that name for no application
 * thread left (it exits the process, crates/pager/src/lifecycle.rs). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pagepilot.h"

#define TUPLE 64
#define INNER_TUPLES (4096 / TUPLE)
#define KEY_SPACE 1024

static const char *prog = "pp-join-c";

static void usage(void) {
    fprintf(stderr, "usage: %s PATH BUDGET_BYTES POLICY LOOPS\n", prog);
}

/* Parses a positive decimal integer, or exits 2 naming the argument. */
static uint64_t positive(const char *name, const char *text) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != 0 || errno != 0 || v == 0) {
        fprintf(stderr, "%s: %s \"%s\" is not a positive integer\n", prog, name, text);
        usage();
        exit(2);
    }
    return (uint64_t)v;
}

/* Bytes this process caused to be read from a block device (read_bytes of
 * /proc/self/io), or 0 if unknown. */
static uint64_t read_bytes_self(void) {
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return 0;
    char line[128];
    uint64_t v = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "read_bytes: %" SCNu64, &v) == 1) break;
    }
    fclose(f);
    return v;
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* For each inner tuple, scan every outer tuple and count key matches. The
 * loads are volatile: each scan really touches the table, as the database's
 * join would. */
static uint64_t join(const volatile unsigned char *base, size_t len, uint64_t loops) {
    uint64_t inner[INNER_TUPLES];
    for (size_t j = 0; j < INNER_TUPLES; j++) inner[j] = j * (KEY_SPACE / INNER_TUPLES);
    size_t tuples = len / TUPLE;
    uint64_t matches = 0;
    for (uint64_t j = 0; j < loops; j++) {
        uint64_t key = inner[j % INNER_TUPLES];
        for (size_t i = 0; i < tuples; i++) {
            uint64_t outer = *(const volatile uint64_t *)(base + i * TUPLE);
            matches += outer == key;
        }
    }
    return matches;
}

int main(int argc, char **argv) {
    if (argc > 0 && argv[0][0] != 0) prog = argv[0];
    if (argc != 5) {
        fprintf(stderr, "%s: expected 4 arguments, got %d\n", prog, argc - 1);
        usage();
        return 2;
    }
    const char *path = argv[1];
    uint64_t budget = positive("BUDGET_BYTES", argv[2]);
    const char *policy = argv[3];
    uint64_t loops = positive("LOOPS", argv[4]);
    if (policy[0] == 0) {
        fprintf(stderr, "%s: POLICY is empty\n", prog);
        usage();
        return 2;
    }

    char err[PP_ERR_MAX] = "";
    pp_region *r = pp_map_file(path, 0, (size_t)budget, policy, err, sizeof err);
    if (!r) {
        fprintf(stderr, "%s: pp_map_file(%s, budget %" PRIu64 ", %s): %s\n", prog, path, budget,
                policy, err);
        return 1;
    }
    const volatile unsigned char *base = pp_addr(r);
    size_t len = pp_len(r);

    uint64_t read0 = read_bytes_self();
    uint64_t t0 = now_ns();
    uint64_t matches = join(base, len, loops);
    uint64_t elapsed = now_ns() - t0;
    uint64_t read1 = read_bytes_self();

    size_t cap = 16384;
    char *stats = NULL;
    int n;
    for (;;) {
        stats = realloc(stats, cap);
        if (!stats) {
            fprintf(stderr, "%s: out of memory for the statistics\n", prog);
            return 1;
        }
        n = pp_stats_json(r, stats, cap);
        if (n != -ERANGE || cap >= (1u << 24)) break;
        cap *= 2;
    }
    if (n < 0) {
        fprintf(stderr, "%s: pp_stats_json: %s\n", prog, strerror(-n));
        return 1;
    }
    int rc = pp_unmap(r);
    if (rc != 0) {
        fprintf(stderr, "%s: pp_unmap: %s\n", prog, strerror(-rc));
        return 1;
    }
    printf("{\"elapsed_ns\":%" PRIu64 ",\"matches\":%" PRIu64 ",\"len\":%zu,\"bytes_read\":%" PRIu64
           ",\"stats\":%s}\n",
           elapsed, matches, len, read1 - read0, stats);
    free(stats);
    return fflush(stdout) == 0 ? 0 : 1;
}
