//! A process with no way into userfaultfd: run as `nobody` (so
//! `/dev/userfaultfd`, root's only by default, does not open) under a seccomp
//! filter that answers `userfaultfd(2)` with `EPERM`, as a container's default
//! profile does. Shared by the C API's and the CLI's tests (`#[path]`).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};

/// `program` run as `nobody`, with no group, `userfaultfd(2)` refused; add
/// its arguments to the command.
pub fn as_nobody_without_userfaultfd(program: &Path) -> Command {
    let rules = [(libc::SYS_userfaultfd, vec![])].into_iter().collect();
    let arch = std::env::consts::ARCH.try_into().expect("a seccomp target");
    let filter: BpfProgram =
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(1), arch)
            .and_then(TryInto::try_into)
            .expect("the filter compiles");
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(program)
        .env_remove("LD_LIBRARY_PATH");
    // SAFETY: between fork and exec the child only makes apply_filter's
    // prctl and seccomp calls, on a filter built before the fork; its error
    // is built without allocating.
    unsafe {
        cmd.pre_exec(move || {
            seccompiler::apply_filter(&filter).map_err(|_| std::io::Error::last_os_error())
        })
    };
    cmd
}

/// Asserts that a refusal of userfaultfd names each way in, what it
/// answered here, and how to open it.
pub fn assert_names_every_way_and_its_fix(message: &str) {
    for part in [
        "userfaultfd(2): Operation not permitted",
        "vm.unprivileged_userfaultfd=1",
        "/dev/userfaultfd: Permission denied",
        "chmod 660 /dev/userfaultfd",
        "packaging/99-pagepilot-userfaultfd.rules",
        "user mode only: Operation not permitted",
        "in the container's profile)",
    ] {
        assert!(message.contains(part), "{part:?} missing in: {message}");
    }
}
