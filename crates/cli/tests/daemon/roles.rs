//! What a client process does, chosen by `PP_TEST_ROLE`. Each prints
//! `ready ...` once its region is mapped, then reports on stdout, one line
//! at a time; `error ...` and exit code 1 when something is wrong.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use pagepilot_pager::{Backing, Region, RegionOptions, PAGE_SIZE};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// The environment variable naming the role.
pub const ROLE_ENV: &str = "PP_TEST_ROLE";

/// Runs `role`: the process's exit code.
pub fn run(role: &str, args: &[String]) -> i32 {
    let outcome = match role {
        "hold" => hold(args),
        "writer" => writer(args),
        "churn" => churn(args),
        "pinner" => pinner(args),
        "pinned_dataspace" => pinned_dataspace(args),
        "forker" => forker(),
        "fork_fill" => fork_fill(args),
        other => Err(format!("unknown role {other}")),
    };
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            println!("error {e}");
            1
        }
    }
}

/// `path` mapped writable under LRU with a budget of `budget` frames.
fn map_file_lru(path: PathBuf, budget: usize) -> Result<Region, String> {
    let backing = Backing::File {
        path,
        writable: true,
    };
    Region::map(RegionOptions::new(backing, budget * PAGE_SIZE, "lru")).map_err(|e| e.to_string())
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, name: &str) -> Result<T, String> {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("argument {i} ({name}) missing or malformed: {args:?}"))
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The value a page holds in the `hold` and `churn` roles.
fn stamp(salt: u64, page: usize) -> u64 {
    salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (page as u64 + 1)
}

fn fill(region: &Region, salt: u64) {
    for p in 0..region.len() / PAGE_SIZE {
        // SAFETY: page `p` is inside the region.
        unsafe { (region.as_ptr().add(p * PAGE_SIZE) as *mut u64).write_volatile(stamp(salt, p)) };
    }
}

fn check(region: &Region, salt: u64) -> Result<(), String> {
    for p in 0..region.len() / PAGE_SIZE {
        // SAFETY: page `p` is inside the region.
        let got = unsafe { (region.as_ptr().add(p * PAGE_SIZE) as *const u64).read_volatile() };
        if got != stamp(salt, p) {
            return Err(format!(
                "page {p} holds {got:#x}, expected {:#x}",
                stamp(salt, p)
            ));
        }
    }
    Ok(())
}

fn stats_line(region: &Region) -> String {
    let s = region.stats();
    format!(
        "{} {} {} {}",
        s.budget_frames, s.pool_reclaimed_frames, s.forced_reclaim_frames, s.frames_in_use
    )
}

/// `hold PAGES MIN BUDGET`: an anonymous region of PAGES pages, its
/// `minFrame` MIN and budget BUDGET frames, every page written. Then on
/// stdin: `check` (every page read back; prints `checked BUDGET RECLAIMED
/// FORCED IN_USE`), `stats` (`stats ...` the same), `budget N`
/// (`set_budget` to N frames), `exit` (unmaps).
fn hold(args: &[String]) -> Result<(), String> {
    let pages: usize = arg(args, 0, "pages")?;
    let min: usize = arg(args, 1, "min")?;
    let budget: usize = arg(args, 2, "budget")?;
    let opts = RegionOptions::new(
        Backing::Anonymous {
            len: pages * PAGE_SIZE,
        },
        budget * PAGE_SIZE,
        "lru",
    )
    .with_min_frames(min);
    let mut region = Region::map(opts).map_err(|e| e.to_string())?;
    let salt = u64::from(std::process::id());
    fill(&region, salt);
    say(&format!("ready {}", stats_line(&region)));
    for line in std::io::stdin().lock().lines() {
        match line.map_err(|e| e.to_string())?.trim() {
            "check" => {
                check(&region, salt)?;
                say(&format!("checked {}", stats_line(&region)));
            }
            "stats" => say(&format!("stats {}", stats_line(&region))),
            command if command.starts_with("budget ") => {
                let frames: usize = command[7..].parse().map_err(|_| format!("bad {command}"))?;
                region
                    .set_budget(frames * PAGE_SIZE)
                    .map_err(|e| e.to_string())?;
                say(&format!("budget {}", stats_line(&region)));
            }
            "exit" => break,
            other => return Err(format!("unknown command {other}")),
        }
    }
    region.unmap().map_err(|e| e.to_string())?;
    say("bye");
    Ok(())
}

/// `writer FILE PAGES BUDGET SEED`: the file mapped writable under a
/// budget of BUDGET frames; 8-byte slots (four per page) written once
/// each in random order, each store logged as `w OFFSET VALUE` after it
/// is done, until killed.
fn writer(args: &[String]) -> Result<(), String> {
    let path: PathBuf = arg(args, 0, "file")?;
    let pages: usize = arg(args, 1, "pages")?;
    let budget: usize = arg(args, 2, "budget")?;
    let seed: u64 = arg(args, 3, "seed")?;
    let region = map_file_lru(path, budget)?;
    let mut slots: Vec<usize> = (0..pages * 4)
        .map(|i| (i / 4) * PAGE_SIZE + (i % 4) * 1000)
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    slots.shuffle(&mut rng);
    say("ready");
    for (n, offset) in slots.into_iter().enumerate() {
        let value = rng.gen::<u64>() | 1 << 63 | n as u64;
        // SAFETY: the slot is inside the region (offset + 8 <= pages * PAGE_SIZE).
        unsafe { (region.as_ptr().add(offset) as *mut u64).write_volatile(value) };
        say(&format!("w {offset} {value}"));
    }
    say("done");
    std::thread::sleep(Duration::from_secs(600));
    Ok(())
}

/// `churn SECONDS SEED DIR`: for SECONDS, map a region (anonymous, or a
/// file in DIR every other time) of a random size under a random budget,
/// write every page, read every page back, unmap; then exit. Prints
/// `done ROUNDS`.
fn churn(args: &[String]) -> Result<(), String> {
    let seconds: f64 = arg(args, 0, "seconds")?;
    let seed: u64 = arg(args, 1, "seed")?;
    let dir: PathBuf = arg(args, 2, "dir")?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let mut rounds = 0;
    while rounds == 0 || Instant::now() < until {
        let pages = rng.gen_range(32..256);
        let budget = rng.gen_range(4..32);
        let salt = rng.gen::<u64>();
        let backing = if rounds % 2 == 1 {
            let path = dir.join(format!("churn-{}-{rounds}", std::process::id()));
            let f = std::fs::File::create(&path).map_err(|e| e.to_string())?;
            f.set_len((pages * PAGE_SIZE) as u64)
                .map_err(|e| e.to_string())?;
            Backing::File {
                path,
                writable: true,
            }
        } else {
            Backing::Anonymous {
                len: pages * PAGE_SIZE,
            }
        };
        let file = match &backing {
            Backing::File { path, .. } => Some(path.clone()),
            _ => None,
        };
        // A small minimum, the rest of the budget asked for: the clients
        // take frames from each other as they come and go.
        let opts = RegionOptions::new(backing, budget * PAGE_SIZE, "clock").with_min_frames(4);
        let region = Region::map(opts).map_err(|e| format!("round {rounds}: {e}"))?;
        fill(&region, salt);
        check(&region, salt).map_err(|e| format!("round {rounds}: {e}"))?;
        region.unmap().map_err(|e| format!("round {rounds}: {e}"))?;
        if let Some(path) = file {
            // What was written reached the file.
            let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
            for p in 0..pages {
                let got =
                    u64::from_ne_bytes(bytes[p * PAGE_SIZE..p * PAGE_SIZE + 8].try_into().unwrap());
                if got != stamp(salt, p) {
                    return Err(format!("round {rounds}: file page {p} holds {got:#x}"));
                }
            }
            let _ = std::fs::remove_file(&path);
        }
        rounds += 1;
    }
    say(&format!("done {rounds}"));
    Ok(())
}

/// `pinner PAGES BUDGET PINS`: an anonymous region of PAGES pages under
/// BUDGET frames (its minFrame); pins its first PINS pages (`pinned`), asks
/// for one more (`refused ERRNO MESSAGE`, or `granted`), then scans every
/// page five times with evictions subscribed: `evicted TOTAL PINNED_ONES
/// LOST`; then waits for `exit` on stdin.
fn pinner(args: &[String]) -> Result<(), String> {
    let pages: usize = arg(args, 0, "pages")?;
    let budget: usize = arg(args, 1, "budget")?;
    let pins: usize = arg(args, 2, "pins")?;
    let opts = RegionOptions::new(
        Backing::Anonymous {
            len: pages * PAGE_SIZE,
        },
        budget * PAGE_SIZE,
        "lru",
    );
    let region = Region::map(opts).map_err(|e| e.to_string())?;
    let salt = 77;
    fill(&region, salt);
    region
        .pin(0, pins * PAGE_SIZE)
        .map_err(|e| format!("pin: {e}"))?;
    say("pinned");
    match region.pin(pins * PAGE_SIZE, PAGE_SIZE) {
        Err(pagepilot_pager::PinError::Daemon { errno, message }) => {
            say(&format!("refused {errno} {message}"))
        }
        Err(e) => return Err(format!("the extra pin failed without the daemon: {e}")),
        Ok(()) => say("granted"),
    }
    region.subscribe_evictions(1 << 20);
    for _ in 0..5 {
        check(&region, salt)?;
    }
    let mut evicted = Vec::new();
    let drained = region.drain_evictions(&mut evicted);
    let pinned_ones = evicted
        .iter()
        .filter(|e| (e.offset as usize) < pins * PAGE_SIZE)
        .count();
    say(&format!(
        "evicted {} {pinned_ones} {}",
        evicted.len(),
        drained.lost
    ));
    for line in std::io::stdin().lock().lines() {
        if line.map_err(|e| e.to_string())?.trim() == "exit" {
            break;
        }
    }
    region.unmap().map_err(|e| e.to_string())?;
    say("bye");
    Ok(())
}

/// `pinned_dataspace PAGES BUDGET DIR`: an anonymous dataspace of PAGES
/// pages (swap file in DIR) transferred to a pinned manager (SawMill's
/// Figure 6), mapped as a region under BUDGET frames: its pages are pinned
/// at map, through the daemon's pin quota. Prints `refused ERRNO MESSAGE`
/// if the daemon refused the pins (and exits), or `mapped` once mapped
/// and every page checked; then waits for `exit` on stdin.
fn pinned_dataspace(args: &[String]) -> Result<(), String> {
    use pagepilot_pager::dataspace::{AnonymousManager, Manager, PinnedManager};
    use pagepilot_pager::{Attachment, MapError, PinError};
    use std::sync::Arc;
    let pages: usize = arg(args, 0, "pages")?;
    let budget: usize = arg(args, 1, "budget")?;
    let dir: PathBuf = arg(args, 2, "dir")?;
    let anon = AnonymousManager::new(dir);
    let id = anon
        .create(None, (pages * PAGE_SIZE) as u64)
        .map_err(|e| e.to_string())?;
    // The manager's own quota is not what this tests: the daemon's is.
    let pinned = Arc::new(PinnedManager::new((pages * PAGE_SIZE) as u64));
    let id = anon
        .transfer(&id, pinned.as_ref())
        .map_err(|e| e.to_string())?;
    let opts = RegionOptions::new(
        Backing::Dataspaces(vec![Attachment::whole(pinned, id)]),
        budget * PAGE_SIZE,
        "lru",
    );
    let region = match Region::map(opts) {
        Ok(region) => region,
        Err(MapError::Pin(PinError::Daemon { errno, message })) => {
            say(&format!("refused {errno} {message}"));
            return Ok(());
        }
        Err(e) => return Err(format!("map: {e}")),
    };
    fill(&region, 3);
    check(&region, 3)?;
    say(&format!("mapped {}", region.stats().pinned_pages));
    for line in std::io::stdin().lock().lines() {
        if line.map_err(|e| e.to_string())?.trim() == "exit" {
            break;
        }
    }
    region.unmap().map_err(|e| e.to_string())?;
    say("bye");
    Ok(())
}

/// `forker`: a region joined to the daemon, then a child forked that
/// sleeps; prints `ready CHILD_PID` and waits for stdin to close.
fn forker() -> Result<(), String> {
    let opts = RegionOptions::new(
        Backing::Anonymous {
            len: 64 * PAGE_SIZE,
        },
        16 * PAGE_SIZE,
        "lru",
    );
    let region = Region::map(opts).map_err(|e| e.to_string())?;
    fill(&region, 5);
    // SAFETY: the child only sleeps and leaves with _exit, calling nothing
    // that a lock held by another thread at the fork could block.
    let child = unsafe { libc::fork() };
    if child == 0 {
        // SAFETY: sleep and _exit are async-signal-safe.
        unsafe {
            libc::sleep(60);
            libc::_exit(0)
        }
    }
    if child < 0 {
        return Err("fork failed".into());
    }
    say(&format!("ready {child}"));
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    drop(region);
    Ok(())
}

/// What byte `i` of the `fork_fill` file holds: its original data (round
/// 0), then what the workers write (round 1).
pub fn fork_byte(round: u8, i: usize) -> u8 {
    let x = (i as u32).wrapping_mul(0x9E37_79B1) ^ (round as u32).wrapping_mul(0x85EB_CA77);
    (x ^ (x >> 13) ^ (i / PAGE_SIZE) as u32) as u8
}

/// Offsets in `range` of `bytes` that do not hold round `round`'s data.
fn not_round(bytes: &[u8], range: std::ops::Range<usize>, round: u8) -> Vec<usize> {
    range.filter(|&i| bytes[i] != fork_byte(round, i)).collect()
}

/// `fork_fill FILE BUDGET`: the file mapped writable under BUDGET frames
/// (joining the daemon), read whole (resident up to the budget): `ready
/// FRAMES_IN_USE`; on `go` (stdin), four workers are forked, each filling
/// a quarter with round 1's data; once they are reaped every byte is
/// checked (no flush or invalidate), then, once the region is paged again
/// (`resumes` 1, within 10 s), every byte again; unmapped. Prints `filled
/// SHARES_AFTER_FORK RESUMES SHARED PAGED` (SHARED 0 or 1, at the end;
/// PAGED the pages brought in since the fork: every page was read since the
/// region was paged again, from no frame).
fn fork_fill(args: &[String]) -> Result<(), String> {
    const WORKERS: usize = 4;
    let path: PathBuf = arg(args, 0, "file")?;
    let budget: usize = arg(args, 1, "budget")?;
    let region = map_file_lru(path, budget)?;
    let len = region.len();
    // SAFETY: the region is mapped for `len` bytes while `region` lives;
    // the workers write disjoint quarters, the parent reads only once they
    // are reaped.
    let bytes = unsafe { std::slice::from_raw_parts_mut(region.as_ptr(), len) };
    let bad = not_round(bytes, 0..len, 0);
    if !bad.is_empty() {
        return Err(format!(
            "{} bytes differ from the file's at the map, first at {}",
            bad.len(),
            bad[0]
        ));
    }
    say(&format!("ready {}", region.stats().frames_in_use));
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    if line.trim() != "go" {
        return Err(format!("expected go, got {line:?}"));
    }
    let quarter = len / WORKERS;
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        // SAFETY: the child only stores to its quarter of the region (no
        // lock, no allocation) and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err("fork failed".into());
        }
        if pid == 0 {
            let range = w * quarter..(w + 1) * quarter;
            for (i, b) in range.clone().zip(&mut bytes[range]) {
                *b = fork_byte(1, i);
            }
            // SAFETY: ends the worker without the parent's exit handlers.
            unsafe { libc::_exit(0) };
        }
        workers.push(pid);
    }
    // No page is brought in while the region is shared.
    let at_fork = region.stats();
    for pid in workers {
        let mut status = 0;
        // SAFETY: waits for our own child.
        let reaped = unsafe { libc::waitpid(pid, &mut status, 0) };
        if reaped != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            return Err(format!(
                "worker {pid}: waitpid {reaped}, status {status:#x}"
            ));
        }
    }
    // The pages resident at the fork (the last `budget`, read last) first:
    // reading the others would evict them.
    let resident = len - budget * PAGE_SIZE;
    for (range, which) in [(resident..len, "resident"), (0..resident, "other")] {
        let bad = not_round(bytes, range, 1);
        if !bad.is_empty() {
            return Err(format!(
                "{} bytes of the {which} pages differ after the workers (no flush), first at {}",
                bad.len(),
                bad[0]
            ));
        }
    }
    let start = Instant::now();
    while region.stats().resumes == 0 {
        if start.elapsed() > Duration::from_secs(10) {
            return Err(format!("not paged again within 10 s: {:?}", region.stats()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let bad = not_round(bytes, 0..len, 1);
    if !bad.is_empty() {
        return Err(format!(
            "{} bytes differ once paged again, first at {}",
            bad.len(),
            bad[0]
        ));
    }
    let stats = region.stats();
    region.unmap().map_err(|e| e.to_string())?;
    say(&format!(
        "filled {} {} {} {}",
        at_fork.shares,
        stats.resumes,
        u8::from(stats.shared),
        stats.missing_faults - at_fork.missing_faults
    ));
    Ok(())
}
