/* The floor of serving a cold file (nothing in the page cache) into region
 * frames: O_DIRECT reads of CHUNK_PAGES-page clusters, in a random order,
 * straight into a fresh shmem (memfd) mapping, which allocates and clears a
 * frame per page before the device fills it, against the kernel's own mmap
 * of the file touched page by page in a random order (it reads around each
 * fault into page-cache pages it neither clears nor copies). Referenced by
 * docs/pager.md ("Read-around"). No fault, no mapping: what the pager does on
 * top can only be slower. Runs as root (drops the page cache before each run).
 *   gcc -O2 -o /tmp/cold_floor crates/pager/benches/cold_floor.c
 *   /tmp/cold_floor FILE CHUNK_PAGES          (median of 5 interleaved runs) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void drop_caches(void) { sync(); int f = open("/proc/sys/vm/drop_caches", O_WRONLY); if (f < 0 || write(f, "3", 1) != 1) { perror("drop_caches"); exit(1); } close(f); }
static void shuffle(size_t *a, size_t n) { for (size_t i = n - 1; i > 0; i--) { size_t j = random() % (i + 1), t = a[i]; a[i] = a[j]; a[j] = t; } }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int c, char **v) {
    if (c < 3 || atoi(v[2]) < 1) { fprintf(stderr, "usage: %s FILE CHUNK_PAGES\n", v[0]); return 2; }
    int fd = open(v[1], O_RDONLY), dfd = open(v[1], O_RDONLY | O_DIRECT);
    if (fd < 0 || dfd < 0) { perror(v[1]); return 1; }
    size_t len = lseek(fd, 0, SEEK_END) & ~4095UL, chunk = atoi(v[2]) * 4096UL, pages = len / 4096, chunks = len / chunk;
    size_t *order = malloc(pages * sizeof *order);
    double kern[5], pager[5];
    volatile char sink = 0;
    for (int r = 0; r < 5; r++) {
        for (size_t i = 0; i < pages; i++) order[i] = i;
        shuffle(order, pages);
        drop_caches();
        char *m = mmap(0, len, PROT_READ, MAP_SHARED, fd, 0);
        double t = now();
        for (size_t i = 0; i < pages; i++) sink += m[order[i] * 4096];
        kern[r] = now() - t;
        munmap(m, len);
        for (size_t i = 0; i < chunks; i++) order[i] = i;
        shuffle(order, chunks);
        drop_caches();
        int mfd = memfd_create("frames", 0);
        if (ftruncate(mfd, len)) { perror("ftruncate"); return 1; }
        char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
        t = now();
        for (size_t i = 0; i < chunks; i++)
            if (pread(dfd, p + order[i] * chunk, chunk, order[i] * chunk) != (ssize_t)chunk) { perror("pread"); return 1; }
        pager[r] = now() - t;
        munmap(p, len); close(mfd);
    }
    qsort(kern, 5, sizeof *kern, cmp); qsort(pager, 5, sizeof *pager, cmp);
    printf("%zu pages, clusters of %zu: kernel mmap random %.0f pages/s, O_DIRECT into fresh memfd frames %.0f pages/s, ratio %.3f\n",
           pages, chunk / 4096, pages / kern[2], pages / pager[2], kern[2] / pager[2]);
    return 0;
}
