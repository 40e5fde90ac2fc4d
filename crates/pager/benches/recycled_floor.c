/* The floor of streaming a cold file through a budget smaller than it: one
 * sequential pass of O_DIRECT reads of CHUNK_PAGES-page windows into a memfd
 * of BUDGET_MB, each window's frames punched out (freed) before they are
 * read into again, as the pager evicts and refills, against the kernel's own
 * mmap of the file touched page by page in order inside a memory cgroup
 * (v1) limited to BUDGET_MB, which recycles its page cache (large folios,
 * neither cleared nor copied). Referenced by docs/pager.md ("Read-around").
 * No fault, no mapping, no policy: what the pager does on top can only be
 * slower. Runs as root (drops the page cache, makes a cgroup).
 *   gcc -O2 -o /tmp/recycled_floor crates/pager/benches/recycled_floor.c
 *   /tmp/recycled_floor FILE CHUNK_PAGES BUDGET_MB   (median of 5 interleaved runs) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define CG "/sys/fs/cgroup/memory/pagepilot-recycled-floor"
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void put(const char *path, const char *s) { int f = open(path, O_WRONLY); if (f < 0 || write(f, s, 0 + __builtin_strlen(s)) < 0) { perror(path); exit(1); } close(f); }
static void drop_caches(void) { sync(); put("/proc/sys/vm/drop_caches", "3"); }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
/* The kernel's pass, in a child inside the cgroup; its time comes back through a pipe. */
static double kernel_pass(int fd, size_t len) {
    int p[2]; if (pipe(p)) { perror("pipe"); exit(1); }
    pid_t c = fork();
    if (c == 0) {
        char pid[32]; snprintf(pid, sizeof pid, "%d", getpid()); put(CG "/tasks", pid);
        char *m = mmap(0, len, PROT_READ, MAP_SHARED, fd, 0); volatile char sink = 0;
        double t = now();
        for (size_t o = 0; o < len; o += 4096) sink += m[o];
        t = now() - t;
        if (write(p[1], &t, sizeof t) != sizeof t) _exit(1);
        _exit(0);
    }
    double t = 0; if (read(p[0], &t, sizeof t) != sizeof t) { fprintf(stderr, "kernel pass failed\n"); exit(1); }
    waitpid(c, 0, 0); close(p[0]); close(p[1]);
    return t;
}
int main(int c, char **v) {
    if (c < 4 || atoi(v[2]) < 1 || atoi(v[3]) < 1) { fprintf(stderr, "usage: %s FILE CHUNK_PAGES BUDGET_MB\n", v[0]); return 2; }
    int fd = open(v[1], O_RDONLY), dfd = open(v[1], O_RDONLY | O_DIRECT);
    if (fd < 0 || dfd < 0) { perror(v[1]); return 1; }
    size_t len = lseek(fd, 0, SEEK_END) & ~4095UL, chunk = atoi(v[2]) * 4096UL, budget = (size_t)atoi(v[3]) << 20;
    budget -= budget % chunk;
    mkdir(CG, 0755);
    char limit[32]; snprintf(limit, sizeof limit, "%zu", budget); put(CG "/memory.limit_in_bytes", limit);
    double kern[5], pager[5];
    for (int r = 0; r < 5; r++) {
        drop_caches();
        kern[r] = kernel_pass(fd, len);
        drop_caches();
        int mfd = memfd_create("frames", 0);
        if (ftruncate(mfd, budget)) { perror("ftruncate"); return 1; }
        char *p = mmap(0, budget, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
        double t = now();
        for (size_t o = 0; o + chunk <= len; o += chunk) {
            size_t slot = o % budget;
            if (o >= budget) fallocate(mfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, slot, chunk);
            if (pread(dfd, p + slot, chunk, o) != (ssize_t)chunk) { perror("pread"); return 1; }
        }
        pager[r] = now() - t;
        munmap(p, budget); close(mfd);
    }
    rmdir(CG);
    qsort(kern, 5, sizeof *kern, cmp); qsort(pager, 5, sizeof *pager, cmp);
    size_t pages = len / 4096;
    printf("%zu pages through %zu MiB, windows of %zu: kernel mmap in a cgroup %.0f pages/s, O_DIRECT into recycled memfd frames %.0f pages/s, ratio %.3f\n",
           pages, budget >> 20, chunk / 4096, pages / kern[2], pages / pager[2], kern[2] / pager[2]);
    return 0;
}
