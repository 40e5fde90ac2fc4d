//! The watchdog: HiPEC's security-checker thread that stops policy executions
//! running past their time limit.
//!
//! The executor marks an execution running by storing an odd sequence number
//! in its [`Execution`] and done by storing the next even one: two plain
//! stores per event, no clock read. The thread wakes periodically; an
//! execution seen running under the same sequence number for at least its
//! time limit gets its stop flag set, which the interpreter reads every few
//! thousand commands. The period adapts as in the paper: halved after a wakeup
//! that found a timeout, doubled after one that did not, kept between 250 ms
//! and 8 s. A runaway is therefore stopped within its time limit plus about
//! two periods, and a quiet system costs one wakeup every 8 s.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The paper's shortest wakeup period.
pub const MIN_PERIOD: Duration = Duration::from_millis(250);
/// The paper's longest wakeup period.
pub const MAX_PERIOD: Duration = Duration::from_secs(8);

/// The next wakeup period: halved if a timeout was found, doubled otherwise,
/// clamped to `[min, max]`.
pub fn next_period(
    current: Duration,
    found_timeout: bool,
    min: Duration,
    max: Duration,
) -> Duration {
    let next = if found_timeout {
        current / 2
    } else {
        current.saturating_mul(2)
    };
    next.clamp(min, max)
}

/// One policy's execution state, shared with the watchdog.
#[derive(Debug)]
pub struct Execution {
    running: AtomicU64,
    stop: AtomicBool,
    timeout: Duration,
}

impl Execution {
    /// State for executions limited to `timeout` each.
    pub fn new(timeout: Duration) -> Arc<Execution> {
        Arc::new(Execution {
            running: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            timeout,
        })
    }

    /// Marks execution number `n` started.
    #[inline]
    pub fn begin(&self, n: u64) {
        self.running.store(n << 1 | 1, Ordering::Relaxed);
    }

    /// Marks execution number `n` done.
    #[inline]
    pub fn end(&self, n: u64) {
        self.running.store((n + 1) << 1, Ordering::Relaxed);
    }

    /// The stop flag the interpreter polls.
    pub fn stop_flag(&self) -> &AtomicBool {
        &self.stop
    }

    /// Whether the watchdog stopped an execution.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Clears the stop flag (for the next execution).
    pub fn rearm(&self) {
        self.stop.store(false, Ordering::Relaxed);
    }
}

/// Wakeup period bounds and start.
#[derive(Clone, Copy, Debug)]
pub struct Periods {
    /// First period.
    pub initial: Duration,
    /// Shortest period.
    pub min: Duration,
    /// Longest period.
    pub max: Duration,
}

impl Default for Periods {
    fn default() -> Self {
        Periods {
            initial: Duration::from_secs(1),
            min: MIN_PERIOD,
            max: MAX_PERIOD,
        }
    }
}

struct Watched {
    exec: Weak<Execution>,
    seen: Option<(u64, Instant)>,
}

struct Shared {
    watched: Mutex<Vec<Watched>>,
    shutdown: Mutex<bool>,
    wake: Condvar,
    timeouts: AtomicU64,
    period_ms: AtomicU64,
}

/// A watchdog thread. Dropping it stops the thread.
pub struct Watchdog {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Starts a watchdog thread with the given periods.
    pub fn start(periods: Periods) -> Watchdog {
        let shared = Arc::new(Shared {
            watched: Mutex::new(Vec::new()),
            shutdown: Mutex::new(false),
            wake: Condvar::new(),
            timeouts: AtomicU64::new(0),
            period_ms: AtomicU64::new(periods.initial.as_millis() as u64),
        });
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("policy-watchdog".into())
            .spawn(move || watch(&for_thread, periods))
            .ok();
        Watchdog { shared, thread }
    }

    /// The process-wide watchdog, started on first use.
    pub fn global() -> &'static Watchdog {
        static GLOBAL: OnceLock<Watchdog> = OnceLock::new();
        GLOBAL.get_or_init(|| Watchdog::start(Periods::default()))
    }

    /// Watches `exec` until it is dropped.
    pub fn watch(&self, exec: &Arc<Execution>) {
        if let Ok(mut w) = self.shared.watched.lock() {
            w.push(Watched {
                exec: Arc::downgrade(exec),
                seen: None,
            });
        }
    }

    /// Executions stopped so far.
    pub fn timeouts(&self) -> u64 {
        self.shared.timeouts.load(Ordering::Relaxed)
    }

    /// The current wakeup period.
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.shared.period_ms.load(Ordering::Relaxed))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Ok(mut s) = self.shared.shutdown.lock() {
            *s = true;
        }
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch(shared: &Shared, periods: Periods) {
    let mut period = periods.initial.clamp(periods.min, periods.max);
    loop {
        shared
            .period_ms
            .store(period.as_millis() as u64, Ordering::Relaxed);
        let Ok(guard) = shared.shutdown.lock() else {
            return;
        };
        let Ok((guard, _)) = shared.wake.wait_timeout_while(guard, period, |s| !*s) else {
            return;
        };
        if *guard {
            return;
        }
        drop(guard);
        let found = scan(shared);
        period = next_period(period, found, periods.min, periods.max);
    }
}

/// One wakeup: stops executions past their limit; returns whether any was.
fn scan(shared: &Shared) -> bool {
    let now = Instant::now();
    let mut found = false;
    let Ok(mut watched) = shared.watched.lock() else {
        return false;
    };
    watched.retain_mut(|w| {
        let Some(exec) = w.exec.upgrade() else {
            return false;
        };
        let state = exec.running.load(Ordering::Relaxed);
        if state & 1 == 0 {
            w.seen = None;
            return true;
        }
        match w.seen {
            Some((s, since)) if s == state => {
                if now.duration_since(since) >= exec.timeout && !exec.stopped() {
                    exec.stop.store(true, Ordering::Relaxed);
                    shared.timeouts.fetch_add(1, Ordering::Relaxed);
                    found = true;
                }
            }
            _ => w.seen = Some((state, now)),
        }
        true
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_period_halves_on_timeout_doubles_otherwise_and_is_clamped() {
        let s = Duration::from_secs;
        assert_eq!(next_period(s(2), true, MIN_PERIOD, MAX_PERIOD), s(1));
        assert_eq!(next_period(s(2), false, MIN_PERIOD, MAX_PERIOD), s(4));
        assert_eq!(next_period(s(8), false, MIN_PERIOD, MAX_PERIOD), s(8));
        assert_eq!(
            next_period(Duration::from_millis(300), true, MIN_PERIOD, MAX_PERIOD),
            MIN_PERIOD
        );
    }

    #[test]
    fn test_watchdog_stops_an_execution_past_its_limit_only() {
        let dog = Watchdog::start(Periods {
            initial: Duration::from_millis(20),
            min: Duration::from_millis(10),
            max: Duration::from_millis(40),
        });
        let slow = Execution::new(Duration::from_millis(30));
        let idle = Execution::new(Duration::from_millis(30));
        dog.watch(&slow);
        dog.watch(&idle);
        slow.begin(0);
        idle.begin(0);
        idle.end(0);
        let t = Instant::now();
        while !slow.stopped() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(slow.stopped(), "runaway execution not stopped");
        assert!(!idle.stopped());
        assert_eq!(dog.timeouts(), 1);
    }
}
