//! `pagepilot run` for an ordinary user (`nobody`): a bad rule refused
//! before the program starts, naming the rule; in a group granted
//! `/dev/userfaultfd` (as `packaging/99-pagepilot-userfaultfd.rules` does),
//! the program's file taken over and paged, with the same output and file
//! as without pagepilot; with userfaultfd user-mode only (the machine's
//! default), the file left to the kernel with the reason logged and the
//! program unharmed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pagepilot_testkit::device::DeviceGranted;

/// The group the device is granted to in these tests.
const DEVICE_GROUP: u32 = 64_998;

/// A program that writes a pattern through a shared mapping of a 2 MiB
/// file (three passes), reads it back and prints a checksum.
const PROGRAM: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    size_t len = 2u << 20;
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)len)) { perror("file"); return 1; }
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    unsigned long sum = 0;
    for (int pass = 1; pass <= 3; pass++)
        for (size_t i = 0; i < len; i += 512) { p[i] = (unsigned char)(i / 512 * pass); sum += p[i]; }
    printf("sum %lu\n", sum);
    return 0;
}
"#;

/// A fresh directory every user may write in, under the build's scratch
/// directory (whose parents every user may enter).
fn open_dir(name: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("run-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// The mapping program, compiled into `dir`.
fn program(dir: &Path) -> PathBuf {
    let src = dir.join("mapper.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let bin = dir.join("mapper");
    let out = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("cc");
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// `args` as `nobody`, in group `group` only (none: no group).
fn as_nobody(group: Option<u32>, args: &[&std::ffi::OsStr]) -> Output {
    let groups = group.map_or("--clear-groups".to_string(), |g| format!("--groups={g}"));
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", &groups])
        .args(args)
        .output()
        .expect("setpriv")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs the mapping program as `nobody` plainly and under `pagepilot run`
/// (group `group`); returns the log after checking that output and file
/// are the same both ways.
fn plain_and_paged(name: &str, group: Option<u32>) -> String {
    let dir = open_dir(name);
    let bin = program(&dir);
    let log = dir.join("run.log");
    let plain = as_nobody(group, &[bin.as_os_str(), dir.join("plain.dat").as_os_str()]);
    assert!(plain.status.success(), "plain: {}", text(&plain.stderr));
    let pp = pagepilot_testkit::run::pagepilot_beside_interposer();
    let paged = as_nobody(
        group,
        &[
            pp.as_os_str(),
            "run".as_ref(),
            "--budget".as_ref(),
            "256K".as_ref(),
            "--log".as_ref(),
            log.as_os_str(),
            "--".as_ref(),
            bin.as_os_str(),
            dir.join("paged.dat").as_os_str(),
        ],
    );
    assert!(
        paged.status.success(),
        "under pagepilot run: {}",
        text(&paged.stderr)
    );
    assert_eq!(text(&plain.stdout), text(&paged.stdout));
    let (a, b) = (
        std::fs::read(dir.join("plain.dat")).unwrap(),
        std::fs::read(dir.join("paged.dat")).unwrap(),
    );
    assert!(a == b, "the files differ");
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    log
}

#[test]
fn a_bad_rule_is_refused_before_the_program_starts_naming_the_rule() {
    let dir = open_dir("bad-rule");
    let marker = dir.join("started");
    let pp = pagepilot_testkit::run::pagepilot_beside_interposer();
    for (args, named) in [
        (vec!["--map", "*.db=lfu9"], "rule \"*.db=lfu9\""),
        (vec!["--map", "nopolicy"], "rule \"nopolicy\""),
        (vec!["--map", "*.db=lru:12Q"], "budget \"12Q\""),
        (vec!["--policy", "lfu9"], "--policy \"lfu9\""),
    ] {
        let mut cmd = vec![pp.as_os_str(), "run".as_ref()];
        cmd.extend(args.iter().map(std::ffi::OsStr::new));
        cmd.extend(["--".as_ref(), "touch".as_ref(), marker.as_os_str()]);
        let out = as_nobody(None, &cmd);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(
            text(&out.stderr).contains(named),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(!marker.exists(), "{args:?}: the program started");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_ordinary_user_granted_userfaultfd_gets_the_file_paged_with_the_same_results() {
    let _device = DeviceGranted::grant(Some(DEVICE_GROUP));
    let log = plain_and_paged("granted", Some(DEVICE_GROUP));
    let took = log
        .lines()
        .filter(|l| l.contains(": took ") && l.contains("paged.dat"))
        .count();
    assert_eq!(took, 1, "{log}");
    let end = log
        .lines()
        .find(|l| l.contains(": end "))
        .unwrap_or_else(|| panic!("{log}"));
    let read: u64 = end
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pages_read="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{end}"));
    // 512 pages, three passes, 64 frames: paged in more than once.
    assert!(read > 512, "{end}");
}

#[test]
fn an_ordinary_user_with_user_mode_only_userfaultfd_runs_the_program_as_without() {
    let _device = DeviceGranted::grant(None);
    let log = plain_and_paged("user-mode", None);
    assert!(!log.contains(": took "), "{log}");
    let left = log
        .lines()
        .find(|l| l.contains(": left ") && l.contains("paged.dat"));
    assert!(left.is_some_and(|l| l.contains("user-mode only")), "{log}");
}
