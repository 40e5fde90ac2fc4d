/* Exercises libpagepilot.so through include/pagepilot.h only, as any C
 * program would. Run by crates/capi/tests/c_api.rs with a scratch directory on
 * a disk as argv[1]. Prints "FAIL ..." and exits 1 on the first failed check. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pagepilot.h"

#define PAGE 4096
#define PAGES 256  /* 1 MiB region */
#define BUDGET_PAGES 16

#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (!(cond)) {                                     \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);    \
            printf(__VA_ARGS__);                           \
            printf("\n");                                  \
            exit(1);                                       \
        }                                                  \
    } while (0)

static void expect_refused(pp_region *r, const char *err, const char *needle, const char *what);

static unsigned char pattern(size_t page, size_t off) {
    return (unsigned char)(page * 31 + off * 7 + 1);
}

static void write_file(const char *path, size_t pages, mode_t mode) {
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
    unsigned char buf[PAGE];
    for (size_t p = 0; p < pages; p++) {
        for (size_t i = 0; i < PAGE; i++) buf[i] = pattern(p, i);
        CHECK(write(fd, buf, PAGE) == PAGE, "write %s", path);
    }
    CHECK(fsync(fd) == 0 && close(fd) == 0, "sync %s", path);
    CHECK(chmod(path, mode) == 0, "chmod %s", path);
}

/* Several passes over the pages in a stride that defeats any sequence, so the
 * region (16 pages of budget for 256) evicts and pages in again and again. */
static void file_region(const char *path) {
    char err[PP_ERR_MAX] = "";
    pp_region *r = pp_map_file(path, 1, BUDGET_PAGES * PAGE, "clock", err, sizeof err);
    CHECK(r != NULL, "pp_map_file: %s", err);
    CHECK(pp_len(r) == PAGES * PAGE, "pp_len %zu", pp_len(r));
    volatile unsigned char *m = pp_addr(r);
    CHECK(m != NULL, "pp_addr");

    for (int pass = 0; pass < 3; pass++) {
        for (size_t k = 0; k < PAGES; k++) {
            size_t p = (k * 37 + pass) % PAGES;
            size_t off = (k * 13) % PAGE;
            unsigned char want = pattern(p, off);
            if (p % 4 == 0 && pass > 0) want ^= 0xff; /* written in pass 0 */
            CHECK(m[p * PAGE + off] == want, "file page %zu off %zu pass %d: %u != %u", p, off,
                  pass, m[p * PAGE + off], want);
            if (pass == 0 && p % 4 == 0) {
                for (size_t i = 0; i < PAGE; i++) m[p * PAGE + i] ^= 0xff;
            }
        }
    }
    CHECK(pp_flush(r) == 0, "pp_flush");

    char stats[4096];
    int n = pp_stats_json(r, stats, sizeof stats);
    CHECK(n > 0 && (size_t)n == strlen(stats), "pp_stats_json returned %d", n);
    CHECK(strstr(stats, "\"missing_faults\"") && strstr(stats, "\"evictions\""), "stats: %s",
          stats);
    char tiny[8];
    CHECK(pp_stats_json(r, tiny, sizeof tiny) == -ERANGE && tiny[0] == 0, "small buffer");
    CHECK(pp_stats_json(NULL, stats, sizeof stats) == -EINVAL, "NULL region");
    printf("file region stats: %s\n", stats);
    CHECK(pp_unmap(r) == 0, "pp_unmap");

    /* The writes reached the file, the rest is untouched. */
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0, "reopen");
    unsigned char buf[PAGE];
    for (size_t p = 0; p < PAGES; p++) {
        CHECK(pread(fd, buf, PAGE, (off_t)(p * PAGE)) == PAGE, "pread");
        for (size_t i = 0; i < PAGE; i++) {
            unsigned char want = pattern(p, i) ^ (p % 4 == 0 ? 0xff : 0);
            CHECK(buf[i] == want, "file after unmap page %zu off %zu: %u != %u", p, i, buf[i],
                  want);
        }
    }
    close(fd);
}

/* Pins hold pages through scans many times the budget; eviction events carry the bits. */
static void pins_and_evictions(const char *path) {
    char err[PP_ERR_MAX] = "";
    pp_region *r = pp_map_file(path, 1, BUDGET_PAGES * PAGE, "clock", err, sizeof err);
    CHECK(r != NULL, "pp_map_file: %s", err);
    volatile unsigned char *m = pp_addr(r);
    CHECK(pp_subscribe_evictions(r, 4096) == 0, "pp_subscribe_evictions");
    CHECK(pp_pin(r, 10 * PAGE + 1, 4 * PAGE - 2) == 0, "pp_pin");
    CHECK(pp_pin(r, 100 * PAGE, BUDGET_PAGES * PAGE) == -ENOMEM, "pins beyond the budget");
    CHECK(pp_pin(r, PAGES * PAGE, 1) == -EINVAL, "pin outside the region");
    CHECK(pp_unpin(r, 100 * PAGE, PAGE) == -EINVAL, "unpin of a page not pinned");
    CHECK(pp_pin(NULL, 0, PAGE) == -EINVAL, "pin of a NULL handle");
    m[200 * PAGE + 5] ^= 0xff;
    for (int pass = 0; pass < 3; pass++) {
        for (size_t p = 0; p < PAGES; p++) (void)m[p * PAGE];
    }
    pp_eviction ev[64];
    size_t events = 0, written_seen = 0;
    int n;
    while ((n = pp_drain_evictions(r, ev, 64)) > 0) {
        for (int i = 0; i < n; i++) {
            size_t page = ev[i].offset / PAGE;
            CHECK(page < 10 || page >= 14, "pinned page %zu evicted", page);
            if (page == 200 && ev[i].modified) written_seen++;
            CHECK(ev[i].reserved[0] == 0, "reserved bytes");
        }
        events += (size_t)n;
    }
    CHECK(n == 0, "pp_drain_evictions returned %d", n);
    CHECK(events >= 2 * PAGES && written_seen == 1, "%zu events, page 200 modified %zu", events,
          written_seen);
    CHECK(pp_evictions_lost(r) == 0, "nothing lost");
    CHECK(pp_drain_evictions(r, NULL, 4) == -EINVAL, "NULL out");
    CHECK(pp_drain_evictions(NULL, ev, 4) == -EINVAL, "NULL handle");
    char stats[4096];
    CHECK(pp_stats_json(r, stats, sizeof stats) > 0, "stats");
    CHECK(strstr(stats, "\"pinned_pages\":4"), "stats: %s", stats);
    /* A small queue loses the oldest and says so. */
    CHECK(pp_subscribe_evictions(r, 2) == 0, "resubscribe");
    for (size_t p = 20; p < 60; p++) (void)m[p * PAGE];
    CHECK(pp_drain_evictions(r, ev, 64) == 2 && pp_evictions_lost(r) > 0, "lost %llu",
          (unsigned long long)pp_evictions_lost(r));
    CHECK(pp_unpin(r, 10 * PAGE, 4 * PAGE) == 0, "pp_unpin");
    m[200 * PAGE + 5] ^= 0xff;
    CHECK(pp_unmap(r) == 0, "pp_unmap");
    printf("pins and evictions: ok\n");
}

static void anon_region(void) {
    char err[PP_ERR_MAX] = "";
    pp_region *r = pp_map_anon(PAGES * PAGE, BUDGET_PAGES * PAGE, "fifo", err, sizeof err);
    CHECK(r != NULL, "pp_map_anon: %s", err);
    volatile unsigned char *m = pp_addr(r);
    for (size_t p = 0; p < PAGES; p++) {
        CHECK(m[p * PAGE + p % PAGE] == 0, "anon page %zu not zero", p);
        for (size_t i = 0; i < PAGE; i += 64) m[p * PAGE + i] = pattern(p, i);
    }
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < PAGES; k++) {
            size_t p = (k * 101 + pass) % PAGES;
            for (size_t i = 0; i < PAGE; i += 64) {
                CHECK(m[p * PAGE + i] == pattern(p, i), "anon page %zu off %zu", p, i);
            }
            CHECK(m[p * PAGE + 1] == 0, "anon page %zu byte 1 not zero", p);
        }
    }
    char stats[4096];
    CHECK(pp_stats_json(r, stats, sizeof stats) > 0, "anon stats");
    printf("anon region stats: %s\n", stats);
    CHECK(pp_unmap(r) == 0, "anon pp_unmap");
}

static void options_region(const char *path) {
    pp_options o;
    pp_options_init(&o);
    o.path = path;
    o.len = 64 * PAGE;
    o.budget_bytes = 8 * PAGE;
    o.policy = "fifo";
    o.readahead_max_pages = 1;
    char err[PP_ERR_MAX] = "";
    pp_region *r = pp_map(&o, err, sizeof err);
    CHECK(r != NULL, "pp_map: %s", err);
    CHECK(pp_len(r) == 64 * PAGE, "pp_map len %zu", pp_len(r));
    volatile unsigned char *m = pp_addr(r);
    CHECK(m[4 * PAGE + 9] == (pattern(4, 9) ^ 0xff), "pp_map data page 4");
    CHECK(m[5 * PAGE + 9] == pattern(5, 9), "pp_map data page 5");
    CHECK(pp_unmap(r) == 0, "pp_map unmap");
    o.size = 3;
    CHECK(pp_map(&o, err, sizeof err) == NULL && strstr(err, "pp_options_init"), "bad size: %s",
          err);
}

/* A region guaranteed 8 frames of a 64-frame pool starts with its budget of 32 (free);
 * a minimum above the budget, reserves that do not fit or out of range, and a reserve
 * without a fault limit are refused. */
static void pool_minimums_and_reserves(void) {
    char err[PP_ERR_MAX] = "";
    pp_pool *pool = pp_pool_create(64 * PAGE, err, sizeof err);
    CHECK(pool != NULL, "pp_pool_create: %s", err);
    pp_options o;
    pp_options_init(&o);
    o.len = PAGES * PAGE;
    o.budget_bytes = 32 * PAGE;
    o.pool = pool;
    o.min_frames = 33;
    expect_refused(pp_map(&o, err, sizeof err), err, "min_frames of 33", "a minimum above the budget");
    CHECK(strstr(err, "budget of 32"), "the budget is named: %s", err);
    o.min_frames = 8;
    pp_region *r = pp_map(&o, err, sizeof err);
    CHECK(r != NULL, "pp_map with min_frames: %s", err);
    for (size_t p = 0; p < PAGES; p++) ((volatile unsigned char *)pp_addr(r))[p * PAGE] = pattern(p, 3);
    for (size_t p = 0; p < PAGES; p++)
        CHECK(((volatile unsigned char *)pp_addr(r))[p * PAGE] == pattern(p, 3), "page %zu", p);
    char stats[4096];
    CHECK(pp_pool_stats_json(pool, stats, sizeof stats) > 0, "pool stats");
    CHECK(strstr(stats, "\"min\":8,\"held\":32"), "min 8, held 32: %s", stats);
    printf("pool with min_frames: %s\n", stats);
    /* RAPHA: a fault takes 20 us, the system period is 100 ms: 1000 faults per 100 ms
       take 0.2 of the processor, beside a reserve of 0.9 that passes 1 (Eq. 2). */
    o.min_frames = 0;
    o.budget_bytes = 8 * PAGE;
    o.fault_limit = 1000;
    o.fault_period_us = 100000;
    o.cpu_reserve = 0.9;
    expect_refused(pp_map(&o, err, sizeof err), err, "Eq. 2", "a reserve that does not fit");
    o.cpu_reserve = 0.8;
    pp_region *fits = pp_map(&o, err, sizeof err);
    CHECK(fits != NULL, "a reserve at the boundary: %s", err);
    o.cpu_reserve = 1.5;
    expect_refused(pp_map(&o, err, sizeof err), err, "reserve", "a reserve above one processor");
    o.cpu_reserve = 0.1;
    o.fault_limit = 0;
    o.fault_period_us = 0;
    expect_refused(pp_map(&o, err, sizeof err), err, "fault limit", "a reserve without a fault limit");
    CHECK(pp_unmap(fits) == 0, "pp_unmap reserve");
    CHECK(pp_unmap(r) == 0, "pp_unmap min_frames");
    pp_pool_destroy(pool);
}

/* Two anonymous regions drawing from one pool of 32 frames, 16 each: their
 * data survives paging, the pool reports both, a third minimum is refused. */
static void pooled_regions(void) {
    char err[PP_ERR_MAX] = "";
    CHECK(pp_pool_create(100, err, sizeof err) == NULL && strstr(err, "at least one page"),
          "pool below a page: %s", err);
    pp_pool *pool = pp_pool_create(2 * BUDGET_PAGES * PAGE, err, sizeof err);
    CHECK(pool != NULL, "pp_pool_create: %s", err);
    pp_region *r[2];
    for (int k = 0; k < 2; k++) {
        pp_options o;
        pp_options_init(&o);
        o.len = PAGES * PAGE;
        o.budget_bytes = BUDGET_PAGES * PAGE;
        o.pool = pool;
        r[k] = pp_map(&o, err, sizeof err);
        CHECK(r[k] != NULL, "pooled pp_map %d: %s", k, err);
    }
    for (size_t p = 0; p < PAGES; p++) {
        for (int k = 0; k < 2; k++) {
            ((volatile unsigned char *)pp_addr(r[k]))[p * PAGE] = pattern(p, k);
        }
    }
    for (size_t p = 0; p < PAGES; p++) {
        for (int k = 0; k < 2; k++) {
            CHECK(((volatile unsigned char *)pp_addr(r[k]))[p * PAGE] == pattern(p, k),
                  "pooled region %d page %zu", k, p);
        }
    }
    char stats[4096];
    CHECK(pp_pool_stats_json(pool, stats, sizeof stats) > 0, "pool stats");
    CHECK(strstr(stats, "\"total_frames\":32") && strstr(stats, "\"free_frames\":0"),
          "pool stats: %s", stats);
    printf("pool stats: %s\n", stats);
    pp_options o;
    pp_options_init(&o);
    o.len = PAGES * PAGE;
    o.budget_bytes = PAGE;
    o.pool = pool;
    err[0] = 0;
    expect_refused(pp_map(&o, err, sizeof err), err, "minFrame", "a minimum beyond the pool");
    /* A fault limit on a pooled region: its faults beyond 8 per 2 ms wait. */
    pp_region *old = r[1];
    CHECK(pp_unmap(old) == 0, "pooled pp_unmap 1");
    o.budget_bytes = BUDGET_PAGES * PAGE;
    o.fault_limit = 8;
    o.fault_period_us = 2000;
    o.fault_around_pages = 1;
    o.zero_around_max_pages = 1; /* one fault per page: 64 faults, 8 per 2 ms */
    r[1] = pp_map(&o, err, sizeof err);
    CHECK(r[1] != NULL, "limited pp_map: %s", err);
    for (size_t p = 0; p < 64; p++) ((volatile unsigned char *)pp_addr(r[1]))[p * PAGE] = 1;
    CHECK(pp_stats_json(r[1], stats, sizeof stats) > 0, "limited stats");
    CHECK(strstr(stats, "\"postponed_faults\":0,") == NULL, "no fault postponed: %s", stats);
    o.fault_period_us = 0;
    err[0] = 0;
    expect_refused(pp_map(&o, err, sizeof err), err, "fault_limit", "a fault limit over no time");
    o.fault_period_us = 1000;
    o.fault_limit = 0;
    err[0] = 0;
    expect_refused(pp_map(&o, err, sizeof err), err, "fault_limit", "a fault limit of no faults");
    pp_pool_destroy(pool);
    for (int k = 0; k < 2; k++) CHECK(pp_unmap(r[k]) == 0, "pooled pp_unmap %d", k);
    CHECK(pp_pool_stats_json(NULL, stats, sizeof stats) == -EINVAL, "NULL pool stats");
    pool_minimums_and_reserves();
}

/* A faulting-thread region: the thread serves its own faults; a system call
 * into an unmapped page fails with EFAULT unless pp_prefault mapped it. */
static void faulting_thread_region(const char *path) {
    pp_options o;
    pp_options_init(&o);
    o.len = PAGES * PAGE;
    o.budget_bytes = BUDGET_PAGES * PAGE;
    o.policy = "clock";
    o.faulting_thread = 1;
    char err[PP_ERR_MAX] = "";
    pp_region *r = pp_map(&o, err, sizeof err);
    CHECK(r != NULL, "pp_map faulting thread: %s", err);
    volatile unsigned char *m = pp_addr(r);
    for (size_t p = 0; p < PAGES; p++) m[p * PAGE] = pattern(p, 0);
    for (size_t p = 0; p < PAGES; p++) {
        CHECK(m[p * PAGE] == pattern(p, 0), "faulting-thread page %zu", p);
    }
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0, "open %s", path);
    /* Page 3 was evicted long ago: the kernel's own write into it fails. */
    unsigned char *dst = (unsigned char *)pp_addr(r) + 3 * PAGE;
    errno = 0;
    CHECK(pread(fd, dst, PAGE, 0) == -1 && errno == EFAULT,
          "read(2) into an unmapped faulting-thread page: errno %d", errno);
    CHECK(pp_prefault(r, 3 * PAGE, PAGE, 1) == 0, "pp_prefault");
    CHECK(pread(fd, dst, PAGE, 0) == PAGE, "read(2) after pp_prefault: errno %d", errno);
    CHECK(m[3 * PAGE + 9] == (pattern(0, 9) ^ 0xff), "read(2) data in the region (file page 0, inverted by file_region)");
    close(fd);
    CHECK(pp_prefault(r, PAGES * PAGE - 1, 2, 0) == -ERANGE, "pp_prefault outside");
    CHECK(pp_prefault(NULL, 0, 1, 0) == -EINVAL, "pp_prefault NULL");
    CHECK(pp_unmap(r) == 0, "faulting-thread pp_unmap");
}

/* A region mapped with defaults only (pp_map_anon, pp_map_file and no other
 * option): the kernel's own writes into its memory, read(2) and pread(2) from
 * a file, succeed without pp_prefault, into pages never touched and pages
 * evicted alike (16 frames for 256 pages), and the data is right. */
static void defaults_read_into_region(const char *dir) {
    char src[512], dst[512], err[256] = "";
    snprintf(src, sizeof src, "%s/read-src.dat", dir);
    snprintf(dst, sizeof dst, "%s/read-dst.dat", dir);
    write_file(src, PAGES, 0644);
    write_file(dst, PAGES, 0644);
    int fd = open(src, O_RDONLY);
    CHECK(fd >= 0, "open %s: %s", src, strerror(errno));

    /* Anonymous: one read(2) of the whole file, 16 times the budget. */
    pp_region *r = pp_map_anon(PAGES * PAGE, BUDGET_PAGES * PAGE, "lru", err, sizeof err);
    CHECK(r != NULL, "pp_map_anon defaults: %s", err);
    unsigned char *m = pp_addr(r);
    size_t done = 0;
    while (done < PAGES * PAGE) {
        ssize_t n = read(fd, m + done, PAGES * PAGE - done);
        CHECK(n > 0, "read(2) into a defaults anonymous region at %zu: %zd, %s", done, n,
              strerror(errno));
        done += (size_t)n;
    }
    for (size_t p = 0; p < PAGES; p++) {
        for (size_t i = 0; i < PAGE; i += 61) {
            CHECK(((volatile unsigned char *)m)[p * PAGE + i] == pattern(p, i),
                  "read(2) data in the anonymous region, page %zu off %zu", p, i);
        }
    }
    CHECK(pp_unmap(r) == 0, "defaults anon pp_unmap");

    /* File, writable: pread(2) file page p + 1 into region page p, back to
     * front, then the region and the file hold the shifted pages. */
    r = pp_map_file(dst, 1, BUDGET_PAGES * PAGE, "clock", err, sizeof err);
    CHECK(r != NULL, "pp_map_file defaults: %s", err);
    m = pp_addr(r);
    for (size_t k = 0; k < PAGES; k++) {
        size_t p = PAGES - 1 - k, from = (p + 1) % PAGES;
        ssize_t n = pread(fd, m + p * PAGE, PAGE, (off_t)(from * PAGE));
        CHECK(n == PAGE, "pread(2) into a defaults file region, page %zu: %zd, %s", p, n,
              strerror(errno));
    }
    for (size_t p = 0; p < PAGES; p++) {
        CHECK(((volatile unsigned char *)m)[p * PAGE + 5] == pattern((p + 1) % PAGES, 5),
              "pread(2) data in the file region, page %zu", p);
    }
    CHECK(pp_unmap(r) == 0, "defaults file pp_unmap");
    close(fd);
    fd = open(dst, O_RDONLY);
    CHECK(fd >= 0, "reopen %s", dst);
    unsigned char buf[PAGE];
    for (size_t p = 0; p < PAGES; p++) {
        CHECK(pread(fd, buf, PAGE, (off_t)(p * PAGE)) == PAGE, "pread %s", dst);
        for (size_t i = 0; i < PAGE; i++) {
            CHECK(buf[i] == pattern((p + 1) % PAGES, i), "file page %zu off %zu after unmap", p,
                  i);
        }
    }
    close(fd);
    unlink(src);
    unlink(dst);
    printf("read(2) into defaults regions: ok\n");
}

/* Every bad input: NULL and a message naming the problem. */
static void expect_refused(pp_region *r, const char *err, const char *needle, const char *what) {
    CHECK(r == NULL, "%s was mapped", what);
    CHECK(err[0] != 0, "%s: empty message", what);
    CHECK(strstr(err, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, err, needle);
    printf("refused %s: %s\n", what, err);
}

static void bad_input(const char *dir, const char *file) {
    char err[PP_ERR_MAX];
    char missing[512], ro[512], empty[512];
    snprintf(missing, sizeof missing, "%s/does-not-exist.dat", dir);
    snprintf(ro, sizeof ro, "%s/read-only.dat", dir);
    snprintf(empty, sizeof empty, "%s/empty.dat", dir);
    write_file(ro, 4, 0444);
    write_file(empty, 0, 0644);

    err[0] = 0;
    expect_refused(pp_map_file(missing, 0, 1 << 20, "lru", err, sizeof err), err,
                   "does-not-exist.dat", "missing file");
    err[0] = 0;
    expect_refused(pp_map_file(file, 0, 1 << 20, "no-such-policy", err, sizeof err), err,
                   "no-such-policy", "unknown policy");
    err[0] = 0;
    expect_refused(pp_map_file(file, 0, 100, "lru", err, sizeof err), err, "budget",
                   "budget below one page");
    err[0] = 0;
    expect_refused(pp_map_anon(1 << 20, 4095, "lru", err, sizeof err), err, "budget",
                   "anon budget below one page");
    err[0] = 0;
    expect_refused(pp_map_file(ro, 1, 1 << 20, "lru", err, sizeof err), err, "read-only",
                   "read-only file mapped writable");
    err[0] = 0;
    expect_refused(pp_map_file(empty, 0, 1 << 20, "lru", err, sizeof err), err, "empty",
                   "empty file");
    err[0] = 0;
    expect_refused(pp_map_file(NULL, 0, 1 << 20, "lru", err, sizeof err), err, "NULL",
                   "NULL path");
    err[0] = 0;
    expect_refused(pp_map_anon(0, 1 << 20, "lru", err, sizeof err), err, "length",
                   "zero length");
    /* errlen 0 (or a NULL buffer): still NULL, nothing written. */
    err[0] = 'x';
    CHECK(pp_map_file(missing, 0, 1 << 20, "lru", err, 0) == NULL && err[0] == 'x', "errlen 0");
    CHECK(pp_map_file(missing, 0, 1 << 20, "lru", NULL, 64) == NULL, "NULL err");
    /* A read-only file mapped read-only is fine. */
    pp_region *r = pp_map_file(ro, 0, 1 << 20, "lru", err, sizeof err);
    CHECK(r != NULL, "read-only file, read-only map: %s", err);
    CHECK(((volatile unsigned char *)pp_addr(r))[PAGE + 3] == pattern(1, 3), "read-only data");
    CHECK(pp_unmap(r) == 0, "read-only unmap");
    /* NULL handles. */
    CHECK(pp_addr(NULL) == NULL && pp_len(NULL) == 0, "NULL handle accessors");
    CHECK(pp_flush(NULL) == -EINVAL && pp_unmap(NULL) == -EINVAL, "NULL handle calls");
    unlink(ro);
    unlink(empty);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/table.dat", argv[1]);
    write_file(path, PAGES, 0644);
    file_region(path);
    pins_and_evictions(path);
    anon_region();
    options_region(path);
    faulting_thread_region(path);
    bad_input(argv[1], path);
    defaults_read_into_region(argv[1]);
    pooled_regions();
    unlink(path);
    printf("OK\n");
    return 0;
}
