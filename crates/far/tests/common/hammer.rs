//! The integrity harness the pager's tests use too (`pagepilot-testkit`).

pub use pagepilot_testkit::*;
