//! The client's reader thread: replies to the waiters in order, the
//! daemon's events applied to the regions they name, and each region's
//! fault count reported once a second.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering::SeqCst};
use std::sync::{Arc, Once, Weak};
use std::time::{Duration, Instant};

use pagepilot_protocol::{ErrorCode, Kind, Message, RegionId};
use pagepilot_transport::Connection;

use super::{RegionState, Waiter};
use crate::shared::Shared;
use crate::{lifecycle, sys};

/// How often each region's fault count goes to the daemon (for status).
const REPORT_PERIOD: Duration = Duration::from_secs(1);

/// Starts the thread reading what the daemon sends on `conn`. It ends when
/// the connection does (the daemon stopped, or the client was dropped).
pub(super) fn spawn_reader(inner: Weak<RegionState>, mut conn: Connection) -> std::io::Result<()> {
    lifecycle::spawn_service("pagepilot-daemon".into(), move || {
        let mut reported = Instant::now();
        loop {
            let received = conn.receive_within(Some(REPORT_PERIOD));
            let Some(inner) = inner.upgrade() else {
                return;
            };
            match received {
                Ok(Some(r)) => dispatch(&inner, r.message),
                Ok(None) => {}
                Err(e) => {
                    if inner.pid == std::process::id() && !inner.closed.load(SeqCst) {
                        eprintln!("pagepilot: the daemon connection ended ({}); regions keep their budgets", pagepilot_policy::chain(&e));
                    }
                    inner.close();
                    return;
                }
            }
            if reported.elapsed() >= REPORT_PERIOD {
                report(&inner);
                reported = Instant::now();
            }
        }
    })
    .map(drop)
}

/// Which way a region's budget may move to follow the daemon's count.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Follow {
    /// Frames came (`Granted`, `Settled`): only up.
    Grow,
    /// Frames went (`Forced`, `Released`): only down.
    Shrink,
}

fn dispatch(inner: &RegionState, message: Message) {
    match message {
        Message::ReclaimOrder { region, frames, .. } => {
            let Some((link, shared)) = region_of(inner, region) else {
                return;
            };
            // HiPEC's normal reclamation: the policy names the pages, dirty
            // ones are written back here, off the faulting threads.
            let given = shared.give_back(usize::try_from(frames).unwrap_or(usize::MAX));
            if given > 0 {
                link.reclaimed.fetch_add(given as u64, SeqCst);
                let _ = inner.notify(&Message::Returned {
                    region,
                    frames: given as u64,
                });
            }
        }
        Message::Forced {
            region,
            frames,
            held_frames,
        } => {
            if let Some((link, shared)) = region_of(inner, region) {
                link.forced.fetch_add(frames, SeqCst);
                link.forced_incidents.fetch_add(1, SeqCst);
                follow(&shared, held_frames, Follow::Shrink);
            }
        }
        Message::Settled {
            region,
            held_frames,
            ..
        } => {
            if let Some((_, shared)) = region_of(inner, region) {
                follow(&shared, held_frames, Follow::Grow);
            }
        }
        // A notification refused (a `Returned` that came after its frames
        // were forced): nothing waits for it, and nothing changes.
        Message::Error(e) if matches!(e.request, Some(Kind::Returned | Kind::Report)) => {}
        // The answer to the client's own `Goodbye` (it is leaving: nothing
        // waits for it; the connection ends next).
        Message::Goodbye => {}
        // The daemon is stopping (it closes the connection next); the
        // regions keep their budgets.
        Message::Error(e) if e.code == ErrorCode::ShuttingDown && e.request.is_none() => {}
        reply => {
            let waiter = inner.writer().waiting.pop_front();
            match waiter {
                Some(Waiter::Caller(tx)) => {
                    let _ = tx.send(reply);
                }
                Some(Waiter::Grant(region)) => {
                    if let Some((link, shared)) = region_of(inner, region) {
                        link.requesting.store(false, SeqCst);
                        if let Message::Granted { held_frames, .. } = reply {
                            follow(&shared, held_frames, Follow::Grow);
                        }
                    }
                }
                Some(Waiter::Release(region)) => {
                    if let (Some((_, shared)), Message::Released { held_frames, .. }) =
                        (region_of(inner, region), &reply)
                    {
                        follow(&shared, *held_frames, Follow::Shrink);
                    }
                }
                Some(Waiter::Nobody) => {}
                None => eprintln!(
                    "pagepilot: the daemon sent {} when no reply was due",
                    reply.kind()
                ),
            }
        }
    }
}

fn region_of(
    inner: &RegionState,
    region: RegionId,
) -> Option<(Arc<super::member::Link>, Arc<Shared>)> {
    let link = inner.link(region)?;
    let shared = link.shared.upgrade()?;
    Some((link, shared))
}

/// Moves the region's budget toward `held` (the daemon's count), in the
/// direction the message allows: a grant crossing a release in flight
/// must not undo the release, the release's own reply settles it.
fn follow(shared: &Shared, held: u64, way: Follow) {
    let held = usize::try_from(held).unwrap_or(usize::MAX);
    let budget = shared.lock().table.budget();
    match way {
        Follow::Grow if held > budget => shared.grow_budget_to(held),
        Follow::Shrink if held < budget => shared.take_back(budget - held),
        _ => {}
    }
}

/// Sends each region's fault counts, when they changed.
fn report(inner: &RegionState) {
    let links: Vec<_> = inner
        .regions_mut()
        .iter()
        .map(|(r, l)| (*r, l.clone()))
        .collect();
    for (region, link) in links {
        let Some(shared) = link.shared.upgrade() else {
            continue;
        };
        let c = &shared.stats();
        let faults = [&c.missing_faults, &c.minor_faults, &c.wp_faults]
            .iter()
            .map(|n| n.load(SeqCst))
            .sum();
        let postponed = shared
            .fault_limit()
            .as_ref()
            .map_or(0, |l| l.stats().postponed)
            .min(faults);
        if link.reported.swap(faults, SeqCst) != faults {
            let _ = inner.notify(&Message::Report {
                region,
                faults,
                postponed_faults: postponed,
            });
        }
    }
}

/// The sockets of this process's clients, closed in a child after fork:
/// the child has none of the client's threads, and a copy of the socket
/// left open would keep its parent "alive" to the daemon after the
/// parent died.
static SOCKETS: [AtomicI32; 32] = [const { AtomicI32::new(-1) }; 32];
static AT_FORK: Once = Once::new();

/// Records a new client's sockets, to close in children.
pub(super) fn close_in_children(fds: [RawFd; 2]) {
    AT_FORK.call_once(|| {
        let _ = sys::at_fork(nothing, nothing, forget_in_child);
    });
    for fd in fds {
        // More clients than slots: their children keep a copy (the daemon
        // then sees them leave when the children exit too).
        let _ = SOCKETS
            .iter()
            .find(|s| s.compare_exchange(-1, fd, SeqCst, SeqCst).is_ok());
    }
}

/// Forgets a client's sockets, before they are closed (their numbers may
/// name something else afterwards).
pub(super) fn forget_sockets(fds: [RawFd; 2]) {
    for fd in fds {
        if let Some(s) = SOCKETS.iter().find(|s| s.load(SeqCst) == fd) {
            s.store(-1, SeqCst);
        }
    }
}

unsafe extern "C" fn nothing() {}

/// In the child, the only thread: each recorded socket's descriptor is made
/// to name `/dev/null`, so the child's copy of the connection goes and the
/// number stays valid for the handles that still name it.
unsafe extern "C" fn forget_in_child() {
    for slot in &SOCKETS {
        let fd = slot.swap(-1, SeqCst);
        if fd >= 0 {
            sys::replace_with_null(fd);
        }
    }
}
