//! Far memory in the C API: `pp_map_far` and `pp_delete_far` (see
//! `include/pagepilot.h` and `docs/far-memory.md`, "From C").
//!
//! A far dataspace is named and kept in Redis (one server or a Redis
//! Cluster) by a [`RedisManager`]; a region mapping it is an ordinary
//! region handle (`pp_flush`, `pp_unmap`, `pp_stats_json`, pins...) whose
//! faults read pages from Redis and whose write-backs write them there, so
//! that a later process mapping the name finds what was flushed.
//!
//! The far manager allows many opens of a dataspace at once; a process
//! mapping one name twice would hold two caches of it that do not see each
//! other's writes, so this API refuses a second map of a name (on the same
//! `seeds`) while the first is mapped in this process (`EBUSY`), as the
//! persistent manager does. Each mapping has a manager of its own, kept
//! alive by its region; a process-wide table of weak references to them
//! tells whether a name is mapped, and `pp_delete_far` deletes through the
//! mapping's manager, which refuses while its region is mapped.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint};
use std::io;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use pagepilot_far::{check_name, ConfigError, RedisConfig, RedisManager};
use pagepilot_pager::dataspace::{
    CreateError, DataspaceId, DeleteError, IdentifyError, Manager, OpenError,
};
use pagepilot_pager::{Attachment, Backing, MapError, Region, RegionOptions};

use crate::message::CallError;
use crate::{guard_region, guard_status, pp_region, str_arg};

/// Why a far dataspace could not be mapped or deleted.
#[derive(Debug, thiserror::Error)]
pub enum FarError {
    /// `seeds` names no server or cluster the far manager can use.
    #[error("bad Redis seeds {seeds:?} (\"host:port[,host:port...]\" or \"redis://host:port\")")]
    BadSeeds {
        /// The seeds given.
        seeds: String,
        /// What was wrong.
        source: ConfigError,
    },
    /// The name is not a far dataspace name.
    #[error(transparent)]
    BadName(ConfigError),
    /// A replica wait of no time: `WAIT` with timeout 0 blocks until the
    /// replicas acknowledge, however long that takes.
    #[error(
        "far dataspace {name:?}: a wait for {replicas} replica(s) needs wait_ms > 0 \
         (WAIT 0 would block until they acknowledge)"
    )]
    NoWaitTime {
        /// The dataspace's name.
        name: String,
        /// The replicas asked for.
        replicas: u32,
    },
    /// A replica wait the far manager refuses (too long).
    #[error("far dataspace {name:?}: a wait for {replicas} replica(s), {wait_ms} ms")]
    BadWait {
        /// The dataspace's name.
        name: String,
        /// The replicas asked for.
        replicas: u32,
        /// The wait asked for, milliseconds.
        wait_ms: u32,
        /// The far manager's reason.
        source: ConfigError,
    },
    /// The dataspace does not exist (`len` 0 opens only an existing one).
    #[error("no far dataspace {name:?} on Redis {seeds}")]
    Missing {
        /// Its name.
        name: String,
        /// The seeds looked at.
        seeds: String,
    },
    /// It could not be looked up (Redis unreachable, bad metadata...).
    #[error("far dataspace {name:?} on Redis {seeds}")]
    Identify {
        /// Its name.
        name: String,
        /// The seeds.
        seeds: String,
        /// The manager's reason.
        source: IdentifyError,
    },
    /// It could not be created (Redis unreachable, too long, too few
    /// replicas acknowledged its metadata...).
    #[error("creating far dataspace {name:?} on Redis {seeds}")]
    Create {
        /// Its name.
        name: String,
        /// The seeds.
        seeds: String,
        /// The manager's reason.
        source: CreateError,
    },
    /// It exists, shorter than the length asked for.
    #[error("far dataspace {name:?} on Redis {seeds} has {actual} bytes, {wanted} were asked for")]
    Short {
        /// Its name.
        name: String,
        /// The seeds.
        seeds: String,
        /// Its length.
        actual: u64,
        /// The length asked for.
        wanted: u64,
    },
    /// This process maps it already (through the same seeds).
    #[error(
        "far dataspace {name:?} on Redis {seeds} is mapped already by this process \
         (pp_unmap it first)"
    )]
    Busy {
        /// Its name.
        name: String,
        /// The seeds.
        seeds: String,
    },
    /// The manager would not open it.
    #[error("opening far dataspace {name:?} on Redis {seeds}")]
    Open {
        /// Its name.
        name: String,
        /// The seeds.
        seeds: String,
        /// The manager's reason.
        source: OpenError,
    },
    /// It could not be deleted.
    #[error("deleting far dataspace {name:?} on Redis {seeds}")]
    Delete {
        /// Its name.
        name: String,
        /// The seeds.
        seeds: String,
        /// The manager's reason.
        source: DeleteError,
    },
}

/// The errno of a failed request to Redis: the system's if it said one,
/// else the nearest to its kind (`ETIMEDOUT`: a timeout, or too few
/// replicas acknowledged a write; `EINVAL`: a request the manager refused
/// to send, such as a length over 1 TiB).
fn io_errno(e: &io::Error) -> c_int {
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    match e.kind() {
        io::ErrorKind::TimedOut => libc::ETIMEDOUT,
        io::ErrorKind::ConnectionRefused => libc::ECONNREFUSED,
        io::ErrorKind::ConnectionAborted => libc::ECONNABORTED,
        io::ErrorKind::ConnectionReset => libc::ECONNRESET,
        io::ErrorKind::InvalidInput => libc::EINVAL,
        _ => libc::EIO,
    }
}

impl FarError {
    /// The errno a C caller of `pp_map_far` (in `errno`) or `pp_delete_far`
    /// (returned) gets.
    pub(crate) fn errno(&self) -> c_int {
        match self {
            FarError::BadSeeds { .. }
            | FarError::BadName(_)
            | FarError::NoWaitTime { .. }
            | FarError::BadWait { .. }
            | FarError::Short { .. } => libc::EINVAL,
            FarError::Missing { .. } => libc::ENOENT,
            FarError::Busy { .. } => libc::EBUSY,
            FarError::Identify { source, .. } => match source {
                IdentifyError::NoSuch(_) => libc::ENOENT,
                IdentifyError::Io { source, .. } => io_errno(source),
                _ => libc::EINVAL,
            },
            FarError::Create { source, .. } => match source {
                CreateError::Exists(_) => libc::EEXIST,
                CreateError::Io { source, .. } => io_errno(source),
                _ => libc::EINVAL,
            },
            FarError::Open { source, .. } => match source {
                OpenError::Busy(_) => libc::EBUSY,
                OpenError::NoSuch(_) => libc::ENOENT,
                OpenError::Io { source, .. } => io_errno(source),
                _ => libc::EINVAL,
            },
            FarError::Delete { source, .. } => match source {
                DeleteError::NoSuch(_) => libc::ENOENT,
                DeleteError::Open(_) => libc::EBUSY,
                DeleteError::Io { source, .. } => io_errno(source),
                DeleteError::Unsupported(_) => libc::ENOTSUP,
                _ => libc::EINVAL,
            },
        }
    }
}

/// The managers of the far dataspaces this process maps, by seeds (as
/// given) and name; an entry is live while its region is mapped.
type Mapped = Mutex<HashMap<(String, String), Weak<RedisManager>>>;

fn mapped() -> &'static Mapped {
    static MAPPED: std::sync::OnceLock<Mapped> = std::sync::OnceLock::new();
    MAPPED.get_or_init(Mapped::default)
}

/// The manager of the live mapping of `name` on `seeds`, if any.
fn mapped_manager(seeds: &str, name: &str) -> Option<Arc<RedisManager>> {
    let mut table = mapped().lock().unwrap_or_else(|p| p.into_inner());
    table.retain(|_, m| m.strong_count() > 0);
    table
        .get(&(seeds.to_owned(), name.to_owned()))
        .and_then(Weak::upgrade)
}

/// The connection configuration `seeds` names: a URL (it has "://") is one
/// server, anything else a comma-separated list of a cluster's seed nodes.
fn config_of(seeds: &str) -> Result<RedisConfig, FarError> {
    let bad = |source| FarError::BadSeeds {
        seeds: seeds.to_owned(),
        source,
    };
    let s = seeds.trim();
    if s.is_empty() {
        return Err(bad(ConfigError::NoSeeds));
    }
    if s.contains("://") {
        return Ok(RedisConfig::single(s));
    }
    let nodes: Vec<&str> = s.split(',').map(str::trim).collect();
    if let Some(empty) = nodes.iter().position(|n| n.is_empty()) {
        return Err(bad(ConfigError::BadAddress {
            addr: s.to_owned(),
            why: format!("seed {} of {} is empty", empty + 1, nodes.len()),
        }));
    }
    if let Some(n) = nodes.iter().find(|n| !n.contains(':')) {
        return Err(bad(ConfigError::BadAddress {
            addr: (*n).to_owned(),
            why: "a seed node is host:port".into(),
        }));
    }
    Ok(RedisConfig::cluster(&nodes))
}

/// A manager for `seeds`, waiting for `replicas` replicas (0: none) up to
/// `wait_ms` on the writes of dataspaces that record no wait of their own.
fn manager_for(
    seeds: &str,
    name: &str,
    replicas: u32,
    wait_ms: u32,
) -> Result<RedisManager, FarError> {
    let mut config = config_of(seeds)?;
    if replicas > 0 {
        if wait_ms == 0 {
            return Err(FarError::NoWaitTime {
                name: name.into(),
                replicas,
            });
        }
        config = config.with_replica_wait(replicas, Duration::from_millis(wait_ms.into()));
    }
    RedisManager::new(config).map_err(|source| match source {
        ConfigError::NoReplicasToWaitFor | ConfigError::WaitBeyondResponse { .. } => {
            FarError::BadWait {
                name: name.into(),
                replicas,
                wait_ms,
                source,
            }
        }
        source => FarError::BadSeeds {
            seeds: seeds.into(),
            source,
        },
    })
}

/// Makes sure far dataspace `name` exists, at least `len` bytes long
/// (`len` 0: it must exist; otherwise it is created with `len` zero bytes
/// if missing, recording a wait for `replicas` replicas if that is > 0).
fn ensure(
    manager: &RedisManager,
    seeds: &str,
    name: &str,
    len: u64,
    replicas: u32,
    wait_ms: u32,
) -> Result<(), FarError> {
    let id = DataspaceId::Name(name.into());
    let missing = || FarError::Missing {
        name: name.into(),
        seeds: seeds.into(),
    };
    let identify = || match manager.identify(&id) {
        Ok(identity) => Ok(Some(identity.len)),
        Err(IdentifyError::NoSuch(_)) => Ok(None),
        Err(source) => Err(FarError::Identify {
            name: name.into(),
            seeds: seeds.into(),
            source,
        }),
    };
    let actual = match identify()? {
        Some(actual) => actual,
        None if len == 0 => return Err(missing()),
        None => {
            let created = if replicas > 0 {
                let wait = Duration::from_millis(wait_ms.into());
                manager.create_with_replica_wait(name, len, replicas, wait)
            } else {
                manager.create(Some(name.as_ref()), len)
            };
            match created {
                Ok(_) => return Ok(()),
                // Made meanwhile by another process: check it as any other.
                Err(CreateError::Exists(_)) => identify()?.ok_or_else(missing)?,
                Err(source) => {
                    return Err(FarError::Create {
                        name: name.into(),
                        seeds: seeds.into(),
                        source,
                    })
                }
            }
        }
    };
    if actual < len {
        return Err(FarError::Short {
            name: name.into(),
            seeds: seeds.into(),
            actual,
            wanted: len,
        });
    }
    Ok(())
}

/// Maps far dataspace `name` kept in Redis at `seeds` as a region of its
/// whole length; `len` 0 opens an existing one, more creates it with `len`
/// zero bytes if missing (with a wait for `replicas` replicas, up to
/// `wait_ms`, recorded in it if `replicas` > 0) or checks that it has at
/// least `len`. See `include/pagepilot.h`.
///
/// # Safety
/// `seeds`, `name` and `policy` must be NULL or NUL-terminated strings;
/// `err` must be NULL or writable for `errlen` bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pp_map_far(
    seeds: *const c_char,
    name: *const c_char,
    len: usize,
    replicas: c_uint,
    wait_ms: c_uint,
    budget_bytes: usize,
    policy: *const c_char,
    err: *mut c_char,
    errlen: usize,
) -> *mut pp_region {
    guard_region(err, errlen, || {
        // SAFETY: forwarded from the caller's contract.
        let seeds = unsafe { str_arg(seeds, "seeds")? };
        // SAFETY: as above.
        let name = unsafe { str_arg(name, "name")? };
        // SAFETY: as above.
        let policy = unsafe { str_arg(policy, "policy")? };
        check_name(&name).map_err(FarError::BadName)?;
        let manager = Arc::new(manager_for(&seeds, &name, replicas, wait_ms)?);
        {
            // Checked and claimed under one lock: of two threads mapping
            // the name at once, one is refused.
            let mut table = mapped().lock().unwrap_or_else(|p| p.into_inner());
            table.retain(|_, m| m.strong_count() > 0);
            let key = (seeds.clone(), name.clone());
            if table.contains_key(&key) {
                return Err(FarError::Busy { name, seeds }.into());
            }
            table.insert(key, Arc::downgrade(&manager));
        }
        // From here the claim lasts as long as `manager`: the region's, or
        // dropped with it on failure.
        ensure(&manager, &seeds, &name, len as u64, replicas, wait_ms)?;
        let id = DataspaceId::Name(name.clone());
        let attachment = Attachment::whole(manager, id);
        let opts = RegionOptions::new(Backing::Dataspaces(vec![attachment]), budget_bytes, &policy);
        Region::map(opts).map_err(|e| match e {
            // The manager's refusal, said of the dataspace rather than of
            // "attachment 0".
            MapError::Attach { source, .. } => FarError::Open {
                name,
                seeds,
                source,
            }
            .into(),
            e => CallError::Map(e),
        })
    })
}

/// Deletes far dataspace `name` kept in Redis at `seeds`: 0, or -errno
/// with a message in `err` (-ENOENT: no such dataspace; -EBUSY: mapped by
/// this process; -EINVAL: bad or NULL seeds or name; a failed request's,
/// e.g. -ETIMEDOUT).
///
/// # Safety
/// `seeds` and `name` must be NULL or NUL-terminated strings; `err` must be
/// NULL or writable for `errlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn pp_delete_far(
    seeds: *const c_char,
    name: *const c_char,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard_status(err, errlen, || {
        // SAFETY: forwarded from the caller's contract.
        let seeds = unsafe { str_arg(seeds, "seeds") }?;
        // SAFETY: as above.
        let name = unsafe { str_arg(name, "name") }?;
        Ok(delete(&seeds, &name)?)
    })
}

/// Deletes far dataspace `name` on `seeds`: through the manager of this
/// process's mapping of it if there is one (which refuses while mapped).
fn delete(seeds: &str, name: &str) -> Result<(), FarError> {
    check_name(name).map_err(FarError::BadName)?;
    let manager = match mapped_manager(seeds, name) {
        Some(m) => m,
        None => Arc::new(manager_for(seeds, name, 0, 0)?),
    };
    manager
        .delete(&DataspaceId::Name(name.into()))
        .map_err(|source| match source {
            DeleteError::NoSuch(_) => FarError::Missing {
                name: name.into(),
                seeds: seeds.into(),
            },
            source => FarError::Delete {
                name: name.into(),
                seeds: seeds.into(),
                source,
            },
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{CStr, CString};

    /// `pp_map_far`'s errno and message (no server needed: refused before
    /// any request).
    fn refused(
        seeds: Option<&str>,
        name: Option<&str>,
        replicas: u32,
        wait_ms: u32,
    ) -> (c_int, String) {
        let seeds = seeds.map(|s| CString::new(s).unwrap());
        let name = name.map(|s| CString::new(s).unwrap());
        let policy = CString::new("clock").unwrap();
        let mut err = [0 as c_char; 1024];
        let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
        // SAFETY: NUL-terminated strings or NULL; err writable for its length.
        let r = unsafe {
            pp_map_far(
                ptr(&seeds),
                ptr(&name),
                4096,
                replicas,
                wait_ms,
                16 * 4096,
                policy.as_ptr(),
                err.as_mut_ptr(),
                err.len(),
            )
        };
        assert!(r.is_null());
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap();
        // SAFETY: the call NUL-terminated its message.
        let msg = unsafe { CStr::from_ptr(err.as_ptr()) };
        (errno, msg.to_string_lossy().into_owned())
    }

    #[test]
    fn test_bad_seeds_names_and_waits_are_refused_before_any_request() {
        let ok = "127.0.0.1:1";
        for (seeds, name, replicas, wait, needles) in [
            (Some(""), Some("x"), 0, 0, vec!["bad Redis seeds \"\""]),
            (
                Some("a:1,,b:2"),
                Some("x"),
                0,
                0,
                vec!["seed 2 of 3 is empty"],
            ),
            (
                Some("localhost"),
                Some("x"),
                0,
                0,
                vec!["\"localhost\"", "host:port"],
            ),
            (
                Some(ok),
                Some("a/b"),
                0,
                0,
                vec!["\"a/b\"", "ASCII letters"],
            ),
            (Some(ok), Some(""), 0, 0, vec!["empty"]),
            (Some(ok), Some("x"), 1, 0, vec!["\"x\"", "wait_ms > 0"]),
            (
                Some(ok),
                Some("x"),
                1,
                60_000,
                vec!["\"x\"", "reply timeout"],
            ),
            (None, Some("x"), 0, 0, vec!["seeds is NULL"]),
            (Some(ok), None, 0, 0, vec!["name is NULL"]),
        ] {
            let (errno, msg) = refused(seeds, name, replicas, wait);
            assert_eq!(errno, libc::EINVAL, "{seeds:?} {name:?}: {msg}");
            for n in needles {
                assert!(msg.contains(n), "{msg:?} lacks {n:?}");
            }
        }
    }

    #[test]
    fn test_delete_refuses_bad_names_and_seeds() {
        let mut err = [0 as c_char; 1024];
        let (seeds, name) = (CString::new("a:1").unwrap(), CString::new("../x").unwrap());
        // SAFETY: NUL-terminated strings; err writable for its length.
        let rc =
            unsafe { pp_delete_far(seeds.as_ptr(), name.as_ptr(), err.as_mut_ptr(), err.len()) };
        // SAFETY: NUL-terminated by the call.
        let msg = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy();
        assert_eq!(rc, -libc::EINVAL, "{msg}");
        assert!(msg.contains("\"../x\""), "{msg}");
        let (seeds, name) = (CString::new("").unwrap(), CString::new("x").unwrap());
        // SAFETY: as above.
        let rc =
            unsafe { pp_delete_far(seeds.as_ptr(), name.as_ptr(), err.as_mut_ptr(), err.len()) };
        assert_eq!(rc, -libc::EINVAL);
    }
}
