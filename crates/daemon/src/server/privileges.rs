//! Dropping root once the socket listens. The daemon needs root for one
//! thing only: creating its socket in `/run`. After that it writes dead
//! clients' pages through descriptors the clients passed (a write through
//! a descriptor checks nothing about the writer) and holds clients with
//! `pidfd_open` (no capability either), so it keeps nothing: not the user
//! (a root writer keeps the setuid and setgid bits of a file it writes,
//! having `CAP_FSETID`, so a client that passed a descriptor of a
//! group-writable setuid-root file would get a setuid-root file with its
//! own contents), not one capability, and it can gain none back
//! (`PR_SET_NO_NEW_PRIVS`: no setuid binary, no file capability).
//!
//! Capabilities, the bounding set and `no_new_privs` are per thread: the
//! drop is refused once a second thread runs, since that thread would keep
//! them. The server starts threads only in [`super::Server::run`].

use std::ffi::CString;
use std::fmt;
use std::mem::MaybeUninit;

use rustix::process::{geteuid, getppid, Signal};
use rustix::thread::{
    capabilities, capability_is_in_bounding_set, clear_ambient_capability_set, no_new_privs,
    remove_capability_from_bounding_set, set_capabilities, set_no_new_privs, CapabilitySet,
    CapabilitySets,
};

/// Whom the daemon runs as once its socket listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunAs {
    /// The same user and groups (uid 0 stays uid 0), every capability
    /// dropped all the same.
    Unchanged,
    /// This user, when started as root: its uid and primary group, no
    /// supplementary group. A user whose uid is 0 (`root`) is
    /// [`RunAs::Unchanged`]. Ignored when not started as root (there is
    /// nothing to drop to, and no right to change user).
    User {
        /// The user's name, looked up with `getpwnam_r`.
        name: String,
    },
}

/// Who the process is after [`drop_privileges`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identity {
    /// It became this user (real, effective and saved ids).
    Became {
        /// The user's name.
        name: String,
    },
    /// It is still root (uid 0), as asked ([`RunAs::Unchanged`], or a user
    /// whose uid is 0), with no capability.
    KeptRoot,
    /// It was not started as root: its ids are left, a user asked for is
    /// ignored.
    NotRoot {
        /// The user asked for, if any.
        ignored: Option<String>,
    },
}

/// What became of the capability bounding set (the most a later `execve`
/// could grant).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundingSet {
    /// Empty.
    Cleared,
    /// Left as it was: emptying it needs `CAP_SETPCAP`, which a process not
    /// started as root (or a unit that withheld it) lacks. Inert all the
    /// same: with `no_new_privs` an `execve` grants nothing beyond the
    /// permitted set, which is empty.
    Left {
        /// Capabilities still in it.
        count: u32,
    },
}

/// What [`drop_privileges`] did, for one log line ([`fmt::Display`]). The
/// effective, permitted, inheritable and ambient capability sets are empty
/// and `no_new_privs` is set whenever it returns this.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The effective user id now (real and saved too when it changed).
    pub uid: u32,
    /// The effective group id now (real and saved too when it changed).
    pub gid: u32,
    /// Whether the user changed, stayed root, or was never root.
    pub identity: Identity,
    /// The bounding set.
    pub bounding_set: BoundingSet,
}

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.identity {
            Identity::Became { name } => write!(
                f,
                "running as {name} (uid {}, gid {}, no supplementary groups)",
                self.uid, self.gid
            )?,
            Identity::KeptRoot => write!(f, "running as root (uid 0, gid {})", self.gid)?,
            Identity::NotRoot { ignored } => {
                write!(f, "running as uid {}, gid {}", self.uid, self.gid)?;
                if let Some(name) = ignored {
                    write!(f, " (not started as root: --user {name} ignored)")?;
                }
            }
        }
        write!(f, "; no capabilities")?;
        match self.bounding_set {
            BoundingSet::Cleared => write!(f, ", bounding set empty")?,
            BoundingSet::Left { count } => {
                write!(f, ", {count} capabilities left in the bounding set")?
            }
        }
        write!(f, "; no_new_privs set")
    }
}

/// A step of [`drop_privileges`], named in its errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// `prctl(PR_SET_NO_NEW_PRIVS, 1)`.
    NoNewPrivs,
    /// `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)`.
    AmbientCapabilities,
    /// `prctl(PR_CAPBSET_DROP, cap)`.
    BoundingSet {
        /// The capability's number.
        cap: u32,
    },
    /// `setgroups(0, NULL)`.
    SetGroups,
    /// `setresgid(gid, gid, gid)`.
    SetGid {
        /// The group.
        gid: u32,
    },
    /// `setresuid(uid, uid, uid)`.
    SetUid {
        /// The user.
        uid: u32,
    },
    /// `capset` with every set empty.
    ClearCapabilities,
    /// `prctl(PR_SET_PDEATHSIG)`: the parent-death signal a supervisor set
    /// is set again (the kernel clears it when the ids change).
    ParentDeathSignal,
    /// Reading the credentials back to check them.
    ReadBack,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::NoNewPrivs => write!(f, "prctl(PR_SET_NO_NEW_PRIVS)"),
            Step::AmbientCapabilities => write!(f, "clearing the ambient capabilities"),
            Step::BoundingSet { cap } => write!(f, "prctl(PR_CAPBSET_DROP, {cap})"),
            Step::SetGroups => write!(f, "setgroups([])"),
            Step::SetGid { gid } => write!(f, "setresgid({gid})"),
            Step::SetUid { uid } => write!(f, "setresuid({uid})"),
            Step::ClearCapabilities => write!(f, "capset (every set empty)"),
            Step::ParentDeathSignal => write!(f, "prctl(PR_SET_PDEATHSIG)"),
            Step::ReadBack => write!(f, "reading the credentials back"),
        }
    }
}

/// Why privileges were not dropped. The daemon does not start: a process
/// half dropped is not run.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    /// More than one thread runs (capabilities are per thread: the others
    /// would keep theirs).
    #[error("cannot drop privileges with {threads} threads running: the others would keep their capabilities")]
    Threaded {
        /// Threads of the process.
        threads: usize,
    },
    /// The thread count could not be read from `/proc/self/status`.
    #[error("cannot count the process's threads (/proc/self/status): {0}")]
    Threads(std::io::Error),
    /// No such user.
    #[error("no user named `{name}` (--user)")]
    UnknownUser {
        /// The name asked for.
        name: String,
    },
    /// The user database could not be read.
    #[error("cannot look up the user `{name}`")]
    LookUp {
        /// The name asked for.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// Root without `CAP_SETUID` and `CAP_SETGID` cannot become another
    /// user (found before anything changed).
    #[error("cannot become {name}: root without CAP_SETUID and CAP_SETGID (a systemd unit must keep them in CapabilityBoundingSet=, with CAP_SETPCAP; or keep uid 0 with --user root)")]
    CannotChangeUser {
        /// The user asked for.
        name: String,
    },
    /// A step failed; what came before it stays done (the process must
    /// not go on).
    #[error("cannot drop privileges: {step}")]
    Failed {
        /// The step.
        step: Step,
        /// Why.
        source: std::io::Error,
    },
    /// Every step succeeded, yet the credentials read back are not the
    /// ones asked for.
    #[error("privileges remain after dropping them: {what}")]
    Remains {
        /// What remains.
        what: String,
    },
}

/// Drops what the process may do, as `run_as` says: as root with a user
/// named, becomes that user (no supplementary group, then `setresgid`,
/// `setresuid`); in every case empties the capability sets (effective,
/// permitted, inheritable, ambient, and the bounding set when the process
/// may), sets `no_new_privs`, and checks all of that by reading it back
/// (`setuid(0)` must fail after a change of user). Call it while the
/// process has one thread, before [`super::Server::run`].
pub fn drop_privileges(run_as: &RunAs) -> Result<Dropped, PrivilegeError> {
    // Before anything changes: a refusal here leaves the process as it was.
    let threads = thread_count().map_err(PrivilegeError::Threads)?;
    if threads != 1 {
        return Err(PrivilegeError::Threaded { threads });
    }
    let root = geteuid().is_root();
    let target = match run_as {
        RunAs::User { name } if root => match look_up(name)? {
            (0, _) => None,
            (uid, gid) => Some((name.clone(), uid, gid)),
        },
        _ => None,
    };
    if let Some((name, ..)) = &target {
        let effective = capabilities(None)
            .map_err(|e| PrivilegeError::Failed {
                step: Step::ReadBack,
                source: e.into(),
            })?
            .effective;
        if !effective.contains(CapabilitySet::SETUID | CapabilitySet::SETGID) {
            return Err(PrivilegeError::CannotChangeUser { name: name.clone() });
        }
    }
    // Read now: the kernel clears it when the ids change.
    let death_signal = rustix::process::parent_process_death_signal().unwrap_or(None);
    let parent = getppid();

    let failed = |step| {
        move |e: rustix::io::Errno| PrivilegeError::Failed {
            step,
            source: e.into(),
        }
    };
    set_no_new_privs(true).map_err(failed(Step::NoNewPrivs))?;
    clear_ambient_capability_set().map_err(failed(Step::AmbientCapabilities))?;
    // While still root: emptying the bounding set needs CAP_SETPCAP, which
    // the change of user takes away.
    let bounding_set = clear_bounding_set()?;
    if let Some((_, uid, gid)) = &target {
        change_ids(*uid, *gid)?;
    }
    // A change of user emptied the effective and permitted sets already
    // (unless SECBIT_KEEP_CAPS was set); the inheritable set it keeps.
    // Emptying is always allowed.
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    set_capabilities(None, none).map_err(failed(Step::ClearCapabilities))?;
    if target.is_some() {
        if let Some(signal) = death_signal {
            restore_death_signal(signal, parent)?;
        }
    }

    let (uid, gid) = check(target.as_ref().map(|(_, u, g)| (*u, *g)), bounding_set)?;
    let identity = match (target, run_as) {
        (Some((name, ..)), _) => Identity::Became { name },
        _ if root => Identity::KeptRoot,
        (None, RunAs::User { name }) => Identity::NotRoot {
            ignored: Some(name.clone()),
        },
        (None, RunAs::Unchanged) => Identity::NotRoot { ignored: None },
    };
    Ok(Dropped {
        uid,
        gid,
        identity,
        bounding_set,
    })
}

/// The process's threads, from `/proc/self/status`.
fn thread_count() -> std::io::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other("no Threads: line"))
}

/// The uid and primary gid of the user `name`.
pub(crate) fn look_up(name: &str) -> Result<(u32, u32), PrivilegeError> {
    let unknown = || PrivilegeError::UnknownUser { name: name.into() };
    let c_name = CString::new(name).map_err(|_| unknown())?;
    let mut buf = vec![0u8; 1024];
    loop {
        let mut entry = MaybeUninit::<libc::passwd>::uninit();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call: the name is a
        // NUL-terminated string, `entry` has room for a passwd, `buf` for
        // `buf.len()` bytes of its strings; getpwnam_r writes only there
        // and sets `found` to `entry` or to null.
        let rc = unsafe {
            libc::getpwnam_r(
                c_name.as_ptr(),
                entry.as_mut_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        match rc {
            0 if found.is_null() => return Err(unknown()),
            0 => {
                // SAFETY: a non-null `found` means getpwnam_r filled `entry`.
                let entry = unsafe { entry.assume_init() };
                return Ok((entry.pw_uid, entry.pw_gid));
            }
            // "Not found" as some NSS modules say it.
            libc::ENOENT | libc::ESRCH => return Err(unknown()),
            libc::ERANGE if buf.len() < 1 << 20 => buf.resize(buf.len() * 2, 0),
            errno => {
                return Err(PrivilegeError::LookUp {
                    name: name.into(),
                    source: std::io::Error::from_raw_os_error(errno),
                })
            }
        }
    }
}

/// The capability numbers the kernel knows (0 up to `cap_last_cap`),
/// found by asking: `/proc/sys` may be hidden (systemd's `ProcSubset=pid`).
fn known_capabilities() -> impl Iterator<Item = (u32, CapabilitySet)> {
    (0..64u32)
        .map(|cap| (cap, CapabilitySet::from_bits_retain(1 << cap)))
        .take_while(|&(_, set)| capability_is_in_bounding_set(set).is_ok())
}

/// Empties the bounding set if the process holds `CAP_SETPCAP`; else
/// counts what is left in it.
fn clear_bounding_set() -> Result<BoundingSet, PrivilegeError> {
    let may = capabilities(None)
        .map_err(|e| PrivilegeError::Failed {
            step: Step::ReadBack,
            source: e.into(),
        })?
        .effective
        .contains(CapabilitySet::SETPCAP);
    let mut left = 0;
    for (cap, set) in known_capabilities() {
        if !capability_is_in_bounding_set(set).unwrap_or(false) {
            continue;
        }
        if may {
            remove_capability_from_bounding_set(set).map_err(|e| PrivilegeError::Failed {
                step: Step::BoundingSet { cap },
                source: e.into(),
            })?;
        } else {
            left += 1;
        }
    }
    // Empty already counts as cleared (a unit's empty CapabilityBoundingSet=).
    Ok(if may || left == 0 {
        BoundingSet::Cleared
    } else {
        BoundingSet::Left { count: left }
    })
}

/// Becomes `uid`:`gid` with no supplementary group: groups first, then
/// the group, then the user (after which no id may change any more).
/// glibc's wrappers change every thread's ids (there is one here).
fn change_ids(uid: u32, gid: u32) -> Result<(), PrivilegeError> {
    let last = |step| PrivilegeError::Failed {
        step,
        source: std::io::Error::last_os_error(),
    };
    // SAFETY: setgroups reads no memory with a count of 0 (null list).
    if unsafe { libc::setgroups(0, std::ptr::null()) } != 0 {
        return Err(last(Step::SetGroups));
    }
    // SAFETY: setresgid takes plain integers and touches no memory.
    if unsafe { libc::setresgid(gid, gid, gid) } != 0 {
        return Err(last(Step::SetGid { gid }));
    }
    // SAFETY: setresuid takes plain integers and touches no memory.
    if unsafe { libc::setresuid(uid, uid, uid) } != 0 {
        return Err(last(Step::SetUid { uid }));
    }
    Ok(())
}

/// Sets the parent-death signal a supervisor had set (a test harness, the
/// bench) again, and sends it now if the parent died in between (the
/// signal would never come).
fn restore_death_signal(
    signal: Signal,
    parent: Option<rustix::process::Pid>,
) -> Result<(), PrivilegeError> {
    rustix::process::set_parent_process_death_signal(Some(signal)).map_err(|e| {
        PrivilegeError::Failed {
            step: Step::ParentDeathSignal,
            source: e.into(),
        }
    })?;
    if getppid() != parent {
        let _ = rustix::process::kill_process(rustix::process::getpid(), signal);
    }
    Ok(())
}

/// Reads the credentials back: every capability set empty, the bounding
/// set as reported, `no_new_privs` set; after a change to `target`, every
/// id is the target's, no supplementary group, and `setuid(0)` and
/// `setgid(0)` fail. Returns the effective uid and gid.
fn check(target: Option<(u32, u32)>, bounding: BoundingSet) -> Result<(u32, u32), PrivilegeError> {
    let remains = |what: String| PrivilegeError::Remains { what };
    let caps = capabilities(None).map_err(|e| PrivilegeError::Failed {
        step: Step::ReadBack,
        source: e.into(),
    })?;
    // The ambient set is not read: the kernel keeps it within permitted
    // and inheritable, both empty.
    for (name, set) in [
        ("effective", caps.effective),
        ("permitted", caps.permitted),
        ("inheritable", caps.inheritable),
    ] {
        if !set.is_empty() {
            return Err(remains(format!("{name} capabilities {:#x}", set.bits())));
        }
    }
    if bounding == BoundingSet::Cleared {
        if let Some((cap, _)) =
            known_capabilities().find(|&(_, s)| capability_is_in_bounding_set(s).unwrap_or(true))
        {
            return Err(remains(format!("capability {cap} in the bounding set")));
        }
    }
    if !no_new_privs().unwrap_or(false) {
        return Err(remains("no_new_privs is not set".into()));
    }
    let (uids, gids) = resids();
    if let Some((uid, gid)) = target {
        if uids != [uid; 3] || gids != [gid; 3] {
            return Err(remains(format!("uids {uids:?}, gids {gids:?}")));
        }
        // SAFETY: getgroups with a count of 0 only returns the count.
        let groups = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
        if groups != 0 {
            return Err(remains(format!("{groups} supplementary groups")));
        }
        // The proof: the way back is closed. Should it open, the process
        // is root again and the caller aborts.
        // SAFETY: setuid and setgid take plain integers, touch no memory.
        if unsafe { libc::setuid(0) } == 0 {
            return Err(remains("setuid(0) succeeded".into()));
        }
        // SAFETY: as above.
        if unsafe { libc::setgid(0) } == 0 {
            return Err(remains("setgid(0) succeeded".into()));
        }
    }
    Ok((uids[1], gids[1]))
}

/// The real, effective and saved user ids, and group ids.
fn resids() -> ([u32; 3], [u32; 3]) {
    let (mut u, mut g) = ([0u32; 3], [0u32; 3]);
    // SAFETY: each pointer is to a live u32 of this frame; the calls only
    // write there and cannot fail with valid pointers.
    unsafe {
        libc::getresuid(&mut u[0], &mut u[1], &mut u[2]);
        libc::getresgid(&mut g[0], &mut g[1], &mut g[2]);
    }
    (u, g)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_line(key: &str) -> String {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_owned()))
            .unwrap()
    }

    /// The test harness runs tests on threads of their own: the drop is
    /// refused before it changes anything (the credentials of this
    /// process stay as they are; the drops themselves are tested in child
    /// processes, tests/privileges).
    #[test]
    fn a_process_with_several_threads_is_refused_and_left_as_it_was() {
        let before = (
            status_line("Uid:"),
            status_line("CapEff:"),
            status_line("NoNewPrivs:"),
        );
        let err = drop_privileges(&RunAs::User {
            name: "nobody".into(),
        })
        .unwrap_err();
        assert!(
            matches!(err, PrivilegeError::Threaded { threads } if threads > 1),
            "{err}"
        );
        let after = (
            status_line("Uid:"),
            status_line("CapEff:"),
            status_line("NoNewPrivs:"),
        );
        assert_eq!(before, after);
    }

    #[test]
    fn users_are_looked_up_by_name() {
        assert_eq!(look_up("root").unwrap(), (0, 0));
        assert!(matches!(
            look_up("no-such-user-pagepilot"),
            Err(PrivilegeError::UnknownUser { .. })
        ));
        assert!(matches!(
            look_up("nul\0inside"),
            Err(PrivilegeError::UnknownUser { .. })
        ));
    }

    #[test]
    fn the_log_line_says_who_and_what_is_left() {
        let d = Dropped {
            uid: 65534,
            gid: 65534,
            identity: Identity::Became {
                name: "nobody".into(),
            },
            bounding_set: BoundingSet::Cleared,
        };
        assert_eq!(
            d.to_string(),
            "running as nobody (uid 65534, gid 65534, no supplementary groups); no capabilities, bounding set empty; no_new_privs set"
        );
        let d = Dropped {
            uid: 1000,
            gid: 1000,
            identity: Identity::NotRoot {
                ignored: Some("nobody".into()),
            },
            bounding_set: BoundingSet::Left { count: 41 },
        };
        assert!(d.to_string().contains("--user nobody ignored"), "{d}");
        assert!(d.to_string().contains("41 capabilities left"), "{d}");
    }
}
