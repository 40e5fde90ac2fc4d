/* Cold uniform random reads through a userfaultfd region, served by a
 * handler kept to each CPU that either reads each fault's page itself
 * (blocking O_DIRECT pread, as the pager's handlers do) or submits the read
 * on an io_uring and goes on with the next fault, the page mapped when its
 * completion arrives (an eventfd in the handlers' epoll). Side by side with
 * the pager's defaults and the kernel's mmap told MADV_RANDOM in a memory
 * cgroup of the budget. Issue 32 item 2: does one handler per CPU keep every
 * faulting thread's read in flight once it no longer waits for them?
 *   cargo build --release -p pagepilot-capi
 *   gcc -O2 -Iinclude -o /tmp/async_reads crates/pager/benches/async_reads.c \
 *       -Ltarget/release -lpagepilot -lpthread -Wl,-rpath,$PWD/target/release
 *   /tmp/async_reads FILE BUDGET_MB OPS ROUNDS   (root: cgroup v1, fadvise)
 * The probe's region: a memfd of the file's size holds the frames, mapped
 * twice (the application's view, registered for missing and minor faults,
 * and the handlers' view the reads land in); a FIFO of resident pages
 * under one lock gives the victims, evicted by MADV_DONTNEED of the
 * application's page and a hole punched in the memfd. Rows: pages per
 * second of OPS reads by 1, 2, 4 threads, median over rounds interleaved. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/io_uring.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pagepilot.h"

#define P 4096
enum { ABSENT, LOADING, RESIDENT };
enum { KERN, DEF, SYNC, ASYNC, ROWS };
static const char *NAMES[ROWS] = {"kern", "def", "sync", "async"};

static size_t pages, budget;
static int ops_per, file_fd, uffd, memfd, efd, ncpu;
static char *app, *view;
static volatile unsigned char *base;
static atomic_int stop;
static int async_mode;
static unsigned char *state;
static uint32_t *fifo; /* resident or loading pages, oldest first */
static size_t fifo_head, fifo_len;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_long in_flight, in_flight_max;

struct ring {
    int fd;
    unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
    pthread_mutex_t lock;
} ring = {.lock = PTHREAD_MUTEX_INITIALIZER};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void ring_init(unsigned entries) {
    struct io_uring_params p = {0};
    ring.fd = syscall(__NR_io_uring_setup, entries, &p);
    if (ring.fd < 0) { perror("io_uring_setup"); exit(1); }
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    size_t len = sq_len > cq_len ? sq_len : cq_len; /* IORING_FEAT_SINGLE_MMAP */
    char *sq = mmap(0, len, 3, MAP_SHARED | MAP_POPULATE, ring.fd, IORING_OFF_SQ_RING);
    char *cq = sq;
    ring.sq_tail = (unsigned *)(sq + p.sq_off.tail);
    ring.sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    ring.sq_array = (unsigned *)(sq + p.sq_off.array);
    ring.cq_head = (unsigned *)(cq + p.cq_off.head);
    ring.cq_tail = (unsigned *)(cq + p.cq_off.tail);
    ring.cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    ring.cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    ring.sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), 3, MAP_SHARED | MAP_POPULATE, ring.fd,
                     IORING_OFF_SQES);
    efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (syscall(__NR_io_uring_register, ring.fd, IORING_REGISTER_EVENTFD, &efd, 1)) {
        perror("IORING_REGISTER_EVENTFD");
        exit(1);
    }
}

static void ring_read(uint32_t page) {
    pthread_mutex_lock(&ring.lock);
    unsigned tail = *ring.sq_tail, idx = tail & *ring.sq_mask;
    struct io_uring_sqe *s = &ring.sqes[idx];
    memset(s, 0, sizeof *s);
    s->opcode = IORING_OP_READ;
    s->fd = file_fd;
    s->addr = (uintptr_t)(view + (size_t)page * P);
    s->len = P;
    s->off = (uint64_t)page * P;
    s->user_data = page;
    ring.sq_array[idx] = idx;
    __atomic_store_n(ring.sq_tail, tail + 1, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, ring.fd, 1, 0, 0, NULL, 0) != 1) perror("io_uring_enter");
    pthread_mutex_unlock(&ring.lock);
}

static void map_page(uint32_t page) {
    struct uffdio_continue c = {{(uintptr_t)app + (size_t)page * P, P}, 0, 0};
    if (ioctl(uffd, UFFDIO_CONTINUE, &c) && errno != EEXIST) perror("UFFDIO_CONTINUE");
}

static void wake_page(uint32_t page) {
    struct uffdio_range r = {(uintptr_t)app + (size_t)page * P, P};
    ioctl(uffd, UFFDIO_WAKE, &r);
}

/* Under the lock: a frame for `page`, the oldest resident page evicted if
 * the budget is full (pages still loading are passed over). */
static void make_room(uint32_t page) {
    if (fifo_len == budget) {
        for (;;) {
            uint32_t v = fifo[fifo_head];
            fifo_head = (fifo_head + 1) % budget;
            fifo_len--;
            if (state[v] == RESIDENT) {
                madvise(app + (size_t)v * P, P, MADV_DONTNEED);
                fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)v * P, P);
                state[v] = ABSENT;
                break;
            }
            fifo[(fifo_head + fifo_len) % budget] = v; /* loading: keep it */
            fifo_len++;
        }
    }
    fifo[(fifo_head + fifo_len) % budget] = page;
    fifo_len++;
    state[page] = LOADING;
}

static void complete(uint32_t page) {
    pthread_mutex_lock(&lock);
    state[page] = RESIDENT;
    map_page(page); /* under the lock: not evicted before it is mapped */
    pthread_mutex_unlock(&lock);
    atomic_fetch_sub(&in_flight, 1);
}

static void serve(uint32_t page) {
    pthread_mutex_lock(&lock);
    if (state[page] != ABSENT) {
        int resident = state[page] == RESIDENT;
        pthread_mutex_unlock(&lock);
        if (resident) wake_page(page); /* a loading page's mapping wakes it */
        return;
    }
    make_room(page);
    pthread_mutex_unlock(&lock);
    long n = atomic_fetch_add(&in_flight, 1) + 1, m = atomic_load(&in_flight_max);
    while (n > m && !atomic_compare_exchange_weak(&in_flight_max, &m, n)) {}
    if (async_mode) {
        ring_read(page);
        return;
    }
    if (pread(file_fd, view + (size_t)page * P, P, (off_t)page * P) != P) perror("pread");
    complete(page);
}

static void reap(void) {
    uint64_t v;
    if (read(efd, &v, sizeof v) < 0) return;
    uint32_t done[256];
    int n = 0;
    pthread_mutex_lock(&ring.lock);
    unsigned head = *ring.cq_head;
    while (head != __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE) && n < 256) {
        struct io_uring_cqe *c = &ring.cqes[head & *ring.cq_mask];
        if (c->res != P) fprintf(stderr, "read of page %llu: %d\n", (unsigned long long)c->user_data, c->res);
        done[n++] = (uint32_t)c->user_data;
        head++;
    }
    __atomic_store_n(ring.cq_head, head, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ring.lock);
    if (n == 256) eventfd_write(efd, 1); /* more left: the next wake-up reaps them */
    for (int i = 0; i < n; i++) complete(done[i]);
}

static void *handler(void *arg) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET((int)(intptr_t)arg, &s);
    sched_setaffinity(0, sizeof s, &s);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event e = {EPOLLIN, {.u32 = 0}}, f = {EPOLLIN, {.u32 = 1}};
    epoll_ctl(ep, EPOLL_CTL_ADD, uffd, &e);
    if (async_mode) epoll_ctl(ep, EPOLL_CTL_ADD, efd, &f);
    struct uffd_msg m[16];
    while (!atomic_load(&stop)) {
        struct epoll_event got[2];
        int k = epoll_wait(ep, got, 2, 10);
        for (int i = 0; i < k; i++) {
            if (got[i].data.u32 == 1) {
                reap();
                continue;
            }
            int n = read(uffd, m, sizeof m);
            for (int j = 0; j < n / (int)sizeof m[0]; j++)
                if (m[j].event == UFFD_EVENT_PAGEFAULT)
                    serve((uint32_t)((m[j].arg.pagefault.address - (uintptr_t)app) / P));
        }
    }
    close(ep);
    return 0;
}

static void *reader(void *arg) {
    uint64_t x = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
    unsigned sum = 0;
    for (int i = 0; i < ops_per; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        sum += base[(x % pages) * P + 5];
    }
    return (void *)(uintptr_t)sum;
}

static double timed_reads(int threads) {
    pthread_t t[8];
    double t0 = now();
    for (int i = 0; i < threads; i++) pthread_create(&t[i], 0, reader, (void *)(intptr_t)(i + 1));
    for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
    return (double)ops_per * threads / (now() - t0);
}

static double probe_run(const char *path, int threads, int async) {
    size_t len = pages * P;
    file_fd = open(path, O_RDONLY | O_DIRECT);
    posix_fadvise(file_fd, 0, 0, POSIX_FADV_DONTNEED);
    memfd = memfd_create("frames", MFD_CLOEXEC);
    ftruncate(memfd, len);
    app = mmap(0, len, PROT_READ, MAP_SHARED, memfd, 0);
    view = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    base = (volatile unsigned char *)app;
    uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    struct uffdio_api api = {UFFD_API, UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_MINOR_SHMEM, 0};
    if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api)) { perror("userfaultfd"); exit(1); }
    struct uffdio_register r = {{(uintptr_t)app, len}, UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_MINOR, 0};
    if (ioctl(uffd, UFFDIO_REGISTER, &r)) { perror("UFFDIO_REGISTER"); exit(1); }
    state = calloc(pages, 1);
    fifo = calloc(budget, sizeof *fifo);
    fifo_head = fifo_len = 0;
    async_mode = async;
    atomic_store(&in_flight_max, 0);
    if (async) ring_init(256);
    atomic_store(&stop, 0);
    pthread_t h[8];
    for (int i = 0; i < ncpu; i++) pthread_create(&h[i], 0, handler, (void *)(intptr_t)i);
    double rate = timed_reads(threads);
    atomic_store(&stop, 1);
    for (int i = 0; i < ncpu; i++) pthread_join(h[i], 0);
    if (async) { close(ring.fd); close(efd); }
    munmap(app, len);
    munmap(view, len);
    close(uffd);
    close(memfd);
    close(file_fd);
    free(state);
    free(fifo);
    return rate;
}

static double def_run(const char *path, int threads) {
    int fd = open(path, O_RDONLY);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    char err[PP_ERR_MAX];
    pp_region *r = pp_map_file(path, 0, budget * P, "lru", err, sizeof err);
    if (!r) { fprintf(stderr, "%s\n", err); exit(1); }
    base = pp_addr(r);
    double rate = timed_reads(threads);
    pp_unmap(r);
    return rate;
}

/* The kernel's run in a child that joins a memory cgroup of the budget. */
static double kern_run(const char *path, int threads) {
    const char *cg = "/sys/fs/cgroup/memory/pp_async_reads";
    char f[256];
    mkdir(cg, 0755);
    snprintf(f, sizeof f, "%s/memory.limit_in_bytes", cg);
    FILE *l = fopen(f, "w");
    if (!l) { perror(f); exit(1); }
    fprintf(l, "%zu\n", budget * P);
    fclose(l);
    int pfd[2];
    pipe(pfd);
    pid_t c = fork();
    if (c == 0) {
        snprintf(f, sizeof f, "%s/tasks", cg);
        FILE *t = fopen(f, "w");
        fprintf(t, "%d\n", getpid());
        fclose(t);
        int fd = open(path, O_RDONLY);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        base = mmap(0, pages * P, PROT_READ, MAP_SHARED, fd, 0);
        madvise((void *)base, pages * P, MADV_RANDOM);
        double rate = timed_reads(threads);
        write(pfd[1], &rate, sizeof rate);
        _exit(0);
    }
    double rate = 0;
    read(pfd[0], &rate, sizeof rate);
    waitpid(c, 0, 0);
    close(pfd[0]);
    close(pfd[1]);
    return rate;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s FILE BUDGET_MB OPS ROUNDS\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); return 1; }
    pages = (size_t)lseek(fd, 0, SEEK_END) / P;
    close(fd);
    budget = (size_t)atol(argv[2]) * 256;
    int ops = atoi(argv[3]), rounds = atoi(argv[4]);
    ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu > 4) ncpu = 4;
    if (rounds > 15) rounds = 15;
    const int threads[3] = {1, 2, 4};
    printf("%zu pages, budget %zu, %d reads per run, %d rounds; pages/s (median), x kern; reads in flight at most (sync, async)\n",
           pages, budget, ops, rounds);
    for (int ti = 0; ti < 3; ti++) {
        int t = threads[ti];
        ops_per = ops / t;
        double v[ROWS][15];
        long most[2] = {0, 0};
        for (int r = 0; r < rounds; r++)
            for (int row = 0; row < ROWS; row++) {
                double rate = row == KERN ? kern_run(path, t)
                              : row == DEF ? def_run(path, t)
                                           : probe_run(path, t, row == ASYNC);
                if (row >= SYNC && atomic_load(&in_flight_max) > most[row - SYNC]) most[row - SYNC] = atomic_load(&in_flight_max);
                v[row][r] = rate;
            }
        double med[ROWS];
        for (int row = 0; row < ROWS; row++) {
            qsort(v[row], rounds, sizeof(double), cmp);
            med[row] = v[row][rounds / 2];
        }
        printf("%d thr:", t);
        for (int row = 0; row < ROWS; row++) printf("  %s %6.0f (%.2f)", NAMES[row], med[row], med[row] / med[KERN]);
        printf("  | in flight %ld, %ld\n", most[0], most[1]);
    }
    return 0;
}
