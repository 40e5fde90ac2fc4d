//! The daemon's log: one line per event on stderr, at most a burst of
//! lines and then a steady rate, so that a client that makes the daemon
//! refuse it in a loop (or a daemon out of descriptors) cannot flood the
//! journal or spend the loop's time writing. Lines beyond the rate are
//! counted, and the count is written with the next line that passes.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Whether log lines are written (`ServerOptions::quiet`).
pub(super) static QUIET: AtomicBool = AtomicBool::new(false);

/// Lines written at once before the rate applies.
const BURST: f64 = 50.0;
/// Lines per second in the long run.
const RATE: f64 = 20.0;

/// A token bucket: how many lines may be written now.
#[derive(Debug)]
pub(super) struct Limiter {
    tokens: f64,
    at: Option<Instant>,
    suppressed: u64,
}

impl Limiter {
    /// A full bucket.
    pub const fn new() -> Limiter {
        Limiter {
            tokens: BURST,
            at: None,
            suppressed: 0,
        }
    }

    /// Whether a line may be written at `now`; when it may, how many were
    /// suppressed since the last one written.
    pub fn admit(&mut self, now: Instant) -> Option<u64> {
        if let Some(at) = self.at {
            let refill = now.saturating_duration_since(at).as_secs_f64() * RATE;
            self.tokens = (self.tokens + refill).min(BURST);
        }
        self.at = Some(now);
        if self.tokens < 1.0 {
            self.suppressed += 1;
            return None;
        }
        self.tokens -= 1.0;
        Some(std::mem::take(&mut self.suppressed))
    }
}

static LIMITER: Mutex<Limiter> = Mutex::new(Limiter::new());

/// Logs one line to stderr, if the rate allows. A failed write is ignored:
/// a daemon whose terminal or journal went away keeps serving
/// (`eprintln!` would panic).
pub(crate) fn write_log(line: std::fmt::Arguments<'_>) {
    if QUIET.load(Ordering::Relaxed) {
        return;
    }
    let admitted = match LIMITER.lock() {
        Ok(mut l) => l.admit(Instant::now()),
        Err(_) => Some(0),
    };
    let Some(suppressed) = admitted else {
        return;
    };
    let mut err = std::io::stderr().lock();
    if suppressed > 0 {
        let _ = writeln!(
            err,
            "pagepilot daemon: ({suppressed} log lines suppressed: more than {RATE} a second)"
        );
    }
    let _ = writeln!(err, "pagepilot daemon: {line}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_flood_of_lines_passes_a_burst_then_the_rate_and_counts_the_rest() {
        let mut l = Limiter::new();
        let start = Instant::now();
        let passed = (0..1000).filter(|_| l.admit(start).is_some()).count();
        assert_eq!(passed, BURST as usize);
        // One second later, RATE more pass; the first says what was left out.
        let later = start + Duration::from_secs(1);
        assert_eq!(l.admit(later), Some(1000 - BURST as u64));
        let more = (1..1000).filter(|_| l.admit(later).is_some()).count();
        assert_eq!(more + 1, RATE as usize);
    }
}
