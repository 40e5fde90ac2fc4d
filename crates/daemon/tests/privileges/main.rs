//! Dropping root (`server::drop_privileges`) in child processes: this test
//! binary run again in a role, so that the test process keeps its own
//! credentials, and so that the role runs on the process's only thread
//! (the drop refuses a process with several: libtest's harness runs each
//! test on a thread of its own, hence `harness = false` here).
//!
//! With `PP_PRIV_ROLE` in its environment the binary plays that role
//! (`roles.rs`); without, it runs the tests (`tests.rs`).
//! `cargo test -p pagepilot-daemon --test privileges -- NAME` runs the
//! tests whose names contain NAME. They need root (they drop it).

mod roles;
mod tests;

fn main() {
    if let Ok(role) = std::env::var(roles::ROLE_ENV) {
        let args: Vec<String> = std::env::args().skip(1).collect();
        std::process::exit(roles::run(&role, &args));
    }
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, test) in tests::ALL {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        eprintln!("test {name} ...");
        match std::panic::catch_unwind(test) {
            Ok(()) => eprintln!("test {name} ... ok"),
            Err(_) => {
                eprintln!("test {name} ... FAILED");
                failed.push(*name);
            }
        }
    }
    eprintln!(
        "\ntest result: {}. {} passed; {} failed",
        if failed.is_empty() { "ok" } else { "FAILED" },
        ran - failed.len(),
        failed.len()
    );
    if !failed.is_empty() {
        eprintln!("failures: {failed:?}");
        std::process::exit(1);
    }
}
