//! The children's side: each role does one thing to its own credentials
//! and reports on stdout, one `key value` line per fact.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use pagepilot_daemon::server::{drop_privileges, stop_on_signals, RunAs, Server, ServerOptions};
use pagepilot_daemon::Config;

/// The environment variable naming the role.
pub const ROLE_ENV: &str = "PP_PRIV_ROLE";

/// Runs `role` with `args`; the process's exit code.
pub fn run(role: &str, args: &[String]) -> i32 {
    match role {
        "drop" => drop(&args[0]),
        "write" => write(&args[0], &args[1]),
        "serve" => serve(&args[0]),
        other => {
            eprintln!("no role {other}");
            2
        }
    }
}

/// `nobody`, `root`, any user name, or `unchanged`.
fn run_as(name: &str) -> RunAs {
    match name {
        "unchanged" => RunAs::Unchanged,
        name => RunAs::User { name: name.into() },
    }
}

/// Drops as `who` says (a parent-death signal set first, to see that it
/// survives), then reports the outcome, the credentials from
/// /proc/self/status, the parent-death signal and what `setuid(0)` and
/// `setgid(0)` return.
fn drop(who: &str) -> i32 {
    // SAFETY: prctl with integer arguments, no memory.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    match drop_privileges(&run_as(who)) {
        Ok(d) => println!("result ok {d}"),
        Err(e) => println!("result err {e}"),
    }
    report_status();
    let mut signal: libc::c_int = 0;
    // SAFETY: PR_GET_PDEATHSIG writes one int at the pointer given.
    unsafe { libc::prctl(libc::PR_GET_PDEATHSIG, &mut signal as *mut libc::c_int) };
    println!("pdeathsig {signal}");
    // SAFETY: setuid and setgid take integers and touch no memory.
    let (u, g) = unsafe { (libc::setuid(0), libc::setgid(0)) };
    println!("setuid0 {u}");
    println!("setgid0 {g}");
    0
}

/// Opens `path` for writing, drops as `who` says (`none`: stays root with
/// every capability, as the daemon did before it dropped anything), then
/// writes through the descriptor opened before, as the daemon's write-back
/// does.
fn write(path: &str, who: &str) -> i32 {
    let file = OpenOptions::new().write(true).open(path).unwrap();
    if who != "none" {
        if let Err(e) = drop_privileges(&run_as(who)) {
            println!("result err {e}");
            return 1;
        }
    }
    file.write_all_at(b"written back", 0).unwrap();
    println!("written yes");
    0
}

/// A daemon as `pagepilot daemon` starts one: binds (as root), drops to
/// nobody, serves until SIGTERM.
fn serve(socket: &str) -> i32 {
    let server =
        Server::bind(Config::with_budget(64).unwrap(), ServerOptions::new(socket)).unwrap();
    let dropped = drop_privileges(&RunAs::User {
        name: "nobody".into(),
    })
    .unwrap();
    stop_on_signals().unwrap();
    println!("ready {dropped}");
    server.run().unwrap();
    0
}

/// The credential lines of /proc/self/status.
fn report_status() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    for line in status.lines() {
        let keys = ["Uid:", "Gid:", "Groups:", "Cap", "NoNewPrivs:"];
        if keys.iter().any(|k| line.starts_with(k)) {
            let (key, value) = line.split_once(':').unwrap();
            println!(
                "{key} {}",
                value.split_whitespace().collect::<Vec<_>>().join(" ")
            );
        }
    }
}
