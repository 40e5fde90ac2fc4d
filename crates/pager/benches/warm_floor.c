/* The floor of serving a warm file (in the page cache) into region frames:
 * pread of cached pages into a fresh shmem (memfd) mapping, which allocates,
 * clears and fills a frame per page, against pread of the same pages into
 * one reused buffer (`bench scan`'s warm baseline). Referenced by
 * docs/pager.md ("The page cache"). No fault, no mapping: what the pager
 * does on top can only be slower.
 *   gcc -O2 -o /tmp/warm_floor crates/pager/benches/warm_floor.c
 *   /tmp/warm_floor FILE CHUNK_PAGES          (best of 5 passes each) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int c, char **v) {
    if (c < 3 || atoi(v[2]) < 1) { fprintf(stderr, "usage: %s FILE CHUNK_PAGES\n", v[0]); return 2; }
    int fd = open(v[1], O_RDONLY);
    if (fd < 0) { perror(v[1]); return 1; } size_t len = lseek(fd, 0, SEEK_END), chunk = atoi(v[2]) * 4096;
    char *buf = aligned_alloc(4096, chunk);
    for (size_t o = 0; o < len; o += chunk) pread(fd, buf, chunk, o); /* warm */
    double best_buf = 1e9, best_mfd = 1e9;
    for (int r = 0; r < 5; r++) {
        double t = now();
        for (size_t o = 0; o < len; o += chunk) pread(fd, buf, chunk, o);
        t = now() - t; if (t < best_buf) best_buf = t;
        int m = memfd_create("f", 0); ftruncate(m, len);
        char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
        t = now();
        for (size_t o = 0; o < len; o += chunk) pread(fd, p + o, chunk, o);
        t = now() - t; if (t < best_mfd) best_mfd = t;
        munmap(p, len); close(m);
    }
    printf("chunk %zu pages: into a reused buffer %.0f pages/s, into fresh memfd frames %.0f pages/s, ratio %.3f\n",
           chunk / 4096, len / 4096 / best_buf, len / 4096 / best_mfd, best_buf / best_mfd);
    return 0;
}
