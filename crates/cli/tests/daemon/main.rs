//! The pagepilot daemon with real processes: a `pagepilot daemon` on a
//! real Unix socket, clients that are separate processes mapping regions
//! through it (this test binary run again in a client role), `SIGKILL` and
//! `SIGSTOP` in the middle of their work.
//!
//! A harness of its own (`harness = false`): the same binary is the test
//! runner and, with `PP_TEST_ROLE` in its environment, a client.
//! `cargo test --test daemon -- NAME` runs the tests whose names contain
//! NAME.

mod harness;
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
        let started = std::time::Instant::now();
        match std::panic::catch_unwind(test) {
            Ok(()) => eprintln!("test {name} ... ok ({:.1?})", started.elapsed()),
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
