//! Every raw system call and ioctl the pager makes: userfaultfd, memfd,
//! fallocate, madvise, mmap and positioned I/O. Nothing else in the crate
//! calls `libc` directly, and the benchmarks (`pagepilot bench`) use these
//! too (plus the few page-cache and resource-usage calls at the end), so the
//! workspace keeps its raw calls in this one module.
//!
//! The page stores' own calls (direct opens, positioned I/O, `cachestat`,
//! populating) live in `pagepilot-dataspace`'s `sys` and are re-exported
//! here.
//!
//! One file per kind: `uffd` (the userfaultfd ABI and its ioctls), `memory`
//! (mappings and the memfd), `file` (backing files and the page cache),
//! `lease` (open file description locks), `direct` (the mapping calls as
//! system calls, unseen by an interposer),
//! `signal`, `process`.

use std::io;

mod direct;
mod file;
mod lease;
mod memory;
mod process;
mod signal;
mod uffd;

pub use file::*;
pub use lease::*;
pub use memory::*;
pub use process::*;
pub use signal::*;
pub use uffd::*;

/// Populating a mapping with zero frames: a page store's call, made once
/// in `pagepilot-dataspace`.
pub use pagepilot_dataspace::sys::populate;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The page size this pager works in.
pub const PAGE: usize = pagepilot_dataspace::PAGE;

/// Runs a system call again while a signal interrupts it (EINTR): the
/// application's signals (a timer) reach the threads that serve faults in
/// the faulting-thread service.
fn restarting(mut call: impl FnMut() -> libc::c_int) -> io::Result<libc::c_int> {
    loop {
        match check(call()) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}
