/* The mapping calls, one behaviour per mode, run by tests/mapping_calls.rs
 * plainly and under `pagepilot run`:  mapping_calls MODE DIR
 *
 * Each mode creates DIR/data (1 MiB or a little more, byte `off` holding
 * pattern(off)), maps it and checks the kernel's semantics itself: every
 * check prints one line ("WHAT: ok", or "WHAT: FAIL (why)" and the exit
 * status becomes 1), a signal probe prints what happened ("WHAT: SEGV").
 * The lines hold no address, pid or time, so both runs print the same. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define K ((size_t)1024)
#define MB (1024 * K)
#define RW (PROT_READ | PROT_WRITE)

static size_t PG;
static char path[4096];
static int failed;
static char why[200];

enum kind { PATTERN, STAMP, ZERO };

/* The file's initial bytes: varying within a page and from page to page. */
static uint8_t pattern(size_t off) { return (uint8_t)(off * 7 + (off >> 12) * 31 + 3); }
/* A store's bytes: byte `i` of stamp `seed` (tests/mapping_calls.rs knows it too). */
static uint8_t stamp_byte(unsigned seed, size_t i) { return (uint8_t)(seed * 0x9d + i * 13 + (i >> 12)); }

static uint8_t want(enum kind k, size_t base, unsigned seed, size_t i) {
    return k == PATTERN ? pattern(base + i) : k == STAMP ? stamp_byte(seed, i) : 0;
}

/* Whether p[0..n) holds `k` (PATTERN: p[0] is file offset `base`). */
static int mem_is(const volatile uint8_t *p, size_t n, enum kind k, size_t base, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        uint8_t g = p[i], w = want(k, base, seed, i);
        if (g != w) {
            snprintf(why, sizeof why, "byte %zu of %zu is 0x%02x, want 0x%02x", i, n, g, w);
            return 0;
        }
    }
    return 1;
}
static int pat(const volatile uint8_t *p, size_t off, size_t n) { return mem_is(p, n, PATTERN, off, 0); }
static int stm(const volatile uint8_t *p, size_t n, unsigned seed) { return mem_is(p, n, STAMP, 0, seed); }
static int zero(const volatile uint8_t *p, size_t n) { return mem_is(p, n, ZERO, 0, 0); }

/* Whether the file's bytes off..off+n (read with pread) hold `k`. */
static int file_is(int fd, size_t off, size_t n, enum kind k, unsigned seed) {
    uint8_t *buf = malloc(n);
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));
        if (r <= 0) {
            snprintf(why, sizeof why, "pread at %zu: %s", off + got, r ? strerror(errno) : "end of file");
            free(buf);
            return 0;
        }
        got += (size_t)r;
    }
    int ok = mem_is(buf, n, k, off, seed);
    free(buf);
    return ok;
}
static int fpat(int fd, size_t off, size_t n) { return file_is(fd, off, n, PATTERN, 0); }
static int fstm(int fd, size_t off, size_t n, unsigned seed) { return file_is(fd, off, n, STAMP, seed); }

static void stamp(volatile uint8_t *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = stamp_byte(seed, i);
}
static uint8_t *stamp_buf(size_t n, unsigned seed) {
    uint8_t *b = malloc(n);
    stamp(b, n, seed);
    return b;
}

static void check(int ok, const char *what) {
    if (ok) {
        printf("%s: ok\n", what);
    } else {
        printf("%s: FAIL (%s)\n", what, why[0] ? why : "false");
        failed = 1;
    }
    why[0] = 0;
}

static const char *errname(int e) {
    switch (e) {
    case 0: return "0";
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    case EEXIST: return "EEXIST";
    case EACCES: return "EACCES";
    case EBUSY: return "EBUSY";
    case EFAULT: return "EFAULT";
    case EPERM: return "EPERM";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    default: return "another errno";
    }
}

/* A call's result: 0, or -1 with errno `want_errno`. */
static void check_rc(int rc, int want_errno, const char *what) {
    int e = rc == 0 ? 0 : errno;
    snprintf(why, sizeof why, "returned %d, errno %s, want %s", rc, errname(e), errname(want_errno));
    check(want_errno ? rc == -1 && e == want_errno : rc == 0, what);
}

/* A mapping the test needs: its failure ends the program. */
static uint8_t *map(void *addr, size_t len, int prot, int flags, int fd, size_t off) {
    void *p = mmap(addr, len, prot, flags, fd, (off_t)off);
    if (p == MAP_FAILED) {
        printf("mmap(len %zu, offset %zu): FAIL (%s)\n", len, off, strerror(errno));
        exit(1);
    }
    return p;
}
static uint8_t *reserve(size_t len) { return map(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); }

/* Signal probes: a load or store that may fault, caught by siglongjmp. */
static sigjmp_buf jump;
static volatile sig_atomic_t caught;
static volatile uint8_t sink;
static void on_fault(int sig) {
    caught = sig;
    siglongjmp(jump, 1);
}
static const char *probe(volatile uint8_t *p, int store) {
    caught = 0;
    if (sigsetjmp(jump, 1) == 0) {
        if (store)
            *p = 0xa5;
        else
            sink = *p;
        return "ok";
    }
    return caught == SIGSEGV ? "SEGV" : caught == SIGBUS ? "SIGBUS" : "another signal";
}
static void check_probe(volatile uint8_t *p, int store, const char *want_sig, const char *what) {
    const char *got = probe(p, store);
    if (strcmp(got, want_sig) == 0) {
        printf("%s: %s\n", what, got);
    } else {
        printf("%s: %s FAIL (want %s)\n", what, got, want_sig);
        failed = 1;
    }
}

/* DIR/data, `size` bytes of the pattern, open read-write. */
static int make_file(size_t size) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        printf("create %s: FAIL (%s)\n", "data", strerror(errno));
        exit(1);
    }
    uint8_t *buf = malloc(size);
    for (size_t i = 0; i < size; i++) buf[i] = pattern(i);
    if (write(fd, buf, size) != (ssize_t)size) {
        printf("write data: FAIL\n");
        exit(1);
    }
    free(buf);
    return fd;
}

/* 1: an offset, a length not a multiple of the page, the end of file. */
static void offset(void) {
    int fd = make_file(MB + 1000);
    size_t off = 16 * PG, len = 300000, end = (len + PG - 1) / PG * PG;
    uint8_t *p = map(NULL, len, PROT_READ, MAP_SHARED, fd, off);
    check(pat(p, off, len), "shared read at offset 16 pages, 300000 bytes: the file's bytes");
    check(pat(p + len, off + len, end - len), "the rest of its last page: the file's bytes");
    munmap(p, len);
    size_t at = MB - 2 * PG; /* 2 pages, 1000 bytes, then end of file */
    uint8_t *q = map(NULL, 3 * PG + 1, PROT_READ, MAP_SHARED, fd, at);
    check(pat(q, at, 2 * PG + 1000), "a mapping over the end of file: the file's last bytes");
    check(zero(q + 2 * PG + 1000, PG - 1000), "past end of file in its last page: zeros");
    check_probe(q + 3 * PG, 0, "SIGBUS", "the mapping's page past the end of file's page");
    munmap(q, 3 * PG + 1);
}

/* 2: an address hint, MAP_FIXED into a reservation, MAP_FIXED_NOREPLACE. */
static void placement(void) {
    int fd = make_file(MB);
    uint8_t *hole = reserve(8 * MB);
    munmap(hole, 8 * MB);
    uint8_t *hint = hole + 16 * PG; /* low in the hole: new mappings go high */
    uint8_t *p = map(hint, MB, PROT_READ, MAP_SHARED, fd, 0);
    check(p == hint, "an address hint on a free range: honoured");
    check(pat(p, 0, MB), "mapped at the hint: the file's bytes");
    munmap(p, MB);

    uint8_t *res = reserve(2 * MB), *target = res + 256 * K;
    p = map(target, 512 * K, RW, MAP_SHARED | MAP_FIXED, fd, 128 * K);
    check(p == target, "MAP_FIXED into a PROT_NONE reservation: at the address");
    check(pat(p, 128 * K, 512 * K), "MAP_FIXED: the file's bytes");
    stamp(p + 3 * PG, 100, 1);
    check(stm(p + 3 * PG, 100, 1), "MAP_FIXED: reads its store");
    check_probe(target - PG, 0, "SEGV", "the reservation below it");
    check_probe(target + 512 * K, 0, "SEGV", "the reservation above it");
    munmap(res, 2 * MB);
    check(fstm(fd, 128 * K + 3 * PG, 100, 1), "MAP_FIXED: its store reached the file after munmap");

    uint8_t *a = map(NULL, MB, PROT_READ, MAP_SHARED, fd, 0);
    void *b = mmap(a + 4 * PG, 64 * K, PROT_READ, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    check_rc(b == MAP_FAILED ? -1 : 0, EEXIST, "MAP_FIXED_NOREPLACE over a mapping");
    check(pat(a, 0, 128 * K + 3 * PG) && stm(a + 128 * K + 3 * PG, 100, 1) &&
              pat(a + 256 * K, 256 * K, MB - 256 * K),
          "the mapping it would have replaced: unchanged");
    munmap(a, MB);
    hole = reserve(2 * MB);
    munmap(hole, 2 * MB);
    uint8_t *c = mmap(hole, 256 * K, PROT_READ, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 768 * K);
    check(c == hole, "MAP_FIXED_NOREPLACE on a free range: at the address");
    if (c != MAP_FAILED) {
        check(pat(c, 768 * K, 256 * K), "MAP_FIXED_NOREPLACE: the file's bytes");
        munmap(c, 256 * K);
    }
}

/* 3: shared stores reach the file after munmap, msync, and exit. */
static void shared_write(void) {
    int fd = make_file(MB);
    uint8_t *p = map(NULL, 256 * K, RW, MAP_SHARED, fd, 0);
    stamp(p + 5 * PG + 10, 3000, 2);
    munmap(p, 256 * K);
    check(fstm(fd, 5 * PG + 10, 3000, 2), "stores reach the file after munmap");
    check(fpat(fd, 0, 5 * PG + 10), "bytes before them unchanged");
    uint8_t *q = map(NULL, 256 * K, RW, MAP_SHARED, fd, 256 * K);
    stamp(q + 7 * PG, 2 * PG + 5, 3);
    check_rc(msync(q, 256 * K, MS_SYNC), 0, "msync(MS_SYNC)");
    check(fstm(fd, 256 * K + 7 * PG, 2 * PG + 5, 3), "stores reach the file after msync(MS_SYNC)");
    /* the test checks the file for these: all 128 pages, over the budget */
    uint8_t *r = map(NULL, 512 * K, RW, MAP_SHARED, fd, 512 * K);
    stamp(r, 512 * K, 4);
    check(stm(r, 512 * K, 4), "512K stored, read back");
    printf("exiting without munmap\n");
}

/* 4: two shared mappings of one file see each other's stores at once. */
static void two_shared(void) {
    int fd = make_file(MB);
    uint8_t *a = map(NULL, MB, RW, MAP_SHARED, fd, 0), *b = map(NULL, MB, RW, MAP_SHARED, fd, 0);
    int seen = 1;
    for (size_t pg = 0; pg < MB / PG; pg += 8) {
        a[pg * PG + 100] = (uint8_t)(pg ^ 0x5a);
        if (b[pg * PG + 100] != (uint8_t)(pg ^ 0x5a)) {
            snprintf(why, sizeof why, "page %zu", pg);
            seen = 0;
        }
        b[pg * PG + 200] = (uint8_t)(pg ^ 0x3c);
        if (a[pg * PG + 200] != (uint8_t)(pg ^ 0x3c)) {
            snprintf(why, sizeof why, "page %zu", pg);
            seen = 0;
        }
    }
    check(seen, "a byte stored through either, read through the other at once, 32 pages");
    stamp(b + 300 * K, 100 * K, 5);
    check(stm(a + 300 * K, 100 * K, 5), "100K stored through the second, read through the first");
    uint8_t *c = map(NULL, 256 * K, RW, MAP_SHARED, fd, 512 * K);
    stamp(c + PG, 2 * PG, 6);
    check(stm(a + 512 * K + PG, 2 * PG, 6), "a third mapping at an offset: the first sees its store");
    check(stm(b + 300 * K, 100 * K, 5), "the second still reads its store");
    munmap(a, MB);
    munmap(b, MB);
    munmap(c, 256 * K);
    check(fstm(fd, 300 * K, 100 * K, 5) && fstm(fd, 512 * K + PG, 2 * PG, 6), "the stores reach the file");
}

/* 5: private mappings read the file; their stores stay private. */
static void private_map(void) {
    int fd = make_file(MB);
    uint8_t *r = map(NULL, MB, PROT_READ, MAP_PRIVATE, fd, 0);
    check(pat(r, 0, MB), "a read-only private mapping: the file's bytes");
    uint8_t *p = map(NULL, MB, RW, MAP_PRIVATE, fd, 0);
    check(pat(p, 0, MB), "a writable private mapping: the file's bytes");
    stamp(p + 100 * K, 300 * K, 7);
    check(stm(p + 100 * K, 300 * K, 7), "it reads its own stores");
    check(fpat(fd, 100 * K, 300 * K), "the file does not have them");
    check(pat(r + 100 * K, 100 * K, 300 * K), "the other private mapping does not see them");
    check_rc(msync(p, MB, MS_SYNC), 0, "msync(MS_SYNC) of the private mapping");
    check(fpat(fd, 0, MB), "the file does not have them after msync");
    munmap(p, MB);
    munmap(r, MB);
    check(fpat(fd, 0, MB), "after munmap: the file unchanged");
}

/* 6: munmap of a mapping's middle pages. */
static void partial_unmap(void) {
    int fd = make_file(MB);
    uint8_t *p = map(NULL, MB, RW, MAP_SHARED, fd, 0);
    stamp(p + 10 * PG, PG, 8);
    check_rc(munmap(p + 64 * PG, 64 * PG), 0, "munmap of pages 64..128 of 256");
    check_probe(p + 64 * PG, 0, "SEGV", "a load from the first unmapped page");
    check_probe(p + 128 * PG - 1, 1, "SEGV", "a store to the last unmapped byte");
    check(stm(p + 10 * PG, PG, 8) && pat(p, 0, 10 * PG), "pages below the hole: as before");
    check(pat(p + 128 * PG, 128 * PG, 128 * PG), "pages above the hole: the file's bytes");
    stamp(p + 20 * PG, 3 * PG, 9);
    stamp(p + 200 * PG, 10 * PG, 10);
    check(stm(p + 20 * PG, 3 * PG, 9) && stm(p + 200 * PG, 10 * PG, 10), "stores below and above it read back");
    munmap(p, 64 * PG);
    munmap(p + 128 * PG, 128 * PG);
    check(fstm(fd, 10 * PG, PG, 8) && fstm(fd, 20 * PG, 3 * PG, 9) && fstm(fd, 200 * PG, 10 * PG, 10),
          "the stores reach the file");
    check(fpat(fd, 64 * PG, 64 * PG), "the hole's bytes in the file: unchanged");
}

/* 7: mremap grow, shrink and move. */
static void remap(void) {
    int fd = make_file(MB);
    uint8_t *p = map(NULL, 256 * K, RW, MAP_SHARED, fd, 0);
    stamp(p + PG, 2 * PG, 11);
    uint8_t *g = mremap(p, 256 * K, 768 * K, MREMAP_MAYMOVE);
    check(g != MAP_FAILED, "mremap grow 256K to 768K (MREMAP_MAYMOVE)");
    if (g == MAP_FAILED) return;
    check(stm(g + PG, 2 * PG, 11), "grown: the store kept");
    check(pat(g + 3 * PG, 3 * PG, 768 * K - 3 * PG), "grown: the rest and the new part read the file");
    stamp(g + 600 * K, PG, 12);
    uint8_t *s = mremap(g, 768 * K, 128 * K, 0);
    check(s == g, "mremap shrink to 128K: in place");
    check_probe(g + 128 * K, 0, "SEGV", "a load past the shrunk end");
    check(stm(s + PG, 2 * PG, 11), "shrunk: the store kept");
    check(fstm(fd, 600 * K, PG, 12), "the store in the part shrunk away reached the file");
    uint8_t *res = reserve(512 * K), *target = res + 128 * K;
    uint8_t *m = mremap(s, 128 * K, 128 * K, MREMAP_MAYMOVE | MREMAP_FIXED, target);
    check(m == target, "mremap move (MREMAP_MAYMOVE|MREMAP_FIXED): at the address");
    if (m != target) return;
    check(stm(m + PG, 2 * PG, 11) && pat(m + 3 * PG, 3 * PG, 128 * K - 3 * PG), "moved: the contents kept");
    check_probe(s, 0, "SEGV", "a load from the old address");
    stamp(m + 50 * K, 1000, 13);
    check_probe(m - PG, 0, "SEGV", "the reservation below the moved mapping");
    munmap(res, 512 * K);
    check(fstm(fd, PG, 2 * PG, 11) && fstm(fd, 50 * K, 1000, 13), "the stores reach the file");
}

/* 8: msync's flags and errors. */
static void msync_flags(void) {
    int fd = make_file(MB);
    uint8_t *p = map(NULL, MB, RW, MAP_SHARED, fd, 0);
    stamp(p + 3 * PG, 5000, 14);
    check_rc(msync(p, MB, MS_SYNC), 0, "msync(MS_SYNC)");
    check(fstm(fd, 3 * PG, 5000, 14), "after MS_SYNC the file has the store");
    stamp(p + 100 * PG, 5000, 15);
    check_rc(msync(p + 100 * PG, 2 * PG, MS_ASYNC), 0, "msync(MS_ASYNC)");
    check(fstm(fd, 100 * PG, 5000, 15), "after MS_ASYNC read(2) sees the store");
    uint8_t *b = stamp_buf(5000, 16);
    check(pwrite(fd, b, 5000, (off_t)(200 * PG)) == 5000, "pwrite 5000 bytes");
    free(b);
    check_rc(msync(p + 200 * PG, 2 * PG, MS_INVALIDATE), 0, "msync(MS_INVALIDATE)");
    check(stm(p + 200 * PG, 5000, 16), "after MS_INVALIDATE the mapping reads what pwrite wrote");
    check_rc(msync(p, MB, MS_SYNC | MS_INVALIDATE), 0, "msync(MS_SYNC|MS_INVALIDATE)");
    check_rc(msync(p + 1, PG, MS_SYNC), EINVAL, "msync of an unaligned address");
    check_rc(msync(p, PG, MS_SYNC | MS_ASYNC), EINVAL, "msync(MS_SYNC|MS_ASYNC)");
    uint8_t *gone = reserve(PG);
    munmap(gone, PG);
    check_rc(msync(gone, PG, MS_SYNC), ENOMEM, "msync of an unmapped page");
    munmap(p, MB);
    check(fstm(fd, 3 * PG, 5000, 14) && fstm(fd, 100 * PG, 5000, 15) && fstm(fd, 200 * PG, 5000, 16),
          "the file after munmap");
}

/* 9: madvise; MADV_DONTNEED keeps a shared mapping's stores. */
static void advice(void) {
    int fd = make_file(MB);
    uint8_t *p = map(NULL, MB, RW, MAP_SHARED, fd, 0);
    stamp(p + 10 * PG, 4 * PG, 17);
    check_rc(madvise(p, MB, MADV_DONTNEED), 0, "madvise(MADV_DONTNEED)");
    check(stm(p + 10 * PG, 4 * PG, 17), "after MADV_DONTNEED the shared mapping reads its store back");
    check(pat(p, 0, 10 * PG) && pat(p + 14 * PG, 14 * PG, MB - 14 * PG), "and the file's bytes elsewhere");
    static const struct { int advice; const char *name; } advices[] = {
        {MADV_SEQUENTIAL, "MADV_SEQUENTIAL"}, {MADV_RANDOM, "MADV_RANDOM"},
        {MADV_WILLNEED, "MADV_WILLNEED"}, {MADV_NORMAL, "MADV_NORMAL"}};
    for (unsigned i = 0; i < sizeof advices / sizeof advices[0]; i++) {
        char what[100];
        snprintf(what, sizeof what, "madvise(%s)", advices[i].name);
        check_rc(madvise(p, MB, advices[i].advice), 0, what);
        stamp(p + (40 + 10 * i) * PG, 100, 18 + i);
        snprintf(what, sizeof what, "after %s: contents unchanged, a store reads back", advices[i].name);
        check(stm(p + 10 * PG, 4 * PG, 17) && pat(p + 100 * PG, 100 * PG, 100 * PG) &&
                  stm(p + (40 + 10 * i) * PG, 100, 18 + i),
              what);
    }
    uint8_t *q = map(NULL, 64 * K, RW, MAP_PRIVATE, fd, 512 * K);
    stamp(q + PG, PG, 30);
    check_rc(madvise(q, 64 * K, MADV_DONTNEED), 0, "madvise(MADV_DONTNEED) of a private mapping");
    check(pat(q + PG, 512 * K + PG, PG), "its private store is gone: the file's bytes again");
    munmap(q, 64 * K);
    munmap(p, MB);
    check(fstm(fd, 10 * PG, 4 * PG, 17) && fstm(fd, 70 * PG, 100, 21), "the stores reach the file");
}

/* 10: mprotect to read-only, back, to PROT_NONE and back. */
static void protect(void) {
    int fd = make_file(MB);
    uint8_t *p = map(NULL, MB, RW, MAP_SHARED, fd, 0);
    stamp(p + 5 * PG, 100, 22);
    check_rc(mprotect(p, MB, PROT_READ), 0, "mprotect(PROT_READ)");
    check_probe(p + 5 * PG, 1, "SEGV", "a store to a read-only page stored before");
    check_probe(p + 200 * PG, 1, "SEGV", "a store to a read-only page not touched before");
    check(stm(p + 5 * PG, 100, 22) && pat(p + 6 * PG, 6 * PG, 250 * PG), "read-only: reads as before");
    check_rc(mprotect(p, MB, RW), 0, "mprotect(PROT_READ|PROT_WRITE)");
    stamp(p + 200 * PG, 100, 23);
    check(stm(p + 200 * PG, 100, 23), "read-write again: a store reads back");
    check_rc(mprotect(p + 64 * PG, 64 * PG, PROT_NONE), 0, "mprotect(PROT_NONE) of pages 64..128");
    check_probe(p + 64 * PG, 0, "SEGV", "a load from its first page");
    check_probe(p + 128 * PG - 1, 0, "SEGV", "a load from its last byte");
    check_probe(p + 63 * PG, 0, "ok", "a load from the page below");
    check_probe(p + 128 * PG, 1, "ok", "a store to the page above");
    check_rc(mprotect(p + 64 * PG, 64 * PG, PROT_READ), 0, "mprotect(PROT_READ) of them again");
    check(pat(p + 64 * PG, 64 * PG, 64 * PG), "they read the file's bytes");
    check_rc(mprotect(p + 64 * PG, 64 * PG, RW), 0, "mprotect(PROT_READ|PROT_WRITE) of them");
    stamp(p + 100 * PG, 50, 24);
    munmap(p, MB);
    check(fstm(fd, 5 * PG, 100, 22) && fstm(fd, 200 * PG, 100, 23) && fstm(fd, 100 * PG, 50, 24),
          "the stores reach the file");
    uint8_t probed = 0;
    check(pread(fd, &probed, 1, (off_t)(128 * PG)) == 1 && probed == 0xa5, "the probe's store reaches the file");
    int ro = open(path, O_RDONLY);
    uint8_t *r = map(NULL, 64 * K, PROT_READ, MAP_SHARED, ro, 0);
    check_rc(mprotect(r, 64 * K, RW), EACCES, "mprotect(PROT_WRITE) of a shared mapping of a read-only fd");
    munmap(r, 64 * K);
}

/* 11: read(2), write(2), ftruncate and fallocate meet the mapping. */
static void fd_io(void) {
    int fd = make_file(MB);
    uint8_t *p = map(NULL, MB, RW, MAP_SHARED, fd, 0), buf[100];
    check(pat(p, 0, MB), "the mapping: the file's bytes");
    uint8_t *b = stamp_buf(3000, 25);
    check(pwrite(fd, b, 3000, (off_t)(5 * PG + 100)) == 3000, "pwrite 3000 bytes");
    check(stm(p + 5 * PG + 100, 3000, 25), "the mapping sees pwrite at once");
    free(b);
    b = stamp_buf(2 * PG, 26);
    check(lseek(fd, (off_t)(250 * PG), SEEK_SET) >= 0 && write(fd, b, 2 * PG) == (ssize_t)(2 * PG), "write 2 pages");
    check(stm(p + 250 * PG, 2 * PG, 26), "the mapping sees write at once");
    free(b);
    stamp(p + 30 * PG, 2 * PG + 7, 27);
    check(fstm(fd, 30 * PG, 2 * PG + 7, 27), "pread sees a store at once");
    stamp(p + 40 * PG, 100, 28);
    check(lseek(fd, (off_t)(40 * PG), SEEK_SET) >= 0 && read(fd, buf, 100) == 100 && stm(buf, 100, 28),
          "read sees a store at once");
    check_rc(ftruncate(fd, (off_t)(128 * PG + 100)), 0, "ftruncate to 128 pages and 100 bytes");
    check_probe(p + 129 * PG, 0, "SIGBUS", "a load past the new end of file's page");
    check_probe(p + 200 * PG, 1, "SIGBUS", "a store far past it");
    check(pat(p + 100 * PG, 100 * PG, 28 * PG + 100), "below the new end: unchanged");
    check(zero(p + 128 * PG + 100, PG - 100), "the rest of the new last page: zeros");
    check_rc(ftruncate(fd, (off_t)MB), 0, "ftruncate back to 1M");
    check(zero(p + 128 * PG + 100, MB - 128 * PG - 100), "the grown part reads zeros");
    stamp(p + 200 * PG, 100, 29);
    check(fstm(fd, 200 * PG, 100, 29), "a store to the grown part: pread sees it");
    check_rc(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(10 * PG), (off_t)(4 * PG)), 0,
             "fallocate(PUNCH_HOLE|KEEP_SIZE) of 4 pages");
    check(zero(p + 10 * PG, 4 * PG), "the hole reads zeros through the mapping");
    check(pat(p + 14 * PG, 14 * PG, 16 * PG) && stm(p + 5 * PG + 100, 3000, 25), "around it: unchanged");
    munmap(p, MB);
    struct stat st;
    check(fstat(fd, &st) == 0 && st.st_size == (off_t)MB, "the file's size: 1M");
}

/* 12: fork: parent and child share the mapping's stores. */
static void fork_share(void) {
    int fd = make_file(MB);
    uint8_t *p = map(NULL, MB, RW, MAP_SHARED, fd, 0);
    stamp(p + 3 * PG, 2 * PG, 31);
    stamp(p + 180 * PG, 10 * PG, 32);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        check(stm(p + 3 * PG, 2 * PG, 31) && stm(p + 180 * PG, 10 * PG, 32), "child: sees the parent's stores");
        stamp(p + 100 * PG, 3 * PG, 33);
        stamp(p + 3 * PG + 10, 10, 34);
        fflush(stdout);
        _exit(failed);
    }
    int status = -1;
    check(pid > 0 && waitpid(pid, &status, 0) == pid, "fork and waitpid");
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child exited 0");
    check(stm(p + 100 * PG, 3 * PG, 33) && stm(p + 3 * PG + 10, 10, 34), "parent: sees the child's stores at once");
    check(stm(p + 3 * PG, 10, 31) && stm(p + 180 * PG, 10 * PG, 32), "parent: its own stores around them");
    check(fstm(fd, 100 * PG, 3 * PG, 33), "pread sees the child's stores");
    munmap(p, MB);
}

/* 13: exec: the stores of the image before reach the image after. */
static void exec_self(const char *self, const char *dir) {
    int fd = make_file(MB);
    uint8_t *p = map(NULL, MB, RW, MAP_SHARED, fd, 0);
    stamp(p + 7 * PG, 3 * PG, 35);
    stamp(p + 222 * PG, 100, 36);
    printf("exec without munmap\n");
    fflush(stdout);
    execl("/proc/self/exe", self, "exec-after", dir, (char *)NULL);
    printf("execl: FAIL (%s)\n", strerror(errno));
    exit(1);
}
static void exec_after(void) {
    int fd = open(path, O_RDWR);
    uint8_t *p = map(NULL, MB, RW, MAP_SHARED, fd, 0);
    check(stm(p + 7 * PG, 3 * PG, 35) && stm(p + 222 * PG, 100, 36), "exec'd image: reads the first image's stores");
    check(pat(p, 0, 7 * PG) && pat(p + 10 * PG, 10 * PG, 200 * PG), "and the file's bytes elsewhere");
    const char *active = getenv("PAGEPILOT_RUN");
    fprintf(stderr, "exec'd image: PAGEPILOT_RUN=%s\n", active ? active : "unset");
    stamp(p + 240 * PG, PG, 37);
    printf("exiting without munmap\n");
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: mapping_calls MODE DIR\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* a run killed by the watchdog shows how far it got */
    PG = (size_t)sysconf(_SC_PAGESIZE);
    snprintf(path, sizeof path, "%s/data", argv[2]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    const char *mode = argv[1];
    if (!strcmp(mode, "offset")) offset();
    else if (!strcmp(mode, "placement")) placement();
    else if (!strcmp(mode, "shared-write")) shared_write();
    else if (!strcmp(mode, "two-shared")) two_shared();
    else if (!strcmp(mode, "private")) private_map();
    else if (!strcmp(mode, "partial-unmap")) partial_unmap();
    else if (!strcmp(mode, "mremap")) remap();
    else if (!strcmp(mode, "msync")) msync_flags();
    else if (!strcmp(mode, "madvise")) advice();
    else if (!strcmp(mode, "mprotect")) protect();
    else if (!strcmp(mode, "fd-io")) fd_io();
    else if (!strcmp(mode, "fork")) fork_share();
    else if (!strcmp(mode, "exec")) exec_self(argv[0], argv[2]);
    else if (!strcmp(mode, "exec-after")) exec_after();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return failed;
}
