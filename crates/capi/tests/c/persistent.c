/* Persistent dataspaces through include/pagepilot.h: run by
 * crates/capi/tests/persistent.rs as separate processes.
 *
 *   persistent write DIR NAME PAGES SEED  creates NAME (PAGES pages) in DIR,
 *       writes every page through a region of 16 frames (so most pages are
 *       evicted and written back before the flush), pp_flush, prints
 *       "flushed" and SIGKILLs itself.
 *   persistent check DIR NAME PAGES SEED  reopens NAME by name (len 0), checks
 *       every byte, checks that a second map and a delete are refused while
 *       it is mapped, unmaps, prints "checked".
 *   persistent refusals DIR               prints "refused WHAT: MESSAGE" or
 *       "errno WHAT: N MESSAGE" for each refusal.
 *
 * Prints "FAIL ..." and exits 1 on the first failed check. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "pagepilot.h"

#define PAGE 4096
#define BUDGET (16 * PAGE)

static void do_write(const char *dir, const char *name, size_t pages, uint64_t seed) {
    char err[PP_ERR_MAX] = "";
    pp_region *r = pp_map_persistent(name, dir, pages * PAGE, BUDGET, "lru", err, sizeof err);
    CHECK(r != NULL, "pp_map_persistent: %s", err);
    CHECK(pp_len(r) == pages * PAGE, "pp_len %zu", pp_len(r));
    unsigned char *m = pp_addr(r);
    /* Pages in a stride that defeats any sequence. */
    for (size_t k = 0; k < pages; k++) {
        size_t p = (k * 37) % pages;
        for (size_t i = 0; i < PAGE; i++) m[p * PAGE + i] = byte_at(seed, p * PAGE + i);
    }
    int rc = pp_flush(r);
    CHECK(rc == 0, "pp_flush: %d", rc);
    printf("flushed\n");
    fflush(stdout);
    kill(getpid(), SIGKILL);
    for (;;) pause();
}

static void do_check(const char *dir, const char *name, size_t pages, uint64_t seed) {
    char err[PP_ERR_MAX] = "";
    pp_region *r = pp_map_persistent(name, dir, 0, BUDGET, "clock", err, sizeof err);
    CHECK(r != NULL, "pp_map_persistent (reopen): %s", err);
    CHECK(pp_len(r) == pages * PAGE, "pp_len %zu, %zu expected", pp_len(r), pages * PAGE);
    const unsigned char *m = pp_addr(r);
    for (size_t i = 0; i < pages * PAGE; i++) {
        CHECK(m[i] == byte_at(seed, i), "byte %zu (page %zu): %u, %u expected", i, i / PAGE,
              m[i], byte_at(seed, i));
    }
    /* Mapped: a second map and a delete are refused. */
    char err2[PP_ERR_MAX] = "";
    pp_region *again = pp_map_persistent(name, dir, 0, BUDGET, "clock", err2, sizeof err2);
    CHECK(again == NULL, "mapped twice");
    printf("refused mapped twice: %s\n", err2);
    int rc = pp_delete_persistent(name, dir, err2, sizeof err2);
    CHECK(rc == -EBUSY, "delete while mapped: %d %s", rc, err2);
    printf("errno delete while mapped: %d %s\n", -rc, err2);
    char stats[4096];
    CHECK(pp_stats_json(r, stats, sizeof stats) > 0, "stats");
    CHECK(pp_unmap(r) == 0, "pp_unmap");
    printf("checked\n");
}

static void expect_null(pp_region *r, const char *err, const char *what) {
    CHECK(r == NULL, "%s was mapped", what);
    CHECK(err[0] != 0, "%s: no message", what);
    printf("refused %s: %s\n", what, err);
}

static void do_refusals(const char *dir) {
    char err[PP_ERR_MAX];
    err[0] = 0;
    expect_null(pp_map_persistent("a/b", dir, PAGE, BUDGET, "lru", err, sizeof err), err,
                "bad name");
    err[0] = 0;
    expect_null(pp_map_persistent("", dir, PAGE, BUDGET, "lru", err, sizeof err), err,
                "empty name");
    err[0] = 0;
    expect_null(pp_map_persistent(NULL, dir, PAGE, BUDGET, "lru", err, sizeof err), err,
                "NULL name");
    err[0] = 0;
    expect_null(pp_map_persistent("missing", dir, 0, BUDGET, "lru", err, sizeof err), err,
                "missing dataspace");
    err[0] = 0;
    expect_null(pp_map_persistent("fresh", dir, 4 * PAGE, BUDGET, "no-such-policy", err,
                                  sizeof err),
                err, "unknown policy");
    err[0] = 0;
    expect_null(pp_map_persistent("fresh", dir, 4 * PAGE, 100, "lru", err, sizeof err), err,
                "budget below one page");
    /* "fresh" was created by the refused maps above (its length checked,
       then the region refused): a longer length is refused. */
    err[0] = 0;
    expect_null(pp_map_persistent("fresh", dir, 8 * PAGE, BUDGET, "lru", err, sizeof err), err,
                "shorter than asked");
    int rc = pp_delete_persistent("missing", dir, err, sizeof err);
    CHECK(rc == -ENOENT, "delete missing: %d %s", rc, err);
    printf("errno delete missing: %d %s\n", -rc, err);
    rc = pp_delete_persistent("..", dir, err, sizeof err);
    CHECK(rc == -EINVAL, "delete ..: %d %s", rc, err);
    printf("errno delete bad name: %d %s\n", -rc, err);
    rc = pp_delete_persistent(NULL, dir, err, sizeof err);
    CHECK(rc == -EINVAL, "delete NULL: %d %s", rc, err);
    rc = pp_delete_persistent("fresh", dir, err, sizeof err);
    CHECK(rc == 0, "delete fresh: %d %s", rc, err);
    printf("OK\n");
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 6 && strcmp(argv[1], "write") == 0) {
        do_write(argv[2], argv[3], strtoul(argv[4], NULL, 10), strtoull(argv[5], NULL, 10));
    } else if (argc == 6 && strcmp(argv[1], "check") == 0) {
        do_check(argv[2], argv[3], strtoul(argv[4], NULL, 10), strtoull(argv[5], NULL, 10));
    } else if (argc == 3 && strcmp(argv[1], "refusals") == 0) {
        do_refusals(argv[2]);
    } else {
        fprintf(stderr, "usage: persistent write|check DIR NAME PAGES SEED | refusals DIR\n");
        return 2;
    }
    return 0;
}
