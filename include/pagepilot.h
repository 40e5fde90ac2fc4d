/* pagepilot: application-controlled paging of files and anonymous memory on
 * stock Linux (userfaultfd), as a C library: libpagepilot.so.
 *
 * A region is a file or zero-filled memory mapped into the process and paged
 * by pagepilot under a frame budget with the replacement policy the program
 * chose. Touch it with ordinary loads and stores from any thread.
 *
 * Build and link: see docs/c-api.md. In short:
 *   cargo build --release -p pagepilot-capi
 *   cc app.c -Iinclude -Ltarget/release -lpagepilot -Wl,-rpath,$PWD/target/release
 */
#ifndef PAGEPILOT_H
#define PAGEPILOT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_region pp_region;

/* Joins the pagepilot daemon listening at path (pagepilot daemon --socket PATH): the
   regions this process maps from now on, outside a pool, draw their frames from the
   daemon, which shares the machine's memory among processes (each region registers
   its minFrame, min_frames or its budget, and is granted frames, asked to give them
   back by a deadline, or has them taken by force; faults stay served in this process).
   PAGEPILOT_DAEMON=PATH in the environment does the same at the first pp_map. 0, or
   -errno and a message in err: -ECONNREFUSED/-ENOENT (no daemon there),
   -EPROTONOSUPPORT (no common protocol version), -EINVAL (path NULL). A pp_map the
   daemon refuses fails with its reason in err (beyond the user's quota, a minFrame
   that does not fit beside the other regions'). */
int pp_connect(const char *path, char *err, size_t errlen);

/* A pool of frames shared by the regions mapped with pp_options.pool set to it (HiPEC's
   global frame manager): each region is guaranteed pp_options.min_frames there (its
   minFrame; 0: its whole budget) and starts with up to budget_bytes, what is above its
   minimum granted from the pool's free frames only. A pool that must make room for a
   newcomer's minimum, or whose regions hold more than half of it above their minimums
   (partition_burst), asks the regions holding more than theirs for frames, first
   allocated first: the region's policy names the pages (a program's ReclaimFrame);
   what a region has not given back within 10 ms is taken by force, the pager choosing
   the pages, and reported ("forced", "forced_incidents" in the pool's stats,
   "forced_reclaims" in the region's). Dirty pages of reclaimed frames are written back
   by the pool's own thread before their frames are freed. On failure: NULL, and a
   message in err. */
typedef struct pp_pool pp_pool;
pp_pool *pp_pool_create(size_t budget_bytes, char *err, size_t errlen);
int      pp_pool_stats_json(pp_pool *p, char *buf, size_t len); /* as pp_stats_json:
                       {"total_frames":..,"free_frames":..,"holders":[{"min":..,"held":..,
                        "reclaimed":..,"forced":..,"forced_incidents":..}],
                        "system_fault_limit":..,"reserved_pc":..} */
void     pp_pool_destroy(pp_pool *p);  /* regions in it keep it until they are unmapped */

/* Size of an err buffer that holds every message whole (a longer one is cut to errlen - 1
   bytes): a refused userfaultfd names each way in and how to enable it. */
#define PP_ERR_MAX 1024

/* policy: a built-in name ("lru", "fifo", "clock", "mru", "seq", ...) or a policy program path.
   On failure: NULL, errno set, and a message in err (if errlen > 0) saying what failed
   and, after ": ", why. Nothing is mapped on failure: missing or empty file, read-only
   file mapped writable, budget smaller than one page, unknown policy, NULL arguments.
   errno, for every pp_map* call: the system's where it said why (ENOENT: no such file,
   ENOTDIR, EACCES, ... from opening the file; EPERM: userfaultfd refused), EINVAL for a
   bad argument (NULL, a budget below a page, an unknown policy, an empty file, an option
   out of range, a fault limit or reserve not admitted), EACCES (a read-only file mapped
   writable), ENOMEM (a minimum the pool cannot hold), EBUSY (a dataspace open already),
   ENOTSUP (a kernel without the userfaultfd features needed), EAGAIN (every
   faulting-thread slot taken), the daemon's (as pp_connect's) when it refused, EIO (an
   internal error). */
pp_region *pp_map_file(const char *path, int writable, size_t budget_bytes,
                       const char *policy, char *err, size_t errlen);
/* An anonymous region is private to this process: a child after fork does not
   have it (map a file region to share memory with forked workers). */
pp_region *pp_map_anon(size_t len, size_t budget_bytes, const char *policy,
                       char *err, size_t errlen);

/* Persistent dataspaces (docs/dataspaces.md, "The persistent manager"): named
   containers of bytes kept in a directory, whose contents outlive the process; any
   later process reopens one by name and finds what was written back (pp_flush,
   pp_unmap, a normal exit; _exit and SIGKILL lose only what was not flushed).
   dir: the directory (NULL: $PAGEPILOT_HOME/dataspaces, else
   $XDG_DATA_HOME/pagepilot/dataspaces, else $HOME/.local/share/pagepilot/dataspaces).
   A name is a file name: not empty, at most 200 bytes, no '/', not starting with '.'.
   On disk: NAME.pages (the bytes, sparse: pages never written take no space) and
   NAME.meta (a checksummed header). `pagepilot dataspaces` lists, creates, inspects
   and deletes them.

   pp_map_persistent maps dataspace `name` as a region of its whole length (pp_len):
   len 0 opens an existing one; len > 0 creates it with len zero bytes if it is missing,
   else checks that it has at least len bytes. The handle is an ordinary region's
   (pp_addr, pp_flush, pp_pin, pp_stats_json, pp_unmap...); pp_flush makes what was
   written durable in NAME.pages. A read-write open is exclusive across processes: a
   second map of it, here or elsewhere, is refused while the first is mapped. On failure:
   NULL, errno (ENOENT: no such dataspace; EBUSY: mapped already; EINVAL: a bad name or
   length; as pp_map_file's otherwise) and a message in err naming the dataspace and directory (a bad name, no such
   dataspace, a shorter one than len, mapped already, a corrupt header or data file,
   and pp_map_file's refusals: budget, policy, NULL arguments). A dataspace this call
   created stays when the region is then refused (a bad budget or policy): reuse it, or
   remove it with pp_delete_persistent.

   pp_delete_persistent removes it: 0, or -errno and a message in err: -ENOENT (no such
   dataspace), -EBUSY (mapped, here or in another process), -EINVAL (a bad or NULL name,
   dir NULL and no default directory). */
pp_region *pp_map_persistent(const char *name, const char *dir, size_t len,
                             size_t budget_bytes, const char *policy,
                             char *err, size_t errlen);
int        pp_delete_persistent(const char *name, const char *dir, char *err, size_t errlen);

/* Far memory (docs/far-memory.md, "From C"): named dataspaces whose pages are kept in
   Redis, one key per page, so that any later process (on any machine reaching the
   servers) mapping the name finds what was written back (pp_flush, pp_unmap).
   seeds: a Redis Cluster's seed nodes, "host:port[,host:port...]", or one server,
   "redis://host:port". A name is 1 to 128 bytes of ASCII letters, digits, '.', '_', '-'.
   Lengths up to 1 TiB.

   pp_map_far maps far dataspace `name` as a region of its whole length (pp_len): len 0
   opens an existing one; len > 0 creates it, zero-filled, of len bytes if it is missing,
   else checks that it has at least len bytes. Faults read pages from Redis; write-backs
   write them there. The handle is an ordinary region's (pp_addr, pp_flush, pp_pin,
   pp_stats_json, pp_unmap...).
   replicas > 0 (with 0 < wait_ms < 2000, the reply timeout): a dataspace this call
   creates records a replica wait: every write-back to it, by whoever opens it, counts as
   done only once that many replicas of its node acknowledged it (Redis WAIT, up to
   wait_ms per attempt, attempts retried for 10 s); fewer and the write-back fails and
   the pages stay dirty in memory (pp_flush, pp_unmap: -ETIMEDOUT, or -EIO). On an
   existing dataspace the wait it records applies; one that records none gets this
   mapping's wait. replicas 0: as the dataspace records (wait_ms ignored).
   A process maps a name (through the same seeds string) once at a time: a second
   map while the first is mapped is refused (EBUSY), since two caches of one dataspace
   would not see each other's writes. Other processes may map it at the same time
   (nothing stops them; their writes do not reach a region's pages already in memory).
   On failure: NULL, errno (ENOENT: no such dataspace with len 0; EINVAL: bad seeds, name,
   length or wait, a dataspace shorter than len; ETIMEDOUT: too few replicas
   acknowledged the creation, or Redis did not answer; ECONNABORTED: Redis unreachable
   for 10 s; EBUSY: mapped already by this process; as pp_map_file's otherwise) and a
   message in err naming the dataspace and seeds, e.g. "creating far dataspace "m" on
   Redis redis://127.0.0.1:6379: cannot create m: ...: WAIT: 0 of 1 replica(s)
   acknowledged the write". A dataspace whose creation was then refused (a wait not
   met, a bad budget or policy) stays: reuse it, or remove it with pp_delete_far.

   pp_delete_far removes it (its pages, then its metadata): 0, or -errno and a message
   in err: -ENOENT (no such dataspace), -EBUSY (mapped by this process), -EINVAL (bad or
   NULL seeds or name), a failed request's (-ETIMEDOUT, -ECONNABORTED). */
pp_region *pp_map_far(const char *seeds, const char *name, size_t len, unsigned replicas,
                      unsigned wait_ms, size_t budget_bytes, const char *policy,
                      char *err, size_t errlen);
int        pp_delete_far(const char *seeds, const char *name, char *err, size_t errlen);

/* Options of pp_map. Initialise with pp_options_init, then set fields; zero
   (or NULL) means the default. */
typedef struct pp_options {
    size_t size;                /* sizeof(pp_options), set by pp_options_init */
    const char *path;           /* backing file, or NULL for anonymous memory */
    int writable;               /* file: non-zero maps it writable */
    size_t len;                 /* anonymous: length (required); file: bytes to map, 0 = all */
    size_t budget_bytes;        /* frame budget, at least one page */
    const char *policy;         /* NULL: "clock" */
    size_t fault_around_pages;  /* pages read per missing fault outside a sequence (0: read
                                   around sized by use, docs/pager.md "Read-around"; 1: demand
                                   paging) */
    size_t readahead_max_pages; /* largest read-ahead window along sequential faults (0: the
                                   pager sizes asynchronous windows from the policy, the
                                   region and the budget: docs/pager.md, "Defaults") */
    size_t handler_threads;     /* fault-handler threads (0: one kept to each CPU, up to 4) */
    const char *swap_dir;       /* anonymous: directory of the swap file; NULL: temp dir */
    int faulting_thread;        /* non-zero: each thread serves its own faults in a SIGBUS
                                   handler (no hand-off to a handler thread, about 1 us less
                                   per fault); the kernel's own accesses to an unmapped page
                                   (read(2) into the region) then fail with EFAULT: call
                                   pp_prefault on the range first */
    size_t zero_around_max_pages; /* anonymous: largest cluster of zero pages one fault fills
                                   along a stream of first touches (1: one page per fault) */
    pp_pool *pool;              /* NULL: a budget of its own; else the region draws its
                                   frames from this pool (see pp_pool_create) */
    size_t fault_limit;         /* RAPHA: at most this many missing faults per period, the
                                   others wait for the next one (0: no limit) */
    size_t fault_period_us;     /* the limit's period, microseconds (required with a limit) */
    size_t min_frames;          /* with a pool: frames guaranteed (minFrame), at most the
                                   budget's pages (0: the whole budget); refused when the
                                   pool cannot hold it beside the other regions' minimums */
    double cpu_reserve;         /* RAPHA: share of one processor the region reserves, in
                                   [0, 1] (0: none), with a fault limit only; refused when
                                   the reserves and every limit's fault handling would pass
                                   the processor (Eq. 2); in a pool the system fault limit
                                   is what the reserves leave (Eq. 4) */
} pp_options;

void pp_options_init(pp_options *opts);
pp_region *pp_map(const pp_options *opts, char *err, size_t errlen);

void  *pp_addr(pp_region *r);                        /* NULL for a NULL handle */
size_t pp_len(pp_region *r);                         /* 0 for a NULL handle */
int    pp_flush(pp_region *r);                       /* 0 or -errno */
int    pp_invalidate(pp_region *r);                  /* pp_flush, then drops every clean page
                                                        (msync MS_INVALIDATE): the next access
                                                        re-reads the file and sees what other
                                                        processes wrote to it (a child after
                                                        fork needs none: see Lifecycle);
                                                        0 or -errno */
int    pp_prefault(pp_region *r, size_t offset, size_t len, int write);
                                                     /* maps [offset, offset+len) now, for a
                                                        system call about to use it (writable
                                                        if write); 0, -ERANGE outside the
                                                        region, -EINVAL for a NULL handle */
int    pp_stats_json(pp_region *r, char *buf, size_t len); /* bytes written or -errno
                                                        (-ERANGE: buf too small) */
int    pp_unmap(pp_region *r);                       /* flushes; 0 or -errno. On failure the
                                                        region stays mapped with its dirty
                                                        data and r stays valid. */

/* Pinned (locked) pages, the Cache Kernel's locked mappings. pp_pin pins every page
   [offset, offset+len) touches: each is brought in now if it is not in memory, mapped,
   and never evicted until pp_unpin: not by the policy, a smaller budget, a pool's
   reclamation (normal or forced) nor pp_invalidate. Pinned pages count in the budget;
   dirty ones are written back by pp_flush and pp_unmap and stay pinned. Pins do not nest:
   pinning a pinned page changes nothing, one unpin unpins it. "pinned_pages" in the
   stats counts them. Nothing changes on failure. */
int    pp_pin(pp_region *r, size_t offset, size_t len);
                                                     /* 0; -EINVAL for a NULL handle or a
                                                        range outside the region; -ENOMEM
                                                        if the pins would pass the budget
                                                        less one frame (kept to serve
                                                        faults); -EIO if a page cannot be
                                                        read (beyond the file's end) */
int    pp_unpin(pp_region *r, size_t offset, size_t len);
                                                     /* 0; -EINVAL for a NULL handle, a range
                                                        outside the region, or a page in it
                                                        that is not pinned */

/* Eviction notifications (the Cache Kernel's write-back of mappings with their
   referenced and modified bits): once subscribed, every page the region evicts is
   queued with its bits: policy victims, pages a pool reclaims (normally or by force),
   pages a smaller budget evicts, clean pages pp_invalidate drops, pages whose failed
   write-back a flush completed. Pages still in memory at pp_unmap are not reported. The
   queue holds `capacity` events; when it is full the oldest is dropped and counted
   (pp_evictions_lost, "evictions_lost" in the stats): a subscriber that falls behind
   learns how many it missed. Off by default (costs one branch per eviction). */
typedef struct pp_eviction {
    uint64_t offset;            /* the page's byte offset in the region */
    uint8_t referenced;         /* 1: mapped since the policy last cleared its referenced
                                   bit (pages mapped by a cluster read around a fault count) */
    uint8_t modified;           /* 1: written since its last write-back (written back
                                   before its frame was freed) */
    uint8_t reserved[6];        /* zero */
} pp_eviction;

int      pp_subscribe_evictions(pp_region *r, size_t capacity);
                                                     /* 0 (capacity 0: off, queue dropped;
                                                        again: the newest that fit are kept),
                                                        -EINVAL for a NULL handle */
int      pp_drain_evictions(pp_region *r, pp_eviction *out, size_t max);
                                                     /* moves up to max events, oldest first,
                                                        into out: the count, or -EINVAL (NULL
                                                        handle, NULL out with max > 0) */
uint64_t pp_evictions_lost(pp_region *r);            /* events dropped in total (0 for NULL) */

/* Lifecycle (docs/lifecycle.md): at a normal exit (return from main, exit(),
   the last thread's pthread_exit) every dirty page of every region still
   mapped is written back; _exit and SIGKILL lose them. Forked workers see
   one memory, as with MAP_SHARED: at fork a writable file region becomes
   the kernel's MAP_SHARED mapping of its file, in the parent and in the
   child, so each sees the other's stores at its next load with no pp_flush
   or pp_invalidate; once no child is left the parent pages it under its
   policy again. An anonymous region is private to the process that mapped
   it: absent in a child (SIGSEGV). pp_flush and pp_unmap work in the child
   on its mapping. An access beyond the file's current end (truncated
   while mapped) or whose read fails raises SIGBUS in the faulting thread. */

#ifdef __cplusplus
}
#endif

#endif /* PAGEPILOT_H */
