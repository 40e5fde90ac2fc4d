/* The floor under bench scale's per-touch and unmap targets (issue 13): the
 * kernel's own anonymous mapping of 1 GiB, 1 TiB and 8 TiB, the same 5,000
 * pages touched at pseudo-random places (one write each, nothing paged out),
 * then munmap. The pages are the same count at every size; what grows is the
 * spread of the page tables they need: a touch allocates its page-table
 * pages, the unmap frees them. No pager involved: pagepilot's region pays
 * this on top of its own work. Referenced by docs/results.md.
 *   gcc -O2 -o /tmp/scale_floor crates/pager/benches/scale_floor.c
 *   /tmp/scale_floor                    (median of 5 runs per size) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(void) {
    const size_t sizes[] = {1UL << 30, 1UL << 40, 8UL << 40}, touches = 5000;
    double base_touch = 0, base_unmap = 0;
    for (int k = 0; k < 3; k++) {
        double touch[5], unmap[5];
        for (int r = 0; r < 5; r++) {
            char *p = mmap(0, sizes[k], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) { perror("mmap"); return 1; }
            double t0 = now();
            for (uint64_t i = 0; i < touches; i++) p[(i * 0x9E3779B97F4A7C15ULL) % (sizes[k] / 4096) * 4096] = (char)i;
            double t1 = now();
            munmap(p, sizes[k]);
            touch[r] = (t1 - t0) / touches * 1e6;
            unmap[r] = (now() - t1) * 1e3;
        }
        qsort(touch, 5, sizeof *touch, cmp);
        qsort(unmap, 5, sizeof *unmap, cmp);
        if (k == 0) { base_touch = touch[2]; base_unmap = unmap[2]; }
        printf("%5zu GiB: touch %.2f us (%.2fx 1 GiB), unmap %.2f ms (%.2fx)\n", sizes[k] >> 30,
               touch[2], touch[2] / base_touch, unmap[2], unmap[2] / base_unmap);
    }
    return 0;
}
