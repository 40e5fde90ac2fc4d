//! Persistent dataspaces in the C API: `pp_map_persistent` and
//! `pp_delete_persistent` (see `include/pagepilot.h` and
//! `docs/dataspaces.md`, "The persistent manager").
//!
//! A persistent dataspace is named and kept in a directory by the
//! [`PersistentManager`]; a region mapping it is an ordinary region handle
//! (`pp_flush`, `pp_unmap`, `pp_stats_json`, pins...), whose write-backs
//! go to the dataspace's data file, so that a later process reopening it by
//! name finds what was flushed.

use std::ffi::{c_char, c_int};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pagepilot_pager::dataspace::{
    CreateError, DataspaceId, DeleteError, IdentifyError, Manager, NoSuch, OpenError,
    PersistentManager,
};
use pagepilot_pager::{Attachment, Backing, MapError, Region, RegionOptions};

use crate::message::CallError;
use crate::{guard_region, guard_status, path_arg, pp_region, str_arg};

/// Why a persistent dataspace could not be mapped or deleted.
#[derive(Debug, thiserror::Error)]
pub enum PersistentError {
    /// `dir` was NULL and no default directory could be made out.
    #[error(
        "no directory for persistent dataspaces: dir is NULL and none of \
         PAGEPILOT_HOME, XDG_DATA_HOME and HOME is set"
    )]
    NoDefaultDir,
    /// The dataspace does not exist (`len` 0 opens only an existing one).
    #[error("no persistent dataspace {name:?} in {}", dir.display())]
    Missing {
        /// Its name.
        name: String,
        /// The directory looked in.
        dir: PathBuf,
    },
    /// The manager refused the name, or found the dataspace damaged.
    #[error("persistent dataspace {name:?} in {}", dir.display())]
    Identify {
        /// Its name.
        name: String,
        /// The directory.
        dir: PathBuf,
        /// The manager's reason (a bad name, a corrupt header...).
        source: IdentifyError,
    },
    /// It could not be created.
    #[error("creating persistent dataspace {name:?} in {}", dir.display())]
    Create {
        /// Its name.
        name: String,
        /// The directory.
        dir: PathBuf,
        /// The manager's reason.
        source: CreateError,
    },
    /// It exists, shorter than the length asked for.
    #[error(
        "persistent dataspace {name:?} in {} has {actual} bytes, {wanted} were asked for",
        dir.display()
    )]
    Short {
        /// Its name.
        name: String,
        /// The directory.
        dir: PathBuf,
        /// Its length.
        actual: u64,
        /// The length asked for.
        wanted: u64,
    },
    /// The manager would not open it (open already, here or in another
    /// process; damaged).
    #[error("opening persistent dataspace {name:?} in {}", dir.display())]
    Open {
        /// Its name.
        name: String,
        /// The directory.
        dir: PathBuf,
        /// The manager's reason.
        source: OpenError,
    },
    /// It could not be deleted.
    #[error("deleting persistent dataspace {name:?} in {}", dir.display())]
    Delete {
        /// Its name.
        name: String,
        /// The directory.
        dir: PathBuf,
        /// The manager's reason.
        source: DeleteError,
    },
}

impl PersistentError {
    /// The errno a C caller of `pp_map_persistent` (in `errno`) or
    /// `pp_delete_persistent` (returned) gets.
    pub(crate) fn errno(&self) -> c_int {
        match self {
            PersistentError::NoDefaultDir => libc::EINVAL,
            PersistentError::Missing { .. } => libc::ENOENT,
            PersistentError::Short { .. } => libc::EINVAL,
            PersistentError::Identify { source, .. } => match source {
                IdentifyError::NoSuch(_) => libc::ENOENT,
                IdentifyError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
                IdentifyError::Corrupt(_) => libc::EIO,
                _ => libc::EINVAL,
            },
            PersistentError::Create { source, .. } => match source {
                CreateError::Exists(_) => libc::EEXIST,
                CreateError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
                _ => libc::EINVAL,
            },
            PersistentError::Open { source, .. } => match source {
                OpenError::Busy(_) => libc::EBUSY,
                OpenError::NoSuch(_) => libc::ENOENT,
                OpenError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
                _ => libc::EINVAL,
            },
            PersistentError::Delete { source, .. } => match source {
                DeleteError::NoSuch(_) => libc::ENOENT,
                DeleteError::Open(_) => libc::EBUSY,
                DeleteError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
                DeleteError::Unsupported(_) => libc::ENOTSUP,
                _ => libc::EINVAL,
            },
        }
    }
}

/// The directory given, else the persistent manager's default.
///
/// # Safety
/// `dir` must be NULL or a NUL-terminated string.
unsafe fn dir_arg(dir: *const c_char) -> Result<PathBuf, CallError> {
    if dir.is_null() {
        return PersistentManager::default_dir()
            .ok_or(CallError::Persistent(PersistentError::NoDefaultDir));
    }
    // SAFETY: non-null, and NUL-terminated per the contract.
    unsafe { path_arg(dir, "dir") }
}

/// Makes sure dataspace `name` exists in `manager`'s directory, at least
/// `len` bytes long (`len` 0: it must exist; otherwise it is created with
/// `len` zero bytes if missing).
fn ensure(manager: &PersistentManager, name: &str, len: u64) -> Result<(), PersistentError> {
    let dir = || manager.dir().to_path_buf();
    let id = DataspaceId::Name(name.into());
    let missing = || PersistentError::Missing {
        name: name.into(),
        dir: dir(),
    };
    let identify = || match manager.identify(&id) {
        Ok(identity) => Ok(Some(identity.len)),
        Err(IdentifyError::NoSuch(NoSuch { .. })) => Ok(None),
        Err(source) => Err(PersistentError::Identify {
            name: name.into(),
            dir: dir(),
            source,
        }),
    };
    let actual = match identify()? {
        Some(actual) => actual,
        None if len == 0 => return Err(missing()),
        None => match manager.create_named(name, len) {
            Ok(_) => return Ok(()),
            // Made meanwhile by another process: check it as any other.
            Err(CreateError::Exists(_)) => identify()?.ok_or_else(missing)?,
            Err(source) => {
                return Err(PersistentError::Create {
                    name: name.into(),
                    dir: dir(),
                    source,
                })
            }
        },
    };
    if actual < len {
        return Err(PersistentError::Short {
            name: name.into(),
            dir: dir(),
            actual,
            wanted: len,
        });
    }
    Ok(())
}

/// Maps persistent dataspace `name` of directory `dir` (NULL: the default
/// directory) as a region of its whole length; `len` 0 opens an existing
/// one, more creates it with `len` zero bytes if missing or checks that it
/// has at least `len`. See `include/pagepilot.h`.
///
/// # Safety
/// `name`, `dir` and `policy` must be NULL or NUL-terminated strings;
/// `err` must be NULL or writable for `errlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn pp_map_persistent(
    name: *const c_char,
    dir: *const c_char,
    len: usize,
    budget_bytes: usize,
    policy: *const c_char,
    err: *mut c_char,
    errlen: usize,
) -> *mut pp_region {
    guard_region(err, errlen, || {
        // SAFETY: forwarded from the caller's contract.
        let name = unsafe { str_arg(name, "name")? };
        // SAFETY: as above.
        let dir = unsafe { dir_arg(dir)? };
        // SAFETY: as above.
        let policy = unsafe { str_arg(policy, "policy")? };
        let manager = PersistentManager::new(&dir);
        ensure(&manager, &name, len as u64)?;
        let id = DataspaceId::Name(name.clone());
        let attachment = Attachment::whole(Arc::new(manager), id);
        let opts = RegionOptions::new(Backing::Dataspaces(vec![attachment]), budget_bytes, &policy);
        Region::map(opts).map_err(|e| match e {
            // The manager's refusal, said of the dataspace rather than of
            // "attachment 0".
            MapError::Attach { source, .. } => {
                CallError::Persistent(PersistentError::Open { name, dir, source })
            }
            e => CallError::Map(e),
        })
    })
}

/// Deletes persistent dataspace `name` of directory `dir` (NULL: the
/// default directory): 0, or -errno with a message in `err` (-ENOENT: no
/// such dataspace; -EBUSY: it is mapped or open, here or in another
/// process; -EINVAL: a bad or NULL name, no default directory).
///
/// # Safety
/// `name` and `dir` must be NULL or NUL-terminated strings; `err` must be
/// NULL or writable for `errlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn pp_delete_persistent(
    name: *const c_char,
    dir: *const c_char,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard_status(err, errlen, || {
        // SAFETY: forwarded from the caller's contract.
        let name = unsafe { str_arg(name, "name") }?;
        // SAFETY: as above.
        let dir = unsafe { dir_arg(dir) }?;
        delete(&dir, &name).map_err(CallError::Persistent)
    })
}

/// Deletes dataspace `name` of `dir`.
fn delete(dir: &Path, name: &str) -> Result<(), PersistentError> {
    let manager = PersistentManager::new(dir);
    manager
        .delete(&DataspaceId::Name(name.into()))
        .map_err(|source| match source {
            DeleteError::NoSuch(_) => PersistentError::Missing {
                name: name.into(),
                dir: dir.into(),
            },
            source => PersistentError::Delete {
                name: name.into(),
                dir: dir.into(),
                source,
            },
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{CStr, CString};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pp-capi-ds-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    fn c_path(p: &Path) -> CString {
        CString::new(p.to_str().unwrap()).unwrap()
    }

    /// `pp_map_persistent`'s handle (unmapped at once) or its message.
    fn map(name: Option<&str>, dir: &Path, len: usize) -> Result<(), String> {
        let name = name.map(c);
        let dir = c_path(dir);
        let policy = c("lru");
        let mut err = [0 as c_char; 1024];
        // SAFETY: NUL-terminated strings or NULL; err writable for its length.
        let r = unsafe {
            pp_map_persistent(
                name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
                dir.as_ptr(),
                len,
                16 * 4096,
                policy.as_ptr(),
                err.as_mut_ptr(),
                err.len(),
            )
        };
        if r.is_null() {
            // SAFETY: the call NUL-terminated its message.
            return Err(unsafe { CStr::from_ptr(err.as_ptr()) }
                .to_string_lossy()
                .into_owned());
        }
        // SAFETY: a live handle, unmapped once.
        assert_eq!(unsafe { crate::pp_unmap(r) }, 0);
        Ok(())
    }

    fn delete_c(name: &str, dir: &Path) -> (c_int, String) {
        let (name, dir) = (c(name), c_path(dir));
        let mut err = [0 as c_char; 1024];
        // SAFETY: as above.
        let rc = unsafe {
            pp_delete_persistent(name.as_ptr(), dir.as_ptr(), err.as_mut_ptr(), err.len())
        };
        // SAFETY: NUL-terminated (zeroed, or the message).
        let msg = unsafe { CStr::from_ptr(err.as_ptr()) };
        (rc, msg.to_string_lossy().into_owned())
    }

    #[test]
    fn test_bad_names_missing_and_short_dataspaces_are_refused_by_name() {
        let dir = scratch("refusals");
        let bad = map(Some("a/b"), &dir, 4096).unwrap_err();
        assert!(bad.contains("\"a/b\"") && bad.contains("'/'"), "{bad}");
        let hidden = map(Some(".x"), &dir, 0).unwrap_err();
        assert!(hidden.contains("\".x\""), "{hidden}");
        let null = map(None, &dir, 0).unwrap_err();
        assert!(null.contains("name is NULL"), "{null}");
        let missing = map(Some("nothere"), &dir, 0).unwrap_err();
        assert!(
            missing.contains("no persistent dataspace \"nothere\"")
                && missing.contains(dir.to_str().unwrap()),
            "{missing}"
        );
        let (rc, msg) = delete_c("nothere", &dir);
        assert_eq!(rc, -libc::ENOENT, "{msg}");
        assert!(msg.contains("\"nothere\""), "{msg}");
        let (rc, msg) = delete_c("../up", &dir);
        assert_eq!(rc, -libc::EINVAL, "{msg}");
        assert!(msg.contains("\"../up\""), "{msg}");
        // One that exists, shorter than asked.
        PersistentManager::new(&dir)
            .create_named("small", 8192)
            .unwrap();
        let short = map(Some("small"), &dir, 3 * 4096).unwrap_err();
        assert!(
            short.contains("\"small\"") && short.contains("8192 bytes"),
            "{short}"
        );
        let (rc, msg) = delete_c("small", &dir);
        assert_eq!((rc, msg.as_str()), (0, ""));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn test_created_mapped_busy_while_mapped_then_deleted() {
        let dir = scratch("busy");
        let name = c("ds");
        let dirc = c_path(&dir);
        let policy = c("clock");
        let mut err = [0 as c_char; 1024];
        // SAFETY: as above.
        let r = unsafe {
            pp_map_persistent(
                name.as_ptr(),
                dirc.as_ptr(),
                10 * 4096,
                8 * 4096,
                policy.as_ptr(),
                err.as_mut_ptr(),
                err.len(),
            )
        };
        // SAFETY: NUL-terminated on failure.
        let msg = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy();
        assert!(!r.is_null(), "{msg}");
        // SAFETY: a live handle.
        assert_eq!(unsafe { crate::pp_len(r) }, 10 * 4096);
        // A second map of it while mapped: busy.
        let busy = map(Some("ds"), &dir, 0).unwrap_err();
        assert!(
            busy.contains("\"ds\"") && busy.contains("open already"),
            "{busy}"
        );
        let (rc, msg) = delete_c("ds", &dir);
        assert_eq!(rc, -libc::EBUSY, "{msg}");
        // SAFETY: a live handle, unmapped once.
        assert_eq!(unsafe { crate::pp_unmap(r) }, 0);
        // Reopened by name, a longer length is refused, the same accepted.
        assert!(map(Some("ds"), &dir, 10 * 4096).is_ok());
        assert!(map(Some("ds"), &dir, 11 * 4096).is_err());
        assert_eq!(delete_c("ds", &dir).0, 0);
        assert!(map(Some("ds"), &dir, 0).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
