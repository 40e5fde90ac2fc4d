/* A contended pool, as a new user tries it (issue 30): regions of 16 MiB
 * drawing from one pool much smaller than their budgets, a thread per
 * region making random reads and writes. Run by
 * crates/capi/tests/contended_pool.rs as
 *
 *     contended_pool DIR REGIONS POOL_MIB MIN_FRAMES OPS SEED
 *
 * REGIONS regions of REGION_BYTES each, budget BUDGET_BYTES each, min_frames
 * MIN_FRAMES, all in one pool of POOL_MIB MiB. Region i is set up by
 * KINDS[i % 8]: a file (DIR/region-I.dat, written here with page_byte(I,
 * page, off)) or anonymous memory, under the policy named there; the first
 * three are the (mru file, lru anonymous, clock file).
 *
 * Thread i starts as soon as region i is mapped (the next regions join the
 * pool meanwhile) and makes OPS random accesses to it (SEED and i seed its
 * generator): reads of a word, checked against a shadow copy of the region
 * in malloc'd memory; writes of a word, made to both; and now and then a
 * whole page compared with the shadow. Once every thread is done, each
 * region is compared whole with its shadow; a file region is then flushed
 * (pp_flush) and its file read with read(2) and compared, then unmapped and
 * read again. The first mismatch prints "FAIL ..." and exits 1. A SIGBUS
 * prints where it hit (which region, which page) before the process dies
 * of it. Exit 0: every check passed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pagepilot.h"
#include "check.h"

#define PAGE 4096u
#define REGION_BYTES (16u << 20)
#define REGION_PAGES (REGION_BYTES / PAGE)
#define BUDGET_BYTES (4u << 20)
#define MAX_REGIONS 16

struct kind {
    int file;
    const char *policy;
};
/* The three first: mru file, lru anonymous, clock file. */
static const struct kind KINDS[8] = {
    {1, "mru"}, {0, "lru"}, {1, "clock"}, {0, "fifo"},
    {1, "lru"}, {0, "clock"}, {1, "fifo"}, {0, "mru"},
};

struct region {
    unsigned index;
    int file;
    const char *policy;
    char path[512];
    pp_region *r;
    unsigned char *mem;    /* pp_addr */
    unsigned char *shadow; /* what the region must hold */
    uint64_t seed;
    unsigned long ops;
    unsigned long reads, writes, pages_checked;
};

static struct region regions[MAX_REGIONS];
static unsigned nregions;

/* The region holding `addr`, or -1 (async-signal-safe). */
static int region_of(uintptr_t addr) {
    for (unsigned i = 0; i < nregions; i++) {
        uintptr_t start = (uintptr_t)regions[i].mem;
        if (start != 0 && addr >= start && addr < start + REGION_BYTES) return (int)i;
    }
    return -1;
}

static void on_sigbus(int sig, siginfo_t *info, void *ctx) {
    (void)ctx;
    uintptr_t addr = (uintptr_t)info->si_addr;
    int i = region_of(addr);
    char msg[300];
    int n;
    if (i >= 0) {
        n = snprintf(msg, sizeof msg,
                     "SIGBUS (si_code %d) at %p: region %d (%s, %s), page %lu\n",
                     info->si_code, info->si_addr, i, regions[i].file ? "file" : "anonymous",
                     regions[i].policy,
                     (unsigned long)((addr - (uintptr_t)regions[i].mem) / PAGE));
    } else {
        n = snprintf(msg, sizeof msg, "SIGBUS (si_code %d) at %p: outside every region\n",
                     info->si_code, info->si_addr);
    }
    if (n > 0) {
        ssize_t w = write(STDOUT_FILENO, msg, (size_t)n);
        (void)w;
    }
    /* Die of it: the default action, raised again as the handler returns. */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* xorshift64* */
static uint64_t next_rand(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static void check_page(struct region *g, unsigned page, const char *when) {
    const unsigned char *got = g->mem + (size_t)page * PAGE;
    const unsigned char *want = g->shadow + (size_t)page * PAGE;
    if (memcmp(got, want, PAGE) == 0) return;
    unsigned off = 0;
    while (got[off] == want[off]) off++;
    fail(__FILE__, __LINE__,
         "%s: region %u (%s, %s) page %u offset %u holds %u, want %u", when, g->index,
         g->file ? "file" : "anonymous", g->policy, page, off, got[off], want[off]);
}

static void *worker(void *arg) {
    struct region *g = arg;
    uint64_t s = g->seed;
    for (unsigned long k = 0; k < g->ops; k++) {
        uint64_t x = next_rand(&s);
        unsigned page = (unsigned)(x % REGION_PAGES);
        unsigned word = (unsigned)((x >> 32) % (PAGE / 8));
        unsigned what = (unsigned)((x >> 48) % 16);
        size_t at = (size_t)page * PAGE + (size_t)word * 8;
        volatile uint64_t *p = (volatile uint64_t *)(g->mem + at);
        uint64_t *shadow = (uint64_t *)(g->shadow + at);
        if (what < 7) {
            uint64_t v = *p;
            CHECK(v == *shadow,
                  "region %u (%s, %s) page %u word %u: read %#llx, want %#llx (access %lu)",
                  g->index, g->file ? "file" : "anonymous", g->policy, page, word,
                  (unsigned long long)v, (unsigned long long)*shadow, k);
            g->reads++;
        } else if (what < 15) {
            uint64_t v = next_rand(&s);
            *p = v;
            *shadow = v;
            g->writes++;
        } else {
            check_page(g, page, "during the run");
            g->pages_checked++;
        }
    }
    return NULL;
}

/* The file of region `g` read with read(2), compared with its shadow. */
static void check_file(struct region *g, const char *when) {
    int fd = open(g->path, O_RDONLY);
    CHECK(fd >= 0, "open %s: %s", g->path, strerror(errno));
    unsigned char *buf = malloc(PAGE);
    CHECK(buf != NULL, "malloc");
    for (unsigned page = 0; page < REGION_PAGES; page++) {
        ssize_t n = pread(fd, buf, PAGE, (off_t)page * PAGE);
        CHECK(n == (ssize_t)PAGE, "read %s page %u: %zd (%s)", g->path, page, n,
              n < 0 ? strerror(errno) : "short");
        const unsigned char *want = g->shadow + (size_t)page * PAGE;
        if (memcmp(buf, want, PAGE) != 0) {
            unsigned off = 0;
            while (buf[off] == want[off]) off++;
            fail(__FILE__, __LINE__,
                 "%s: file of region %u (%s) page %u offset %u holds %u, want %u", when,
                 g->index, g->policy, page, off, buf[off], want[off]);
        }
    }
    free(buf);
    close(fd);
}

static void make_file(struct region *g, const char *dir) {
    snprintf(g->path, sizeof g->path, "%s/region-%u.dat", dir, g->index);
    int fd = open(g->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0, "create %s: %s", g->path, strerror(errno));
    for (unsigned page = 0; page < REGION_PAGES; page++) {
        unsigned char *dst = g->shadow + (size_t)page * PAGE;
        for (unsigned off = 0; off < PAGE; off++) dst[off] = page_byte(g->index, page, off);
    }
    size_t done = 0;
    while (done < REGION_BYTES) {
        ssize_t n = write(fd, g->shadow + done, REGION_BYTES - done);
        CHECK(n > 0, "write %s: %s", g->path, strerror(errno));
        done += (size_t)n;
    }
    close(fd);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s DIR REGIONS POOL_MIB MIN_FRAMES OPS SEED\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *dir = argv[1];
    nregions = (unsigned)strtoul(argv[2], NULL, 10);
    size_t pool_mib = strtoul(argv[3], NULL, 10);
    size_t min_frames = strtoul(argv[4], NULL, 10);
    unsigned long ops = strtoul(argv[5], NULL, 10);
    uint64_t seed = strtoull(argv[6], NULL, 10);
    CHECK(nregions >= 1 && nregions <= MAX_REGIONS, "REGIONS %u not in [1, %d]", nregions,
          MAX_REGIONS);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGBUS, &sa, NULL) == 0, "sigaction: %s", strerror(errno));

    char err[PP_ERR_MAX];
    pp_pool *pool = pp_pool_create(pool_mib << 20, err, sizeof err);
    CHECK(pool != NULL, "pp_pool_create: %s", err);

    pthread_t threads[MAX_REGIONS];
    for (unsigned i = 0; i < nregions; i++) {
        struct region *g = &regions[i];
        g->index = i;
        g->file = KINDS[i % 8].file;
        g->policy = KINDS[i % 8].policy;
        g->ops = ops;
        g->seed = (seed + 1) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(i + 1) * 0xBF58476D1CE4E5B9ULL;
        if (g->seed == 0) g->seed = 1;
        g->shadow = malloc(REGION_BYTES);
        CHECK(g->shadow != NULL, "malloc shadow");
        pp_options o;
        pp_options_init(&o);
        if (g->file) {
            make_file(g, dir);
            o.path = g->path;
            o.writable = 1;
        } else {
            memset(g->shadow, 0, REGION_BYTES);
            o.len = REGION_BYTES;
        }
        o.budget_bytes = BUDGET_BYTES;
        o.policy = g->policy;
        o.pool = pool;
        o.min_frames = min_frames;
        g->r = pp_map(&o, err, sizeof err);
        CHECK(g->r != NULL, "pp_map region %u (%s, %s): %s", i, g->file ? "file" : "anonymous",
              g->policy, err);
        CHECK(pp_len(g->r) == REGION_BYTES, "region %u: pp_len %zu", i, pp_len(g->r));
        g->mem = pp_addr(g->r);
        /* Its thread starts at once, while the next regions join the pool
           (and the pool takes frames back for their minimums). */
        int e = pthread_create(&threads[i], NULL, worker, g);
        CHECK(e == 0, "pthread_create: %s", strerror(e));
    }
    for (unsigned i = 0; i < nregions; i++) pthread_join(threads[i], NULL);

    for (unsigned i = 0; i < nregions; i++) {
        struct region *g = &regions[i];
        printf("region %u (%s, %s): %lu reads, %lu writes, %lu pages checked\n", i,
               g->file ? "file" : "anonymous", g->policy, g->reads, g->writes, g->pages_checked);
        for (unsigned page = 0; page < REGION_PAGES; page++) check_page(g, page, "after the run");
    }
    for (unsigned i = 0; i < nregions; i++) {
        struct region *g = &regions[i];
        char stats[4096];
        if (pp_stats_json(g->r, stats, sizeof stats) > 0) printf("region %u stats %s\n", i, stats);
        if (!g->file) continue;
        int rc = pp_flush(g->r);
        CHECK(rc == 0, "pp_flush region %u: %s", i, strerror(-rc));
        check_file(g, "after pp_flush");
    }
    char stats[4096];
    if (pp_pool_stats_json(pool, stats, sizeof stats) > 0) printf("pool stats %s\n", stats);
    for (unsigned i = 0; i < nregions; i++) {
        struct region *g = &regions[i];
        int rc = pp_unmap(g->r);
        CHECK(rc == 0, "pp_unmap region %u: %s", i, strerror(-rc));
        g->mem = NULL;
        if (g->file) check_file(g, "after pp_unmap");
    }
    pp_pool_destroy(pool);
    printf("ok\n");
    return 0;
}
