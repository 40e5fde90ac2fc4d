//! What a process does besides touching its regions: it exits, and it forks.
//! `docs/lifecycle.md` sets each case beside the kernel's `MAP_SHARED`.
//!
//! Exit: an `atexit` handler, installed at the first map, writes back every
//! dirty page of every region still mapped, so that a program that exits
//! without unmapping (as most do with `mmap`) loses nothing. `_exit` and
//! `SIGKILL` run no handler: only a process outside this one (the daemon)
//! can keep those writes. A process ends by itself when its last thread
//! exits (`pthread_exit` in `main`, then the others return), but the
//! pager's threads would keep it alive: a watcher thread sees when only
//! they are left and exits the process as its last thread would
//! (`exit(0)`, so the handler above runs).
//!
//! Fork: the child has none of the pager's threads, and the frames the
//! parent's pager manages must not be touched by anyone else (a hole the
//! child filled would be a page the parent's table does not know). So both
//! views of a region are left out of the child (`MADV_DONTFORK`); before the
//! fork the parent writes back the dirty pages of its file regions, and in
//! the child the backing file is mapped in each file region's place: the
//! kernel's own `MAP_SHARED` mapping, at the same address, with the data the
//! parent wrote, for the child to use and to outlive the parent. An
//! anonymous region has no file: it is absent in the child (`SIGSEGV`).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, Once, Weak};
use std::time::{Duration, Instant};

use std::os::fd::{IntoRawFd, OwnedFd};

use crate::error::MapError;
use crate::shared::Shared;
use crate::{sharing, sigbus, sys};

/// Every region mapped by this process and not unmapped yet.
static LIVE: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();
/// The process whose watcher thread runs (`watch_for_last_thread`).
static WATCHER: AtomicU32 = AtomicU32::new(0);

/// How long the exit handler waits for the write-back before it gives up
/// (and says so): a store that hangs must not hang the exit.
const EXIT_WRITE_BACK_LIMIT: Duration = Duration::from_secs(60);

/// How often the watcher looks for the application's threads.
const WATCH_PERIOD: Duration = Duration::from_millis(100);

/// How often, while a region is shared, the watcher asks whether its
/// children are gone (one `fcntl` per shared region): the most a parent
/// waits to page the region again.
const RESUME_PERIOD: Duration = Duration::from_millis(10);

/// The ids of the pager's own threads, which do not keep a process alive
/// (registered by [`spawn_service`]). By id, not by name: an application
/// may name its threads, or itself, anything.
static SERVICE: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// `PF_IO_WORKER` in a task's flags (`/proc/<pid>/task/<tid>/stat`, field
/// 9): the kernel's io_uring workers, which do not keep a process alive
/// either.
const PF_IO_WORKER: u64 = 0x10;

fn service() -> MutexGuard<'static, Vec<i32>> {
    SERVICE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts one of the pager's threads, named `name`: registered as a
/// service thread for its life, so that the watcher does not count it as
/// the application's.
pub fn spawn_service<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new().name(name).spawn(move || {
        SERVICE_THREAD.set(true);
        struct Registered(i32);
        impl Drop for Registered {
            fn drop(&mut self) {
                service().retain(|&t| t != self.0);
            }
        }
        let tid = sys::thread_id();
        service().push(tid);
        let _registered = Registered(tid);
        f()
    })
}

thread_local! {
    /// Whether this thread is one of the pager's (`spawn_service`).
    static SERVICE_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is one of the pager's own (a fault handler,
/// a reader, a watcher): an interposer passes its calls straight on.
pub fn is_service_thread() -> bool {
    SERVICE_THREAD.get()
}

thread_local! {
    /// Held by the forking thread from `before_fork` to the handler after it.
    static FORKING: RefCell<Option<Forking>> = const { RefCell::new(None) };
}

/// What the forking thread holds from `before_fork` to the handler after it.
struct Forking {
    /// The registry's lock, so that the child's copy of it is whole and unlocked.
    live: MutexGuard<'static, Vec<Weak<Shared>>>,
    /// The leases granted to the child, region by region.
    leases: Vec<(Weak<Shared>, OwnedFd)>,
}

fn live() -> MutexGuard<'static, Vec<Weak<Shared>>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The regions mapped (some may be gone).
pub fn regions() -> Vec<Weak<Shared>> {
    live().clone()
}

/// Registers a region just mapped: it is written back at exit and given to
/// a child as its file at fork. Leaves both views out of children.
pub fn adopt(shared: &Arc<Shared>) -> Result<(), MapError> {
    let sys_err = |call| move |source| MapError::Sys { call, source };
    sys::dont_fork(shared.views().app(), shared.views().map_len())
        .map_err(sys_err("madvise(MADV_DONTFORK)"))?;
    sys::dont_fork(shared.views().pager(), shared.views().map_len())
        .map_err(sys_err("madvise(MADV_DONTFORK)"))?;
    let mut failed = None;
    INSTALL.call_once(|| {
        let installed = sys::at_exit(at_exit)
            .map_err(sys_err("atexit"))
            .and_then(|()| {
                sys::at_fork(before_fork, after_fork_in_parent, after_fork_in_child)
                    .map_err(sys_err("pthread_atfork"))
            });
        failed = installed.err();
    });
    if let Some(e) = failed {
        return Err(e);
    }
    // One watcher per process: a child after fork has none of the parent's threads.
    let pid = std::process::id();
    if WATCHER.swap(pid, SeqCst) != pid {
        let spawned = spawn_service("pagepilot-watch".into(), watch_for_last_thread);
        if let Err(e) = spawned {
            WATCHER.store(0, SeqCst);
            return Err(sys_err("thread spawn")(e));
        }
    }
    let mut g = live();
    g.retain(|w| w.strong_count() > 0);
    g.push(Arc::downgrade(shared));
    Ok(())
}

/// Runs for the life of the process: when every thread left is a service
/// thread, the application has ended, and the process exits as its last
/// thread's `pthread_exit` would have made it (status 0, exit handlers run).
fn watch_for_last_thread() {
    sys::block_async_signals();
    *watcher_thread() = Some(std::thread::current());
    let mut since_check = Duration::ZERO;
    let mut period = WATCH_PERIOD;
    loop {
        // Woken early when a region is shared (`watch_closely`).
        std::thread::park_timeout(period);
        since_check += period;
        if since_check >= WATCH_PERIOD {
            since_check = Duration::ZERO;
            if application_has_ended() {
                std::process::exit(0);
            }
        }
        period = if resume_unshared() {
            RESUME_PERIOD
        } else {
            WATCH_PERIOD
        };
    }
}

/// Whether no thread of the process but service threads is alive (a thread
/// that exited before the others stays listed, as a zombie, until the
/// process ends). Any doubt (an unreadable entry) counts as alive.
fn application_has_ended() -> bool {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    let ours = service().clone();
    for task in tasks {
        let Ok(task) = task else {
            return false;
        };
        let tid = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<i32>().ok());
        if tid.is_some_and(|t| ours.contains(&t)) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            return false;
        };
        // "tid (comm) state ppid pgrp session tty_nr tpgid flags ...": comm
        // may hold spaces and parentheses.
        let Some(close) = stat.rfind(')') else {
            return false;
        };
        let mut fields = stat[close + 1..].split_whitespace();
        let exited = matches!(fields.next(), Some("Z" | "X"));
        let flags = fields.nth(5).and_then(|f| f.parse::<u64>().ok());
        let io_worker = flags.is_some_and(|f| f & PF_IO_WORKER != 0);
        if !exited && !io_worker {
            return false;
        }
    }
    true
}

/// Forgets a region being unmapped.
pub fn forget(shared: &Arc<Shared>) {
    live().retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(shared)));
}

/// The live regions this process mapped (not a parent's, in a child).
fn owned() -> Vec<Arc<Shared>> {
    live()
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|sh| !sh.forked())
        .collect()
}

fn describe(sh: &Shared) -> String {
    format!(
        "region at {:#x} ({} bytes)",
        sh.views().app(),
        sh.views().len()
    )
}

/// Writes back every region's dirty pages, reporting each failure.
fn write_back_all(regions: &[Arc<Shared>], done: &std::sync::mpsc::Sender<()>) {
    for sh in regions {
        if let Err(e) = sh.write_back(None) {
            eprintln!(
                "pagepilot: at exit, {}: {}",
                describe(sh),
                pagepilot_policy::chain(&e)
            );
        }
    }
    let _ = done.send(());
}

extern "C" fn at_exit() {
    // Nothing may unwind out of an exit handler.
    let _ = std::panic::catch_unwind(|| {
        let regions = owned();
        if regions.is_empty() {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = {
            let (regions, tx) = (regions.clone(), tx.clone());
            spawn_service("pagepilot-exit".into(), move || {
                write_back_all(&regions, &tx)
            })
        };
        if worker.is_err() {
            write_back_all(&regions, &tx);
            return;
        }
        let start = Instant::now();
        if rx.recv_timeout(EXIT_WRITE_BACK_LIMIT).is_err() {
            eprintln!(
                "pagepilot: at exit, the write-back of dirty pages did not finish in {:?}; \
                 pages not written yet are lost",
                start.elapsed()
            );
        }
    });
}

/// Before `fork`: every writable file region becomes the kernel's mapping
/// of its file, shared with the child (`sharing`), and a lease is granted
/// for the child to inherit. A region that cannot be shared is written
/// back, and the child maps the file in its place (no coherence after the
/// fork: said on stderr).
unsafe extern "C" fn before_fork() {
    let _ = std::panic::catch_unwind(|| {
        let g = live();
        let mut leases = Vec::new();
        for sh in g.iter().filter_map(Weak::upgrade) {
            if sh.forked() || !sh.views().writable() || sh.store().file().is_none() {
                continue;
            }
            match sharing::share(&sh) {
                Ok(lease) => leases.push((Arc::downgrade(&sh), lease)),
                Err(e) => {
                    if let Err(e) = sh.write_back(None) {
                        eprintln!(
                            "pagepilot: at fork, {}: {}; the child reads the file without those pages",
                            describe(&sh)
                        , pagepilot_policy::chain(&e));
                    }
                    eprintln!(
                        "pagepilot: at fork, {}: not shared with the child ({}); \
                         stores after the fork reach the other process through the file only",
                        describe(&sh),
                        pagepilot_policy::chain(&e)
                    );
                }
            }
        }
        FORKING.with(|f| *f.borrow_mut() = Some(Forking { live: g, leases }));
    });
}

/// In the parent: the child holds its leases now; the parent's copies go.
unsafe extern "C" fn after_fork_in_parent() {
    FORKING.with(|f| drop(f.borrow_mut().take()));
}

/// In the child, the only thread: no lock of a region is taken (a pager
/// thread of the parent may have held one at the fork).
unsafe extern "C" fn after_fork_in_child() {
    sigbus::forget_all_in_child();
    let Some(Forking { live: g, leases }) = FORKING.with(|f| f.borrow_mut().take()) else {
        return;
    };
    for (sh, lease) in leases {
        // The region was shared before the fork: the child inherited the
        // file's mapping in its place, and keeps the lease while it lives.
        if let Some(sh) = sh.upgrade() {
            sh.child_view().store(true, SeqCst);
            sh.sharing().keep_in_child(lease.into_raw_fd());
            std::mem::forget(sh);
        }
    }
    for sh in g.iter().filter_map(Weak::upgrade) {
        let Some(fd) = sh.store().file() else {
            continue;
        };
        if sh.child_view().load(SeqCst) {
            // Shared, or a grandchild: the file mapping was inherited as it is.
            std::mem::forget(sh);
            continue;
        }
        // SAFETY: the region's range is unmapped in the child (both views
        // are MADV_DONTFORK) and nothing else can have been mapped there
        // before this handler, the first code the child runs.
        if unsafe {
            sys::map_shared_at(
                sh.views().app(),
                fd,
                sh.views().map_len(),
                sh.views().writable(),
            )
        }
        .is_ok()
        {
            sh.child_view().store(true, SeqCst);
        }
        // The child's copy of the state must outlive every handle to it:
        // the parent's threads holding the other references are not here.
        std::mem::forget(sh);
    }
    drop(g);
}

/// Pages again, under their policies, the shared regions whose leases no
/// other process holds (the children are gone).
/// The watcher thread of this process, once it runs.
static WATCHER_THREAD: Mutex<Option<std::thread::Thread>> = Mutex::new(None);

fn watcher_thread() -> MutexGuard<'static, Option<std::thread::Thread>> {
    WATCHER_THREAD.lock().unwrap_or_else(|p| p.into_inner())
}

/// A region was shared: the watcher asks at `RESUME_PERIOD` from now on
/// whether its children are gone.
pub fn watch_closely() {
    if let Some(t) = watcher_thread().as_ref() {
        t.unpark();
    }
}

/// Returns whether a region is still shared.
fn resume_unshared() -> bool {
    sharing::forget_claimed_orphans();
    let mut still = false;
    for sh in owned() {
        if sh.sharing().mode() == sharing::Mode::Shared {
            still |= !sharing::resume(&sh);
        }
    }
    still
}
