/* A small program using pagepilot from C: it writes a 16 MiB file, maps it
 * with a 1 MiB budget and the "mru" policy, sums it twice (a cyclic scan,
 * where MRU beats LRU), and prints the region's statistics.
 *
 * Build (from the repository root, after `cargo build --release -p pagepilot-capi`):
 *   cc -std=gnu11 -O2 examples/c/pagepilot_example.c -Iinclude \
 *      -Ltarget/release -lpagepilot -Wl,-rpath,$PWD/target/release -o pagepilot_example
 *   ./pagepilot_example /var/tmp/example.dat
 * or: make -C examples/c run
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pagepilot.h"

#define FILE_BYTES (16u << 20)
#define BUDGET (1u << 20)

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "pagepilot_example.dat";

    /* The data: 64-bit integers 0, 1, 2, ... */
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    static uint64_t chunk[8192];
    for (uint64_t base = 0; base < FILE_BYTES / 8; base += 8192) {
        for (uint64_t i = 0; i < 8192; i++) chunk[i] = base + i;
        if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) {
            perror("write");
            return 1;
        }
    }
    fsync(fd);
    close(fd);

    char err[PP_ERR_MAX];
    pp_region *r = pp_map_file(path, 0, BUDGET, "mru", err, sizeof err);
    if (!r) {
        fprintf(stderr, "pp_map_file: %s\n", err);
        return 1;
    }
    const uint64_t *v = pp_addr(r);
    size_t n = pp_len(r) / sizeof *v;
    uint64_t sum = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) sum += v[i];
    uint64_t want = 2 * ((uint64_t)n * (n - 1) / 2);
    printf("sum %s (%llu)\n", sum == want ? "ok" : "WRONG", (unsigned long long)sum);

    char stats[4096];
    if (pp_stats_json(r, stats, sizeof stats) > 0) printf("stats: %s\n", stats);
    int rc = pp_unmap(r);
    if (rc != 0) fprintf(stderr, "pp_unmap: %s\n", strerror(-rc));
    unlink(path);
    return sum == want && rc == 0 ? 0 : 1;
}
