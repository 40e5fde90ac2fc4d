/* Ways of filling a region frame AND mapping it into the application's view,
 * side by side (issue 32, item 3; fill_ways.c measures the fill alone): pages
 * per second of each, best of 5 passes over a file, CHUNK_PAGES pages per
 * fill. The application's view is registered with a userfaultfd (MISSING |
 * MINOR); nothing faults, the pager fills and maps ahead, as it does a window.
 * Each pass starts from frames that are not there (memfd punched, anonymous
 * view zapped), what an evicted frame leaves.
 *   view+CONTINUE   pread into the pager's view of the memfd (faults each
 *                   frame in: allocated, cleared), UFFDIO_CONTINUE
 *   splice+CONTINUE splice file -> pipe -> memfd (allocated, not cleared),
 *                   UFFDIO_CONTINUE (the pager's way for cached pages)
 *   pread+COPY      pread into one reused buffer, UFFDIO_COPY into the memfd
 *                   view (shmem allocates the frame, copies, maps: one ioctl)
 *   pread+COPY anon the same into a private anonymous view
 *   pread+MOVE anon pread into a staging area of private memory (its pages
 *                   faulted in by the read), UFFDIO_MOVE into the view
 *   recycle MOVE    the same, but the staging pages are the view's previous
 *                   chunk moved back (a frame kept across its eviction: no
 *                   allocation, no clearing; the steady state of a region
 *                   whose budget is full)
 *   recycle splice  the memfd's steady state to compare: punch the previous
 *                   chunk, splice, CONTINUE
 * O_DIRECT=1 in the environment reads the file with O_DIRECT (cold data;
 * view+CONTINUE then reads into the view, the others into the buffer);
 * splice cannot, and is left out.
 *   gcc -O2 -o /tmp/fill_map_ways crates/pager/benches/fill_map_ways.c
 *   /tmp/fill_map_ways FILE CHUNK_PAGES */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifndef UFFDIO_MOVE
struct uffdio_move { uint64_t dst, src, len, mode; int64_t move; };
#define UFFDIO_MOVE _IOWR(UFFDIO, 0x05, struct uffdio_move)
#define UFFD_FEATURE_MOVE (1 << 16)
#endif
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
enum way { VIEW, SPLICE, COPY, COPY_ANON, MOVE_ANON, RECYCLE_MOVE, RECYCLE_SPLICE, WAYS };
static const char *names[] = {"view+CONTINUE", "splice+CONTINUE", "pread+COPY", "pread+COPY anon", "pread+MOVE anon", "recycle MOVE", "recycle splice"};
static int fd, m, uffd, pipefd[2], direct;
static char *pager, *app, *anon, *stage, *kept, *buf;
static size_t len, chunk;
static void die(const char *what) { perror(what); exit(1); }
static void cont(char *at, size_t n) {
    struct uffdio_continue c = {{(uintptr_t)at, n}, 0, 0};
    if (ioctl(uffd, UFFDIO_CONTINUE, &c)) die("UFFDIO_CONTINUE");
}
static void copy(char *dst, char *src, size_t n) {
    struct uffdio_copy c = {(uintptr_t)dst, (uintptr_t)src, n, 0, 0};
    if (ioctl(uffd, UFFDIO_COPY, &c)) die("UFFDIO_COPY");
}
static void move(char *dst, char *src, size_t n) {
    struct uffdio_move mv = {(uintptr_t)dst, (uintptr_t)src, n, 0, 0};
    if (ioctl(uffd, UFFDIO_MOVE, &mv)) die("UFFDIO_MOVE");
}
static void splice_in(size_t o, size_t n) {
    loff_t in = o, out = o;
    for (size_t got = 0; got < n;) {
        ssize_t k = splice(fd, &in, pipefd[1], 0, n - got, SPLICE_F_MOVE);
        if (k <= 0) die("splice in");
        for (ssize_t d = 0; d < k;) {
            ssize_t w = splice(pipefd[0], 0, m, &out, k - d, SPLICE_F_MOVE);
            if (w <= 0) die("splice out");
            d += w;
        }
        got += k;
    }
}
static void read_at(char *to, size_t n, size_t o) { if (pread(fd, to, n, o) != (ssize_t)n) die("pread"); }
static void pass(enum way w) {
    for (size_t o = 0; o < len; o += chunk) {
        size_t n = chunk < len - o ? chunk : len - o;
        switch (w) {
        case VIEW: read_at(pager + o, n, o); cont(app + o, n); break;
        case SPLICE: splice_in(o, n); cont(app + o, n); break;
        case COPY: read_at(buf, n, o); copy(app + o, buf, n); break;
        case COPY_ANON: read_at(buf, n, o); copy(anon + o, buf, n); break;
        case MOVE_ANON:
            read_at(stage, n, o); move(anon + o, stage, n); break;
        case RECYCLE_MOVE:
            /* The previous chunk is evicted into the staging area. */
            if (o) move(kept, anon + o - chunk, chunk);
            read_at(kept, n, o); move(anon + o, kept, n); break;
        case RECYCLE_SPLICE:
            if (o) fallocate(m, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, o - chunk, chunk);
            splice_in(o, n); cont(app + o, n); break;
        default: break;
        }
    }
}
static void reset(void) {
    if (fallocate(m, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, len)) die("punch");
    if (madvise(anon, len, MADV_DONTNEED) || madvise(stage, chunk, MADV_DONTNEED) || madvise(kept, chunk, MADV_DONTNEED)) die("zap");
    /* Recycling starts from one chunk of kept frames, as a full budget. */
    copy(kept, buf, chunk);
}
int main(int c, char **v) {
    if (c < 3 || atoi(v[2]) < 1) { fprintf(stderr, "usage: %s FILE CHUNK_PAGES\n", v[0]); return 2; }
    direct = getenv("O_DIRECT") && atoi(getenv("O_DIRECT"));
    fd = open(v[1], O_RDONLY | (direct ? O_DIRECT : 0));
    if (fd < 0) die(v[1]);
    chunk = atoi(v[2]) * 4096UL;
    len = (lseek(fd, 0, SEEK_END) & ~4095UL) / chunk * chunk;
    if (!len) { fprintf(stderr, "%s: shorter than one chunk\n", v[1]); return 1; }
    buf = aligned_alloc(4096, chunk);
    memset(buf, 1, chunk);
    if (pipe(pipefd) || fcntl(pipefd[1], F_SETPIPE_SZ, 1 << 20) < 0) die("pipe");
    m = memfd_create("frames", 0);
    if (m < 0 || ftruncate(m, len)) die("memfd");
    pager = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
    app = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
    anon = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stage = mmap(0, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    kept = mmap(0, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pager == MAP_FAILED || app == MAP_FAILED || anon == MAP_FAILED || stage == MAP_FAILED || kept == MAP_FAILED) die("mmap");
    uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
    if (uffd < 0) die("userfaultfd");
    struct uffdio_api api = {UFFD_API, UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_MINOR_SHMEM | UFFD_FEATURE_MOVE, 0};
    if (ioctl(uffd, UFFDIO_API, &api)) die("UFFDIO_API");
    struct uffdio_register r1 = {{(uintptr_t)app, len}, UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_MINOR, 0};
    struct uffdio_register r2 = {{(uintptr_t)anon, len}, UFFDIO_REGISTER_MODE_MISSING, 0};
    /* A move's destination must be registered: the kept frames' area too
     * (always full when read into, so it never faults). */
    struct uffdio_register r3 = {{(uintptr_t)kept, chunk}, UFFDIO_REGISTER_MODE_MISSING, 0};
    if (ioctl(uffd, UFFDIO_REGISTER, &r1) || ioctl(uffd, UFFDIO_REGISTER, &r2) || ioctl(uffd, UFFDIO_REGISTER, &r3)) die("UFFDIO_REGISTER");
    if (!direct) read_at(buf, chunk, 0), pass(COPY); /* the file warm */
    printf("%s, chunk %zu pages, k pages/s:", direct ? "O_DIRECT" : "cached", chunk / 4096);
    for (int w = 0; w < WAYS; w++) {
        if (direct && (w == SPLICE || w == RECYCLE_SPLICE)) continue;
        double best = 1e9;
        for (int r = 0; r < 5; r++) {
            reset();
            double t = now(); pass(w); t = now() - t;
            if (t < best) best = t;
        }
        printf("  %s %.0f", names[w], len / 4096 / best / 1e3);
        fflush(stdout);
        /* Every way leaves the file's bytes in the view it maps. */
        char *view = w >= COPY_ANON && w <= RECYCLE_MOVE ? anon : app;
        size_t at = len - chunk;
        read_at(buf, chunk, at);
        if (memcmp(buf, view + at, chunk)) { fprintf(stderr, "\n%s: bytes differ\n", names[w]); return 1; }
    }
    printf("\n");
    return 0;
}
