/* Ways of filling region frames (a memfd) from a warm file, side by side
 * (issue 32, item 3): pages per second of each, best of 5 passes, per chunk
 * of CHUNK_PAGES pages. Fresh frames: the memfd range was punched (what an
 * evicted frame is), so the kernel allocates a page per frame; refilled:
 * the frames are still allocated and are overwritten.
 *   read-into-view  pread into the pager's mapping of the memfd (the pager's
 *                   way until now): a fault per page, which allocates and
 *                   clears it, then the copy
 *   sendfile        lseek + sendfile(memfd <- file): the page cache's pages
 *                   copied straight into shmem pages allocated uncleared
 *                   (copy_file_range refuses another filesystem: EXDEV)
 *   splice          splice(file -> pipe) + splice(pipe -> memfd), the same
 *                   copy with offsets and a pipe of 1 MiB
 *   read+pwrite     pread into a reused buffer, pwrite into the memfd
 *   buffer          pread into one reused buffer (the warm baseline)
 *   gcc -O2 -o /tmp/fill_ways crates/pager/benches/fill_ways.c
 *   /tmp/fill_ways FILE CHUNK_PAGES */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
enum way { VIEW, CFR, SPLICE, RW, BUF, WAYS };
static const char *names[] = {"read-into-view", "sendfile", "splice", "read+pwrite", "buffer"};
static int fd, m, pipefd[2]; static char *view, *buf; static size_t len, chunk;
static void fill(enum way w) {
    for (size_t o = 0; o < len; o += chunk) {
        size_t n = chunk; if (o + n > len) n = len - o;
        ssize_t got;
        switch (w) {
        case VIEW: got = pread(fd, view + o, n, o); break;
        case CFR: { off_t in = o; lseek(m, o, SEEK_SET); got = sendfile(m, fd, &in, n); break; }
        case SPLICE: {
            loff_t in = o, out = o; got = 0;
            while ((size_t)got < n) {
                ssize_t k = splice(fd, &in, pipefd[1], 0, n - got, SPLICE_F_MOVE);
                if (k <= 0) break;
                for (ssize_t d = 0; d < k;) { ssize_t w2 = splice(pipefd[0], 0, m, &out, k - d, SPLICE_F_MOVE); if (w2 <= 0) { perror("splice out"); exit(1); } d += w2; }
                got += k;
            }
            break;
        }
        case RW: got = pread(fd, buf, n, o); if (got > 0) got = pwrite(m, buf, got, o); break;
        default: got = pread(fd, buf, n, o);
        }
        if (got != (ssize_t)n) { perror(names[w]); exit(1); }
    }
}
int main(int c, char **v) {
    if (c < 3 || atoi(v[2]) < 1) { fprintf(stderr, "usage: %s FILE CHUNK_PAGES\n", v[0]); return 2; }
    fd = open(v[1], O_RDONLY);
    if (fd < 0) { perror(v[1]); return 1; }
    len = lseek(fd, 0, SEEK_END) & ~4095UL; chunk = atoi(v[2]) * 4096;
    buf = aligned_alloc(4096, chunk);
    if (pipe(pipefd) || fcntl(pipefd[1], F_SETPIPE_SZ, 1 << 20) < 0) { perror("pipe"); return 1; }
    m = memfd_create("frames", 0); ftruncate(m, len);
    view = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
    fill(BUF); /* warm */
    for (int fresh = 1; fresh >= 0; fresh--) {
        printf("%s frames, chunk %zu pages:", fresh ? "fresh" : "refilled", chunk / 4096);
        for (int w = 0; w < WAYS; w++) {
            double best = 1e9;
            for (int r = 0; r < 5; r++) {
                if (fresh) fallocate(m, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, len);
                else fill(CFR);
                double t = now(); fill(w); t = now() - t;
                if (t < best) best = t;
            }
            printf("  %s %.0f k/s", names[w], len / 4096 / best / 1e3);
        }
        printf("\n");
    }
    /* The memfd holds the file's bytes after either way. */
    fallocate(m, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, len); fill(CFR);
    if (pread(fd, buf, chunk < len ? chunk : len, 0) < 0 || memcmp(buf, view, chunk < len ? chunk : len)) { fprintf(stderr, "sendfile: bytes differ\n"); return 1; }
    return 0;
}
