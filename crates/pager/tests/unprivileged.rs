//! An ordinary user (`nobody`), on a kernel with the distributions' default
//! `vm.unprivileged_userfaultfd = 0` and `/dev/userfaultfd` readable by root
//! only: regions map in user-mode-only (docs/pager.md, "Ordinary users"),
//! faults from user space are served, and the kernel's own access to a page
//! not mapped yet fails with EFAULT instead of finding zeros.

mod common;

use common::*;
use pagepilot_pager::doctor::{self, State};
use pagepilot_pager::{Backing, Region, RegionOptions, UffdAccess, PAGE_SIZE};
use pagepilot_testkit::device::DeviceGranted;

const SYSCTL: &str = "/proc/sys/vm/unprivileged_userfaultfd";

/// Sets the sysctl for the test's life and puts the old value back after,
/// also when the test fails; one test at a time holds it.
struct Sysctl {
    old: String,
    _one: std::sync::MutexGuard<'static, ()>,
}

impl Sysctl {
    fn set(value: &str) -> Sysctl {
        static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let one = ONE.lock().unwrap_or_else(|p| p.into_inner());
        let old = std::fs::read_to_string(SYSCTL).unwrap();
        std::fs::write(SYSCTL, value).unwrap();
        Sysctl { old, _one: one }
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = std::fs::write(SYSCTL, self.old.trim());
    }
}

/// The random file of `pages` pages (seed `seed`) test `test` and its
/// scenario process share, made by the test, writable by every user.
fn shared_file(test: &str, pages: usize, seed: u64) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = shared_path(test, "data");
    if !in_scenario(test) {
        random_file(&path, pages * PAGE_SIZE, seed);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    path
}

/// Runs `nobody`'s part of test `test` as `nobody`, in group `group` only
/// (none: no group).
fn as_nobody_in(test: &str, group: Option<u32>, body: impl FnOnce()) -> ChildOutcome {
    let groups = group.map_or("--clear-groups".to_string(), |g| format!("--groups={g}"));
    let launcher = ["setpriv", "--reuid=65534", "--regid=65534", &groups];
    in_child_process_under(test, std::time::Duration::from_secs(120), &launcher, body)
}

/// Runs `nobody`'s part of test `test` as `nobody`, with no group.
fn as_nobody(test: &str, body: impl FnOnce()) -> ChildOutcome {
    as_nobody_in(test, None, body)
}

/// `pread(2)` of the first page of `path` into page `page` of `region`:
/// the kernel writes into the region. Returns what the call answered.
fn pread_into(region: &Region, page: usize, path: &std::path::Path) -> (isize, std::io::Error) {
    let src = std::fs::File::open(path).unwrap();
    // SAFETY: the destination is one page inside the region; the kernel
    // writes into it or fails.
    let n = unsafe {
        libc::pread(
            std::os::fd::AsRawFd::as_raw_fd(&src),
            region.as_ptr().add(page * PAGE_SIZE).cast(),
            PAGE_SIZE,
            0,
        )
    };
    (n, std::io::Error::last_os_error())
}

/// Page `page` of `region`, as the application reads it.
fn page_of(region: &Region, page: usize) -> &[u8] {
    // SAFETY: one page inside the region, which outlives the slice.
    unsafe { std::slice::from_raw_parts(region.as_ptr().add(page * PAGE_SIZE), PAGE_SIZE) }
}

/// The group the device is granted to (`packaging/99-pagepilot-userfaultfd.rules`
/// names it `pagepilot`; a number stands for it here).
const DEVICE_GROUP: u32 = 64_999;

/// Test `test` as `nobody` in group `group`: a region opened `want`'s way,
/// and read(2) into a page not mapped yet, with the defaults, served like
/// any other fault.
fn every_feature_for_nobody(test: &str, group: Option<u32>, want: UffdAccess) {
    let pages = 1024;
    let path = shared_file(test, pages, 32);
    let outcome = as_nobody_in(test, group, || {
        let data = std::fs::read(&path).unwrap();
        let region = Region::map_file(&path, true, pages / 4 * PAGE_SIZE, "lru").unwrap();
        assert_eq!(region.stats().uffd_access, want);
        let (n, err) = pread_into(&region, pages - 3, &path);
        assert_eq!(n, PAGE_SIZE as isize, "{err}");
        assert_eq!(page_of(&region, pages - 3), &data[..PAGE_SIZE]);
        region.unmap().unwrap();
        println!("every feature, read(2) into a region served");
        // doctor tells the same: the way in, every feature.
        let report = doctor::run(None);
        let userfaultfd = report.checks.iter().find(|c| c.name == "userfaultfd");
        println!(
            "doctor: can_map={} access={:?} userfaultfd={:?}",
            report.can_map(),
            report.uffd_access,
            userfaultfd.map(|c| (c.state, c.detail.as_str()))
        );
    });
    let _ = std::fs::remove_file(&path);
    assert!(outcome.succeeded(), "{outcome:?}");
    assert!(
        outcome.stdout.contains("every feature"),
        "{}",
        outcome.stdout
    );
    let doctor = format!(
        "doctor: can_map=true access={:?} userfaultfd={:?}",
        Some(want),
        Some((State::Ok, format!("{want:?}").as_str()))
    );
    assert!(
        outcome.stdout.contains(&doctor),
        "{doctor} not in {}",
        outcome.stdout
    );
}

#[test]
fn test_a_member_of_the_devices_group_gets_every_feature_and_read_into_a_region_works() {
    const TEST: &str =
        "test_a_member_of_the_devices_group_gets_every_feature_and_read_into_a_region_works";
    let scenario = in_scenario(TEST);
    let _sysctl = (!scenario).then(|| Sysctl::set("0"));
    let _device = (!scenario).then(|| DeviceGranted::grant(Some(DEVICE_GROUP)));
    every_feature_for_nobody(TEST, Some(DEVICE_GROUP), UffdAccess::Device);
}

#[test]
fn test_with_the_sysctl_on_an_ordinary_user_gets_every_feature_and_read_into_a_region_works() {
    const TEST: &str =
        "test_with_the_sysctl_on_an_ordinary_user_gets_every_feature_and_read_into_a_region_works";
    let _sysctl = (!in_scenario(TEST)).then(|| Sysctl::set("1"));
    every_feature_for_nobody(TEST, None, UffdAccess::Syscall);
}

#[test]
fn test_an_ordinary_user_maps_in_user_mode_only_and_a_kernel_access_fails_with_efault() {
    const TEST: &str =
        "test_an_ordinary_user_maps_in_user_mode_only_and_a_kernel_access_fails_with_efault";
    let pages = 4096;
    let path = shared_file(TEST, pages, 31);
    let _sysctl = (!in_scenario(TEST)).then(|| Sysctl::set("0"));
    let outcome = as_nobody(TEST, || {
        let data = std::fs::read(&path).unwrap();
        // Random reads and the file checked, under a quarter of its size.
        let region = Region::map_file(&path, false, pages / 4 * PAGE_SIZE, "lru").unwrap();
        assert_eq!(region.stats().uffd_access, UffdAccess::UserModeOnly);
        let mut rng = Rng(4);
        for _ in 0..20_000 {
            let at = rng.below(pages) * PAGE_SIZE + rng.below(PAGE_SIZE);
            // SAFETY: inside the region.
            let v = unsafe { region.as_ptr().add(at).read_volatile() };
            assert_eq!(v, data[at], "byte {at}");
        }
        region.unmap().unwrap();

        // read(2) into a page of a fresh region, not mapped yet: EFAULT (the
        // region is writable: not an EFAULT of a read-only mapping), and the
        // page then holds the file's data, not zeros.
        let backing = Backing::File {
            path: path.clone(),
            writable: true,
        };
        let opts = RegionOptions::new(backing, pages * PAGE_SIZE, "lru").with_fault_around(1);
        let region = Region::map(opts).unwrap();
        let page = pages - 7;
        let (n, err) = pread_into(&region, page, &path);
        assert_eq!(
            (n, err.raw_os_error()),
            (-1, Some(libc::EFAULT)),
            "read(2): {n} {err}"
        );
        assert_eq!(
            page_of(&region, page),
            &data[page * PAGE_SIZE..(page + 1) * PAGE_SIZE]
        );
        // The documented answer: prefault what the kernel will write into.
        let other = pages - 100;
        region.prefault(other * PAGE_SIZE, PAGE_SIZE, true).unwrap();
        let (n, err) = pread_into(&region, other, &path);
        assert_eq!(n, PAGE_SIZE as isize, "read(2) after prefault: {err}");
        assert_eq!(page_of(&region, other), &data[..PAGE_SIZE]);
        region.unmap().unwrap();
        // The integrity harness: two threads reading and writing at random
        // over a file four times the budget, the file reread after.
        let out = hammer_file_region("nobody-integrity", 9, 16 << 20, "lru", 2, 400_000, |o| o);
        assert_eq!(out.stats.uffd_access, UffdAccess::UserModeOnly);
        assert!(
            out.stats.evictions > 500 && out.stats.writebacks > 100,
            "{:?}",
            out.stats
        );
        println!("nobody: user-mode-only, 20000 reads checked, read(2) EFAULT, integrity");
    });
    let _ = std::fs::remove_file(&path);
    assert!(
        outcome.succeeded(),
        "as nobody: {:?}\n{}\n{}",
        outcome.status,
        outcome.stdout,
        outcome.stderr
    );
    assert!(
        outcome.stdout.contains("user-mode-only"),
        "{}",
        outcome.stdout
    );
}

/// `doctor`'s report for `nobody`, the sysctl at `sysctl`.
fn doctor_as_nobody(test: &str, sysctl: &str) -> ChildOutcome {
    let _sysctl = (!in_scenario(test)).then(|| Sysctl::set(sysctl));
    as_nobody(test, || {
        let report = doctor::run(Some(&std::env::temp_dir()));
        let state = |name: &str| {
            report
                .checks
                .iter()
                .find(|c| c.name == name)
                .map(|c| (c.state, c.detail.clone()))
                .unwrap()
        };
        println!(
            "can_map={} access={:?} userfaultfd={:?} sysctl={:?} device={:?} direct={:?} cgroup={:?}",
            report.can_map(),
            report.uffd_access,
            state("userfaultfd").0,
            state("vm.unprivileged_userfaultfd").0,
            state("/dev/userfaultfd").0,
            state("direct I/O").0,
            state("memory cgroup").0,
        );
    })
}

#[test]
fn test_doctor_tells_an_ordinary_user_the_limits_of_user_mode_only_with_the_sysctl_off() {
    const OFF: &str =
        "test_doctor_tells_an_ordinary_user_the_limits_of_user_mode_only_with_the_sysctl_off";
    let off = doctor_as_nobody(OFF, "0");
    assert!(off.succeeded(), "{off:?}");
    let expected_off = format!(
        "can_map=true access={:?} userfaultfd={:?} sysctl={:?} device={:?} direct={:?} cgroup={:?}",
        Some(UffdAccess::UserModeOnly),
        State::Warn,
        State::Warn,
        State::Warn,
        State::Ok,
        State::Warn
    );
    assert!(off.stdout.contains(&expected_off), "{}", off.stdout);
}

#[test]
fn test_doctor_gives_an_ordinary_user_every_feature_with_the_sysctl_on() {
    const ON: &str = "test_doctor_gives_an_ordinary_user_every_feature_with_the_sysctl_on";
    let on = doctor_as_nobody(ON, "1");
    assert!(on.succeeded(), "{on:?}");
    let expected_on = format!(
        "can_map=true access={:?} userfaultfd={:?} sysctl={:?}",
        Some(UffdAccess::Syscall),
        State::Ok,
        State::Ok
    );
    assert!(on.stdout.contains(&expected_on), "{}", on.stdout);
}
