/* Who should serve cold random faults: uniform random reads of a file
 * (nothing in the page cache) through a region under each fault service the
 * C API offers, against the kernel's mmap told MADV_RANDOM, 1, 2 and 4
 * threads, rounds interleaved, medians. Referenced by issue 32's notes
 * ("page-ins in parallel"). Runs as root (the file is dropped from the page
 * cache with fadvise before each run).
 *   cargo build --release -p pagepilot-capi
 *   gcc -O2 -Iinclude -o /tmp/random_service crates/pager/benches/random_service.c \
 *       -Ltarget/release -lpagepilot -lpthread -Wl,-rpath,$PWD/target/release
 *   /tmp/random_service FILE BUDGET_MB OPS ROUNDS
 * Services: def (the defaults: a handler kept to each CPU), fa1 (the same,
 * one page per fault), lone (one handler thread per application thread,
 * handler_threads = threads: a lone blocking handler at 1 thread), two (two
 * floating handlers), ft (the faulting thread, one page per fault), kern.
 * Each row ends with the most reads any run of a service had in flight
 * (`reads_in_flight_max`), in the order of the columns.
 *   /tmp/random_service FILE BUDGET_MB OPS ROUNDS SERVICE THREADS
 * runs one service alone, ROUNDS times, printing each run's pages/s: for a
 * profiler, e.g. `perf sched record -- ...` to see where a fault waits. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "pagepilot.h"

enum { SERVICES = 6, MAX_ROUNDS = 15 };
static const char *NAMES[SERVICES] = {"def", "fa1", "lone", "two", "ft", "kern"};
static const int THREADS[3] = {1, 2, 4};

static volatile unsigned char *base;
static size_t pages;
static int ops_per;
/* The region's reads in flight at most, in the last run (0 for kern). */
static unsigned inflight;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *reader(void *arg) {
    uint64_t x = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
    unsigned sum = 0;
    for (int i = 0; i < ops_per; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        sum += base[(x % pages) * 4096 + 5];
    }
    return (void *)(uintptr_t)sum;
}

/* Pages per second of OPS reads by `threads` threads under `service`. */
static double run(const char *path, int service, int threads, int ops, size_t budget) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); exit(1); }
    size_t len = lseek(fd, 0, SEEK_END) & ~4095UL;
    pages = len / 4096;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ops_per = ops / threads;
    pp_region *r = NULL;
    void *m = NULL;
    if (service == 5) {
        m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) { perror("mmap"); exit(1); }
        madvise(m, len, MADV_RANDOM);
        base = m;
    } else {
        pp_options o;
        pp_options_init(&o);
        o.path = path;
        o.budget_bytes = budget;
        o.policy = "lru";
        if (service == 1 || service == 4) o.fault_around_pages = 1;
        if (service == 2) o.handler_threads = threads;
        if (service == 3) o.handler_threads = 2;
        if (service == 4) o.faulting_thread = 1;
        char err[PP_ERR_MAX];
        r = pp_map(&o, err, sizeof err);
        if (!r) { fprintf(stderr, "pp_map: %s\n", err); exit(1); }
        base = pp_addr(r);
    }
    pthread_t t[4];
    double t0 = now();
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, reader, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    double rate = ops_per * threads / (now() - t0);
    inflight = 0;
    if (r) {
        static char stats[16384];
        const char *key = "\"reads_in_flight_max\":";
        if (pp_stats_json(r, stats, sizeof stats) > 0 && strstr(stats, key))
            inflight = (unsigned)atoi(strstr(stats, key) + strlen(key));
        if (pp_unmap(r) != 0) { fprintf(stderr, "pp_unmap failed\n"); exit(1); }
    }
    if (m) munmap(m, len);
    close(fd);
    return rate;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if ((argc != 5 && argc != 7) || atoi(argv[2]) < 1 || atoi(argv[3]) < 4 || atoi(argv[4]) < 1 ||
        atoi(argv[4]) > MAX_ROUNDS) {
        fprintf(stderr, "usage: %s FILE BUDGET_MB OPS ROUNDS (1..%d) [SERVICE THREADS]\n",
                argv[0], MAX_ROUNDS);
        return 2;
    }
    size_t budget = (size_t)atoi(argv[2]) << 20;
    int ops = atoi(argv[3]), rounds = atoi(argv[4]);
    if (argc == 7) {
        int service = -1, threads = atoi(argv[6]);
        for (int s = 0; s < SERVICES; s++)
            if (!strcmp(argv[5], NAMES[s])) service = s;
        if (service < 0 || threads < 1 || threads > 4) {
            fprintf(stderr, "%s: unknown service or threads not 1..4: %s %s\n", argv[0], argv[5], argv[6]);
            return 2;
        }
        for (int k = 0; k < rounds; k++)
            printf("%s %d threads: %.0f pages/s\n", argv[5], threads,
                   run(argv[1], service, threads, ops, budget));
        return 0;
    }
    static double rate[3][SERVICES][MAX_ROUNDS];
    static unsigned most[3][SERVICES];
    for (int k = 0; k < rounds; k++)
        for (int t = 0; t < 3; t++)
            for (int s = 0; s < SERVICES; s++) {
                /* Odd rounds run the services in reverse order. */
                int service = k % 2 ? SERVICES - 1 - s : s;
                rate[t][service][k] = run(argv[1], service, THREADS[t], ops, budget);
                if (inflight > most[t][service]) most[t][service] = inflight;
            }
    printf("threads");
    for (int s = 0; s < SERVICES; s++) printf(" %12s", NAMES[s]);
    printf("   (pages/s, median of %d; in brackets: / kern)\n", rounds);
    for (int t = 0; t < 3; t++) {
        double med[SERVICES];
        for (int s = 0; s < SERVICES; s++) {
            qsort(rate[t][s], rounds, sizeof(double), cmp);
            med[s] = rate[t][s][rounds / 2];
        }
        printf("%7d", THREADS[t]);
        for (int s = 0; s < SERVICES; s++) printf(" %6.0f[%.2f]", med[s], med[s] / med[SERVICES - 1]);
        printf("   reads in flight at most:");
        for (int s = 0; s < SERVICES - 1; s++) printf(" %u", most[t][s]);
        printf("\n");
    }
    return 0;
}
