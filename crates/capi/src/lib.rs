//! The C API of pagepilot: `libpagepilot.so` with the calls declared in
//! `include/pagepilot.h`.
//!
//! Every entry point catches panics (none crosses the FFI boundary), checks
//! its pointers for NULL, and reports failure the C way: NULL, `errno` and
//! a message in the caller's `err` buffer for the mapping calls, `-errno`
//! for the rest. Messages show the error with its causes
//! ([`pagepilot_pager::policy::chain`]); errnos are the pager's errors' own
//! (`errno()`), the same Python's exceptions carry.
//! A region handle is a boxed [`Region`]; `pp_unmap` frees it, except when
//! the final write-back fails: then the region stays mapped with its dirty
//! data and the handle stays valid, so nothing is silently dropped.

use std::ffi::{c_char, c_int, c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use pagepilot_pager::{Backing, FaultService, FlushError, Region, RegionOptions};

mod daemon;
mod dataspace;
mod far;
mod message;
mod pins;
mod pool;

pub use daemon::pp_connect;
pub use dataspace::{pp_delete_persistent, pp_map_persistent, PersistentError};
pub use far::{pp_delete_far, pp_map_far, FarError};
pub use pins::{
    pp_drain_evictions, pp_eviction, pp_evictions_lost, pp_pin, pp_subscribe_evictions, pp_unpin,
};
pub use pool::{pp_pool, pp_pool_create, pp_pool_destroy, pp_pool_stats_json};

use message::CallError;

/// The opaque region handle of the C API (`pp_region *`).
#[allow(non_camel_case_types)]
pub struct pp_region {
    /// `None` only if a panic interrupted `pp_unmap`: the handle is then dead.
    region: Option<Region>,
}

impl pp_region {
    /// The live region behind a handle pointer.
    ///
    /// # Safety
    /// `r` must be NULL or a live handle.
    unsafe fn get<'a>(r: *mut pp_region) -> Option<&'a Region> {
        // SAFETY: forwarded from the caller.
        unsafe { r.as_ref() }.and_then(|h| h.region.as_ref())
    }
}

/// Options of [`pp_map`], laid out as `pp_options` in the header. Zero
/// means "the default" for every size field.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct pp_options {
    /// `sizeof(pp_options)` as the caller compiled it (set by `pp_options_init`).
    pub size: usize,
    /// Backing file, or NULL for anonymous memory.
    pub path: *const c_char,
    /// Non-zero: map the file writable (dirty pages are written back).
    pub writable: c_int,
    /// Anonymous: the length (required). File: bytes to map (0: the whole file).
    pub len: usize,
    /// The frame budget in bytes (at least one page).
    pub budget_bytes: usize,
    /// Policy: a built-in name or a policy program path; NULL: "clock".
    pub policy: *const c_char,
    /// Pages read per missing fault outside a sequence (0: default).
    pub fault_around_pages: usize,
    /// Largest read-ahead window along sequential faults, pages (0: default).
    pub readahead_max_pages: usize,
    /// Fault-handler threads (0: default).
    pub handler_threads: usize,
    /// Directory of an anonymous region's swap file (NULL: the system's temp dir).
    pub swap_dir: *const c_char,
    /// Non-zero: faults are served in the faulting thread (SIGBUS), see `pp_prefault`.
    pub faulting_thread: c_int,
    /// Largest cluster of zero pages filled along a stream of first touches (0: default, 1: off).
    pub zero_around_max_pages: usize,
    /// The pool the region's frames are drawn from (NULL: a budget of its
    /// own); the region is guaranteed `min_frames` there and starts with up
    /// to `budget_bytes`.
    pub pool: *mut pp_pool,
    /// RAPHA: missing faults allowed per period (0: no limit).
    pub fault_limit: usize,
    /// The limit's period, microseconds.
    pub fault_period_us: usize,
    /// In a pool: the frames guaranteed (HiPEC's minFrame; 0: the budget).
    pub min_frames: usize,
    /// RAPHA: the share of one processor reserved, in [0, 1] (0: none);
    /// only with a fault limit.
    pub cpu_reserve: f64,
}

/// Fills `*opts` with the defaults: anonymous, no length, no budget, policy "clock".
///
/// # Safety
/// `opts` must be NULL or point to writable memory for one `pp_options`.
#[no_mangle]
pub unsafe extern "C" fn pp_options_init(opts: *mut pp_options) {
    if opts.is_null() {
        return;
    }
    let o = pp_options {
        size: std::mem::size_of::<pp_options>(),
        path: std::ptr::null(),
        writable: 0,
        len: 0,
        budget_bytes: 0,
        policy: std::ptr::null(),
        fault_around_pages: 0,
        readahead_max_pages: 0,
        handler_threads: 0,
        swap_dir: std::ptr::null(),
        faulting_thread: 0,
        zero_around_max_pages: 0,
        pool: std::ptr::null_mut(),
        fault_limit: 0,
        fault_period_us: 0,
        min_frames: 0,
        cpu_reserve: 0.0,
    };
    // SAFETY: the caller guarantees opts points to one writable pp_options.
    unsafe { opts.write(o) };
}

/// Maps a file; see `include/pagepilot.h`.
///
/// # Safety
/// `path` and `policy` must be NULL or NUL-terminated strings; `err` must be
/// NULL or writable for `errlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn pp_map_file(
    path: *const c_char,
    writable: c_int,
    budget_bytes: usize,
    policy: *const c_char,
    err: *mut c_char,
    errlen: usize,
) -> *mut pp_region {
    guard_map(err, errlen, || {
        // SAFETY: forwarded from the caller's contract.
        let path = unsafe { path_arg(path, "path")? };
        // SAFETY: as above.
        let policy = unsafe { str_arg(policy, "policy")? };
        let backing = Backing::File {
            path,
            writable: writable != 0,
        };
        Ok(RegionOptions::new(backing, budget_bytes, &policy))
    })
}

/// Maps anonymous zero-filled memory; see `include/pagepilot.h`.
///
/// # Safety
/// `policy` must be NULL or a NUL-terminated string; `err` must be NULL or
/// writable for `errlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn pp_map_anon(
    len: usize,
    budget_bytes: usize,
    policy: *const c_char,
    err: *mut c_char,
    errlen: usize,
) -> *mut pp_region {
    guard_map(err, errlen, || {
        // SAFETY: forwarded from the caller's contract.
        let policy = unsafe { str_arg(policy, "policy")? };
        Ok(RegionOptions::new(
            Backing::Anonymous { len },
            budget_bytes,
            &policy,
        ))
    })
}

/// Maps a region with options; see `include/pagepilot.h`.
///
/// # Safety
/// `opts` must be NULL or point to a `pp_options` initialised by
/// `pp_options_init` whose string fields are NULL or NUL-terminated; `err`
/// must be NULL or writable for `errlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn pp_map(
    opts: *const pp_options,
    err: *mut c_char,
    errlen: usize,
) -> *mut pp_region {
    guard_map(err, errlen, || {
        if opts.is_null() {
            return Err(CallError::Null("opts"));
        }
        // SAFETY: non-null, and the caller guarantees it points to a pp_options.
        let o = unsafe { &*opts };
        if o.size != std::mem::size_of::<pp_options>() {
            return Err(CallError::Invalid(format!(
                "opts.size is {}, this library's pp_options has {} bytes: \
                 initialise it with pp_options_init",
                o.size,
                std::mem::size_of::<pp_options>()
            )));
        }
        let policy = if o.policy.is_null() {
            "clock".to_string()
        } else {
            // SAFETY: non-null and NUL-terminated per the contract.
            unsafe { str_arg(o.policy, "policy")? }
        };
        let backing = if o.path.is_null() {
            Backing::Anonymous { len: o.len }
        } else {
            // SAFETY: as above.
            let path = unsafe { path_arg(o.path, "path")? };
            Backing::File {
                path,
                writable: o.writable != 0,
            }
        };
        let file = matches!(backing, Backing::File { .. });
        let mut ro = RegionOptions::new(backing, o.budget_bytes, &policy);
        if file && o.len != 0 {
            ro = ro.with_len(o.len);
        }
        if o.fault_around_pages != 0 {
            ro = ro.with_fault_around(o.fault_around_pages);
        }
        if o.readahead_max_pages != 0 {
            ro = ro.with_readahead(o.readahead_max_pages);
        }
        if o.handler_threads != 0 {
            ro = ro.with_handler_threads(o.handler_threads);
        }
        if !o.swap_dir.is_null() {
            // SAFETY: as above.
            ro = ro.with_swap_dir(unsafe { path_arg(o.swap_dir, "swap_dir")? });
        }
        if o.faulting_thread != 0 {
            ro = ro.with_fault_service(FaultService::FaultingThread);
        }
        if o.zero_around_max_pages != 0 {
            ro = ro.with_zero_around(o.zero_around_max_pages);
        }
        // SAFETY: NULL or a live pool handle, per the contract.
        if let Some(handle) = unsafe { o.pool.as_ref() } {
            ro = ro.with_pool(&handle.pool);
        }
        if o.min_frames != 0 {
            ro = ro.with_min_frames(o.min_frames);
        }
        if o.cpu_reserve != 0.0 {
            ro = ro.with_reserve(o.cpu_reserve);
        }
        if o.fault_limit != 0 || o.fault_period_us != 0 {
            let period = std::time::Duration::from_micros(o.fault_period_us as u64);
            ro = ro.with_fault_limit(o.fault_limit as u64, period);
        }
        Ok(ro)
    })
}

/// The region's first byte, or NULL for a NULL handle.
///
/// # Safety
/// `r` must be NULL or a handle returned by a mapping call and not yet unmapped.
#[no_mangle]
pub unsafe extern "C" fn pp_addr(r: *mut pp_region) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        // SAFETY: forwarded from the caller's contract.
        match unsafe { pp_region::get(r) } {
            Some(region) => region.as_ptr().cast(),
            None => std::ptr::null_mut(),
        }
    })
}

/// The region's length in bytes, or 0 for a NULL handle.
///
/// # Safety
/// As [`pp_addr`].
#[no_mangle]
pub unsafe extern "C" fn pp_len(r: *mut pp_region) -> usize {
    // SAFETY: forwarded from the caller's contract.
    guard(0, || unsafe { pp_region::get(r) }.map_or(0, Region::len))
}

/// Writes back every dirty page: 0, or -errno (the first failed page's).
///
/// # Safety
/// As [`pp_addr`].
#[no_mangle]
pub unsafe extern "C" fn pp_flush(r: *mut pp_region) -> c_int {
    // SAFETY: forwarded from the caller's contract.
    unsafe { write_back(r, Region::flush) }
}

/// Writes back every dirty page, then drops every clean page from memory
/// (msync's `MS_INVALIDATE`): the next access reads the file again, with
/// what other processes wrote to the file since (a child after `fork` needs
/// none: it shares the kernel's mapping, docs/lifecycle.md). 0, or -errno.
///
/// # Safety
/// As [`pp_addr`].
#[no_mangle]
pub unsafe extern "C" fn pp_invalidate(r: *mut pp_region) -> c_int {
    // SAFETY: forwarded from the caller's contract.
    unsafe { write_back(r, Region::invalidate) }
}

/// Runs a write-back of the region behind `r`: 0, or -errno.
///
/// # Safety
/// As [`pp_addr`].
unsafe fn write_back(r: *mut pp_region, op: fn(&Region) -> Result<(), FlushError>) -> c_int {
    guard(-libc::EIO, || {
        // SAFETY: forwarded from the caller's contract.
        let Some(region) = (unsafe { pp_region::get(r) }) else {
            return -libc::EINVAL;
        };
        match op(region) {
            Ok(()) => 0,
            Err(e) => -e.errno(),
        }
    })
}

/// Maps `[offset, offset + len)` now (writable if `write` is non-zero), so that
/// a system call can use it in a faulting-thread region: 0, -ERANGE outside
/// the region, -EINVAL for a NULL handle.
///
/// # Safety
/// As [`pp_addr`].
#[no_mangle]
pub unsafe extern "C" fn pp_prefault(
    r: *mut pp_region,
    offset: usize,
    len: usize,
    write: c_int,
) -> c_int {
    guard(-libc::EIO, || {
        // SAFETY: forwarded from the caller's contract.
        let Some(region) = (unsafe { pp_region::get(r) }) else {
            return -libc::EINVAL;
        };
        match region.prefault(offset, len, write != 0) {
            Ok(()) => 0,
            Err(e) => -e.errno(),
        }
    })
}

/// Writes the statistics as a NUL-terminated JSON object into `buf`.
/// Returns the bytes written (without the NUL), -EINVAL for a NULL handle or
/// buffer, -ERANGE if `len` is too small (then `buf` holds an empty string).
///
/// # Safety
/// As [`pp_addr`]; `buf` must be NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn pp_stats_json(r: *mut pp_region, buf: *mut c_char, len: usize) -> c_int {
    guard(-libc::EIO, || {
        // SAFETY: forwarded from the caller's contract.
        let Some(region) = (unsafe { pp_region::get(r) }) else {
            return -libc::EINVAL;
        };
        // SAFETY: forwarded from the caller's contract.
        unsafe { write_json(&region.stats_json(), buf, len) }
    })
}

/// Copies `json` and a NUL into `buf`: the bytes written (without the NUL),
/// -EINVAL for a NULL or empty buffer, -ERANGE if it does not fit (then
/// `buf` holds an empty string).
///
/// # Safety
/// `buf` must be NULL or writable for `len` bytes.
unsafe fn write_json(json: &str, buf: *mut c_char, len: usize) -> c_int {
    if buf.is_null() || len == 0 {
        return -libc::EINVAL;
    }
    if json.len() + 1 > len || json.len() > c_int::MAX as usize {
        // SAFETY: buf is writable for len >= 1 bytes.
        unsafe { *buf = 0 };
        return -libc::ERANGE;
    }
    // SAFETY: json.len() + 1 <= len bytes of buf are writable; the source
    // is a live string that cannot overlap the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(json.as_ptr(), buf.cast::<u8>(), json.len());
        *buf.add(json.len()) = 0;
    }
    json.len() as c_int
}

/// Writes back every dirty page and unmaps the region: 0, or -errno. On
/// failure the region stays mapped with its dirty data and `r` stays valid
/// (retry `pp_unmap` or `pp_flush` later); -EINVAL for a NULL handle.
///
/// # Safety
/// `r` must be NULL or a handle returned by a mapping call and not yet
/// unmapped; after 0 it must not be used again.
#[no_mangle]
pub unsafe extern "C" fn pp_unmap(r: *mut pp_region) -> c_int {
    guard(-libc::EIO, || {
        // SAFETY: forwarded from the caller's contract; no other reference to
        // the handle exists during the call.
        let Some(h) = (unsafe { r.as_mut() }) else {
            return -libc::EINVAL;
        };
        let Some(region) = h.region.take() else {
            return -libc::EINVAL;
        };
        match region.try_unmap() {
            Ok(()) => {
                // SAFETY: r came from Box::into_raw in guard_map and is freed once.
                drop(unsafe { Box::from_raw(r) });
                0
            }
            Err((region, e)) => {
                h.region = Some(region);
                -e.errno()
            }
        }
    })
}

fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

fn guard_map(
    err: *mut c_char,
    errlen: usize,
    opts: impl FnOnce() -> Result<RegionOptions, CallError>,
) -> *mut pp_region {
    guard_region(err, errlen, || {
        let opts = opts()?;
        Region::map(opts).map_err(CallError::Map)
    })
}

/// Runs a call that maps a region: its handle, or NULL with the reason in
/// `err` and `errno` (a panic is caught and reported as such, `EIO`).
fn guard_region(
    err: *mut c_char,
    errlen: usize,
    map: impl FnOnce() -> Result<Region, CallError>,
) -> *mut pp_region {
    let outcome = catch_unwind(AssertUnwindSafe(map));
    let e = match outcome {
        Ok(Ok(region)) => {
            return Box::into_raw(Box::new(pp_region {
                region: Some(region),
            }))
        }
        Ok(Err(e)) => e,
        Err(_) => CallError::Panic,
    };
    // SAFETY: the caller guarantees err is NULL or writable for errlen bytes.
    unsafe { e.report(err, errlen) };
    std::ptr::null_mut()
}

/// Runs a call that answers 0 or -errno: 0, or -errno with the reason in
/// `err` (a panic is caught and reported as such, -EIO).
fn guard_status(
    err: *mut c_char,
    errlen: usize,
    call: impl FnOnce() -> Result<(), CallError>,
) -> c_int {
    let e = match catch_unwind(AssertUnwindSafe(call)) {
        Ok(Ok(())) => return 0,
        Ok(Err(e)) => e,
        Err(_) => CallError::Panic,
    };
    // SAFETY: the caller guarantees err is NULL or writable for errlen bytes.
    unsafe { message::write_message(err, errlen, &pagepilot_pager::policy::chain(&e).to_string()) };
    -e.errno()
}

/// # Safety
/// `s` must be NULL or NUL-terminated.
unsafe fn cstr<'a>(s: *const c_char, what: &'static str) -> Result<&'a CStr, CallError> {
    if s.is_null() {
        return Err(CallError::Null(what));
    }
    // SAFETY: non-null and NUL-terminated per the contract.
    Ok(unsafe { CStr::from_ptr(s) })
}

/// # Safety
/// As [`cstr`].
unsafe fn str_arg(s: *const c_char, what: &'static str) -> Result<String, CallError> {
    // SAFETY: forwarded.
    let c = unsafe { cstr(s, what)? };
    c.to_str()
        .map(str::to_owned)
        .map_err(|_| CallError::Invalid(format!("{what} is not UTF-8")))
}

/// # Safety
/// As [`cstr`].
unsafe fn path_arg(s: *const c_char, what: &'static str) -> Result<PathBuf, CallError> {
    // SAFETY: forwarded.
    let c = unsafe { cstr(s, what)? };
    Ok(PathBuf::from(OsStr::from_bytes(c.to_bytes())))
}
