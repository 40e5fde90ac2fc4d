//! Which descriptors refer to a taken-over file: asked of `fstat` once per
//! descriptor and remembered, so that a program's `read`/`write` on other
//! files (its output, sockets) costs one atomic load. The answer "not
//! taken over" holds until another file is taken over (a generation
//! count); descriptors of pagepilot's own (the pager's opened backing
//! file) are never the program's and stay so until closed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Descriptors below this are remembered; others are asked every time.
const REMEMBERED: usize = 1 << 16;
const UNKNOWN: u64 = 0;
const OWN: u64 = 2;

static SEEN: [AtomicU64; REMEMBERED] = [const { AtomicU64::new(UNKNOWN) }; REMEMBERED];
/// Bumped when a file is taken over: remembered "not ours" answers lapse.
static GENERATION: AtomicU64 = AtomicU64::new(1);

/// A file's identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

/// What `find` answers of the file behind `fd` (a regular file): `None`
/// without asking for a descriptor remembered as no taken-over file's or
/// as pagepilot's own, and remembered so when `find` answers `None`.
pub fn lookup<T>(fd: i32, find: impl FnOnce(FileId) -> Option<T>) -> Option<T> {
    let slot = usize::try_from(fd)
        .ok()
        .filter(|&f| f < REMEMBERED)
        .map(|f| &SEEN[f]);
    let generation = GENERATION.load(Relaxed);
    if let Some(s) = slot {
        let v = s.load(Relaxed);
        if v == OWN || v == generation << 2 | 1 {
            return None;
        }
    }
    let found = identify(fd).and_then(find);
    if found.is_none() {
        if let Some(s) = slot {
            s.store(generation << 2 | 1, Relaxed);
        }
    }
    found
}

/// The file behind `fd`, if it is a regular file.
pub fn identify(fd: i32) -> Option<FileId> {
    // SAFETY: `st` is a plain C struct that fstat fills; zeroes are valid.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer for the call.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    Some(FileId {
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

/// `fd` was closed (or replaced by `dup2`): forget it.
pub fn forget(fd: i32) {
    if let Some(s) = usize::try_from(fd).ok().filter(|&f| f < REMEMBERED) {
        SEEN[s].store(UNKNOWN, Relaxed);
    }
}

/// A descriptor of the interposer's own on `fd`'s file (close-on-exec,
/// marked as pagepilot's).
pub fn own_dup(fd: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a live descriptor.
    let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if d < 0 {
        return None;
    }
    mark_own(d);
    // SAFETY: `d` was just made, owned here alone.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(d) })
}

/// `fd` is pagepilot's own.
pub fn mark_own(fd: i32) {
    if let Some(s) = usize::try_from(fd).ok().filter(|&f| f < REMEMBERED) {
        SEEN[s].store(OWN, Relaxed);
    }
}

/// A file was taken over: descriptors remembered as others are asked again.
pub fn new_generation() {
    GENERATION.fetch_add(1, Relaxed);
}

/// The descriptors open now that refer to `id` (from /proc/self/fd).
pub fn open_on(id: FileId) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| identify(fd) == Some(id))
        .collect()
}
