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
    pagepilot_testkit::role_harness(roles::ROLE_ENV, roles::run, tests::ALL);
}
