//! Errors of the C API's calls and how they reach the caller: the message
//! with its causes in the `err` buffer, the errno in `errno` or returned.

use std::ffi::{c_char, c_int};

use pagepilot_pager::policy::chain;
use pagepilot_pager::MapError;

/// Why a mapping call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// A required pointer argument was NULL.
    #[error("{0} is NULL")]
    Null(&'static str),
    /// An argument was malformed.
    #[error("{0}")]
    Invalid(String),
    /// The pager refused the mapping.
    #[error(transparent)]
    Map(MapError),
    /// A persistent dataspace could not be made, opened or deleted.
    #[error(transparent)]
    Persistent(#[from] crate::dataspace::PersistentError),
    /// A far dataspace could not be made, opened or deleted (boxed: it
    /// is larger than the others).
    #[error(transparent)]
    Far(Box<crate::far::FarError>),
    /// A bug inside pagepilot panicked; the panic was stopped at the API.
    #[error("internal error in pagepilot (panic caught at the C API)")]
    Panic,
}

impl From<crate::far::FarError> for CallError {
    fn from(e: crate::far::FarError) -> Self {
        CallError::Far(Box::new(e))
    }
}

impl CallError {
    /// The errno a C caller finds in `errno` (`EINVAL`: a bad argument).
    pub fn errno(&self) -> c_int {
        match self {
            CallError::Null(_) | CallError::Invalid(_) => libc::EINVAL,
            CallError::Map(e) => e.errno(),
            CallError::Persistent(e) => e.errno(),
            CallError::Far(e) => e.errno(),
            CallError::Panic => libc::EIO,
        }
    }

    /// Tells a caller of a mapping call why it failed: the message and its
    /// causes in `err`, the errno in `errno`.
    ///
    /// # Safety
    /// `err` must be NULL or writable for `errlen` bytes.
    pub unsafe fn report(&self, err: *mut c_char, errlen: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { write_message(err, errlen, &chain(self).to_string()) };
        // Last: nothing after it may overwrite errno before the return.
        set_errno(self.errno());
    }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(errno: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno, valid
    // and writable for the thread's life.
    unsafe { *libc::__errno_location() = errno };
}

/// Copies `msg` into `err` (at most `errlen - 1` bytes, then a NUL).
/// Nothing is written if `err` is NULL or `errlen` is 0.
///
/// # Safety
/// `err` must be NULL or writable for `errlen` bytes.
pub unsafe fn write_message(err: *mut c_char, errlen: usize, msg: &str) {
    if err.is_null() || errlen == 0 {
        return;
    }
    let n = msg.len().min(errlen - 1);
    // SAFETY: n + 1 <= errlen bytes of err are writable; msg is a Rust
    // string, which cannot overlap the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr(), err.cast::<u8>(), n);
        *err.add(n) = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_message_is_truncated_and_terminated() {
        let mut buf = [0x7f as c_char; 6];
        // SAFETY: buf is writable for its length.
        unsafe { write_message(buf.as_mut_ptr(), buf.len(), "budget too small") };
        let got: Vec<u8> = buf.iter().map(|&c| c as u8).collect();
        assert_eq!(&got, b"budge\0");
        // errlen 0 writes nothing.
        let mut one = [0x7f as c_char; 1];
        // SAFETY: as above.
        unsafe { write_message(one.as_mut_ptr(), 0, "x") };
        assert_eq!(one[0], 0x7f);
    }
}
