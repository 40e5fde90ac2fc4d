/* Far memory through include/pagepilot.h: run by crates/capi/tests/far.rs as
 * separate processes against a real Redis Cluster or redis-server.
 *
 *   far write SEEDS NAME PAGES SEED REPLICAS  creates NAME (PAGES pages; a wait
 *       for REPLICAS replicas, 500 ms, if > 0), writes every page through a
 *       region of 16 frames (so most pages are evicted and written back before
 *       the flush), checks that a second map and a delete are refused while
 *       it is mapped, pp_flush, pp_unmap; prints "flushed", "unmapped".
 *   far check SEEDS NAME PAGES SEED  maps NAME by name (len 0), checks every
 *       byte, unmaps, prints "checked".
 *   far delete SEEDS NAME  pp_delete_far, then a len-0 map and a second delete
 *       are refused; prints "deleted", "errno WHAT: N MESSAGE" lines.
 *   far refusals SEEDS  prints "errno WHAT: N MESSAGE" for each refusal.
 *   far unreplicated URL NAME  on a server without replicas: a map creating
 *       NAME with a wait for 1 replica is refused; then NAME (created, its
 *       wait recorded) mapped with replicas 0 takes a write whose pp_flush
 *       fails; prints "errno ...: N MESSAGE" and "flush unreplicated: RC".
 *
 * Prints "FAIL ..." and exits 1 on the first failed check. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "pagepilot.h"

#define PAGE 4096
#define BUDGET (16 * PAGE)
#define WAIT_MS 500

/* A refused map: NULL, errno `want`, a message; prints "errno WHAT: N MESSAGE". */
static void expect_refused(pp_region *r, int errno_got, int want, const char *err,
                           const char *what) {
    CHECK(r == NULL, "%s was mapped", what);
    CHECK(err[0] != 0, "%s: no message", what);
    CHECK(errno_got == want, "%s: errno %d, %d expected: %s", what, errno_got, want, err);
    printf("errno %s: %d %s\n", what, errno_got, err);
}

static void do_write(const char *seeds, const char *name, size_t pages, uint64_t seed,
                     unsigned replicas) {
    char err[PP_ERR_MAX] = "";
    pp_region *r = pp_map_far(seeds, name, pages * PAGE, replicas, replicas ? WAIT_MS : 0,
                              BUDGET, "lru", err, sizeof err);
    CHECK(r != NULL, "pp_map_far: %s", err);
    CHECK(pp_len(r) == pages * PAGE, "pp_len %zu", pp_len(r));
    unsigned char *m = pp_addr(r);
    /* Pages in a stride that defeats any sequence. */
    for (size_t k = 0; k < pages; k++) {
        size_t p = (k * 37) % pages;
        for (size_t i = 0; i < PAGE; i++) m[p * PAGE + i] = byte_at(seed, p * PAGE + i);
    }
    /* Mapped: a second map and a delete are refused. */
    char err2[PP_ERR_MAX] = "";
    errno = 0;
    pp_region *again = pp_map_far(seeds, name, 0, 0, 0, BUDGET, "clock", err2, sizeof err2);
    expect_refused(again, errno, EBUSY, err2, "mapped twice");
    int rc = pp_delete_far(seeds, name, err2, sizeof err2);
    CHECK(rc == -EBUSY, "delete while mapped: %d %s", rc, err2);
    printf("errno delete while mapped: %d %s\n", -rc, err2);
    rc = pp_flush(r);
    CHECK(rc == 0, "pp_flush: %d", rc);
    printf("flushed\n");
    char stats[4096];
    CHECK(pp_stats_json(r, stats, sizeof stats) > 0, "stats");
    printf("stats: %s\n", stats);
    rc = pp_unmap(r);
    CHECK(rc == 0, "pp_unmap: %d", rc);
    printf("unmapped\n");
}

static void do_check(const char *seeds, const char *name, size_t pages, uint64_t seed) {
    char err[PP_ERR_MAX] = "";
    pp_region *r = pp_map_far(seeds, name, 0, 0, 0, BUDGET, "clock", err, sizeof err);
    CHECK(r != NULL, "pp_map_far (by name): %s", err);
    CHECK(pp_len(r) == pages * PAGE, "pp_len %zu, %zu expected", pp_len(r), pages * PAGE);
    const unsigned char *m = pp_addr(r);
    for (size_t i = 0; i < pages * PAGE; i++) {
        CHECK(m[i] == byte_at(seed, i), "byte %zu (page %zu): %u, %u expected", i, i / PAGE,
              m[i], byte_at(seed, i));
    }
    CHECK(pp_unmap(r) == 0, "pp_unmap");
    printf("checked\n");
}

static void do_delete(const char *seeds, const char *name) {
    char err[PP_ERR_MAX] = "";
    int rc = pp_delete_far(seeds, name, err, sizeof err);
    CHECK(rc == 0, "pp_delete_far: %d %s", rc, err);
    printf("deleted\n");
    err[0] = 0;
    errno = 0;
    pp_region *r = pp_map_far(seeds, name, 0, 0, 0, BUDGET, "clock", err, sizeof err);
    expect_refused(r, errno, ENOENT, err, "map after delete");
    rc = pp_delete_far(seeds, name, err, sizeof err);
    CHECK(rc == -ENOENT, "second delete: %d %s", rc, err);
    printf("errno second delete: %d %s\n", -rc, err);
}

static void do_refusals(const char *seeds) {
    char err[PP_ERR_MAX];
    struct {
        const char *what, *seeds, *name;
        size_t len;
        unsigned replicas, wait_ms;
        size_t budget;
        int want;
    } cases[] = {
        {"missing", seeds, "pp-capi-missing", 0, 0, 0, BUDGET, ENOENT},
        {"empty seeds", "", "x", PAGE, 0, 0, BUDGET, EINVAL},
        {"seed without port", "localhost", "x", PAGE, 0, 0, BUDGET, EINVAL},
        {"empty seed", "127.0.0.1:7000,,127.0.0.1:7001", "x", PAGE, 0, 0, BUDGET, EINVAL},
        {"bad url", "redis://127.0.0.1:notaport", "x", PAGE, 0, 0, BUDGET, EINVAL},
        {"NULL seeds", NULL, "x", PAGE, 0, 0, BUDGET, EINVAL},
        {"bad name", seeds, "a/b", PAGE, 0, 0, BUDGET, EINVAL},
        {"empty name", seeds, "", PAGE, 0, 0, BUDGET, EINVAL},
        {"NULL name", seeds, NULL, PAGE, 0, 0, BUDGET, EINVAL},
        {"wait of 0 ms", seeds, "x", PAGE, 1, 0, BUDGET, EINVAL},
        {"wait beyond the reply timeout", seeds, "x", PAGE, 1, 5000, BUDGET, EINVAL},
        {"too long", seeds, "pp-capi-huge", (size_t)1 << 41, 0, 0, BUDGET, EINVAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = 0;
        errno = 0;
        pp_region *r = pp_map_far(cases[i].seeds, cases[i].name, cases[i].len,
                                  cases[i].replicas, cases[i].wait_ms, cases[i].budget, "lru",
                                  err, sizeof err);
        expect_refused(r, errno, cases[i].want, err, cases[i].what);
    }
    int rc = pp_delete_far(seeds, "pp-capi-missing", err, sizeof err);
    CHECK(rc == -ENOENT, "delete missing: %d %s", rc, err);
    printf("errno delete missing: %d %s\n", -rc, err);
    rc = pp_delete_far(seeds, "a{b}", err, sizeof err);
    CHECK(rc == -EINVAL, "delete a{b}: %d %s", rc, err);
    printf("errno delete bad name: %d %s\n", -rc, err);
    rc = pp_delete_far("", "x", err, sizeof err);
    CHECK(rc == -EINVAL, "delete with empty seeds: %d %s", rc, err);
    printf("errno delete empty seeds: %d %s\n", -rc, err);
    printf("OK\n");
}

static void do_unreplicated(const char *url, const char *name) {
    char err[PP_ERR_MAX] = "";
    errno = 0;
    pp_region *r = pp_map_far(url, name, 4 * PAGE, 1, 100, BUDGET, "lru", err, sizeof err);
    expect_refused(r, errno, ETIMEDOUT, err, "unreplicated create");
    /* The dataspace stays, its wait recorded: any opener's write-back waits. */
    r = pp_map_far(url, name, 0, 0, 0, BUDGET, "lru", err, sizeof err);
    CHECK(r != NULL, "pp_map_far (reopen): %s", err);
    CHECK(pp_len(r) == 4 * PAGE, "pp_len %zu", pp_len(r));
    unsigned char *m = pp_addr(r);
    m[0] = 42;
    int rc = pp_flush(r);
    CHECK(rc < 0, "pp_flush of an unreplicated write: %d", rc);
    printf("flush unreplicated: %d\n", rc);
    CHECK(m[0] == 42, "the dirty page kept: %u", m[0]);
    /* Exit without unmapping: pp_unmap would wait for the replica again. */
    printf("OK\n");
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 7 && strcmp(argv[1], "write") == 0) {
        do_write(argv[2], argv[3], strtoul(argv[4], NULL, 10), strtoull(argv[5], NULL, 10),
                 (unsigned)strtoul(argv[6], NULL, 10));
    } else if (argc == 6 && strcmp(argv[1], "check") == 0) {
        do_check(argv[2], argv[3], strtoul(argv[4], NULL, 10), strtoull(argv[5], NULL, 10));
    } else if (argc == 4 && strcmp(argv[1], "delete") == 0) {
        do_delete(argv[2], argv[3]);
    } else if (argc == 3 && strcmp(argv[1], "refusals") == 0) {
        do_refusals(argv[2]);
    } else if (argc == 4 && strcmp(argv[1], "unreplicated") == 0) {
        do_unreplicated(argv[2], argv[3]);
    } else {
        fprintf(stderr,
                "usage: far write SEEDS NAME PAGES SEED REPLICAS | check SEEDS NAME PAGES SEED"
                " | delete SEEDS NAME | refusals SEEDS | unreplicated URL NAME\n");
        return 2;
    }
    return 0;
}
