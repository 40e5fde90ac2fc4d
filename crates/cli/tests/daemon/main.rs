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
    pagepilot_testkit::role_harness(roles::ROLE_ENV, roles::run, tests::ALL);
}
