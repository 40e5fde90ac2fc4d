//! Opening a region for a mapping the interposer takes over: the file's
//! shared region (one per file, reaching past its end), or a private copy
//! of one mapping's range (`MAP_PRIVATE`: a lazy copy of the file, whose
//! written pages are its own and never reach the file). Both draw from the
//! common pool, the daemon, or a rule's budget of their own.

use std::ffi::c_int;
use std::sync::Arc;

use pagepilot_pager::dataspace::{DataspaceId, FileManager, LazyCopyManager, Manager};
use pagepilot_pager::{Attachment, Backing, Region, RegionOptions};

use crate::fds::{self, FileId};
use crate::maps::round_up;
use crate::real;
use crate::state::State;
use crate::taken::TakenFile;

/// Frames each region is guaranteed in the common pool (HiPEC's minFrame):
/// the rest moves between regions as they fault.
const MIN_FRAMES: usize = 16;

/// A mapping to take over.
pub struct Request<'a> {
    /// The file.
    pub id: FileId,
    /// Its path.
    pub path: &'a str,
    /// The mapping's length, bytes.
    pub len: usize,
    /// Its protection.
    pub prot: c_int,
    /// The program's descriptor.
    pub fd: c_int,
    /// The file offset (page-aligned).
    pub off: i64,
    /// The program's address hint (0: none).
    pub hint: usize,
    /// Whether the program's descriptor is open for writing.
    pub writable_fd: bool,
}

/// The file's shared region, reaching at least `end` bytes. An empty
/// cause: the kernel is to refuse the mapping itself.
pub fn shared(s: &mut State, r: &Request<'_>, end: usize) -> Result<Arc<TakenFile>, String> {
    // Writable whenever the file may be written, whatever this descriptor
    // allows: a later read-write mapping (another descriptor) then shares
    // the region. Read-only windows are protected read-only.
    let writable = r.writable_fd || may_write(r.path);
    let size = file_size(r.fd)?;
    // Room to grow: a database's map grows with its file (mremap).
    let reach = round_up(end.max(size) * 2);
    // The mapping lands at the program's hint if the view fits there.
    let at = r.hint.checked_sub(r.off as usize).filter(|_| r.hint != 0);
    let reservation = at.and_then(|view| Reservation::take(view, reach));
    let backing = Backing::File {
        path: r.path.into(),
        writable,
    };
    let opts = options(s, r.path, backing)?
        .with_len(reach)
        .with_past_end(true);
    adopt(s, r, opts, reservation, writable, false)
}

/// A private copy of the request's range of the file.
pub fn private(s: &mut State, r: &Request<'_>) -> Result<Arc<TakenFile>, String> {
    let size = file_size(r.fd)?;
    if r.off as usize + r.len > round_up(size) {
        return Err("a private mapping past the end of its file".into());
    }
    let copies = Arc::new(LazyCopyManager::new(std::env::temp_dir()));
    let source: Arc<dyn Manager> = Arc::new(FileManager);
    let id = copies
        .copy_of(source, &DataspaceId::Path(r.path.into()))
        .map_err(|e| format!("the private copy: {}", pagepilot_pager::policy::chain(&e)))?;
    let len = r.len.min(size - r.off as usize);
    let reservation = Some(r.hint)
        .filter(|&h| h != 0)
        .and_then(|h| Reservation::take(h, round_up(len)));
    let backing = Backing::Dataspaces(vec![Attachment::whole(copies, id).range(r.off as u64, len)]);
    let opts = options(s, r.path, backing)?;
    adopt(s, r, opts, reservation, true, true)
}

/// The range at a program's address hint, held from the moment the
/// mapping is asked for until the region's view replaces it: the pool,
/// threads and allocations made on the way (thread stacks are mapped from
/// the top of the largest free range) cannot take it meanwhile.
struct Reservation {
    at: usize,
    len: usize,
}

impl Reservation {
    /// `[at, at+len)` reserved, if nothing is mapped there.
    fn take(at: usize, len: usize) -> Option<Reservation> {
        let flags = libc::MAP_PRIVATE
            | libc::MAP_ANONYMOUS
            | libc::MAP_NORESERVE
            | libc::MAP_FIXED_NOREPLACE;
        // SAFETY: MAP_FIXED_NOREPLACE maps only where nothing is mapped.
        let p = unsafe { real::mmap(at as *mut _, len, libc::PROT_NONE, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return None;
        }
        if p as usize != at {
            // A kernel older than MAP_FIXED_NOREPLACE took it as a hint.
            // SAFETY: the mapping just made, used by nothing.
            unsafe { real::munmap(p, len) };
            return None;
        }
        Some(Reservation { at, len })
    }
}

impl Drop for Reservation {
    /// The region failed: the range it left reserved is released.
    fn drop(&mut self) {
        // SAFETY: our reservation (or the pager's, put back over the view it
        // replaced), used by nothing.
        unsafe { real::munmap(self.at as *mut _, self.len) };
    }
}

/// Whether this process may write the file at `path` (its permission bits
/// too: root is not let write what is marked read-only, as in the pager).
fn may_write(path: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(path) else {
        return false;
    };
    let read_only = std::fs::metadata(path).map_or(true, |m| m.permissions().readonly());
    // SAFETY: `c` is a NUL-terminated path.
    !read_only && unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0
}

/// The file's size; refuses empty files and files already in memory.
fn file_size(fd: c_int) -> Result<usize, String> {
    // SAFETY: plain C structs the calls fill; zeroes are valid.
    let (mut st, mut fs): (libc::stat, libc::statfs) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    // SAFETY: valid out-pointers.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || unsafe { libc::fstatfs(fd, &mut fs) } != 0 {
        return Err(String::new());
    }
    if st.st_size == 0 {
        return Err("an empty file".into());
    }
    if fs.f_type == libc::TMPFS_MAGIC {
        return Err("a file in memory already (tmpfs)".into());
    }
    Ok(st.st_size as usize)
}

/// The region's options for `path`: its policy, and its frames from a
/// rule's own budget, the daemon, or the common pool.
fn options(s: &mut State, path: &str, backing: Backing) -> Result<RegionOptions, String> {
    let choice = s.config.choose(std::path::Path::new(path));
    let budget = s.budget() as usize;
    let mut opts = RegionOptions::new(backing, budget, &choice.policy);
    let daemon = std::env::var_os(pagepilot_pager::DAEMON_ENV).is_some();
    match choice.budget {
        Some(b) => opts.budget_bytes = b as usize,
        None if daemon => {}
        None => {
            if s.pool.is_none() {
                // No partition burst: a file alone may hold the whole
                // budget; a newcomer short of its minimum takes frames back.
                let pool = pagepilot_pager::Pool::new(budget)
                    .map_err(|e| format!("the pool: {e}"))?
                    .with_partition_burst(budget);
                s.pool = Some(pool);
            }
            opts = opts
                .with_pool(s.pool.as_ref().expect("made above"))
                .with_min_frames(MIN_FRAMES);
        }
    }
    Ok(opts)
}

/// Maps the region and records the file taken over, its view
/// inaccessible until a window shows part of it.
fn adopt(
    s: &mut State,
    r: &Request<'_>,
    mut opts: RegionOptions,
    reservation: Option<Reservation>,
    writable: bool,
    private: bool,
) -> Result<Arc<TakenFile>, String> {
    if let Some(range) = &reservation {
        // SAFETY: the reservation is ours, of exactly the view's length (the
        // region's reach, or the private copy's rounded length), and used by
        // nothing.
        opts = unsafe { opts.with_app_reservation(range.at) };
    }
    let before = fds::open_on(r.id);
    let region = Region::map(opts)
        .map_err(|e| format!("the region: {}", pagepilot_pager::policy::chain(&e)))?;
    // The view replaced the reservation: the region owns the range now.
    std::mem::forget(reservation);
    for own in fds::open_on(r.id)
        .into_iter()
        .filter(|f| !before.contains(f))
    {
        fds::mark_own(own);
    }
    if region.stats().uffd_access == pagepilot_pager::UffdAccess::UserModeOnly {
        // The kernel's own accesses (a `write(2)` from the mapping) would
        // fail with EFAULT: the program would break.
        return Err("userfaultfd is user-mode only for this user (see `pagepilot doctor`)".into());
    }
    let fd = fds::own_dup(r.fd).ok_or("no descriptor left")?;
    let file = Arc::new(TakenFile {
        id: r.id,
        path: r.path.into(),
        region,
        writable,
        fd,
        log: s.log.clone(),
        owner: std::process::id(),
        private,
    });
    // SAFETY: the region's own view, which it keeps mapped while it lives.
    unsafe { real::mprotect(file.base() as *mut _, file.span(), libc::PROT_NONE) };
    s.add_file(file.clone());
    Ok(file)
}
