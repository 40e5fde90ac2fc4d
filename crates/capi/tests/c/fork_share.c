/* Forked workers see one memory (docs/lifecycle.md): after fork, a store by
 * the parent or a child to a writable file region is seen by the other at
 * its next load, with no pp_flush and no pp_invalidate, as with the
 * kernel's MAP_SHARED; once no child holds the region the parent pages it
 * again ("resumes":1 in pp_stats_json). Run by
 * crates/capi/tests/fork_coherence.rs as
 *
 *     fork_share SCENARIO SETUP DIR
 *
 * where DIR/data.dat is an 8 MiB file (N pages) whose page p holds
 * page_byte(ORIG, p, off) at each offset. SCENARIO (see main):
 *
 *   fill-all, fill-quarter  four workers each fill a quarter of a region the
 *                           parent has read whole (budget the whole file, or
 *                           a quarter of it)
 *   stream-children-write   four workers write pages while the parent reads
 *                           each page as soon as a counter says it is written
 *   stream-parent-writes    the parent writes pages while a worker reads them
 *   grandchild              a grandchild, outliving its parent (the child),
 *                           writes; the region is not paged again while it lives
 *   orphan                  the parent exits soon after the fork; the child
 *                           keeps working and leaves DIR/child.done
 *   switches-under-writes   twenty forks, each child reaped and the region paged
 *                           again, while a thread of the parent keeps storing
 *   switches-under-demand-writes  the same under demand paging (one page per
 *                           fault, no read-ahead)
 *
 * SETUP: handler (handler threads), faulting (pp_options.faulting_thread),
 * pool (a pp_pool), daemon (handler threads, the region joining the daemon
 * named by PAGEPILOT_DAEMON: the program prints "mapped PID" and waits for
 * "go" on stdin, the driver checking meanwhile that the daemon has it).
 *
 * Every check compares every byte it covers with a shadow copy the program
 * keeps (the parent's) or with the tag formula (a child's); the first
 * mismatch prints "FAIL ..." (page, offset, what the page holds) and exits
 * 1; a child does the same with a "child: " prefix and its parent then
 * fails on its status. The driver checks the file left behind against its
 * own image of what each scenario writes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pagepilot.h"
#include "check.h"

#define PAGE 4096u
#define N 2048u /* pages of data.dat: 8 MiB */
#define WORKERS 4u
/* How long a wait inside the program may last before it fails. */
#define DEADLINE_MS 10000u

/* Tags of page contents (fork_coherence.rs: the same numbers). */
enum { ORIG = 0, P = 1, W = 2, Q = 3, G = 4, C = 5, O = 6, NTAGS = 7 };
static const char *tag_name(unsigned tag) {
    static const char *names[] = {"ORIG (the file's data)", "P (the parent before fork)",
                                  "W (a worker)",           "Q (the parent after fork)",
                                  "G (the grandchild)",     "C (the child)",
                                  "O (the orphaned child)"};
    return tag < NTAGS ? names[tag] : "?";
}


static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------ the shadow */

/* What the parent knows the region holds, byte for byte. */
static unsigned char *shadow;

static void shadow_init(void) {
    shadow = malloc((size_t)N * PAGE);
    CHECK(shadow != NULL, "malloc the shadow");
    for (unsigned p = 0; p < N; p++)
        for (unsigned off = 0; off < PAGE; off++)
            shadow[(size_t)p * PAGE + off] = page_byte(ORIG, p, off);
}

/* What a page holds: one of the tags, zeros, or something else. */
static const char *what_is(const unsigned char *pg, unsigned page) {
    for (unsigned tag = 0; tag < NTAGS; tag++) {
        unsigned off = 0;
        while (off < PAGE && pg[off] == page_byte(tag, page, off)) off++;
        if (off == PAGE) return tag_name(tag);
    }
    unsigned off = 0;
    while (off < PAGE && pg[off] == 0) off++;
    if (off == PAGE) return "zeros";
    return "other data (or a mix)";
}

/* Fails unless every byte of pages [from, to) of m equals the shadow's;
 * names the first wrong byte and counts the wrong pages. */
static void check_shadow_at(const char *file, int line, const unsigned char *m, unsigned from,
                            unsigned to, const char *when) {
    unsigned bad = 0, first = 0;
    for (unsigned p = from; p < to; p++) {
        if (memcmp(m + (size_t)p * PAGE, shadow + (size_t)p * PAGE, PAGE) != 0) {
            if (bad++ == 0) first = p;
        }
    }
    if (bad == 0) return;
    const unsigned char *pg = m + (size_t)first * PAGE, *want = shadow + (size_t)first * PAGE;
    unsigned off = 0;
    while (pg[off] == want[off]) off++;
    fail(file, line, "%s: %u of %u pages differ from the shadow; the first, page %u, at offset %u "
         "holds %u, want %u (the page holds %s, should hold %s)",
         when, bad, to - from, first, off, pg[off], want[off], what_is(pg, first),
         what_is(want, first));
}
#define check_shadow(m, from, to, when) check_shadow_at(__FILE__, __LINE__, m, from, to, when)
#define check_all(m, when) check_shadow(m, 0, N, when)

/* Fails unless pages [from, to) of m hold tag (a child's check: it has no
 * shadow of what the others wrote). */
static void check_tag_at(const char *file, int line, const unsigned char *m, unsigned from,
                         unsigned to, unsigned tag, const char *when) {
    for (unsigned p = from; p < to; p++) {
        const unsigned char *pg = m + (size_t)p * PAGE;
        for (unsigned off = 0; off < PAGE; off++) {
            if (pg[off] != page_byte(tag, p, off)) {
                fail(file, line, "%s: page %u offset %u holds %u, want %u: the page should "
                     "hold %s, holds %s",
                     when, p, off, pg[off], page_byte(tag, p, off), tag_name(tag),
                     what_is(pg, p));
            }
        }
    }
}
#define check_tag(...) check_tag_at(__FILE__, __LINE__, __VA_ARGS__)

/* Records in the shadow that pages [from, to) hold tag. */
static void shadow_fill(unsigned from, unsigned to, unsigned tag) {
    for (unsigned p = from; p < to; p++)
        for (unsigned off = 0; off < PAGE; off++)
            shadow[(size_t)p * PAGE + off] = page_byte(tag, p, off);
}

/* Writes tag into pages [from, to) of m (a child's writes: no shadow). */
static void write_tag(unsigned char *m, unsigned from, unsigned to, unsigned tag) {
    for (unsigned p = from; p < to; p++)
        for (unsigned off = 0; off < PAGE; off++) m[(size_t)p * PAGE + off] = page_byte(tag, p, off);
}

/* Writes tag into pages [from, to) of m and of the shadow (the parent's). */
static void fill(unsigned char *m, unsigned from, unsigned to, unsigned tag) {
    write_tag(m, from, to, tag);
    shadow_fill(from, to, tag);
}

/* The file, read with read(2) on a descriptor of its own, equals the shadow. */
static void check_file(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
    unsigned char buf[PAGE];
    for (unsigned p = 0; p < N; p++) {
        ssize_t n = pread(fd, buf, PAGE, (off_t)p * PAGE);
        CHECK(n == (ssize_t)PAGE, "read page %u of %s: %zd", p, path, n);
        if (memcmp(buf, shadow + (size_t)p * PAGE, PAGE) != 0) {
            fail(__FILE__, __LINE__, "after pp_unmap, page %u of the file holds %s, should hold %s",
                 p, what_is(buf, p), what_is(shadow + (size_t)p * PAGE, p));
        }
    }
    close(fd);
}

/* ------------------------------------------------------- the region's setup */

enum setup { HANDLER, FAULTING, POOL, DAEMON };
static enum setup setup;
static pp_pool *pool;
/* Demand paging: one page per missing fault, no read-ahead. */
static int demand;

static pp_region *map_region(const char *path, unsigned budget_pages) {
    char err[PP_ERR_MAX] = "";
    size_t budget = (size_t)budget_pages * PAGE;
    pp_options o;
    pp_options_init(&o);
    o.path = path;
    o.writable = 1;
    o.budget_bytes = budget;
    o.policy = "lru";
    o.faulting_thread = setup == FAULTING;
    if (demand) {
        o.fault_around_pages = 1;
        o.readahead_max_pages = 1;
    }
    if (setup == POOL) {
        pool = pp_pool_create(budget, err, sizeof err);
        CHECK(pool != NULL, "pp_pool_create: %s", err);
        o.pool = pool;
    }
    if (setup == DAEMON) {
        const char *socket = getenv("PAGEPILOT_DAEMON");
        CHECK(socket != NULL && *socket, "the daemon setup without PAGEPILOT_DAEMON");
    }
    pp_region *r = pp_map(&o, err, sizeof err);
    CHECK(r != NULL, "pp_map %s: %s", path, err);
    CHECK(pp_len(r) == (size_t)N * PAGE, "pp_len %zu", pp_len(r));
    if (setup == DAEMON) {
        /* The driver checks that the daemon lists this process's region. */
        printf("mapped %d\n", (int)getpid());
        char line[16] = "";
        CHECK(fgets(line, sizeof line, stdin) != NULL && !strcmp(line, "go\n"),
              "the driver did not say go (it found no region of ours in the daemon)");
    }
    return r;
}

static void unmap_region(pp_region *r) {
    CHECK(pp_unmap(r) == 0, "pp_unmap");
    if (pool != NULL) pp_pool_destroy(pool);
    pool = NULL;
}

/* --------------------------------------------------------------- stats */

/* The value of "key" in the region's stats: a number, or 1/0 for true/false. */
static uint64_t stat_of(pp_region *r, const char *key) {
    static char buf[16384];
    int n = pp_stats_json(r, buf, sizeof buf);
    CHECK(n > 0, "pp_stats_json: %d", n);
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = strstr(buf, pattern);
    CHECK(at != NULL, "no %s in the stats: %s", pattern, buf);
    at += strlen(pattern);
    if (!strncmp(at, "true", 4)) return 1;
    if (!strncmp(at, "false", 5)) return 0;
    char *end;
    unsigned long long v = strtoull(at, &end, 10);
    CHECK(end != at, "%s is not a number in the stats: %s", pattern, buf);
    return v;
}

/* The region's sharing as the parent's stats say right after the fork. */
struct at_fork {
    uint64_t shared, shares, resumes, missing_faults;
};

/* Records the stats right after the fork; checked by check_was_shared
 * once the scenario has checked the data (what a missing share breaks
 * first). No page is brought in while the region is shared. */
static struct at_fork record_at_fork(pp_region *r) {
    struct at_fork a = {stat_of(r, "shared"), stat_of(r, "shares"), stat_of(r, "resumes"),
                        stat_of(r, "missing_faults")};
    return a;
}

/* Right after the fork the region was the file's mapping, shared once,
 * not paged again yet (a child lived). */
static void check_was_shared(const struct at_fork *a) {
    CHECK(a->shared == 1 && a->shares == 1 && a->resumes == 0,
          "right after the fork: shared %llu, shares %llu, resumes %llu; want 1, 1, 0",
          (unsigned long long)a->shared, (unsigned long long)a->shares,
          (unsigned long long)a->resumes);
}

/* Once every child is gone: waits (bounded) until the parent pages the
 * region again, then reads it all (every byte against the shadow). Since
 * the fork (when it had a->missing_faults) every page must have been
 * brought in again: the region is paged from no frame at all when it
 * resumes, and the parent has read it whole since (here, or in its last
 * check if the resume came before it). */
static void check_resumed(pp_region *r, const unsigned char *m, const struct at_fork *a) {
    uint64_t start = now_ms();
    while (stat_of(r, "resumes") == 0) {
        CHECK(now_ms() - start < DEADLINE_MS,
              "the region was not paged again within %u ms of the last child's end (shared %llu)",
              DEADLINE_MS, (unsigned long long)stat_of(r, "shared"));
        sleep_ms(10);
    }
    CHECK(stat_of(r, "resumes") == 1, "resumes %llu, want 1",
          (unsigned long long)stat_of(r, "resumes"));
    CHECK(stat_of(r, "shared") == 0, "resumed but still shared");
    CHECK(stat_of(r, "shares") == 1, "shares %llu, want 1",
          (unsigned long long)stat_of(r, "shares"));
    check_all(m, "after the region was paged again");
    uint64_t paged = stat_of(r, "missing_faults") - a->missing_faults;
    CHECK(paged >= N, "only %llu pages brought in since the fork, %u read since it was paged "
          "again: not paged", (unsigned long long)paged, N);
    printf("paged again: %llu pages brought in since the fork\n", (unsigned long long)paged);
}

/* ------------------------------------------------------------ processes */

static const char *describe_status(int st) {
    static char buf[64];
    if (WIFEXITED(st))
        snprintf(buf, sizeof buf, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, sizeof buf, "killed by signal %d (%s)", WTERMSIG(st),
                 strsignal(WTERMSIG(st)));
    else
        snprintf(buf, sizeof buf, "wait status %#x", st);
    return buf;
}

static void reap(pid_t pid, const char *what) {
    int st = 0;
    pid_t got;
    do got = waitpid(pid, &st, 0);
    while (got < 0 && errno == EINTR);
    CHECK(got == pid, "waitpid %d: %s", (int)pid, strerror(errno));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s (pid %d) failed: %s", what, (int)pid,
          describe_status(st));
}

/* Forks; returns the child's pid in the parent, 0 in the child. */
static pid_t fork_or_fail(void) {
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) who = "child: ";
    return pid;
}

/* One byte over a pipe: 1 if it came, 0 at end of file (the peer ended). */
static int receive(int fd) {
    char c;
    ssize_t n;
    do n = read(fd, &c, 1);
    while (n < 0 && errno == EINTR);
    CHECK(n >= 0, "read a pipe: %s", strerror(errno));
    return n == 1;
}

static void send_byte(int fd) {
    CHECK(write(fd, "x", 1) == 1, "write a pipe: %s", strerror(errno));
}

/* ------------------------------------------- 1. workers fill, parent reads */

/* The parent reads the whole region (resident up to its budget), four
 * workers each fill a quarter and exit; the parent sees every byte with no
 * flush or invalidate; once they are gone it pages the region again and
 * sees every byte again; the file holds them after pp_unmap. */
static void workers_fill(const char *path, unsigned budget_pages) {
    pp_region *r = map_region(path, budget_pages);
    unsigned char *m = pp_addr(r);
    check_all(m, "the parent after the map");
    CHECK(stat_of(r, "frames_in_use") > 0, "nothing resident before the fork");
    CHECK(stat_of(r, "shares") == 0, "shared before any fork");
    const unsigned quarter = N / WORKERS;
    pid_t pids[WORKERS];
    for (unsigned w = 0; w < WORKERS; w++) {
        pids[w] = fork_or_fail();
        if (pids[w] == 0) {
            write_tag(m, w * quarter, (w + 1) * quarter, W);
            check_tag(m, w * quarter, (w + 1) * quarter, W, "a worker reads its own quarter");
            exit(0);
        }
    }
    struct at_fork at_fork = record_at_fork(r);
    for (unsigned w = 0; w < WORKERS; w++) reap(pids[w], "a worker");
    shadow_fill(0, N, W);
    /* The pages resident at the fork (the last budget_pages, read last)
     * first: reading the others would evict them. */
    check_shadow(m, N - budget_pages, N,
                 "the parent after its workers, its resident pages, with no flush or invalidate");
    check_shadow(m, 0, N - budget_pages, "the parent after its workers, with no flush or invalidate");
    check_was_shared(&at_fork);
    check_resumed(r, m, &at_fork);
    unmap_region(r);
    check_file(path);
}

/* -------------------------------------------------------- 2. streaming */

/* Pages [1, 1 + STREAM) are written one by one, each published by a
 * counter in page 0 (worker w's at byte 64 w) stored with release after the
 * page; the reader loads the counter with acquire and checks every page up
 * to it. Pages [DIRTY_FROM, N) are written (P) by the parent before the
 * fork and not flushed: the readers check them first. */
#define STREAM (N * 3 / 4)
#define DIRTY_FROM (N * 7 / 8)
#define PER_WORKER (STREAM / WORKERS)

static uint64_t *counter(unsigned char *m, unsigned w) {
    return (uint64_t *)(m + 64 * w);
}

/* Sets counter w to 0 (and the shadow's). */
static void counter_reset(unsigned char *m, unsigned w) {
    __atomic_store_n(counter(m, w), 0, __ATOMIC_SEQ_CST);
    memset(shadow + 64 * w, 0, 8);
}

static void shadow_counter(unsigned w, uint64_t v) {
    memcpy(shadow + 64 * w, &v, 8);
}

/* The page worker w writes k-th. */
static unsigned worker_page(unsigned w, unsigned k) {
    return 1 + w + WORKERS * k;
}

/* Reads, as they are published, the pages written with tag: the pages
 * [1, 1 + STREAM) in order (writers == 1, counter 0) or worker w's pages
 * (writers == WORKERS, counter w). Returns how many pages it checked while
 * their writer was still writing (its counter short of its last page). */
static unsigned read_as_published(unsigned char *m, unsigned writers, unsigned tag) {
    const unsigned total = writers == 1 ? STREAM : PER_WORKER;
    unsigned checked[WORKERS] = {0};
    unsigned done = 0, overlapping = 0;
    uint64_t start = now_ms();
    while (done < writers) {
        done = 0;
        for (unsigned w = 0; w < writers; w++) {
            uint64_t upto = __atomic_load_n(counter(m, w), __ATOMIC_ACQUIRE);
            CHECK(upto <= total, "counter %u holds %llu, beyond %u", w, (unsigned long long)upto,
                  total);
            if (upto < total) overlapping += (unsigned)upto - checked[w];
            for (unsigned k = checked[w]; k < upto; k++) {
                unsigned p = writers == 1 ? 1 + k : worker_page(w, k);
                check_tag(m, p, p + 1, tag, "a page behind the counter");
            }
            checked[w] = (unsigned)upto;
            if (upto == total) done++;
        }
        if (done < writers) {
            CHECK(now_ms() - start < DEADLINE_MS,
                  "the counters did not reach %u within %u ms (counter 0 at %u): the writer's "
                  "stores do not reach the reader",
                  total, DEADLINE_MS, checked[0]);
        }
    }
    return overlapping;
}

/* Before a streaming fork: the region read whole (every page resident:
 * the budget is the whole file, so a stale copy would show), the last
 * eighth written (P) and the counters zeroed, none of it flushed. */
static pp_region *stream_setup(const char *path, unsigned writers) {
    pp_region *r = map_region(path, N);
    unsigned char *m = pp_addr(r);
    check_all(m, "the parent after the map");
    fill(m, DIRTY_FROM, N, P);
    for (unsigned w = 0; w < writers; w++) counter_reset(m, w);
    return r;
}

/* Four workers write their pages (W) while the parent reads each page as
 * soon as its worker's counter says it is written. */
static void stream_children_write(const char *path) {
    pp_region *r = stream_setup(path, WORKERS);
    unsigned char *m = pp_addr(r);
    pid_t pids[WORKERS];
    for (unsigned w = 0; w < WORKERS; w++) {
        pids[w] = fork_or_fail();
        if (pids[w] == 0) {
            check_tag(m, DIRTY_FROM, N, P, "a worker reads the parent's unflushed writes");
            for (unsigned k = 0; k < PER_WORKER; k++) {
                unsigned p = worker_page(w, k);
                write_tag(m, p, p + 1, W);
                __atomic_store_n(counter(m, w), (uint64_t)k + 1, __ATOMIC_RELEASE);
            }
            exit(0);
        }
    }
    struct at_fork at_fork = record_at_fork(r);
    unsigned overlapping = read_as_published(m, WORKERS, W);
    printf("the parent checked %u pages while their worker was still writing\n", overlapping);
    for (unsigned w = 0; w < WORKERS; w++) reap(pids[w], "a worker");
    for (unsigned w = 0; w < WORKERS; w++) {
        shadow_counter(w, PER_WORKER);
        for (unsigned k = 0; k < PER_WORKER; k++)
            shadow_fill(worker_page(w, k), worker_page(w, k) + 1, W);
    }
    check_all(m, "the parent after its workers");
    check_was_shared(&at_fork);
    check_resumed(r, m, &at_fork);
    unmap_region(r);
    check_file(path);
}

/* The parent writes pages (Q) while a worker reads each as soon as the
 * counter says it is written. */
static void stream_parent_writes(const char *path) {
    pp_region *r = stream_setup(path, 1);
    unsigned char *m = pp_addr(r);
    pid_t pid = fork_or_fail();
    if (pid == 0) {
        check_tag(m, DIRTY_FROM, N, P, "the reader reads the parent's unflushed writes");
        unsigned overlapping = read_as_published(m, 1, Q);
        printf("child: the reader checked %u pages while the parent was still writing\n",
               overlapping);
        exit(0);
    }
    struct at_fork at_fork = record_at_fork(r);
    for (unsigned p = 1; p < 1 + STREAM; p++) {
        fill(m, p, p + 1, Q);
        __atomic_store_n(counter(m, 0), (uint64_t)p, __ATOMIC_RELEASE);
    }
    shadow_counter(0, STREAM);
    reap(pid, "the reader");
    check_all(m, "the parent after its reader");
    check_was_shared(&at_fork);
    check_resumed(r, m, &at_fork);
    unmap_region(r);
    check_file(path);
}

/* ---------------------------------------------------------- 3. grandchild */

/* The grandchild's bytes: every third byte of the region. */
static int grandchild_byte(size_t i) {
    return i % 3 == 0;
}

/* The child forks a grandchild and exits; the grandchild, which holds the
 * region's lease now, waits for the parent's word, writes every third byte
 * (G), says so, and exits when the parent closes its pipe. The parent, its
 * whole file resident (a stale copy would show), sees the region stay
 * shared while the grandchild lives, sees its writes, and pages the region
 * again once it is gone. */
static void grandchild_writes(const char *path) {
    pp_region *r = map_region(path, N);
    unsigned char *m = pp_addr(r);
    check_all(m, "the parent after the map");
    fill(m, 0, N / 8, P);
    int go[2], done[2];
    CHECK(pipe2(go, O_CLOEXEC) == 0 && pipe2(done, O_CLOEXEC) == 0, "pipe2");
    pid_t child = fork_or_fail();
    if (child == 0) {
        pid_t grandchild = fork_or_fail();
        if (grandchild > 0) exit(0);
        who = "grandchild: ";
        close(go[1]);
        close(done[0]);
        CHECK(receive(go[0]), "the parent ended before saying go");
        check_tag(m, 0, N / 8, P, "the grandchild reads the parent's unflushed writes");
        for (size_t i = 0; i < (size_t)N * PAGE; i++)
            if (grandchild_byte(i)) m[i] = page_byte(G, i / PAGE, i % PAGE);
        send_byte(done[1]);
        (void)receive(go[0]);
        exit(0);
    }
    close(go[0]);
    close(done[1]);
    struct at_fork at_fork = record_at_fork(r);
    reap(child, "the child");
    check_all(m, "the parent after the child, before the grandchild writes");
    /* Three periods of the watcher: a region paged again while the
     * grandchild lives would show here (and its writes would be missed). */
    sleep_ms(300);
    uint64_t held_resumes = stat_of(r, "resumes"), held_shared = stat_of(r, "shared");
    check_all(m, "the parent before the grandchild writes");
    send_byte(go[1]);
    CHECK(receive(done[0]), "the grandchild ended before its writes");
    for (size_t i = 0; i < (size_t)N * PAGE; i++)
        if (grandchild_byte(i)) shadow[i] = page_byte(G, i / PAGE, i % PAGE);
    check_all(m, "the parent after the grandchild's writes, with no flush or invalidate");
    check_was_shared(&at_fork);
    CHECK(held_resumes == 0 && held_shared == 1,
          "while only the grandchild held the region: resumes %llu, shared %llu; want 0, 1",
          (unsigned long long)held_resumes, (unsigned long long)held_shared);
    close(go[1]);
    CHECK(!receive(done[0]), "the grandchild said more than done");
    check_resumed(r, m, &at_fork);
    unmap_region(r);
    check_file(path);
}

/* ------------------------------------------------------------ 4. orphan */

/* The parent writes P on the first half and forks; the child writes C on
 * [N/2, 5N/8) and says so; the parent checks it sees C (no flush or
 * invalidate), writes Q on [5N/8, 3N/4) and exits (exit(0), the region
 * still mapped). The child waits until it is an orphan, checks P, C, Q and
 * the file's data, writes O on [3N/4, N), checks, and leaves
 * DIR/child.done ("ok PID" or its failure) without unmapping. */
static void orphan(const char *dir, const char *path) {
    pp_region *r = map_region(path, N);
    unsigned char *m = pp_addr(r);
    check_all(m, "the parent after the map");
    fill(m, 0, N / 2, P);
    pid_t parent = getpid();
    static char marker[600];
    snprintf(marker, sizeof marker, "%s/child.done", dir);
    int wrote[2];
    CHECK(pipe2(wrote, O_CLOEXEC) == 0, "pipe2");
    pid_t pid = fork_or_fail();
    if (pid > 0) {
        close(wrote[1]);
        struct at_fork at_fork = record_at_fork(r);
        CHECK(receive(wrote[0]), "the child ended before writing");
        shadow_fill(N / 2, 5 * N / 8, C);
        check_shadow(m, N / 2, 5 * N / 8, "the parent reads the child's writes, with no flush");
        check_was_shared(&at_fork);
        fill(m, 5 * N / 8, 3 * N / 4, Q);
        printf("parent %d saw the child's writes, wrote its own and exits\n", (int)parent);
        exit(0);
    }
    close(wrote[0]);
    fail_marker = marker;
    char log[600];
    snprintf(log, sizeof log, "%s/child.log", dir);
    int fd = open(log, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    CHECK(fd >= 0, "open %s", log);
    CHECK(dup2(fd, 1) == 1 && dup2(fd, 2) == 2, "dup2");
    close(fd);
    write_tag(m, N / 2, 5 * N / 8, C);
    send_byte(wrote[1]);
    close(wrote[1]);
    uint64_t start = now_ms();
    while (getppid() == parent) {
        CHECK(now_ms() - start < DEADLINE_MS, "the parent %d has not exited", (int)parent);
        sleep_ms(1);
    }
    printf("child %d: parent gone, working\n", (int)getpid());
    check_tag(m, 0, N / 2, P, "the orphan reads the parent's writes before the fork");
    check_tag(m, N / 2, 5 * N / 8, C, "the orphan reads its own writes");
    check_tag(m, 5 * N / 8, 3 * N / 4, Q, "the orphan reads the parent's writes after the fork");
    check_tag(m, 3 * N / 4, N, ORIG, "the orphan reads the file's data");
    write_tag(m, 3 * N / 4, N, O);
    check_tag(m, 3 * N / 4, N, O, "the orphan reads its own last writes");
    char text[64];
    snprintf(text, sizeof text, "ok %d\n", (int)getpid());
    write_marker(marker, text);
    exit(0);
}

/* ------------------------------------- 5. switches while a thread writes */

/* Share-and-resume cycles, each under a thread of the parent that keeps
 * storing: write i stores the round i / N + 1 into the first word of page
 * i % N, then publishes i + 1 (release). The region's budget is a quarter
 * of the file: the thread keeps faulting while the region is shared for a
 * child and paged again. With `demand`, faults read one page each (no
 * read-around, no read-ahead windows). */
#define CYCLES 20u
static unsigned char *writer_m;
static int writer_stop;
static uint64_t writes_done;

static uint64_t *word_of(unsigned char *m, unsigned p) {
    return (uint64_t *)(m + (size_t)p * PAGE);
}

/* The round page p holds once the first `done` writes are done. */
static uint64_t round_after(uint64_t done, unsigned p) {
    return done > p ? (done - 1 - p) / N + 1 : 0;
}

static void *writer(void *arg) {
    (void)arg;
    for (uint64_t i = 0; !__atomic_load_n(&writer_stop, __ATOMIC_ACQUIRE); i++) {
        __atomic_store_n(word_of(writer_m, (unsigned)(i % N)), i / N + 1, __ATOMIC_RELAXED);
        __atomic_store_n(&writes_done, i + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Every page holds at least the round the first `done` writes left there:
 * no store lost, no load older than one already seen. */
static void check_rounds(unsigned char *m, uint64_t done, const char *when, unsigned cycle) {
    for (unsigned p = 0; p < N; p++) {
        uint64_t got = __atomic_load_n(word_of(m, p), __ATOMIC_RELAXED);
        CHECK(got >= round_after(done, p),
              "%s (cycle %u): page %u holds round %llu, want at least %llu (%llu writes done)",
              when, cycle, p, (unsigned long long)got, (unsigned long long)round_after(done, p),
              (unsigned long long)done);
    }
}

static void switches_under_writes(const char *path) {
    pp_region *r = map_region(path, N / 4);
    unsigned char *m = pp_addr(r);
    check_all(m, "the parent after the map");
    for (unsigned p = 0; p < N; p++) __atomic_store_n(word_of(m, p), 0, __ATOMIC_RELAXED);
    writer_m = m;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, writer, NULL) == 0, "pthread_create");
    uint64_t start = now_ms();
    while (__atomic_load_n(&writes_done, __ATOMIC_ACQUIRE) < 2 * N)
        CHECK(now_ms() - start < DEADLINE_MS, "the writing thread does not get going");
    for (unsigned k = 0; k < CYCLES; k++) {
        uint64_t before = __atomic_load_n(&writes_done, __ATOMIC_ACQUIRE);
        pid_t pid = fork_or_fail();
        if (pid == 0) {
            check_rounds(m, before, "a child right after the fork", k);
            exit(0);
        }
        check_rounds(m, before, "the parent right after the fork", k);
        CHECK(stat_of(r, "shares") == k + 1, "cycle %u: shares %llu", k,
              (unsigned long long)stat_of(r, "shares"));
        reap(pid, "a child");
        start = now_ms();
        while (stat_of(r, "resumes") < k + 1) {
            CHECK(now_ms() - start < DEADLINE_MS, "cycle %u: not paged again", k);
            sleep_ms(5);
        }
        CHECK(stat_of(r, "resumes") == k + 1, "cycle %u: resumes %llu", k,
              (unsigned long long)stat_of(r, "resumes"));
        check_rounds(m, __atomic_load_n(&writes_done, __ATOMIC_ACQUIRE),
                     "the parent once paged again", k);
    }
    __atomic_store_n(&writer_stop, 1, __ATOMIC_RELEASE);
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    uint64_t done = __atomic_load_n(&writes_done, __ATOMIC_ACQUIRE);
    for (unsigned p = 0; p < N; p++) {
        uint64_t round = round_after(done, p);
        memcpy(shadow + (size_t)p * PAGE, &round, 8);
    }
    check_all(m, "the parent after the writing thread");
    unmap_region(r);
    check_file(path);
    printf("writes %llu in %u cycles\n", (unsigned long long)done, CYCLES);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s SCENARIO SETUP DIR\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *scenario = argv[1], *setup_name = argv[2], *dir = argv[3];
    if (!strcmp(setup_name, "handler")) {
        setup = HANDLER;
    } else if (!strcmp(setup_name, "faulting")) {
        setup = FAULTING;
    } else if (!strcmp(setup_name, "pool")) {
        setup = POOL;
    } else if (!strcmp(setup_name, "daemon")) {
        setup = DAEMON;
    } else {
        fprintf(stderr, "unknown setup %s\n", setup_name);
        return 2;
    }
    char path[600];
    snprintf(path, sizeof path, "%s/data.dat", dir);
    shadow_init();

    if (!strcmp(scenario, "fill-all")) {
        workers_fill(path, N);
    } else if (!strcmp(scenario, "fill-quarter")) {
        workers_fill(path, N / 4);
    } else if (!strcmp(scenario, "stream-children-write")) {
        stream_children_write(path);
    } else if (!strcmp(scenario, "stream-parent-writes")) {
        stream_parent_writes(path);
    } else if (!strcmp(scenario, "grandchild")) {
        grandchild_writes(path);
    } else if (!strcmp(scenario, "switches-under-writes")) {
        switches_under_writes(path);
    } else if (!strcmp(scenario, "switches-under-demand-writes")) {
        demand = 1;
        switches_under_writes(path);
    } else if (!strcmp(scenario, "orphan")) {
        orphan(dir, path);
    } else {
        fprintf(stderr, "unknown scenario %s\n", scenario);
        return 2;
    }
    printf("OK\n");
    return 0;
}
