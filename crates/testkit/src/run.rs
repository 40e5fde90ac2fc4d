//! Where the tests of `pagepilot run` find what they run: the `pagepilot`
//! binary and the interposer beside it, in the test executable's
//! `target/<profile>`.

use std::path::PathBuf;

/// `target/<profile>/pagepilot`, checked to have `libpagepilot_run.so`
/// beside it; a failure naming the command that builds both if either is
/// missing (`cargo test` leaves the interposer in `deps/`; scripts/test
/// builds it into place).
pub fn pagepilot_beside_interposer() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's executable");
    // target/<profile>/deps/<test>-<hash>
    let dir = exe.ancestors().nth(2).expect("target/<profile>");
    for path in [dir.join("pagepilot"), dir.join("libpagepilot_run.so")] {
        assert!(
            path.is_file(),
            "{} is missing: build it first with `cargo build --profile test -p pagepilot-cli \
             -p pagepilot-interpose` (scripts/test does)",
            path.display()
        );
    }
    dir.join("pagepilot")
}
