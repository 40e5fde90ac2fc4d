//! Joining the pagepilot daemon from C: `pp_connect` (see
//! `include/pagepilot.h`). `PAGEPILOT_DAEMON=PATH` in the environment does
//! the same at the first `pp_map`.

use std::ffi::{c_char, c_int, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;

use pagepilot_pager::policy::chain;
use pagepilot_pager::Client;

use crate::guard;
use crate::message::write_message;

/// Connects to the daemon listening at `path` and joins it: the regions
/// the process maps from now on (outside a pool) draw their frames from
/// the daemon. 0, or -errno with a message in `err` (-ECONNREFUSED or
/// -ENOENT: no daemon there; -EPROTONOSUPPORT: no common protocol
/// version; -EINVAL: a NULL path).
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string; `err` NULL or writable
/// for `errlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn pp_connect(path: *const c_char, err: *mut c_char, errlen: usize) -> c_int {
    if path.is_null() {
        // SAFETY: forwarded from the caller.
        unsafe { write_message(err, errlen, "pp_connect: the socket path is NULL") };
        return -libc::EINVAL;
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    let path = OsStr::from_bytes(unsafe { CStr::from_ptr(path) }.to_bytes());
    let joined = guard(None, || Some(Client::connect(path)));
    let (errno, message) = match joined {
        Some(Ok(_)) => return 0,
        Some(Err(e)) => (e.errno(), chain(&e).to_string()),
        None => (
            libc::EIO,
            "internal error in pagepilot (panic caught at the C API)".into(),
        ),
    };
    // SAFETY: forwarded from the caller.
    unsafe { write_message(err, errlen, &message) };
    -errno
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(path: Option<&str>) -> (c_int, String) {
        let path = path.map(|p| std::ffi::CString::new(p).unwrap());
        let mut err = [0 as c_char; 256];
        let ptr = path.as_ref().map_or(std::ptr::null(), |p| p.as_ptr());
        // SAFETY: a NUL-terminated path or NULL; `err` is writable for its length.
        let rc = unsafe { pp_connect(ptr, err.as_mut_ptr(), err.len()) };
        // SAFETY: pp_connect NUL-terminates what it writes.
        let msg = unsafe { CStr::from_ptr(err.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        (rc, msg)
    }

    #[test]
    fn connecting_where_no_daemon_listens_names_the_socket_and_fails() {
        let (rc, msg) = connect(Some("/nonexistent/pagepilot.sock"));
        assert_eq!(rc, -libc::ENOENT);
        assert!(msg.contains("/nonexistent/pagepilot.sock"), "{msg}");
    }

    #[test]
    fn a_null_path_is_refused() {
        let (rc, msg) = connect(None);
        assert_eq!(rc, -libc::EINVAL);
        assert!(msg.contains("NULL"), "{msg}");
    }
}
