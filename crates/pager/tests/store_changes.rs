//! The backing store changes or fails under a mapped region
//! (docs/lifecycle.md): a file truncated by another process raises SIGBUS
//! beyond its new end, in the faulting thread, as `MAP_SHARED` does, and
//! keeps every byte below it; a store whose reads fail (a device-mapper
//! `error` target under ext4) raises SIGBUS in the faulting thread while
//! the other threads go on. Each scenario runs in its own process, whose
//! SIGBUS handler reports what it saw and exits with [`CAUGHT`].

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst,
};
use std::time::Duration;

use common::*;
use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, PAGE_SIZE};

const MIB: usize = 1 << 20;
const LEN: usize = 16 * MIB;
/// The exit code of a scenario whose SIGBUS handler ran.
const CAUGHT: i32 = 42;
const WATCHDOG: Duration = Duration::from_secs(30);

/// What the scenario's SIGBUS handler reports.
static REGION: AtomicPtr<Region> = AtomicPtr::new(std::ptr::null_mut());
static FAULTING_TID: AtomicI32 = AtomicI32::new(0);
static OTHER_READS: AtomicU64 = AtomicU64::new(0);
static OTHER_BAD: AtomicU64 = AtomicU64::new(0);
static EXPECTED_ADDR: AtomicUsize = AtomicUsize::new(0);

extern "C" fn report_sigbus(_: i32, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let region = REGION.load(SeqCst);
    // The process ends here: the usual rules of signal handlers are bent
    // for a report (the region's lock is not held by this thread).
    // SAFETY: the region outlives the scenario, which ends in this handler.
    let stats = unsafe { region.as_ref() }
        .map(Region::stats)
        .unwrap_or_default();
    println!(
        "SIGBUS at_expected={} in_faulting_thread={} read_errors={} signalled_faults={} other_reads={} other_bad={}",
        addr == EXPECTED_ADDR.load(SeqCst),
        tid == FAULTING_TID.load(SeqCst),
        stats.read_errors,
        stats.signalled_faults,
        OTHER_READS.load(SeqCst),
        OTHER_BAD.load(SeqCst),
    );
    use std::io::Write;
    let _ = std::io::stdout().flush();
    // SAFETY: ends the scenario process at once.
    unsafe { libc::_exit(CAUGHT) };
}

/// Installs [`report_sigbus`]: before the region is mapped, so that the
/// faulting-thread service passes the faults it cannot serve to it.
fn install_report() {
    // SAFETY: a zeroed sigaction filled with a SA_SIGINFO handler.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        let handler: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) = report_sigbus;
        sa.sa_sigaction = handler as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        assert_eq!(libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()), 0);
    }
}

/// The value of the field `name=` in the handler's report line.
fn field<'a>(out: &'a ChildOutcome, name: &str) -> &'a str {
    let report = out
        .stdout
        .lines()
        .find_map(|l| l.find("SIGBUS ").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("no SIGBUS report: {out:?}"));
    report
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {name} in {report}"))
}

fn assert_caught(out: &ChildOutcome) {
    assert!(!out.hung(), "the scenario hung: {out:?}");
    assert_eq!(out.status.and_then(|s| s.code()), Some(CAUGHT), "{out:?}");
    assert_eq!(field(out, "at_expected"), "true", "{out:?}");
    assert_eq!(field(out, "in_faulting_thread"), "true", "{out:?}");
    assert!(
        field(out, "signalled_faults").parse::<u64>().unwrap() >= 1,
        "{out:?}"
    );
}

fn map_file(path: &Path, writable: bool, service: FaultService) -> &'static Region {
    let backing = Backing::File {
        path: path.into(),
        writable,
    };
    let region =
        Region::map(RegionOptions::new(backing, 4 * MIB, "lru").with_fault_service(service))
            .unwrap();
    let region: &'static Region = Box::leak(Box::new(region));
    REGION.store(region as *const Region as *mut Region, SeqCst);
    region
}

fn byte(region: &Region, at: usize) -> u8 {
    assert!(at < region.len());
    // SAFETY: inside the region.
    unsafe { region.as_ptr().add(at).read_volatile() }
}

fn set_byte(region: &Region, at: usize, v: u8) {
    assert!(at < region.len());
    // SAFETY: inside the region.
    unsafe { region.as_ptr().add(at).write_volatile(v) }
}

/// The file after [`truncated_file_scenario`] (the truncation and the
/// writes below the new end), computed the same way in test and scenario.
fn written_below(data: &[u8]) -> Vec<u8> {
    let mut want = data[..LEN / 2].to_vec();
    for p in (MIB..2 * MIB).step_by(PAGE_SIZE) {
        want[p + 3] = 0x5A;
    }
    for p in (5 * MIB..6 * MIB).step_by(PAGE_SIZE) {
        want[p + 5] = 0xA5;
    }
    want
}

/// Maps a 16 MiB file, writes pages below and above 8 MiB, has another
/// process truncate it to 8 MiB, checks and writes below the new end, then
/// touches 12 MiB (a read, or a write): SIGBUS.
fn truncated_file_scenario(path: &Path, data: &[u8], service: FaultService, write_beyond: bool) {
    install_report();
    let region = map_file(path, true, service);
    for p in (MIB..2 * MIB).step_by(PAGE_SIZE) {
        set_byte(region, p + 3, 0x5A);
    }
    set_byte(region, 12 * MIB + 7, 1);
    let st = Command::new("truncate")
        .args(["-s", "8M"])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
    let want = written_below(data);
    // Below the new end: resident pages and pages read now.
    for at in (0..LEN / 2).step_by(PAGE_SIZE / 2) {
        if (5 * MIB..6 * MIB).contains(&at) {
            continue;
        }
        assert_eq!(byte(region, at + 3), want[at + 3], "byte {}", at + 3);
    }
    for p in (5 * MIB..6 * MIB).step_by(PAGE_SIZE) {
        set_byte(region, p + 5, 0xA5);
    }
    region.flush().unwrap();
    let file = std::fs::read(path).unwrap();
    assert_eq!(file.len(), LEN / 2, "a write-back grew the file again");
    assert_eq!(diff(&file, &want), 0, "bytes below the new end differ");
    println!("below the new end: ok");
    let at = 12 * MIB + 100;
    EXPECTED_ADDR.store(region.as_ptr() as usize + at, SeqCst);
    // SAFETY: gettid has no preconditions.
    FAULTING_TID.store(unsafe { libc::gettid() }, SeqCst);
    if write_beyond {
        set_byte(region, at, 9);
    } else {
        byte(region, at);
    }
    println!("no signal beyond the new end");
}

fn truncated_file(
    name: &str,
    dir: impl Fn() -> Scratch,
    service: FaultService,
    write_beyond: bool,
) {
    let in_scenario = in_scenario(name);
    // The test and its scenario agree on the file: the test's, by a link.
    let dir = if in_scenario { None } else { Some(dir()) };
    let link = shared_path(name, "truncated");
    if let Some(d) = &dir {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(d.file("data"), &link).unwrap();
    }
    let path = match &dir {
        Some(d) => d.file("data"),
        None => std::fs::canonicalize(&link).unwrap(),
    };
    let data = if in_scenario {
        std::fs::read(&path).unwrap()
    } else {
        random_file(&path, LEN, 21)
    };
    let out = in_child_process(name, WATCHDOG, || {
        truncated_file_scenario(&path, &data, service, write_beyond)
    });
    let _ = std::fs::remove_file(&link);
    assert!(out.stdout.contains("below the new end: ok"), "{out:?}");
    assert_caught(&out);
    let file = std::fs::read(&path).unwrap();
    assert_eq!(
        diff(&file, &written_below(&data)),
        0,
        "the file after the scenario"
    );
}

#[test]
fn test_truncated_file_read_beyond_end_raises_sigbus_with_handler_threads() {
    truncated_file(
        "test_truncated_file_read_beyond_end_raises_sigbus_with_handler_threads",
        || Scratch::new("trunc"),
        FaultService::HandlerThreads,
        false,
    );
}

#[test]
fn test_truncated_file_write_beyond_end_raises_sigbus_in_the_faulting_thread() {
    truncated_file(
        "test_truncated_file_write_beyond_end_raises_sigbus_in_the_faulting_thread",
        || Scratch::new("trunc"),
        FaultService::FaultingThread,
        true,
    );
}

#[test]
fn test_truncated_file_on_tmpfs_write_beyond_end_raises_sigbus_with_handler_threads() {
    truncated_file(
        "test_truncated_file_on_tmpfs_write_beyond_end_raises_sigbus_with_handler_threads",
        || Scratch::tmpfs("trunc", 64 * MIB),
        FaultService::HandlerThreads,
        true,
    );
}

#[test]
fn test_truncated_file_on_tmpfs_read_beyond_end_raises_sigbus_in_the_faulting_thread() {
    truncated_file(
        "test_truncated_file_on_tmpfs_read_beyond_end_raises_sigbus_in_the_faulting_thread",
        || Scratch::tmpfs("trunc", 64 * MIB),
        FaultService::FaultingThread,
        false,
    );
}

/// An ext4 file system on a loop device over an image file, which a
/// scenario shuts down (`EXT4_IOC_SHUTDOWN`: every read then fails with
/// EIO, as from a dying disk). Torn down on drop.
struct FailingDisk {
    loop_dev: String,
    mount: PathBuf,
    _dir: Scratch,
}

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl FailingDisk {
    /// Builds it (as root); where it cannot be built, why.
    fn new() -> Result<FailingDisk, String> {
        let dir = Scratch::new("ext4");
        let image = dir.file("disk.img");
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(64 * MIB as u64))
            .map_err(|e| e.to_string())?;
        run("mkfs.ext4", &["-q", "-F", image.to_str().unwrap()])?;
        let loop_dev = run("losetup", &["-f", "--show", image.to_str().unwrap()])?;
        let mount = dir.file("mnt");
        let mut disk = FailingDisk {
            loop_dev,
            mount: PathBuf::new(),
            _dir: dir,
        };
        std::fs::create_dir_all(&mount).map_err(|e| e.to_string())?;
        run("mount", &[&disk.loop_dev, mount.to_str().unwrap()])?;
        disk.mount = mount;
        Ok(disk)
    }
}

impl Drop for FailingDisk {
    fn drop(&mut self) {
        if !self.mount.as_os_str().is_empty() {
            let _ = run("umount", &["-l", self.mount.to_str().unwrap()]);
        }
        let _ = run("losetup", &["-d", &self.loop_dev]);
    }
}

/// Shuts the file system of `file` down: from now on its reads fail (EIO).
fn shut_down(file: &std::fs::File) {
    /// `EXT4_IOC_SHUTDOWN`: `_IOR('X', 125, __u32)`.
    const EXT4_IOC_SHUTDOWN: u64 = 0x8004_587D;
    // EXT4_GOING_FLAGS_NOLOGFLUSH.
    let flags: u32 = 2;
    use std::os::fd::AsRawFd;
    // SAFETY: the ioctl reads one u32 that outlives the call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), EXT4_IOC_SHUTDOWN as _, &flags) };
    assert_eq!(
        rc,
        0,
        "EXT4_IOC_SHUTDOWN: {}",
        std::io::Error::last_os_error()
    );
}

/// Reads 64 pages, starts a thread that keeps reading them, shuts the file
/// system down, then touches a page never read: SIGBUS in this thread,
/// while the other thread's reads stay right.
fn failing_reads_scenario(path: &Path, data: &[u8], service: FaultService) {
    install_report();
    let region = map_file(path, false, service);
    for p in 0..64 {
        assert_eq!(byte(region, p * PAGE_SIZE + 1), data[p * PAGE_SIZE + 1]);
    }
    let broken = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| loop {
            for p in 0..64 {
                let at = p * PAGE_SIZE + 1;
                if byte(region, at) != data[at] {
                    OTHER_BAD.fetch_add(1, SeqCst);
                }
                if broken.load(SeqCst) {
                    OTHER_READS.fetch_add(1, SeqCst);
                }
            }
        });
        shut_down(&std::fs::File::open(path).unwrap());
        broken.store(true, SeqCst);
        std::thread::sleep(Duration::from_millis(50));
        let at = 10 * MIB + 5;
        EXPECTED_ADDR.store(region.as_ptr() as usize + at, SeqCst);
        // SAFETY: gettid has no preconditions.
        FAULTING_TID.store(unsafe { libc::gettid() }, SeqCst);
        byte(region, at);
        println!("no signal for a failed read");
        std::process::exit(1);
    });
}

fn failing_reads(name: &str, service: FaultService) {
    if in_scenario(name) {
        let path = PathBuf::from(std::env::var("PAGEPILOT_FAILING_FILE").unwrap());
        let data = std::fs::read(&path).unwrap();
        failing_reads_scenario(&path, &data, service);
        return;
    }
    // One failing disk at a time: the scenario finds it in the environment.
    static ONE_DISK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_DISK.lock().unwrap_or_else(|p| p.into_inner());
    // CI runs as root, with mkfs.ext4 and losetup (scripts/setup installs
    // them): without root this is a failure, not a skip.
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "a loop device and a mount need root: run the pager's tests as root, as CI does"
    );
    let disk =
        FailingDisk::new().unwrap_or_else(|why| panic!("cannot build the failing disk: {why}"));
    let path = disk.mount.join("data");
    random_file(&path, LEN, 22);
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::env::set_var("PAGEPILOT_FAILING_FILE", &path);
    let out = in_child_process(name, WATCHDOG, || unreachable!("handled above"));
    drop(disk);
    assert_caught(&out);
    assert!(
        field(&out, "read_errors").parse::<u64>().unwrap() >= 1,
        "{out:?}"
    );
    assert_eq!(field(&out, "other_bad"), "0", "{out:?}");
    assert!(
        field(&out, "other_reads").parse::<u64>().unwrap() > 0,
        "{out:?}"
    );
}

#[test]
fn test_failing_reads_raise_sigbus_in_the_faulting_thread_only_with_handler_threads() {
    failing_reads(
        "test_failing_reads_raise_sigbus_in_the_faulting_thread_only_with_handler_threads",
        FaultService::HandlerThreads,
    );
}

#[test]
fn test_failing_reads_raise_sigbus_in_the_faulting_thread_only_when_it_serves_itself() {
    failing_reads(
        "test_failing_reads_raise_sigbus_in_the_faulting_thread_only_when_it_serves_itself",
        FaultService::FaultingThread,
    );
}
