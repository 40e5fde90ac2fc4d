//! Pinned pages and eviction notifications in the C API: `pp_pin`,
//! `pp_unpin`, `pp_subscribe_evictions`, `pp_drain_evictions`,
//! `pp_evictions_lost` (see `include/pagepilot.h`).

use std::ffi::c_int;

use pagepilot_pager::{Eviction, PinError, Region};

use crate::{guard, pp_region};

/// One page evicted, laid out as `pp_eviction` in the header.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct pp_eviction {
    /// The page's byte offset in the region.
    pub offset: u64,
    /// 1 if the page was referenced (mapped since its bit was last cleared).
    pub referenced: u8,
    /// 1 if it was modified (written back before its frame was freed).
    pub modified: u8,
    /// Zero.
    pub reserved: [u8; 6],
}

impl From<Eviction> for pp_eviction {
    fn from(e: Eviction) -> Self {
        pp_eviction {
            offset: e.offset,
            referenced: u8::from(e.referenced),
            modified: u8::from(e.modified),
            reserved: [0; 6],
        }
    }
}

/// Runs a pin call on the region behind `r`: 0, or -errno.
///
/// # Safety
/// `r` must be NULL or a live handle.
unsafe fn pin_call(r: *mut pp_region, op: impl FnOnce(&Region) -> Result<(), PinError>) -> c_int {
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

/// Pins every page `[offset, offset + len)` touches: brought in now, never
/// evicted until `pp_unpin`. 0; -EINVAL for a NULL handle or a range
/// outside the region; -ENOMEM if the pins would pass the budget less one
/// frame; -EIO if a page cannot be read. Nothing is pinned on failure.
///
/// # Safety
/// `r` must be NULL or a handle returned by a mapping call and not yet unmapped.
#[no_mangle]
pub unsafe extern "C" fn pp_pin(r: *mut pp_region, offset: usize, len: usize) -> c_int {
    // SAFETY: forwarded from the caller's contract.
    unsafe { pin_call(r, |region| region.pin(offset, len)) }
}

/// Unpins every page `[offset, offset + len)` touches. 0; -EINVAL for a
/// NULL handle, a range outside the region, or a page in it that is not
/// pinned (then nothing is unpinned).
///
/// # Safety
/// As [`pp_pin`].
#[no_mangle]
pub unsafe extern "C" fn pp_unpin(r: *mut pp_region, offset: usize, len: usize) -> c_int {
    // SAFETY: forwarded from the caller's contract.
    unsafe { pin_call(r, |region| region.unpin(offset, len)) }
}

/// Turns eviction notifications on with a queue of `capacity` events (0:
/// off). 0, or -EINVAL for a NULL handle.
///
/// # Safety
/// As [`pp_pin`].
#[no_mangle]
pub unsafe extern "C" fn pp_subscribe_evictions(r: *mut pp_region, capacity: usize) -> c_int {
    guard(-libc::EIO, || {
        // SAFETY: forwarded from the caller's contract.
        let Some(region) = (unsafe { pp_region::get(r) }) else {
            return -libc::EINVAL;
        };
        region.subscribe_evictions(capacity);
        0
    })
}

/// Moves up to `max` queued evictions, oldest first, into `out`: the count
/// (at most `INT_MAX`), or -EINVAL for a NULL handle, or a NULL `out` with
/// `max` > 0.
///
/// # Safety
/// As [`pp_pin`]; `out` must be NULL or writable for `max` `pp_eviction`s.
#[no_mangle]
pub unsafe extern "C" fn pp_drain_evictions(
    r: *mut pp_region,
    out: *mut pp_eviction,
    max: usize,
) -> c_int {
    guard(-libc::EIO, || {
        // SAFETY: forwarded from the caller's contract.
        let Some(region) = (unsafe { pp_region::get(r) }) else {
            return -libc::EINVAL;
        };
        if out.is_null() && max > 0 {
            return -libc::EINVAL;
        }
        let mut events = Vec::new();
        region.drain_evictions_up_to(&mut events, max.min(c_int::MAX as usize));
        for (i, e) in events.iter().enumerate() {
            // SAFETY: i < events.len() <= max, and the caller guarantees
            // `out` is writable for `max` entries.
            unsafe { out.add(i).write(pp_eviction::from(*e)) };
        }
        events.len() as c_int
    })
}

/// Evictions dropped because the queue was full, since notifications were
/// first turned on (0 for a NULL handle).
///
/// # Safety
/// As [`pp_pin`].
#[no_mangle]
pub unsafe extern "C" fn pp_evictions_lost(r: *mut pp_region) -> u64 {
    guard(0, || {
        // SAFETY: forwarded from the caller's contract.
        let region = unsafe { pp_region::get(r) };
        region.map_or(0, |region| region.stats().evictions_lost)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_pp_eviction_has_the_headers_layout() {
        assert_eq!(std::mem::size_of::<pp_eviction>(), 16);
        assert_eq!(std::mem::align_of::<pp_eviction>(), 8);
        let e = pp_eviction::from(Eviction {
            offset: 8192,
            referenced: true,
            modified: false,
        });
        assert_eq!((e.offset, e.referenced, e.modified), (8192, 1, 0));
    }

    #[test]
    fn test_pin_errors_map_to_the_documented_errnos() {
        let bad = PinError::OutOfRange {
            offset: 1,
            len: 2,
            region_len: 2,
        };
        let over = PinError::OverBudget {
            new: 1,
            pinned: 1,
            budget_frames: 2,
        };
        assert_eq!(PinError::errno(&bad), libc::EINVAL);
        assert_eq!(
            PinError::errno(&PinError::NotPinned { page: 0 }),
            libc::EINVAL
        );
        assert_eq!(PinError::errno(&over), libc::ENOMEM);
        assert_eq!(
            PinError::errno(&PinError::Unreadable { page: 0 }),
            libc::EIO
        );
    }
}
