//! `pagepilot doctor`: what this process may use of what the pager needs,
//! one check each, with the exact fix where one fails.

use serde::Serialize;

use crate::sys::{self, OpenError, UffdAccess};

#[path = "doctor_folios.rs"]
mod folios;
#[path = "doctor_footprint.rs"]
mod footprint;

/// How a check ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Available.
    Ok,
    /// Available with a limit, or not needed by every use.
    Warn,
    /// Missing.
    Fail,
}

/// One check.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// How it ended.
    pub state: State,
    /// What was found.
    pub detail: String,
    /// What to do about a warning or a failure.
    pub fix: Option<String>,
}

/// Every check, and whether a region can be mapped at all.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The checks, in the order printed.
    pub checks: Vec<Check>,
    /// How a region's userfaultfd would be opened (none: no region can be
    /// mapped by this user).
    pub uffd_access: Option<UffdAccess>,
}

impl Report {
    /// Whether this user can map a region.
    pub fn can_map(&self) -> bool {
        self.uffd_access.is_some()
    }
}

/// The value of field `name` in a `/proc/<pid>/status` text, its unit
/// left on (`"1200 kB"`).
fn status_field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

fn check(name: &'static str, state: State, detail: String, fix: Option<String>) -> Check {
    Check {
        name,
        state,
        detail,
        fix,
    }
}

/// Runs every check, for the file or directory `path` if given (where data
/// files will live).
pub fn run(path: Option<&std::path::Path>) -> Report {
    let mut checks = Vec::new();
    let want = sys::FEATURE_MINOR_SHMEM
        | sys::FEATURE_WP_SHMEM
        | sys::FEATURE_SIGBUS
        | sys::FEATURE_POISON
        | sys::FEATURE_MOVE;
    let access = match sys::Uffd::open(want) {
        Ok((_, got, access)) => {
            let (state, fix) = match access {
                UffdAccess::UserModeOnly => (
                    State::Warn,
                    Some(
                        "the kernel's own accesses to a page not mapped yet (read(2) into a \
                         region) fail with EFAULT: prefault such buffers (pp_prefault), or ask \
                         an administrator for /dev/userfaultfd"
                            .to_string(),
                    ),
                ),
                _ => (State::Ok, None),
            };
            checks.push(check("userfaultfd", state, format!("{access:?}"), fix));
            let named = [
                (sys::FEATURE_MINOR_SHMEM, "minor faults on shmem", true),
                (sys::FEATURE_WP_SHMEM, "write-protect on shmem", true),
                (
                    sys::FEATURE_SIGBUS,
                    "SIGBUS (faulting-thread service)",
                    false,
                ),
                (sys::FEATURE_POISON, "UFFDIO_POISON", false),
                (sys::FEATURE_MOVE, "UFFDIO_MOVE", false),
            ];
            let missing: Vec<&str> = named
                .iter()
                .filter(|(bit, ..)| got & bit == 0)
                .map(|(_, name, _)| *name)
                .collect();
            let needed = named.iter().any(|(bit, _, need)| *need && got & bit == 0);
            let state = match (needed, missing.is_empty()) {
                (true, _) => State::Fail,
                (false, true) => State::Ok,
                (false, false) => State::Warn,
            };
            let detail = if missing.is_empty() {
                "every feature".to_string()
            } else {
                format!("missing: {}", missing.join(", "))
            };
            let fix = needed.then(|| "Linux 6.6 or later".to_string());
            checks.push(check("userfaultfd features", state, detail, fix));
            (!needed).then_some(access)
        }
        Err(e) => {
            let fix = match &e {
                OpenError::Denied { .. } => Some(e.to_string()),
                OpenError::Api(_) => Some("Linux 6.6 or later".to_string()),
            };
            checks.push(check("userfaultfd", State::Fail, "refused".into(), fix));
            None
        }
    };
    checks.push(sysctl_check(access));
    checks.push(device_check());
    checks.push(seccomp_check(access));
    checks.push(io_uring_check());
    if let Some(p) = path {
        checks.extend(file_system_checks(p));
    }
    checks.push(cgroup_check());
    checks.push(folios::folios_check());
    checks.push(footprint::footprint_check(access.is_some()));
    Report {
        checks,
        uffd_access: access,
    }
}

fn sysctl_check(access: Option<UffdAccess>) -> Check {
    let name = "vm.unprivileged_userfaultfd";
    match std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd") {
        Ok(v) if v.trim() == "1" => check(name, State::Ok, "1".into(), None),
        Ok(v) if access == Some(UffdAccess::Syscall) => check(
            name,
            State::Ok,
            format!(
                "{} (not needed: this user may call userfaultfd(2))",
                v.trim()
            ),
            None,
        ),
        Ok(v) => check(
            name,
            State::Warn,
            v.trim().to_string(),
            Some(
                "only root and CAP_SYS_PTRACE get userfaultfd(2) with every feature: \
                 `sysctl -w vm.unprivileged_userfaultfd=1` allows every user, or grant \
                 /dev/userfaultfd to a group"
                    .into(),
            ),
        ),
        Err(e) => check(name, State::Warn, e.to_string(), None),
    }
}

fn device_check() -> Check {
    let name = "/dev/userfaultfd";
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/userfaultfd")
    {
        Ok(_) => check(name, State::Ok, "readable and writable".into(), None),
        Err(e) => check(
            name,
            State::Warn,
            e.to_string(),
            Some(
                "an administrator grants it to a group: \
                 `chgrp pagepilot /dev/userfaultfd && chmod 660 /dev/userfaultfd`, kept \
                 across boots by packaging/99-pagepilot-userfaultfd.rules (README, \
                 \"Ordinary users\")"
                    .into(),
            ),
        ),
    }
}

fn seccomp_check(access: Option<UffdAccess>) -> Check {
    let name = "seccomp";
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mode = status_field(&status, "Seccomp").unwrap_or("?");
    // User-mode-only is open to every user: refused too, a filter is the likely cause.
    let state = if access.is_none() {
        State::Fail
    } else {
        State::Warn
    };
    match mode {
        "0" => check(name, State::Ok, "no filter".into(), None),
        m => check(
            name,
            state,
            format!("mode {m}"),
            Some(
                "a seccomp filter is in force (containers have one by default): if it \
                 blocks userfaultfd, allow the system call in the container's profile"
                    .into(),
            ),
        ),
    }
}

fn io_uring_check() -> Check {
    let name = "io_uring";
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|_| "0".into());
    match crate::ring::Ring::new() {
        Ok(_) => check(
            name,
            State::Ok,
            format!("available (kernel.io_uring_disabled = {disabled})"),
            None,
        ),
        Err(e) => check(
            name,
            State::Warn,
            format!("{e} (kernel.io_uring_disabled = {disabled})"),
            Some(
                "read-ahead windows are then read by reader threads: \
                 `sysctl -w kernel.io_uring_disabled=0` enables io_uring"
                    .into(),
            ),
        ),
    }
}

fn file_system_checks(path: &std::path::Path) -> Vec<Check> {
    let opened = if path.is_dir() {
        sys::tmpfile_direct(path)
    } else {
        sys::open_direct(path, false, false)
    };
    match opened {
        Err(e) => vec![check(
            "data files",
            State::Fail,
            format!("{}: {e}", path.display()),
            None,
        )],
        Ok((file, direct)) => {
            let direct_check = if direct {
                check("direct I/O", State::Ok, path.display().to_string(), None)
            } else {
                check(
                    "direct I/O",
                    State::Warn,
                    format!("{}: refused by the file system", path.display()),
                    Some("cold data is then cached twice (page cache and region)".into()),
                )
            };
            let nowait = match sys::supports_nowait(&file) {
                Ok(true) => check("RWF_NOWAIT", State::Ok, "supported".into(), None),
                Ok(false) => check(
                    "RWF_NOWAIT",
                    State::Warn,
                    "not supported by the file system".into(),
                    None,
                ),
                Err(e) => check("RWF_NOWAIT", State::Warn, e.to_string(), None),
            };
            vec![direct_check, nowait]
        }
    }
}

fn cgroup_check() -> Check {
    let name = "memory cgroup";
    let v1 = std::path::Path::new("/sys/fs/cgroup/memory");
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap_or_default();
    let dir = if v1.is_dir() {
        Some(v1)
    } else if v2.split_whitespace().any(|c| c == "memory") {
        Some(std::path::Path::new("/sys/fs/cgroup"))
    } else {
        None
    };
    match dir {
        None => check(
            name,
            State::Warn,
            "no memory controller".into(),
            Some("the benchmarks' kernel baselines need it".into()),
        ),
        Some(d) if sys::writable(d) => check(name, State::Ok, d.display().to_string(), None),
        Some(d) => check(
            name,
            State::Warn,
            format!("{}: not writable by this user", d.display()),
            Some("the benchmarks' kernel baselines need root".into()),
        ),
    }
}
