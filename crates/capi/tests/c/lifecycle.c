/* What an ordinary process does around a pagepilot region: exit without
 * unmapping, fork (child first or parent first), exec, and its own SIGBUS
 * handler. Run by crates/capi/tests/lifecycle.rs as
 *
 *     lifecycle MODE DIR
 *
 * where DIR/data.dat is a 16 MiB file (4096 pages) whose page p holds
 * page_byte(ORIG, p, off) at each offset. MODE (see main): exit-return,
 * exit-exit, exit-last-thread, exit-faulting-thread, exit-underscore;
 * fork-{handler,faulting}-{unmap,exit} (the parent waits for its child),
 * orphan-{handler,faulting} (the child outlives its parent),
 * anon-{handler,faulting} (a child touches an anonymous region);
 * exec-{handler,faulting}; sigbus-{siginfo,plain,default}. Each mode is one
 * scenario in its own process; the Rust driver checks the exit status and
 * the file left behind. On the first failed check the program prints "FAIL ..." (naming the
 * page and what it holds instead) and exits 1; a forked child does the same
 * with a "child: " prefix, and its parent then fails on the child's status.
 *
 * The page contents: page p written with tag T holds page_byte(T, p, off) at
 * offset off, so a page from the wrong place, the wrong moment or the wrong
 * process is told apart from the right one (lifecycle.rs uses the same
 * formula). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pagepilot.h"
#include "check.h"

#define PAGE 4096u
#define N 4096u /* pages of data.dat: 16 MiB */
#define BUDGET (4u << 20)

/* Tags of page contents (lifecycle.rs: the same numbers). */
enum { ORIG = 0, P = 1, C = 2, Q = 3, W = 4 };
static const char *tag_name(unsigned tag) {
    static const char *names[] = {"ORIG", "P (parent before fork)", "C (child)",
                                  "Q (parent after fork)", "W (written before exit)"};
    return tag < 5 ? names[tag] : "?";
}


/* What a page holds: one of the tags, zeros, or something else. */
static const char *what_is(const volatile unsigned char *pg, unsigned page) {
    for (unsigned tag = 0; tag < 5; tag++) {
        unsigned off = 0;
        while (off < PAGE && pg[off] == page_byte(tag, page, off)) off++;
        if (off == PAGE) return tag_name(tag);
    }
    unsigned off = 0;
    while (off < PAGE && pg[off] == 0) off++;
    if (off == PAGE) return "zeros";
    return "other data";
}

static void fill_page(volatile unsigned char *m, unsigned page, unsigned tag) {
    volatile unsigned char *pg = m + (size_t)page * PAGE;
    for (unsigned off = 0; off < PAGE; off++) pg[off] = page_byte(tag, page, off);
}

static void fill(volatile unsigned char *m, unsigned from, unsigned to, unsigned tag) {
    for (unsigned p = from; p < to; p++) fill_page(m, p, tag);
}

/* Fails (naming the first bad page and what it holds) unless pages
 * [from, to) hold tag. */
static void check_range_at(const char *file, int line, const volatile unsigned char *m,
                           unsigned from, unsigned to, unsigned tag, const char *when) {
    for (unsigned p = from; p < to; p++) {
        const volatile unsigned char *pg = m + (size_t)p * PAGE;
        for (unsigned off = 0; off < PAGE; off++) {
            if (pg[off] != page_byte(tag, p, off)) {
                fail(file, line, "%s: page %u off %u is %u, want %u: the page should hold %s, "
                     "holds %s",
                     when, p, off, pg[off], page_byte(tag, p, off), tag_name(tag),
                     what_is(pg, p));
            }
        }
    }
}
#define check_range(...) check_range_at(__FILE__, __LINE__, __VA_ARGS__)

static void write_orig_file(const char *path, unsigned pages) {
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
    unsigned char buf[PAGE];
    for (unsigned p = 0; p < pages; p++) {
        for (unsigned off = 0; off < PAGE; off++) buf[off] = page_byte(ORIG, p, off);
        CHECK(write(fd, buf, PAGE) == (ssize_t)PAGE, "write %s", path);
    }
    CHECK(close(fd) == 0, "close %s", path);
}

static pp_region *map_file(const char *path, int faulting_thread, size_t budget) {
    char err[PP_ERR_MAX] = "";
    pp_region *r;
    if (!faulting_thread && budget == BUDGET) {
        r = pp_map_file(path, 1, BUDGET, "lru", err, sizeof err);
    } else {
        pp_options o;
        pp_options_init(&o);
        o.path = path;
        o.writable = 1;
        o.budget_bytes = budget;
        o.policy = "lru";
        o.faulting_thread = faulting_thread;
        r = pp_map(&o, err, sizeof err);
    }
    CHECK(r != NULL, "map %s (faulting_thread %d): %s", path, faulting_thread, err);
    CHECK(pp_addr(r) != NULL, "pp_addr");
    return r;
}

static pp_region *map_anon(size_t len, size_t budget, int faulting_thread) {
    char err[PP_ERR_MAX] = "";
    pp_options o;
    pp_options_init(&o);
    o.len = len;
    o.budget_bytes = budget;
    o.policy = "lru";
    o.faulting_thread = faulting_thread;
    pp_region *r = pp_map(&o, err, sizeof err);
    CHECK(r != NULL, "pp_map anonymous (faulting_thread %d): %s", faulting_thread, err);
    return r;
}

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

static int wait_child(pid_t pid) {
    int st = 0;
    pid_t got;
    do got = waitpid(pid, &st, 0);
    while (got < 0 && errno == EINTR);
    CHECK(got == pid, "waitpid %d: %s", (int)pid, strerror(errno));
    return st;
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---------------------------------------------------------------- 1. exit */

/* Writes W into every page of data.dat's region and leaves it mapped. */
static pp_region *map_and_write_all(const char *path, int faulting_thread) {
    pp_region *r = map_file(path, faulting_thread, BUDGET);
    CHECK(pp_len(r) == (size_t)N * PAGE, "pp_len %zu", pp_len(r));
    fill(pp_addr(r), 0, N, W);
    return r;
}

/* Two live regions, both dirty, then exit(0) from a nested call. */
static void exit_by_exit(const char *dir, const char *path) {
    char second[600];
    snprintf(second, sizeof second, "%s/second.dat", dir);
    write_orig_file(second, 1024);
    pp_region *r2 = map_file(second, 0, 1u << 20);
    (void)map_and_write_all(path, 0);
    fill(pp_addr(r2), 0, 1024, W);
    exit(0);
}

/* State letter of a task of this process in /proc, or 0. */
static char task_state(pid_t tid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *paren = strrchr(buf, ')');
    return paren != NULL && paren[1] == ' ' ? paren[2] : 0;
}

static pp_region *pthread_region;
static pid_t main_tid;

/* Waits until the main thread has ended (pthread_exit), then writes every
 * page and returns: the process ends with the last thread. */
static void *last_thread(void *arg) {
    (void)arg;
    int waited = 0;
    while (task_state(main_tid) != 'Z') {
        CHECK(waited < 20000, "the main thread did not end after pthread_exit (state %c)",
              task_state(main_tid));
        sleep_ms(1);
        waited++;
    }
    fill(pp_addr(pthread_region), 0, N, W);
    printf("the last thread wrote every page after main's pthread_exit\n");
    return NULL;
}

static void exit_by_last_thread(const char *path) {
    pthread_region = map_file(path, 0, BUDGET);
    main_tid = getpid();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, last_thread, NULL) == 0, "pthread_create");
    pthread_exit(NULL);
}

/* ---------------------------------------------------------------- 2. fork */

/* The file image a fork scenario leaves without the parent's writes after
 * the fork: P on the first half, C (the child's) on the last quarter. */
static unsigned fork_tag(unsigned p) {
    if (p < N / 2) return P;
    if (p >= 3 * N / 4) return C;
    return ORIG;
}

/* Pages the parent writes (Q) while the child runs, and flushes for it. */
#define LATE_FROM (5 * N / 8)
#define LATE_TO (5 * N / 8 + N / 16)

/* The image at the end of fork_and_wait: Q where the parent wrote after
 * the fork (LATE pages, then every third page). */
static unsigned fork_final_tag(unsigned p) {
    if (p % 3 == 0 || (p >= LATE_FROM && p < LATE_TO)) return Q;
    return fork_tag(p);
}

/* In the child: the region is the file (the parent's writes before fork and
 * the original data elsewhere); its writes go to the file. */
static void child_reads_and_writes(volatile unsigned char *m) {
    check_range(m, 0, N / 2, P, "child reads the parent's writes made before fork");
    check_range(m, N / 2, N, ORIG, "child reads the file's data");
    fill(m, 3 * N / 4, N, C);
    check_range(m, 3 * N / 4, N, C, "child reads its own writes");
}

static void child_unmaps(pp_region *r) {
    CHECK(pp_flush(r) == 0, "pp_flush in the child");
    CHECK(pp_unmap(r) == 0, "pp_unmap in the child");
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

/* Parent writes P, reads a few pages the child will write, forks. The child
 * checks (P, original data), writes C, tells the parent; the parent writes
 * Q on the LATE pages (which the child has read), flushes, tells the child,
 * which must then read Q there; the child unmaps (or not) and exits. The
 * parent waits, invalidates, checks P / original / C / Q, writes Q on every
 * third page, checks everything, unmaps. */
static void fork_and_wait(const char *path, int faulting_thread, int unmap_in_child) {
    pp_region *r = map_file(path, faulting_thread, BUDGET);
    volatile unsigned char *m = pp_addr(r);
    fill(m, 0, N / 2, P);
    /* Pages the child will write, resident and clean in the parent at the
     * fork: only pp_invalidate makes the parent read them again. */
    check_range(m, 3 * N / 4, 3 * N / 4 + N / 32, ORIG, "parent before fork");
    int to_parent[2], to_child[2];
    CHECK(pipe2(to_parent, O_CLOEXEC) == 0 && pipe2(to_child, O_CLOEXEC) == 0, "pipe2");
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        who = "child: ";
        close(to_parent[0]);
        close(to_child[1]);
        child_reads_and_writes(m);
        send_byte(to_parent[1]);
        CHECK(receive(to_child[0]), "the parent ended without flushing its writes");
        check_range(m, LATE_FROM, LATE_TO, Q,
                    "child reads the parent's writes made after fork, once flushed");
        if (unmap_in_child) child_unmaps(r);
        exit(0);
    }
    close(to_parent[1]);
    close(to_child[0]);
    /* The parent keeps paging while the child works (pages the child only
     * reads; fewer than the budget: the clean pages read above stay
     * resident, as a variant of this program without pp_invalidate shows by
     * reading the original data there after the child's writes). */
    check_range(m, 0, N / 8, P, "parent reads its own writes while the child runs");
    if (!receive(to_parent[0])) {
        int st = wait_child(pid);
        fail(__FILE__, __LINE__, "the child ended before its writes: %s", describe_status(st));
    }
    fill(m, LATE_FROM, LATE_TO, Q);
    CHECK(pp_flush(r) == 0, "pp_flush in the parent");
    send_byte(to_child[1]);
    int st = wait_child(pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed: %s", describe_status(st));
    close(to_parent[0]);
    close(to_child[1]);
    CHECK(pp_invalidate(r) == 0, "pp_invalidate");
    /* The child's writes first, before other pages evict the stale ones. */
    check_range(m, 3 * N / 4, N, C, "parent after the child, the child's writes");
    check_range(m, 0, N / 2, P, "parent after the child, its own writes");
    check_range(m, N / 2, LATE_FROM, ORIG, "parent after the child, the file's data");
    check_range(m, LATE_FROM, LATE_TO, Q, "parent after the child, its writes after fork");
    check_range(m, LATE_TO, 3 * N / 4, ORIG, "parent after the child, the file's data");
    for (unsigned p = 0; p < N; p += 3) fill_page(m, p, Q);
    for (unsigned p = 0; p < N; p++) {
        check_range(m, p, p + 1, fork_final_tag(p), "parent after its last writes");
    }
    CHECK(pp_unmap(r) == 0, "pp_unmap in the parent");
}

/* Parent writes P, forks and exits at once (exit without unmapping); the
 * child waits until it is an orphan, checks, writes C, unmaps and leaves
 * DIR/child.done ("ok PID" or the failure). */
static void fork_child_outlives_parent(const char *dir, const char *path, int faulting_thread) {
    pp_region *r = map_file(path, faulting_thread, BUDGET);
    fill(pp_addr(r), 0, N / 2, P);
    pid_t parent = getpid();
    static char marker[600];
    snprintf(marker, sizeof marker, "%s/child.done", dir);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid > 0) {
        printf("parent %d exits right after forking child %d\n", (int)parent, (int)pid);
        exit(0);
    }
    who = "child: ";
    fail_marker = marker;
    /* Output to a log of its own: the driver stops reading the parent's. */
    char log[600];
    snprintf(log, sizeof log, "%s/child.log", dir);
    int fd = open(log, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    CHECK(fd >= 0, "open %s", log);
    CHECK(dup2(fd, 1) == 1 && dup2(fd, 2) == 2, "dup2");
    close(fd);
    sleep_ms(200);
    for (int waited = 0; getppid() == parent; waited++) {
        CHECK(waited < 20000, "the parent %d has not exited after 20 s", (int)parent);
        sleep_ms(1);
    }
    printf("child %d: parent gone, working\n", (int)getpid());
    child_reads_and_writes(pp_addr(r));
    child_unmaps(r);
    char text[64];
    snprintf(text, sizeof text, "ok %d\n", (int)getpid());
    write_marker(marker, text);
    exit(0);
}

/* An anonymous region is absent in a child: a read of an evicted page and a
 * write of a resident one both end the child with SIGSEGV; the parent's
 * data stays intact. */
static void fork_anonymous(int faulting_thread) {
    pp_region *r = map_anon((size_t)N * PAGE, BUDGET, faulting_thread);
    volatile unsigned char *m = pp_addr(r);
    fill(m, 0, N, P);
    for (int k = 0; k < 2; k++) {
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            who = "child: ";
            struct rlimit no_core = {0, 0};
            setrlimit(RLIMIT_CORE, &no_core);
            if (k == 0) {
                unsigned char v = m[5 * PAGE + 7];
                printf("child: read %u from an evicted page of an anonymous region\n", v);
            } else {
                m[(size_t)(N - 1) * PAGE + 7] = 1;
                printf("child: wrote a resident page of an anonymous region\n");
            }
            _exit(3);
        }
        int st = wait_child(pid);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
              "child %s an anonymous region: %s, want SIGSEGV",
              k == 0 ? "reading" : "writing", describe_status(st));
    }
    check_range(m, 0, N, P, "parent after its children died");
    CHECK(pp_unmap(r) == 0, "pp_unmap");
}

/* ---------------------------------------------------------------- 3. exec */

/* Writes "FD -> TARGET" for each of this process's descriptors. */
static void list_fds(const char *out) {
    FILE *f = fopen(out, "we");
    CHECK(f != NULL, "open %s", out);
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL, "opendir /proc/self/fd");
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char link[300], target[512];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n < 0) continue;
        target[n] = 0;
        fprintf(f, "%s -> %s\n", e->d_name, target);
    }
    closedir(d);
    fclose(f);
}

/* A file region and an anonymous one (every kind of descriptor the pager
 * holds); the parent lists its descriptors before the maps (before_fds.txt)
 * and after its writes (parent_fds.txt), forks; the child execs
 * `ls -l /proc/self/fd/` into DIR/child_fds.txt. */
static void fork_exec(const char *dir, const char *path, int faulting_thread) {
    char before_fds[600];
    snprintf(before_fds, sizeof before_fds, "%s/before_fds.txt", dir);
    list_fds(before_fds);
    pp_region *r = map_file(path, faulting_thread, BUDGET);
    pp_region *a = map_anon(4u << 20, 1u << 20, faulting_thread);
    fill(pp_addr(r), 0, N / 2, P);
    fill(pp_addr(a), 0, 1024, P);
    char parent_fds[600], child_fds[600];
    snprintf(parent_fds, sizeof parent_fds, "%s/parent_fds.txt", dir);
    snprintf(child_fds, sizeof child_fds, "%s/child_fds.txt", dir);
    list_fds(parent_fds);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        who = "child: ";
        int fd = open(child_fds, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
        CHECK(fd >= 0, "open %s", child_fds);
        CHECK(dup2(fd, 1) == 1, "dup2");
        close(fd);
        execl("/bin/ls", "ls", "-l", "/proc/self/fd/", (char *)NULL);
        fail(__FILE__, __LINE__, "exec /bin/ls: %s", strerror(errno));
    }
    int st = wait_child(pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the exec'd ls: %s", describe_status(st));
    check_range(pp_addr(r), 0, N / 2, P, "parent after its child exec'd");
    check_range(pp_addr(r), N / 2, N, ORIG, "parent after its child exec'd");
    check_range(pp_addr(a), 0, 1024, P, "parent's anonymous region after its child exec'd");
    CHECK(pp_unmap(a) == 0, "pp_unmap anonymous");
    CHECK(pp_unmap(r) == 0, "pp_unmap");
}

/* --------------------------------------------------------------- 4. SIGBUS */

static sigjmp_buf bus_jump;
static volatile sig_atomic_t bus_calls;
static void *volatile bus_addr;

static void on_sigbus_info(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    if (sig == SIGBUS) {
        bus_addr = si->si_addr;
        bus_calls++;
    }
    siglongjmp(bus_jump, 1);
}

static void on_sigbus_plain(int sig) {
    if (sig == SIGBUS) bus_calls++;
    siglongjmp(bus_jump, 1);
}

/* A store beyond the end of a mapped 1-page file: the application's own
 * SIGBUS, which its handler must see. */
static void foreign_sigbus(volatile unsigned char *beyond, int siginfo, const char *when) {
    int before = bus_calls;
    bus_addr = NULL;
    if (sigsetjmp(bus_jump, 1) == 0) {
        beyond[123] = 1;
        fail(__FILE__, __LINE__, "%s: a store beyond the end of a file did not fault", when);
    }
    CHECK(bus_calls == before + 1, "%s: the application's SIGBUS handler ran %d times, want 1",
          when, bus_calls - before);
    if (siginfo) {
        CHECK(bus_addr == (void *)(beyond + 123),
              "%s: the application's handler got si_addr %p, want %p", when, bus_addr,
              (void *)(beyond + 123));
    }
    printf("%s: the application's SIGBUS handler was called\n", when);
}

/* Two pages of a file one page long, mapped shared: a store to the second
 * raises the application's own SIGBUS. */
static unsigned char *two_pages_of_one(const char *dir) {
    char small[600];
    snprintf(small, sizeof small, "%s/small.dat", dir);
    write_orig_file(small, 1);
    int fd = open(small, O_RDWR | O_CLOEXEC);
    CHECK(fd >= 0, "open %s", small);
    unsigned char *two = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(two != MAP_FAILED, "mmap %s: %s", small, strerror(errno));
    close(fd);
    return two;
}

static void foreign_sigbus_handler(const char *dir, const char *path, int siginfo) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (siginfo) {
        sa.sa_sigaction = on_sigbus_info;
        sa.sa_flags = SA_SIGINFO;
    } else {
        sa.sa_handler = on_sigbus_plain;
    }
    CHECK(sigaction(SIGBUS, &sa, NULL) == 0, "sigaction");

    unsigned char *two = two_pages_of_one(dir);
    volatile unsigned char *beyond = two + PAGE;

    pp_region *r = map_file(path, 1, BUDGET);
    volatile unsigned char *m = pp_addr(r);
    /* The library's handler is in place: the application's is reached through it. */
    struct sigaction now;
    CHECK(sigaction(SIGBUS, NULL, &now) == 0, "sigaction query");
    CHECK((now.sa_flags & SA_SIGINFO) ? now.sa_sigaction != on_sigbus_info
                                      : now.sa_handler != on_sigbus_plain,
          "a faulting-thread region installed no SIGBUS handler of its own");
    foreign_sigbus(beyond, siginfo, "after the map");
    fill(m, 0, N, P);
    check_range(m, 0, N, P, "after the application's SIGBUS");
    foreign_sigbus(beyond, siginfo, "after paging the whole region");
    check_range(m, 0, N, P, "after the second application SIGBUS");
    CHECK(two[5] == page_byte(ORIG, 0, 5), "the application's own mapping");
    CHECK(pp_unmap(r) == 0, "pp_unmap");
    foreign_sigbus(beyond, siginfo, "after the unmap");
    munmap(two, 2 * PAGE);
}

/* No handler of the application (SIG_DFL) before the map: its own SIGBUS
 * takes the default action, the process dies of SIGBUS (lifecycle.rs checks
 * the status), after the region worked. */
static void foreign_sigbus_default(const char *dir, const char *path) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    unsigned char *two = two_pages_of_one(dir);
    pp_region *r = map_file(path, 1, BUDGET);
    volatile unsigned char *m = pp_addr(r);
    fill(m, 0, N, P);
    check_range(m, 0, N, P, "before the application's SIGBUS");
    CHECK(pp_flush(r) == 0, "pp_flush");
    printf("the region works; now a store beyond the end of a file\n");
    ((volatile unsigned char *)two)[PAGE + 123] = 1;
    printf("survived a store beyond the end of a file\n");
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODE DIR\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argv[1], *dir = argv[2];
    char path[600];
    snprintf(path, sizeof path, "%s/data.dat", dir);

    if (!strcmp(mode, "exit-return")) {
        (void)map_and_write_all(path, 0);
        return 0;
    } else if (!strcmp(mode, "exit-exit")) {
        exit_by_exit(dir, path);
    } else if (!strcmp(mode, "exit-last-thread")) {
        exit_by_last_thread(path);
    } else if (!strcmp(mode, "exit-faulting-thread")) {
        (void)map_and_write_all(path, 1);
        exit(0);
    } else if (!strcmp(mode, "exit-underscore")) {
        (void)map_and_write_all(path, 0);
        _exit(0);
    } else if (!strcmp(mode, "fork-handler-unmap")) {
        fork_and_wait(path, 0, 1);
    } else if (!strcmp(mode, "fork-handler-exit")) {
        fork_and_wait(path, 0, 0);
    } else if (!strcmp(mode, "fork-faulting-unmap")) {
        fork_and_wait(path, 1, 1);
    } else if (!strcmp(mode, "fork-faulting-exit")) {
        fork_and_wait(path, 1, 0);
    } else if (!strcmp(mode, "orphan-handler")) {
        fork_child_outlives_parent(dir, path, 0);
    } else if (!strcmp(mode, "orphan-faulting")) {
        fork_child_outlives_parent(dir, path, 1);
    } else if (!strcmp(mode, "anon-handler")) {
        fork_anonymous(0);
    } else if (!strcmp(mode, "anon-faulting")) {
        fork_anonymous(1);
    } else if (!strcmp(mode, "exec-handler")) {
        fork_exec(dir, path, 0);
    } else if (!strcmp(mode, "exec-faulting")) {
        fork_exec(dir, path, 1);
    } else if (!strcmp(mode, "sigbus-siginfo")) {
        foreign_sigbus_handler(dir, path, 1);
    } else if (!strcmp(mode, "sigbus-plain")) {
        foreign_sigbus_handler(dir, path, 0);
    } else if (!strcmp(mode, "sigbus-default")) {
        foreign_sigbus_default(dir, path);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("OK\n");
    return 0;
}
