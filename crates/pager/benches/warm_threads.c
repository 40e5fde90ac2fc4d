/* The floor of warm sequential reads with several threads (issue 32): a
 * cached file filled AND mapped into region frames by 1, 2 and 4 threads,
 * each its own contiguous share in chunks of CHUNK_PAGES pages, against
 * the same threads' buffered pread of their shares into a reused buffer
 * (`bench scan`'s warm baseline). fill_map_ways.c measures the ways with
 * one thread; this asks what happens to each when threads fill the same
 * memfd at once:
 *   view+CONTINUE   pread into the pager's view of the memfd (faults each
 *                   frame in: allocated, cleared), UFFDIO_CONTINUE
 *   splice+CONTINUE splice file -> pipe (one per thread) -> memfd, which
 *                   takes the memfd inode's lock for each write,
 *                   UFFDIO_CONTINUE (the pager's way for a lone reader)
 *   pread+COPY      pread into a reused buffer, UFFDIO_COPY into the
 *                   memfd view (shmem allocates the frame, copies, maps)
 * Each pass starts from frames that are not there (memfd punched). Pages
 * per second, best of 5 passes, and the ratio to pread at that count.
 *   gcc -O2 -o /tmp/warm_threads crates/pager/benches/warm_threads.c -lpthread
 *   /tmp/warm_threads FILE CHUNK_PAGES */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum way { PREAD, VIEW, SPLICE, COPY, WAYS };
static const char *NAMES[WAYS] = {"pread (baseline)", "view+CONTINUE", "splice+CONTINUE", "pread+COPY"};
static int fd, m, uffd, nthreads;
static char *pager, *app;
static size_t len, chunk;
static enum way way;

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void die(const char *what) { perror(what); exit(1); }

static void cont(char *at, size_t n) {
    struct uffdio_continue c = {{(uintptr_t)at, n}, 0, 0};
    if (ioctl(uffd, UFFDIO_CONTINUE, &c)) die("UFFDIO_CONTINUE");
}

static void *worker(void *arg) {
    long t = (long)arg;
    size_t share = len / nthreads / chunk * chunk, from = t * share, to = t == nthreads - 1 ? len : from + share;
    char *buf = aligned_alloc(4096, chunk);
    int p[2];
    if (pipe(p) || fcntl(p[1], F_SETPIPE_SZ, 1 << 20) < 0) die("pipe");
    for (size_t o = from; o < to; o += chunk) {
        size_t n = chunk < to - o ? chunk : to - o;
        switch (way) {
        case PREAD:
            if (pread(fd, buf, n, o) != (ssize_t)n) die("pread");
            break;
        case VIEW:
            if (pread(fd, pager + o, n, o) != (ssize_t)n) die("pread");
            cont(app + o, n);
            break;
        case SPLICE: {
            loff_t in = o, out = o;
            for (size_t got = 0; got < n;) {
                ssize_t k = splice(fd, &in, p[1], 0, n - got, SPLICE_F_MOVE);
                if (k <= 0) die("splice in");
                for (ssize_t d = 0; d < k;) {
                    ssize_t w = splice(p[0], 0, m, &out, k - d, SPLICE_F_MOVE);
                    if (w <= 0) die("splice out");
                    d += w;
                }
                got += k;
            }
            cont(app + o, n);
            break;
        }
        case COPY: {
            if (pread(fd, buf, n, o) != (ssize_t)n) die("pread");
            struct uffdio_copy c = {(uintptr_t)(app + o), (uintptr_t)buf, n, 0, 0};
            if (ioctl(uffd, UFFDIO_COPY, &c)) die("UFFDIO_COPY");
            break;
        }
        default:
            break;
        }
    }
    close(p[0]);
    close(p[1]);
    free(buf);
    return 0;
}

/* Pages per second of one pass of `w` by `threads` threads. */
static double pass(enum way w, int threads) {
    if (fallocate(m, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, len)) die("punch");
    way = w;
    nthreads = threads;
    pthread_t th[8];
    double t0 = now();
    for (long i = 0; i < threads; i++) pthread_create(&th[i], 0, worker, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(th[i], 0);
    return len / 4096 / (now() - t0);
}

int main(int c, char **v) {
    if (c < 3 || atoi(v[2]) < 1) { fprintf(stderr, "usage: %s FILE CHUNK_PAGES\n", v[0]); return 2; }
    fd = open(v[1], O_RDONLY);
    if (fd < 0) die(v[1]);
    chunk = atoi(v[2]) * 4096UL;
    len = (lseek(fd, 0, SEEK_END) & ~4095UL) / (4 * chunk) * (4 * chunk);
    if (!len) { fprintf(stderr, "%s: shorter than four chunks\n", v[1]); return 1; }
    m = memfd_create("frames", 0);
    if (m < 0 || ftruncate(m, len)) die("memfd");
    pager = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
    app = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
    if (pager == MAP_FAILED || app == MAP_FAILED) die("mmap");
    uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
    if (uffd < 0) die("userfaultfd");
    struct uffdio_api api = {UFFD_API, UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_MINOR_SHMEM, 0};
    if (ioctl(uffd, UFFDIO_API, &api)) die("UFFDIO_API");
    struct uffdio_register r = {{(uintptr_t)app, len}, UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_MINOR, 0};
    if (ioctl(uffd, UFFDIO_REGISTER, &r)) die("UFFDIO_REGISTER");
    pass(PREAD, 1); /* the file warm */
    printf("cached %zu MiB, chunk %zu pages: k pages/s best of 5 (x pread at that thread count)\n", len >> 20, chunk / 4096);
    const int counts[3] = {1, 2, 4};
    for (int w = 0; w < WAYS; w++) {
        printf("%-18s", NAMES[w]);
        for (int ci = 0; ci < 3; ci++) {
            double best = 0, base = 0;
            for (int r = 0; r < 5; r++) {
                double b = pass(PREAD, counts[ci]), x = pass(w, counts[ci]);
                if (x > best) best = x;
                if (b > base) base = b;
            }
            printf("  %d thr %6.0f (%.2f)", counts[ci], best / 1e3, best / base);
        }
        printf("\n");
    }
    return 0;
}
