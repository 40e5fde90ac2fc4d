//! Frame pools from C: `pp_pool_create`, `pp_pool_stats_json`,
//! `pp_pool_destroy`, and `pp_options.pool` (see `include/pagepilot.h`).

use std::ffi::{c_char, c_int};

use pagepilot_pager::policy::chain;
use pagepilot_pager::Pool;

use crate::message::write_message;
use crate::{guard, write_json};

/// The opaque pool handle of the C API (`pp_pool *`).
#[allow(non_camel_case_types)]
pub struct pp_pool {
    /// The pool; regions mapped into it keep it alive after `pp_pool_destroy`.
    pub(crate) pool: Pool,
}

/// Creates a pool of `budget_bytes` shared by the regions mapped with
/// `pp_options.pool` set to it. NULL and a message in `err` on failure.
///
/// # Safety
/// `err` must be NULL or writable for `errlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn pp_pool_create(
    budget_bytes: usize,
    err: *mut c_char,
    errlen: usize,
) -> *mut pp_pool {
    let made = guard(None, || Some(Pool::new(budget_bytes)));
    let message = match made {
        Some(Ok(pool)) => return Box::into_raw(Box::new(pp_pool { pool })),
        Some(Err(e)) => chain(&e).to_string(),
        None => "internal error in pagepilot (panic caught at the C API)".to_string(),
    };
    // SAFETY: the caller guarantees err is NULL or writable for errlen bytes.
    unsafe { write_message(err, errlen, &message) };
    std::ptr::null_mut()
}

/// Writes the pool's statistics (frames, free frames, each region's part)
/// as a NUL-terminated JSON object into `buf`; as `pp_stats_json`.
///
/// # Safety
/// `p` must be NULL or a live pool handle; `buf` NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn pp_pool_stats_json(
    p: *mut pp_pool,
    buf: *mut c_char,
    len: usize,
) -> c_int {
    guard(-libc::EIO, || {
        // SAFETY: forwarded from the caller's contract.
        let Some(handle) = (unsafe { p.as_ref() }) else {
            return -libc::EINVAL;
        };
        // SAFETY: forwarded from the caller's contract.
        unsafe { write_json(&handle.pool.stats_json(), buf, len) }
    })
}

/// Frees the handle. Regions mapped into the pool keep drawing from it
/// until they are unmapped.
///
/// # Safety
/// `p` must be NULL or a handle from `pp_pool_create` not destroyed yet.
#[no_mangle]
pub unsafe extern "C" fn pp_pool_destroy(p: *mut pp_pool) {
    if !p.is_null() {
        // SAFETY: a handle from pp_pool_create (Box::into_raw), destroyed once.
        guard((), || drop(unsafe { Box::from_raw(p) }));
    }
}
