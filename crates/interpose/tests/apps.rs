//! Real programs nobody here wrote, run unmodified twice: plainly, then under
//! `pagepilot run --budget 4M --min-size 0` (the interposer pages their file
//! mappings). Each run has a fresh directory prepared alike; the two runs'
//! outputs (stdout, stderr, exit status) and the files they leave must be
//! equal byte for byte, on data several times the budget, and the
//! interposer's log must show that it took the data file and read more
//! pages of it than the budget holds ([`assert_paged`]).
//!
//! The programs (installed by `scripts/setup`; a missing one fails the
//! test): the `sqlite3` shell, Python's `sqlite3` module, `numpy.memmap`,
//! LMDB through the `lmdb` package, `rg --mmap`, Python's `mmap` across
//! `os.fork`, and a Python writer killed with SIGKILL under `pagepilot run
//! --daemon` (its stores must reach the file, as the kernel's page cache
//! keeps them). The scripts they run are in `tests/apps/`. The `pagepilot`
//! binary and `libpagepilot_run.so` are the ones in this test's
//! `target/<profile>` (`cargo build --profile test -p pagepilot-cli -p pagepilot-interpose`).
//! `PAGEPILOT_APPS_KEEP=1` keeps the tests' directories (in `$TMPDIR`).

use std::ffi::OsString;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The budget of every run under `pagepilot run`.
const BUDGET: &str = "4M";
/// The same in 4 KiB pages.
const BUDGET_PAGES: u64 = (4 << 20) / 4096;
/// A program still running after this is killed with its process group.
const WATCHDOG: Duration = Duration::from_secs(120);
/// The two ways a program runs, each in a directory of that name.
const PLAIN: &str = "plain";
const PAGED: &str = "paged";

/// `name` on the PATH; a failure naming scripts/setup if it is not.
fn installed(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut found = std::env::split_paths(&path).map(|dir| dir.join(name));
    let missing = || panic!("`{name}` is not installed: run scripts/setup");
    found.find(|p| p.is_file()).unwrap_or_else(missing)
}

/// The Python interpreter itself (`$PYTHON`, else `python3`; not a shim
/// that would run other programs under the interposer too), which must
/// import `modules`.
fn python(modules: &[&str]) -> OsString {
    let py = std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into());
    let imports: Vec<&str> = ["sys"].iter().chain(modules).copied().collect();
    let code = format!("import {}\nprint(sys.executable)", imports.join(", "));
    let out = Command::new(&py).args(["-c", &code]).output();
    let out = out.unwrap_or_else(|e| panic!("{py:?} cannot run ({e}): run scripts/setup"));
    let err = String::from_utf8_lossy(&out.stderr);
    let ok = out.status.success();
    assert!(
        ok,
        "{py:?} cannot import {modules:?}: run scripts/setup\n{err}"
    );
    String::from_utf8_lossy(&out.stdout).trim().into()
}

/// A script of `tests/apps/`.
fn script(name: &str) -> OsString {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps");
    dir.join(name).into()
}

/// A fresh scratch directory (kept if `PAGEPILOT_APPS_KEEP` is set).
fn scratch(name: &str) -> tempfile::TempDir {
    let mut dir = tempfile::Builder::new();
    dir.disable_cleanup(std::env::var_os("PAGEPILOT_APPS_KEEP").is_some());
    let prefix = format!("pagepilot-apps-{name}-");
    dir.prefix(&prefix)
        .tempdir()
        .expect("a temporary directory")
}

/// Kills process group `pgid`: a program and whatever it left behind.
fn kill_group(pgid: u32) {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe { libc::kill(-(pgid as i32), libc::SIGKILL) };
}

/// A program started in a process group of its own in `tmp/<way>/`, its
/// output in `tmp/<way>.out` and `tmp/<way>.err`.
struct Running {
    child: Child,
    out: PathBuf,
    err: PathBuf,
    started: Instant,
}

/// How a program ended (`None`: the watchdog killed it) and what it printed.
struct Outcome {
    status: Option<ExitStatus>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Outcome {
    fn show(&self) -> String {
        let cut = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(3000)]).into_owned();
        let (status, out, err) = (self.status, cut(&self.stdout), cut(&self.stderr));
        format!(
            "status {status:?} (output cut at 3000 bytes)\n--- stdout\n{out}\n--- stderr\n{err}"
        )
    }
}

/// Starts `argv` in `tmp/<way>/`: plainly, or under `pagepilot run` logging
/// to `tmp/paged.log` (drawing frames from the daemon at `daemon`, if any).
fn start(tmp: &Path, way: &str, argv: &[OsString], daemon: Option<&Path>) -> Running {
    let mut command = Command::new(&argv[0]);
    if way == PAGED {
        command = Command::new(pagepilot_testkit::run::pagepilot_beside_interposer());
        let options = ["run", "--budget", BUDGET, "--min-size", "0", "--log"];
        command.args(options).arg(tmp.join("paged.log"));
        if let Some(socket) = daemon {
            command.arg("--daemon").arg(socket);
        }
        command.arg("--").arg(&argv[0]);
    }
    let (out, err) = (
        tmp.join(format!("{way}.out")),
        tmp.join(format!("{way}.err")),
    );
    let file = |p: &Path| std::fs::File::create(p).expect("an output file");
    command.args(&argv[1..]).current_dir(tmp.join(way));
    command
        .env_remove("LD_PRELOAD")
        .env_remove("PAGEPILOT_DAEMON");
    command
        .stdin(Stdio::null())
        .stdout(file(&out))
        .stderr(file(&err));
    let child = command.process_group(0).spawn();
    let child = child.unwrap_or_else(|e| panic!("cannot start {argv:?}: {e}"));
    Running {
        child,
        out,
        err,
        started: Instant::now(),
    }
}

impl Running {
    fn ended(&mut self) -> bool {
        self.child
            .try_wait()
            .expect("wait for the program")
            .is_some()
    }

    /// Waits for the end (killing the group past the watchdog), then kills
    /// whatever the program left in its group.
    fn wait(mut self) -> Outcome {
        while !self.ended() && self.started.elapsed() < WATCHDOG {
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = self.child.try_wait().expect("wait for the program");
        kill_group(self.child.id());
        let _ = self.child.wait();
        let read = |p: &Path| std::fs::read(p).unwrap_or_default();
        let (stdout, stderr) = (read(&self.out), read(&self.err));
        Outcome {
            status,
            stdout,
            stderr,
        }
    }
}

/// Where `a` and `b` first differ (the shorter one's length if one is the
/// other's beginning).
fn first_difference<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    let at = a.iter().zip(b).position(|(x, y)| x != y);
    at.unwrap_or(a.len().min(b.len()))
}

/// Runs each step in `tmp/plain/`, then in `tmp/paged/` (both prepared by
/// `prepare`), and asserts that every step did the same both ways; then
/// that each of `files` is the same afterwards and that the first was
/// paged. Returns the plain runs' stdout, all steps'.
fn alike(tmp: &Path, steps: &[Vec<OsString>], prepare: impl Fn(&Path), files: &[&str]) -> String {
    let mut outcomes: Vec<Vec<Outcome>> = Vec::new();
    for way in [PLAIN, PAGED] {
        std::fs::create_dir_all(tmp.join(way)).expect("a run directory");
        prepare(&tmp.join(way));
        let run = |argv: &Vec<OsString>| start(tmp, way, argv, None).wait();
        outcomes.push(steps.iter().map(run).collect());
    }
    for ((argv, plain), paged) in steps.iter().zip(&outcomes[0]).zip(&outcomes[1]) {
        assert_same(argv, plain, paged);
    }
    files.iter().for_each(|name| assert_same_file(tmp, name));
    if let Some(data) = files.first() {
        assert_paged(tmp, data, true);
    }
    outcomes[0]
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stdout))
        .collect()
}

/// The plain run succeeded and the paged one did exactly the same.
fn assert_same(argv: &[OsString], plain: &Outcome, paged: &Outcome) {
    let ok = plain.status.is_some_and(|s| s.success());
    assert!(
        ok,
        "{argv:?} failed without pagepilot (the test is wrong):\n{}",
        plain.show()
    );
    let all = |o: &Outcome| (o.status, o.stdout.clone(), o.stderr.clone());
    if all(plain) != all(paged) {
        let lines = |o: &Outcome| {
            o.stdout
                .split(|&b| b == b'\n')
                .map(<[u8]>::to_vec)
                .collect()
        };
        let (a, b): (Vec<_>, Vec<_>) = (lines(plain), lines(paged));
        let line = first_difference(&a, &b) + 1;
        let (plain, paged) = (plain.show(), paged.show());
        panic!(
            "{argv:?} differs under pagepilot run (stdout from line {line}):\n\
             ===== plain\n{plain}\n===== under pagepilot run\n{paged}"
        );
    }
}

/// `tmp/plain/name` and `tmp/paged/name` are equal byte for byte.
fn assert_same_file(tmp: &Path, name: &str) {
    let read = |way: &str| {
        let p = tmp.join(way).join(name);
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let (plain, paged) = (read(PLAIN), read(PAGED));
    if plain != paged {
        let at = first_difference(&plain, &paged);
        let near = |b: &[u8]| {
            String::from_utf8_lossy(&b[at.min(b.len())..b.len().min(at + 48)]).into_owned()
        };
        let (a, b, page) = (plain.len(), paged.len(), at / 4096);
        let (plain, paged) = (near(&plain), near(&paged));
        panic!(
            "{name} differs under pagepilot run: {a} bytes plainly, {b} paged; first at byte {at} \
             (page {page}): plain {plain:?}, paged {paged:?}"
        );
    }
}

/// The interposer's log `tmp/paged.log` says that it took `tmp/paged/name`
/// (`pagepilot-run[PID]: took PATH offset=N len=N ...`) and, if the
/// program `ended` (was not killed), that one of the file's regions read
/// more pages than the budget holds (`... end PATH faults=N pages_read=N
/// pages_written=N`): the data was paged under the budget, not held whole.
fn assert_paged(tmp: &Path, name: &str, ended: bool) {
    let (log, file) = (tmp.join("paged.log"), tmp.join("paged").join(name));
    let text = std::fs::read_to_string(&log).unwrap_or_else(|e| format!("<no log: {e}>"));
    let file = file.canonicalize().unwrap_or(file);
    // PATH as logged: absolute, or relative to the program's directory.
    let names_file = |p: &str| Path::new(p) == file || (!p.starts_with('/') && file.ends_with(p));
    let (mut took, mut most_read) = (0, None);
    for line in text.lines().filter(|l| l.starts_with("pagepilot-run[")) {
        let rest = line.split_once("]: ").map_or("", |(_, rest)| rest);
        // The rest of the line after "WHAT PATH" if PATH is the file's.
        let of_file = |what: &str, then: &str| {
            let (path, tail) = rest.strip_prefix(what)?.rsplit_once(then)?;
            names_file(path).then_some(tail)
        };
        took += of_file("took ", " offset=").is_some() as usize;
        if let Some(counts) = of_file("end ", " faults=") {
            let read = counts
                .split(' ')
                .find_map(|w| w.strip_prefix("pages_read=")?.parse().ok());
            most_read = most_read.max(read);
        }
    }
    let (file, log) = (file.display(), &text[..text.len().min(4000)]);
    assert!(
        took > 0,
        "the interposer took no mapping of {file}; its log:\n{log}"
    );
    assert!(
        !ended || most_read.is_some_and(|n: u64| n > BUDGET_PAGES),
        "no region of {file} read more than the budget's {BUDGET_PAGES} pages (most: {most_read:?}); \
         the interposer's log:\n{log}"
    );
}

/// xorshift64*: the same bytes on every run, fast.
fn noise(seed: u64) -> impl Iterator<Item = u64> {
    std::iter::successors(Some(seed | 1), |&x| {
        let x = x ^ (x >> 12);
        let x = x ^ (x << 25);
        Some(x ^ (x >> 27))
    })
    .map(|x| x.wrapping_mul(0x2545_f491_4f6c_dd1d))
}

/// `python SCRIPT FILE` (`py`: modules to check, SCRIPT, FILE) both ways
/// after `prepare`, as [`alike`] with FILE.
fn python_alike(tmp: &Path, py: &[&str], prepare: impl Fn(&Path)) -> String {
    let [modules @ .., name, file] = py else {
        panic!("modules, script, file")
    };
    alike(
        tmp,
        &[vec![python(modules), script(name), file.into()]],
        prepare,
        &[file],
    )
}

#[test]
fn sqlite_shell_grows_joins_and_checks_a_mapped_database_alike() {
    let sqlite = installed("sqlite3");
    let tmp = scratch("sqlite-shell");
    let seed = tmp.path().join("seed.db");
    let read = |name| format!(".read {}", script(name).to_string_lossy());
    let built = Command::new(&sqlite)
        .arg(&seed)
        .arg(read("sqlite_seed.sql"))
        .output();
    let built = built.expect("run sqlite3");
    let err = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "building the seed: {err}");
    let argv = [
        sqlite.into(),
        "-bail".into(),
        "data.db".into(),
        read("sqlite_cli.sql").into(),
    ];
    let copy = |dir: &Path| _ = std::fs::copy(&seed, dir.join("data.db")).expect("copy the seed");
    let out = alike(tmp.path(), &[argv.to_vec()], copy, &["data.db"]);
    let ok = out.contains("\njoin|60000|") && out.contains("\nok\n");
    assert!(ok, "the plain run:\n{out}");
}

#[test]
fn python_sqlite3_in_wal_mode_answers_and_stores_alike() {
    let tmp = scratch("sqlite-module");
    let out = python_alike(
        tmp.path(),
        &["sqlite3", "sqlite_module.py", "data.db"],
        |_| (),
    );
    assert!(out.contains("\ncheck ok\n"), "the plain run:\n{out}");
}

#[test]
fn numpy_memmap_reads_writes_in_place_and_copies_on_write_alike() {
    let tmp = scratch("numpy");
    let out = python_alike(
        tmp.path(),
        &["numpy", "numpy_memmap.py", "data.f32"],
        |_| (),
    );
    assert_eq!(out.lines().count(), 9, "the plain run:\n{out}");
}

/// LMDB puts, random gets and a cursor scan in `db/`, with `extra` args.
/// Its data file is compared as `mdb_dump` prints it (the records), then
/// byte for byte: two plain runs leave identical files (LMDB zeroes the
/// unused parts of the pages it writes and reuses free pages in the same
/// order), so a difference in layout alone is a difference too. `lock.mdb`
/// (pids, reader slots) is not compared.
fn lmdb_alike(name: &str, extra: &[&str]) {
    let dump = installed("mdb_dump");
    let tmp = scratch(name);
    let mut argv = vec![python(&["lmdb"]), script("lmdb_store.py"), "db".into()];
    argv.extend(extra.iter().map(OsString::from));
    let out = alike(tmp.path(), &[argv], |_| (), &[]);
    assert!(out.contains("\nscan 36000 "), "the plain run:\n{out}");
    let dumped = |way: &str| {
        let out = Command::new(&dump)
            .arg(tmp.path().join(way).join("db"))
            .output();
        let out = out.expect("run mdb_dump");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "mdb_dump: {err}");
        out.stdout
    };
    // The records first: a failure then says whether the data or only the layout differs.
    let (plain, paged) = (dumped(PLAIN), dumped(PAGED));
    let (a, b) = (plain.len(), paged.len());
    assert!(
        plain == paged,
        "the records differ (mdb_dump: {a} bytes plainly, {b} paged)"
    );
    assert_same_file(tmp.path(), "db/data.mdb");
    assert_paged(tmp.path(), "db/data.mdb", true);
}

#[test]
fn lmdb_with_a_read_only_map_and_pwrite_stores_and_scans_alike() {
    lmdb_alike("lmdb", &[]);
}

#[test]
fn lmdb_writing_through_its_map_stores_and_scans_alike() {
    lmdb_alike("lmdb-writemap", &["--writemap"]);
}

#[test]
fn ripgrep_through_mmap_counts_and_prints_the_same_lines() {
    let rg = installed("rg");
    let tmp = scratch("ripgrep");
    // ~24 MB of lines of eight words and a number.
    let words = "alpha beta gamma delta omega pager frame fault region budget policy clock";
    let words: Vec<&str> = words
        .split(' ')
        .chain(["zebra", "quux", "lorem", "ipsum"])
        .collect();
    let (mut text, mut random) = (String::with_capacity(25 << 20), noise(7));
    while text.len() < 24 << 20 {
        let r = random.next().expect("endless");
        (0..8).for_each(|w| text += &format!("{} ", words[(r >> (4 * w) & 15) as usize]));
        text += &format!("{}\n", r >> 44);
    }
    let searches: [&[&str]; 4] = [
        &["--count", "zebra"],
        &["--count", "-e", "quux zebra", "-e", r"omega \d{5}$"],
        &["-n", r"fault region budget \w+ clock"],
        &["-n", "-i", "-w", "PAGER PAGER PAGER"],
    ];
    let rg = [rg.to_str().expect("a path"), "--no-config", "--mmap"];
    let argv = |args: &[&str]| {
        rg.iter()
            .chain(args)
            .chain(&["words.txt"])
            .map(OsString::from)
            .collect()
    };
    let write = |dir: &Path| std::fs::write(dir.join("words.txt"), &text).expect("write the text");
    let out = alike(tmp.path(), &searches.map(argv), write, &["words.txt"]);
    assert!(
        out.lines().count() > 100,
        "the patterns matched too little:\n{out}"
    );
}

#[test]
fn forked_workers_read_the_parents_shared_mapping_and_write_their_halves_alike() {
    let tmp = scratch("fork");
    let data: Vec<u8> = noise(11).take(2 << 20).flat_map(u64::to_le_bytes).collect(); // 16 MiB
    let write = |dir: &Path| std::fs::write(dir.join("data.bin"), &data).expect("write the data");
    let out = python_alike(tmp.path(), &["fork_workers.py", "data.bin"], write);
    let exits = ["worker 0 exit 0\n", "worker 1 exit 0\n"];
    assert!(
        exits.iter().all(|e| out.contains(e)),
        "the plain run:\n{out}"
    );
}

/// A `pagepilot daemon --foreground` that hands out 16 MiB, all to this
/// test's user, on `dir/daemon.sock`; killed when dropped (its log, in
/// `dir/daemon.log`, printed if the test failed).
struct Daemon(Child, PathBuf);

impl Daemon {
    fn start(dir: &Path) -> Daemon {
        let (config, log) = (dir.join("daemon.toml"), dir.join("daemon.log"));
        std::fs::create_dir_all(dir).expect("the daemon's directory");
        let machine = "[machine]\nbudget_frames = 4096\ndeadline_ms = 10\n";
        let user = "frames = 4096\nfault_rate = 4294967296\ncpu_reserve_ppm = 1000000\n";
        let text = format!("{machine}\n[default]\n{user}connections = 1024\ndescriptors = 65536\n");
        std::fs::write(&config, text).expect("the daemon's configuration");
        let (mut command, socket) = (
            Command::new(pagepilot_testkit::run::pagepilot_beside_interposer()),
            dir.join("daemon.sock"),
        );
        let options = ["daemon", "--foreground", "--socket"];
        command
            .args(options)
            .arg(&socket)
            .arg("--config")
            .arg(&config);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .env_remove("PAGEPILOT_DAEMON");
        command.stderr(std::fs::File::create(&log).expect("the daemon's log"));
        // SAFETY: runs in the child between fork and exec and calls only
        // prctl, async-signal-safe, touching no memory of the parent's:
        // the daemon ends with this test even if no destructor runs.
        unsafe { command.pre_exec(|| Ok(_ = libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL))) };
        let mut daemon = Daemon(command.spawn().expect("start pagepilot daemon"), log);
        let started = Instant::now();
        while UnixStream::connect(&socket).is_err() {
            let exited = daemon.0.try_wait().expect("wait for the daemon");
            let late = started.elapsed() > Duration::from_secs(10);
            assert!(
                exited.is_none() && !late,
                "pagepilot daemon is not listening ({exited:?})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        daemon
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = (self.0.kill(), self.0.wait());
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.1).unwrap_or_default();
            eprintln!("--- daemon log\n{log}");
        }
    }
}

#[test]
fn a_writer_killed_with_sigkill_leaves_its_shared_stores_in_the_file() {
    const SIZE: usize = 16 << 20;
    let tmp = scratch("killed");
    let _daemon = Daemon::start(&tmp.path().join("daemon"));
    let socket = tmp.path().join("daemon/daemon.sock");
    // Page i: "page %08d written through MAP_SHARED\n" repeated, cut at 4096.
    let page = |i| format!("page {i:08} written through MAP_SHARED\n").repeat(100);
    let expected: Vec<u8> = (0..SIZE / 4096)
        .flat_map(|i| page(i).into_bytes()[..4096].to_vec())
        .collect();
    let argv = [
        python(&[]),
        script("kill_writer.py"),
        "data.bin".into(),
        SIZE.to_string().into(),
    ];
    for way in [PLAIN, PAGED] {
        std::fs::create_dir_all(tmp.path().join(way)).expect("a run directory");
        let mut running = start(tmp.path(), way, &argv, (way == PAGED).then_some(&socket));
        let said =
            |r: &Running| std::fs::read_to_string(&r.out).is_ok_and(|o| o.contains("written"));
        while !said(&running) {
            if running.ended() || running.started.elapsed() > WATCHDOG {
                panic!(
                    "the writer ({way}) never said \"written\":\n{}",
                    running.wait().show()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_group(running.child.id());
        let outcome = running.wait();
        let signal = outcome.status.and_then(|s| s.signal());
        let shown = outcome.show();
        assert_eq!(
            signal,
            Some(libc::SIGKILL),
            "the writer ({way}) was not killed:\n{shown}"
        );
        // The kernel's stores are in the file at once; the daemon writes a
        // dead client's back once it sees the death: given 30 s.
        let (data, started) = (tmp.path().join(way).join("data.bin"), Instant::now());
        while std::fs::read(&data).ok().as_ref() != Some(&expected)
            && started.elapsed().as_secs() < 30
        {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let plain = std::fs::read(tmp.path().join("plain/data.bin")).expect("the plain run's file");
    assert!(
        plain == expected,
        "without pagepilot the killed writer's file is not the pattern"
    );
    assert_same_file(tmp.path(), "data.bin");
    assert_paged(tmp.path(), "data.bin", false);
}
