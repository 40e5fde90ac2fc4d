/* The floor of a userfaultfd missing fault on these machines, side by side
 * with the kernel's own first touch of shmem (memfd): nothing but the ioctls
 * per fault. Referenced by docs/results/2026-11-22-fault-cost.md.
 *   gcc -O2 -o /tmp/uffd_probe crates/pager/benches/uffd_probe.c -lpthread
 *   /tmp/uffd_probe MODE [ROUNDS] [PAGES]
 * Rounds alternate the kernel's first touch of a fresh memfd and the probe's
 * (each a fresh memfd of PAGES pages, default 16 rounds of 1024 pages); it
 * prints the median over rounds of each round's p50 ratio, of its mean ratio
 * and of its throughput ratio (wall time to first-touch every page, batch
 * work included; and CPU time of the whole process, other threads included).
 * MODE bits:
 *   1 UFFDIO_COPY of a zero page; 32 UFFDIO_ZEROPAGE; neither: fallocate +
 *     UFFDIO_CONTINUE (the pager's old path)
 *   4 poll before read, 8 non-blocking read (spinning handler)
 *   16 SIGBUS: the faulting thread serves itself (else one handler thread)
 *   64 pre-zeroed frames: every page is put in the memfd before the timed
 *     loop (counted in the throughput), each fault is a MINOR fault served by
 *     UFFDIO_CONTINUE alone; 128: the same in batches of 64 pages on the
 *     fault path (a fault on a page not prepared prepares it and the next
 *     63); 256: the same by a zeroer thread keeping 256 pages ahead.
 *     How the frames are prepared: fallocate, or with 512 MADV_POPULATE_WRITE
 *     on the pager's own view, or with 2048 pwrite(2) of zeros (fallocate
 *     leaves shmem folios !uptodate, so the CONTINUE still clears them;
 *     the other two clear them up front).
 *   1024 pin the handler thread (or zeroer) to the faulting thread's CPU.
 *   16384 the handler thread runs SCHED_FIFO (priority 1): a woken handler
 *     preempts other processes' threads instead of queueing behind them;
 *     32768 the faulting thread too (it is woken by the handler's ioctl).
 *   131072 the faulting thread pinned to its CPU, the handler thread to
 *     the next CPU (every wake-up crosses CPUs, to a CPU idle-polling under
 *     the haltpoll cpuidle driver).
 *   262144 with 65536: each handler waits in an epoll of its own with
 *     EPOLLEXCLUSIVE (one handler woken per fault, the first idle one in
 *     the order they were added); 524288: a handler that served a fault
 *     adds itself again, at the back (the faulting thread, woken while
 *     that handler's CPU is busy, moves to the other one, whose handler is
 *     then first).
 *   1048576 a handler switches to SCHED_IDLE around each fault's service
 *     (the ioctl that wakes the faulting thread), back to SCHED_OTHER
 *     before it waits again.
 *   4194304 every handler SCHED_IDLE for its whole life (its CPU counts as
 *     idle to the scheduler while only it runs there, so the thread it wakes
 *     stays on that CPU and preempts it).
 *   2097152 with 65536: each handler waits in an epoll of its own (not
 *     exclusive); one that did not serve the last fault first gives the
 *     one that did up to 4 us to take the event (no race for it from the
 *     other CPU). The faulting thread stores sched_getcpu() before each
 *     touch, so the probe counts faults served off the faulting thread's
 *     CPU ("remote"), wake-ups that found nothing ("spurious") and events
 *     left to the last server ("deferred").
 *   8388608 with 65536: a handler that finds no event spins (non-blocking
 *     read, sched_yield) for PAGEPILOT_SPIN_NS (default 50000) after the
 *     last fault it served, then sleeps in poll: every CPU then has a
 *     runnable handler while faults stream, none is idle, so the woken
 *     thread stays on its CPU and no wake-up crosses CPUs.
 *   16777216 a thread per CPU, pinned, SCHED_IDLE, spinning for the whole
 *     round (no fault served by it): no vCPU halts, so a wake-up never
 *     waits for the host to run a halted vCPU again.
 *   65536 one handler thread per CPU, each pinned to its CPU (blocking
 *     reads, every handler woken per fault: the one on the faulting thread's
 *     CPU serves it without a cross-CPU wake-up); the faulting thread is not
 *     pinned.
 *   4096 private anonymous memory instead of a memfd, on both sides (the
 *     kernel's anonymous first touch); served by UFFDIO_COPY of a zero page,
 *     or with 8192 by UFFDIO_MOVE of a page pre-zeroed in a staging area
 *     (MADV_POPULATE_WRITE of 64 pages at a time on the fault path).
 * Used: 33 / 37 (handler, blocking read / poll + read), 9 (spinning),
 * 17 / 49 (faulting thread, copy / zeropage), 80 / 592 / 2128 / 144 / 656 /
 * 2192 / 272 / 784 / 2320 (faulting thread, pre-zeroed frames), 4113 /
 * 12304 (faulting thread, private anonymous memory, copy / move), 1057 /
 * 16417 / 49185 (handler pinned / SCHED_FIFO / both threads SCHED_FIFO),
 * 2162721 (a handler per CPU deferring to the last server), 4259873 (a
 * handler per CPU, SCHED_IDLE). */
#define _GNU_SOURCE
#include <linux/userfaultfd.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sched.h>
#include <pthread.h>
#include <poll.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#ifndef UFFDIO_MOVE
struct uffdio_move { unsigned long long dst, src, len, mode; long long move; };
#define UFFDIO_MOVE _IOWR(UFFDIO, 0x05, struct uffdio_move)
#define UFFD_FEATURE_MOVE (1 << 16)
#endif
#define P 4096
#define BATCH 64
#define AHEAD 256
static int uffd = -1, memfd, mode, npages;
static long spin_ns = 50000;            /* 8388608: PAGEPILOT_SPIN_NS */
static char *app, *pager, *staging;
static char zeros[P] __attribute__((aligned(4096)));
static char bigzero[BATCH * P] __attribute__((aligned(4096)));
static unsigned char *ready;            /* page prepared in the memfd */
static atomic_long want;                /* zeroer: prepare up to here */
static atomic_int stop;
static atomic_int app_cpu = -1;          /* 2097152: where the faulting thread runs */
static atomic_long spurious_total, served[64], remote, served_seq, deferred;
static atomic_int last_server;
static long ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000L + t.tv_nsec; }
static long cpu_ns(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec * 1000000000L + t.tv_nsec; }
static void prepare(long first, long n) {
    if (first + n > npages) n = npages - first;
    if (n <= 0) return;
    if (mode & 512) madvise(pager + first * P, n * P, MADV_POPULATE_WRITE);
    else if (mode & 2048) for (long q = 0; q < n; q += BATCH) pwrite(memfd, bigzero, (n - q < BATCH ? n - q : BATCH) * P, (first + q) * P);
    else fallocate(memfd, 0, first * P, n * P);
    memset(ready + first, 1, n);
}
static void serve(unsigned long addr) {
    long page = (addr - (unsigned long)app) / P;
    if (mode & 8192) {
        if (!ready[page]) {
            long n = page + BATCH > npages ? npages - page : BATCH;
            madvise(staging + page * P, n * P, MADV_POPULATE_WRITE);
            memset(ready + page, 1, n);
        }
        struct uffdio_move m = {addr, (unsigned long)staging + page * P, P, 0, 0};
        if (ioctl(uffd, UFFDIO_MOVE, &m)) perror("move");
    } else if (mode & (64 | 128 | 256)) {
        if (!ready[page]) prepare(page, (mode & 128) ? BATCH : 1);
        if (mode & 256) atomic_store(&want, page + AHEAD);
        struct uffdio_continue c = {{addr, P}, 0, 0};
        if (ioctl(uffd, UFFDIO_CONTINUE, &c)) perror("continue");
    } else if (mode & 32) {
        struct uffdio_zeropage z = {{addr, P}, 0, 0};
        if (ioctl(uffd, UFFDIO_ZEROPAGE, &z)) perror("zeropage");
    } else if (mode & 1) {
        struct uffdio_copy c = {addr, (unsigned long)zeros, P, 0, 0};
        if (ioctl(uffd, UFFDIO_COPY, &c)) perror("copy");
    } else {
        fallocate(memfd, 0, addr - (unsigned long)app, P);
        struct uffdio_continue c = {{addr, P}, 0, 0};
        if (ioctl(uffd, UFFDIO_CONTINUE, &c)) perror("continue");
    }
}
static void pin_here(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s); }
static void fifo(void) { struct sched_param sp = {.sched_priority = 1}; if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp)) perror("SCHED_FIFO"); }
static void *handler(void *a) {
    if (mode & (1024 | 65536)) pin_here((int)(long)a);
    if (mode & 131072) pin_here(((int)(long)a + 1) % (int)sysconf(_SC_NPROCESSORS_ONLN));
    if (mode & 16384) fifo();
    if (mode & 4194304) { struct sched_param none = {0}; if (sched_setscheduler(0, SCHED_IDLE, &none)) perror("SCHED_IDLE"); }
    struct uffd_msg m[16];
    int ep = -1;
    if (mode & 2097152) {
        /* A handler that did not serve the last fault gives the handler
         * that did (on the faulting thread's CPU, as a rule) a moment to
         * take the event before it reads the userfaultfd itself. */
        int me = (int)(long)a;
        ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event e = {EPOLLIN, {.u32 = 0}};
        epoll_ctl(ep, EPOLL_CTL_ADD, uffd, &e);
        while (!atomic_load(&stop)) {
            struct epoll_event got;
            if (epoll_wait(ep, &got, 1, 10) <= 0) continue;
            if (atomic_load(&last_server) != me) {
                long seq = atomic_load(&served_seq), t0 = ns();
                while (atomic_load(&served_seq) == seq && ns() - t0 < 4000) __builtin_ia32_pause();
                if (atomic_load(&served_seq) != seq) { atomic_fetch_add(&deferred, 1); continue; }
            }
            int n = read(uffd, m, sizeof m);
            if (n <= 0) { atomic_fetch_add(&spurious_total, 1); continue; }
            atomic_store(&last_server, me);
            atomic_fetch_add(&served[me], 1);
            if (atomic_load(&app_cpu) != me) atomic_fetch_add(&remote, 1);
            for (int i = 0; i < n / (int)sizeof(m[0]); i++) serve(m[i].arg.pagefault.address & ~(unsigned long)(P - 1));
            atomic_fetch_add(&served_seq, 1);
        }
        close(ep);
        return 0;
    }
    if (mode & 262144) {
        ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event e = {EPOLLIN | EPOLLEXCLUSIVE, {0}};
        epoll_ctl(ep, EPOLL_CTL_ADD, uffd, &e);
    }
    while (!atomic_load(&stop)) {
        if (ep >= 0) {
            struct epoll_event e;
            if (epoll_wait(ep, &e, 1, 10) <= 0) continue;
            int n = read(uffd, m, sizeof m);
            if (n <= 0) continue;
            for (int i = 0; i < n / (int)sizeof(m[0]); i++) serve(m[i].arg.pagefault.address & ~(unsigned long)(P - 1));
            if (mode & 524288) { /* to the back of the wake-up queue */
                struct epoll_event e2 = {EPOLLIN | EPOLLEXCLUSIVE, {0}};
                epoll_ctl(ep, EPOLL_CTL_DEL, uffd, 0);
                epoll_ctl(ep, EPOLL_CTL_ADD, uffd, &e2);
            }
            continue;
        }
        if (mode & 8388608) {
            /* Spin with sched_yield for a while after the last fault:
             * a runnable handler on every CPU leaves no CPU idle, so the
             * thread it wakes stays where it faulted, and the next fault
             * finds its CPU's handler runnable (no wake-up, no IPI). */
            static __thread long last;
            int n = read(uffd, m, sizeof m);
            if (n <= 0) {
                if (ns() - last < spin_ns) { sched_yield(); continue; }
                struct pollfd p = {uffd, POLLIN};
                poll(&p, 1, 10);
                continue;
            }
            for (int i = 0; i < n / (int)sizeof(m[0]); i++) serve(m[i].arg.pagefault.address & ~(unsigned long)(P - 1));
            last = ns();
            continue;
        }
        if (mode & 4) { struct pollfd p = {uffd, POLLIN}; if (poll(&p, 1, 10) <= 0) continue; }
        int n = read(uffd, m, sizeof m);
        if (n <= 0) continue;
        for (int i = 0; i < n / (int)sizeof(m[0]); i++) {
            struct sched_param none = {0};
            /* SCHED_IDLE while waking the faulting thread: this CPU then
             * counts as idle (sched_idle_cpu), so the woken thread is placed
             * here, not on another CPU, and preempts this handler at once. */
            if (mode & 1048576) sched_setscheduler(0, SCHED_IDLE, &none);
            serve(m[i].arg.pagefault.address & ~(unsigned long)(P - 1));
            if (mode & 1048576) sched_setscheduler(0, SCHED_OTHER, &none);
        }
    }
    return 0;
}
/* 16777216: keeps its CPU out of halt at idle priority (SCHED_IDLE: any
 * runnable thread preempts it, and the scheduler counts its CPU as idle). */
static void *keeper(void *a) {
    pin_here((int)(long)a);
    struct sched_param none = {0};
    if (sched_setscheduler(0, SCHED_IDLE, &none)) perror("SCHED_IDLE");
    while (!atomic_load(&stop)) ; /* no PAUSE: pause-loop exiting would hand the vCPU back to the host */
    return 0;
}
static void *zeroer(void *a) {
    if (mode & 1024) pin_here((int)(long)a);
    long done = 0;
    while (!atomic_load(&stop)) {
        long w = atomic_load(&want);
        if (w > npages) w = npages;
        if (done < w) {
            long n = w - done < 32 ? w - done : 32;
            for (long q = done; q < done + n; q++)
                if (!ready[q]) prepare(q, 1);
            done += n;
        } else sched_yield();
    }
    return 0;
}
static void onbus(int sig, siginfo_t *si, void *ctx) { serve((unsigned long)si->si_addr & ~(unsigned long)(P - 1)); }
static int cmp(const void *a, const void *b) { long x = *(long *)a, y = *(long *)b; return x < y ? -1 : x > y; }
static double medd(double *v, int n) { for (int i = 1; i < n; i++) for (int j = i; j > 0 && v[j - 1] > v[j]; j--) { double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; } return v[n / 2]; }
struct run { long p50, mean, wall, cpu; };
static struct run touch(char *b, int prefill) {
    long *t = malloc(npages * sizeof *t), sum = 0;
    long w0 = ns(), c0 = cpu_ns();
    if (prefill) prepare(0, npages);
    for (int i = 0; i < npages; i++) {
        if (mode & 2097152) atomic_store_explicit(&app_cpu, sched_getcpu(), memory_order_relaxed);
        long t0 = ns(); b[(long)i * P] = 1; t[i] = ns() - t0; sum += t[i];
    }
    struct run r = {0, sum / npages, ns() - w0, cpu_ns() - c0};
    qsort(t, npages, 8, cmp); r.p50 = t[npages / 2]; free(t);
    return r;
}
static char *region(long len, int fd) {
    if (mode & 4096) return mmap(0, len, 3, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return mmap(0, len, 3, MAP_SHARED, fd, 0);
}
static struct run kernel_round(void) {
    int k = memfd_create("k", 0); ftruncate(k, (long)npages * P);
    char *kb = region((long)npages * P, k);
    struct run r = touch(kb, 0);
    munmap(kb, (long)npages * P); close(k);
    return r;
}
static struct run probe_round(void) {
    long len = (long)npages * P;
    if (uffd < 0) {
        uffd = syscall(SYS_userfaultfd, O_CLOEXEC | ((mode & (8 | 262144 | 2097152 | 8388608)) ? O_NONBLOCK : 0));
        struct uffdio_api api = {UFFD_API, ((mode & 16) ? UFFD_FEATURE_SIGBUS : 0) | ((mode & 8192) ? UFFD_FEATURE_MOVE : 0) | UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_MINOR_SHMEM};
        if (ioctl(uffd, UFFDIO_API, &api)) perror("api");
    }
    memfd = memfd_create("m", 0); ftruncate(memfd, len);
    app = region(len, memfd);
    pager = mmap(0, len, 3, MAP_SHARED, memfd, 0);
    staging = mmap(0, len, 3, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ready = calloc(npages, 1);
    struct uffdio_register r = {{(unsigned long)app, len}, UFFDIO_REGISTER_MODE_MISSING | ((mode & 4096) ? 0 : UFFDIO_REGISTER_MODE_MINOR), 0};
    if (ioctl(uffd, UFFDIO_REGISTER, &r)) perror("register");
    atomic_store(&stop, 0); atomic_store(&want, AHEAD);
    pthread_t t = 0, z = 0, per_cpu[64];
    int cpu = sched_getcpu(), ncpu = 0;
    if (mode & (1024 | 131072)) pin_here(cpu);
    if (mode & 65536) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (ncpu = 0; ncpu < n && ncpu < 64; ncpu++) pthread_create(&per_cpu[ncpu], 0, handler, (void *)(long)ncpu);
    } else if (!(mode & 16)) pthread_create(&t, 0, handler, (void *)(long)cpu);
    if (mode & 256) pthread_create(&z, 0, zeroer, (void *)(long)cpu);
    pthread_t keepers[64];
    int nkeep = 0;
    if (mode & 16777216)
        for (; nkeep < sysconf(_SC_NPROCESSORS_ONLN) && nkeep < 64; nkeep++) pthread_create(&keepers[nkeep], 0, keeper, (void *)(long)nkeep);
    usleep(1000);
    struct run res = touch(app, (mode & 64) != 0);
    atomic_store(&stop, 1);
    if (t) { pthread_cancel(t); pthread_join(t, 0); } /* read(2) is a cancellation point */
    for (int i = 0; i < ncpu; i++) {
        if (!(mode & 2097152)) pthread_cancel(per_cpu[i]); /* epoll handlers see `stop` */
        pthread_join(per_cpu[i], 0);
    }
    if (z) pthread_join(z, 0);
    for (int i = 0; i < nkeep; i++) pthread_join(keepers[i], 0);
    if (mode & (1024 | 131072)) { cpu_set_t s; CPU_ZERO(&s); for (int i = 0; i < CPU_SETSIZE; i++) CPU_SET(i, &s); sched_setaffinity(0, sizeof s, &s); }
    munmap(app, len); munmap(pager, len); munmap(staging, len); close(memfd); free(ready);
    return res;
}
int main(int c, char **v) {
    if (c < 2) { fprintf(stderr, "usage: %s MODE [ROUNDS] [PAGES]\n", v[0]); return 2; }
    mode = atoi(v[1]);
    if (getenv("PAGEPILOT_SPIN_NS")) spin_ns = atol(getenv("PAGEPILOT_SPIN_NS"));
    int rounds = c > 2 ? atoi(v[2]) : 16;
    npages = c > 3 ? atoi(v[3]) : 1024;
    if (rounds < 1 || rounds > 1000 || npages < 1 || npages > (1 << 20)) { fprintf(stderr, "bad ROUNDS or PAGES\n"); return 2; }
    if (mode & 32768) fifo();
    if (mode & 16) { struct sigaction sa = {0}; sa.sa_sigaction = onbus; sa.sa_flags = SA_SIGINFO; sigaction(SIGBUS, &sa, 0); }
    double r50[1000], rmean[1000], rwall[1000], rcpu[1000], k50[1000], p50[1000];
    for (int i = 0; i < rounds; i++) {
        struct run k = kernel_round(), p = probe_round();
        r50[i] = (double)p.p50 / k.p50; rmean[i] = (double)p.mean / k.mean;
        rwall[i] = (double)p.wall / k.wall; rcpu[i] = (double)p.cpu / k.cpu;
        k50[i] = k.p50; p50[i] = p.p50;
    }
    printf("mode %d rounds %d pages %d: kernel p50 %.0f ns, probe p50 %.0f ns | ratio p50 %.2f mean %.2f wall %.2f cpu %.2f\n",
           mode, rounds, npages, medd(k50, rounds), medd(p50, rounds), medd(r50, rounds), medd(rmean, rounds),
           medd(rwall, rounds), medd(rcpu, rounds));
    if (mode & 2097152) printf("deferred %ld, spurious %ld, served by CPU 0 / 1 %ld / %ld, remote %ld\n", atomic_load(&deferred), atomic_load(&spurious_total), atomic_load(&served[0]), atomic_load(&served[1]), atomic_load(&remote));
    return 0;
}
