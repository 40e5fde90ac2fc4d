/* The device's floor for cold pages read with O_DIRECT (as the pager reads
 * them, so as not to cache them twice): N threads each reading its own part
 * of FILE in order, one read of CHUNK_KIB at a time each, into a reused
 * buffer (no frame to allocate or clear, no mapping). Beside `bench scan`'s
 * cold sequential rows: when the pager's rate at N streams is this one,
 * what is left is the device's, not the pager's (issue 32: four streams at
 * 323-354k pages/s, this probe at 280-430k in the same minutes).
 *   gcc -O2 -o /tmp/direct_floor crates/pager/benches/direct_floor.c -lpthread
 *   /tmp/direct_floor FILE THREADS CHUNK_KIB */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static int fd, threads;
static size_t len, chunk;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void *stream(void *a) {
    long i = (long)a;
    char *buf = aligned_alloc(4096, chunk);
    size_t part = len / threads / chunk * chunk;
    for (size_t o = i * part; o < (i + 1) * part; o += chunk)
        if (pread(fd, buf, chunk, o) != (ssize_t)chunk) { perror("pread"); exit(1); }
    free(buf);
    return 0;
}
int main(int c, char **v) {
    if (c < 4 || atoi(v[2]) < 1 || atoi(v[2]) > 64 || atoi(v[3]) < 4 || atoi(v[3]) % 4) {
        fprintf(stderr, "usage: %s FILE THREADS(1-64) CHUNK_KIB(multiple of 4)\n", v[0]);
        return 2;
    }
    fd = open(v[1], O_RDONLY | O_DIRECT);
    if (fd < 0) { perror(v[1]); return 1; }
    threads = atoi(v[2]);
    chunk = (size_t)atoi(v[3]) * 1024;
    len = lseek(fd, 0, SEEK_END);
    if (len / threads < chunk) { fprintf(stderr, "%s: too short for %d parts of a chunk\n", v[1], threads); return 1; }
    pthread_t t[64];
    double t0 = now();
    for (long i = 0; i < threads; i++) pthread_create(&t[i], 0, stream, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
    double s = now() - t0;
    size_t pages = len / threads / chunk * chunk * threads / 4096;
    printf("%d streams x %zu KiB O_DIRECT reads: %.0f k pages/s\n", threads, chunk / 1024, pages / s / 1e3);
    return 0;
}
