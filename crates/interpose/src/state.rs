//! The interposer's state: the configuration, the files taken over with
//! their regions, the program's windows into them, the common pool, and
//! the log. One fork-safe lock guards it; the fast paths (a mapping that is
//! not a file's, I/O on a file not taken over) never take it.

use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use pagepilot_pager::Pool;
use pagepilot_run::Config;

use crate::fds::FileId;
use crate::lock::{ForkLock, Guard};
use crate::log::Log;
use crate::taken::{TakenFile, Window};

/// Everything behind the lock.
pub struct State {
    /// The configuration from the environment.
    pub config: Config,
    /// Bytes of the common pool, once the first region asked
    /// ([`State::budget`]).
    budget: Option<u64>,
    /// The common pool, made at the first region that draws from it.
    pub pool: Option<Pool>,
    /// The files taken over: their shared regions, and private copies.
    pub files: Vec<Arc<TakenFile>>,
    /// The program's mappings of them.
    pub windows: Vec<Window>,
    /// Files no window shows any more, kept with their frames (the least
    /// recently used first), as the page cache keeps an unmapped file.
    idle: Vec<(Arc<TakenFile>, Option<Stamp>)>,
    /// Small shared file mappings the kernel holds, watched for growth.
    pub watched: Vec<crate::remap::Watched>,
    /// Where lines go.
    pub log: Arc<Log>,
    /// (path, cause) pairs already logged as left to the kernel.
    logged: HashSet<(String, String)>,
}

/// Idle files kept with their frames, at most.
pub const MAX_IDLE: usize = 4;

/// What says a file changed: its size and modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    size: i64,
    mtime: (i64, i64),
}

impl Stamp {
    fn of(file: &TakenFile) -> Option<Stamp> {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain C struct fstat fills; zeroes are valid.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat on the file's own descriptor, a valid out-pointer.
        (unsafe { libc::fstat(file.fd.as_raw_fd(), &mut st) } == 0).then_some(Stamp {
            size: st.st_size,
            mtime: (st.st_mtime, st.st_mtime_nsec),
        })
    }
}

static STATE: ForkLock<Option<State>> = ForkLock::new(None);
/// Files taken over now (the I/O fast path's test).
static TAKEN: AtomicUsize = AtomicUsize::new(0);
/// The process that last took a file over (`took_here`).
static TAKER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// The configuration was read: the interposer acts.
static READY: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while this thread runs the interposer's own code (and the
    /// pager's under it): calls it makes are passed straight on.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Whether a call is to be passed straight to the C library: before the
/// configuration is read, from the interposer's own code, or from one of
/// the pager's threads.
pub fn bypass() -> bool {
    !READY.load(Relaxed) || INSIDE.get() || pagepilot_pager::is_service_thread()
}

/// Whether any file is taken over.
pub fn any_taken() -> bool {
    TAKEN.load(Relaxed) > 0
}

/// Whether this process took a file over: not a child after `fork` or
/// `vfork`, whose copy of the state must not be locked (a `vfork` child
/// shares the parent's memory, whose threads may hold the lock or the
/// allocator's).
pub fn took_here() -> bool {
    any_taken() && TAKER.load(Relaxed) == std::process::id()
}

/// Runs `f` as the interposer's own code, with the state locked.
pub fn with<R>(f: impl FnOnce(&mut State) -> R) -> Option<R> {
    let was = INSIDE.replace(true);
    let result = {
        let mut g: Guard<'_, Option<State>> = STATE.lock();
        g.as_mut().map(f)
    };
    INSIDE.set(was);
    result
}

/// Runs `f` as the interposer's own code, without the lock (the long part
/// of an operation: a region's write-back, I/O beside it).
pub fn inside<R>(f: impl FnOnce() -> R) -> R {
    let was = INSIDE.replace(true);
    let r = f();
    INSIDE.set(was);
    r
}

impl State {
    /// Bytes of the common pool: `--budget`, or the default, measured when
    /// the first file is taken over (the program's own memory by then is
    /// left to it, see `budget::default_budget`).
    pub fn budget(&mut self) -> u64 {
        *self
            .budget
            .get_or_insert_with(crate::budget::default_budget)
    }

    /// The taken-over file `id` (its shared region, not a private copy).
    pub fn file(&self, id: FileId) -> Option<&Arc<TakenFile>> {
        self.files.iter().find(|f| f.id == id && !f.private)
    }

    /// Adds a file taken over.
    pub fn add_file(&mut self, file: Arc<TakenFile>) {
        TAKER.store(file.owner, Relaxed);
        self.files.push(file);
        TAKEN.store(self.files.len(), Relaxed);
        crate::fds::new_generation();
    }

    /// Removes a file no window shows any more; the caller drops it
    /// outside the lock (its region writes back).
    pub fn remove_file(&mut self, file: &Arc<TakenFile>) -> Option<Arc<TakenFile>> {
        let i = self.files.iter().position(|f| Arc::ptr_eq(f, file))?;
        let f = self.files.swap_remove(i);
        TAKEN.store(self.files.len(), Relaxed);
        Some(f)
    }

    /// `file`'s last window went: it stays, idle, with its frames (its
    /// dirty pages are the caller's to write back). Returns the files to
    /// drop, outside the lock: the least recently idle beyond [`MAX_IDLE`].
    pub fn retire(&mut self, file: &Arc<TakenFile>) -> Vec<Arc<TakenFile>> {
        self.idle.push((file.clone(), Stamp::of(file)));
        let excess = self.idle.len().saturating_sub(MAX_IDLE);
        let old: Vec<_> = self.idle.drain(..excess).collect();
        old.into_iter()
            .filter_map(|(f, _)| self.remove_file(&f))
            .collect()
    }

    /// `file` is mapped again: no longer idle. Returns whether the file
    /// changed on disk since it went idle (its clean pages are stale).
    pub fn revive(&mut self, file: &Arc<TakenFile>) -> bool {
        let Some(i) = self.idle.iter().position(|(f, _)| Arc::ptr_eq(f, file)) else {
            return false;
        };
        let (_, then) = self.idle.remove(i);
        then != Stamp::of(file)
    }

    /// Whether `file` is idle (no window shows it).
    pub fn is_idle(&self, file: &Arc<TakenFile>) -> bool {
        self.idle.iter().any(|(f, _)| Arc::ptr_eq(f, file))
    }

    /// Drops `file` from the idle ones and the files taken over.
    pub fn forget_idle(&mut self, file: &Arc<TakenFile>) -> Option<Arc<TakenFile>> {
        self.idle.retain(|(f, _)| !Arc::ptr_eq(f, file));
        self.remove_file(file)
    }

    /// Logs that a mapping of `path` was left to the kernel, once per cause.
    pub fn left(&mut self, path: &str, offset: i64, len: usize, cause: &str) {
        if self.logged.insert((path.to_string(), cause.to_string())) {
            self.log.line(format_args!(
                "left {path} offset={offset} len={len}: {cause}"
            ));
        }
    }
}

/// Reads the configuration from the environment (the library's
/// constructor). A configuration that does not parse is said on stderr
/// and leaves every mapping to the kernel: the program runs as without.
pub fn init() {
    let config = match Config::from_env(|k| std::env::var(k).ok()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pagepilot-run: {e}; every mapping is left to the kernel");
            return;
        }
    };
    let log = Arc::new(Log::open(config.log.as_deref()));
    let budget = config.budget;
    *STATE.lock() = Some(State {
        config,
        budget,
        pool: None,
        files: Vec::new(),
        windows: Vec::new(),
        idle: Vec::new(),
        watched: Vec::new(),
        log,
        logged: HashSet::new(),
    });
    extern "C" fn prepare() {
        STATE.raw_lock();
    }
    extern "C" fn after() {
        // SAFETY: `prepare` locked it in this (the forking) thread.
        unsafe { STATE.raw_unlock() };
    }
    // SAFETY: the handlers are plain functions that lock and unlock the
    // static lock, valid for the process's life.
    unsafe { libc::pthread_atfork(Some(prepare), Some(after), Some(after)) };
    extern "C" fn at_exit() {
        // The pager's own exit handler (installed at the first region, so
        // run before this one) wrote the regions back.
        let _ = with(|s| s.files.iter().for_each(|f| f.log_end()));
    }
    // SAFETY: a plain function, valid for the process's life.
    unsafe { libc::atexit(at_exit) };
    READY.store(true, Relaxed);
}
