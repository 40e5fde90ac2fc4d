//! A region's place among the daemon's holders.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Weak};

use pagepilot_frames::HolderStats;
use pagepilot_protocol::{Message, RegionFiles, RegionId, RegisterRegion, PPM};

use super::{Client, DaemonError, RegionState, Waiter};
use crate::shared::Shared;
use crate::source::Source;

/// What the client's reader thread knows of a region.
pub(crate) struct Link {
    pub shared: Weak<Shared>,
    /// A `RequestFrames` is in flight: a policy asking on every fault sends
    /// one message, not one per fault.
    pub requesting: AtomicBool,
    /// Frames given back when the daemon asked.
    pub reclaimed: AtomicU64,
    /// Frames the daemon took by force, and how many times.
    pub forced: AtomicU64,
    pub forced_incidents: AtomicU64,
    /// The fault count last reported.
    pub reported: AtomicU64,
    min: u64,
}

/// A region registered with the daemon; unregistered when dropped.
pub(crate) struct Membership {
    inner: Arc<RegionState>,
    region: RegionId,
    link: Arc<Link>,
}

/// What a region asks of the daemon as it joins.
pub(crate) struct Terms {
    /// Its `minFrame`.
    pub min_frames: usize,
    /// Its budget (the most it asks for).
    pub budget_frames: usize,
    /// RAPHA's fault limit and period.
    pub fault_limit: Option<(u64, std::time::Duration)>,
    /// RAPHA's processor reserve, a share of one processor.
    pub reserve: f64,
}

/// Registers `shared` with the daemon behind `client`: the region's budget
/// becomes what the daemon grants (at least one frame), its `Request` and
/// `Release` go to the daemon. Before the region serves its first fault.
pub(crate) fn join(
    client: &Client,
    shared: &Arc<Shared>,
    terms: &Terms,
) -> Result<(), DaemonError> {
    let inner = client.inner();
    let region = RegionId(inner.next_region.fetch_add(1, SeqCst));
    let link = Arc::new(Link {
        shared: Arc::downgrade(shared),
        requesting: AtomicBool::new(false),
        reclaimed: AtomicU64::new(0),
        forced: AtomicU64::new(0),
        forced_incidents: AtomicU64::new(0),
        reported: AtomicU64::new(0),
        min: terms.min_frames as u64,
    });
    // Known before the registration is sent: a `Settled` may follow its
    // reply at once.
    inner.regions_mut().insert(region, link.clone());
    let (files, fds) = files_of(shared);
    let (fault_limit, fault_period_us) = terms.fault_limit.map_or((0, 0), |(faults, period)| {
        (
            faults,
            period.as_micros().clamp(1, u128::from(u64::MAX)) as u64,
        )
    });
    let register = Message::RegisterRegion(RegisterRegion {
        region,
        min_frames: terms.min_frames as u64,
        budget_frames: terms.budget_frames.max(1) as u64,
        fault_limit,
        fault_period_us,
        cpu_reserve_ppm: (terms.reserve * f64::from(PPM)).round() as u32,
        files,
    });
    let granted = match inner.call(&register, &fds) {
        Ok(Message::Registered { granted_frames, .. }) => granted_frames,
        Ok(other) => {
            inner.regions_mut().remove(&region);
            return Err(super::refusal(other, "Registered"));
        }
        Err(e) => {
            inner.regions_mut().remove(&region);
            return Err(e);
        }
    };
    let mut g = shared.lock();
    // A `Settled` read meanwhile may have grown it already.
    let granted = usize::try_from(granted).unwrap_or(usize::MAX);
    g.table.grow_budget_to(granted.max(1));
    let membership = Membership {
        inner: inner.clone(),
        region,
        link,
    };
    // The rest of the budget is asked for as in a pool: granted from free
    // frames, the budget growing when the answer comes.
    if terms.budget_frames > granted {
        membership.request(terms.budget_frames - granted);
    }
    g.table.set_source(Some(Source::Daemon(membership)));
    Ok(())
}

/// The descriptors the daemon keeps for a region: its memory file, and for
/// a writable file its backing file and dirty map, so it can write back for
/// a client that died.
fn files_of(shared: &Shared) -> (RegionFiles, Vec<BorrowedFd<'_>>) {
    let Some(f) = shared.daemon_files() else {
        return (RegionFiles::default(), Vec::new());
    };
    let files = RegionFiles {
        memory: true,
        backing: f.backing.is_some(),
        dirty: f.dirty.is_some(),
    };
    let fds = [Some(f.memory), f.backing, f.dirty]
        .into_iter()
        .flatten()
        .collect();
    (files, fds)
}

impl Membership {
    /// `Request(n)`: sent, answered later (one in flight per region).
    pub fn request(&self, n: usize) {
        if n == 0 || self.link.requesting.swap(true, SeqCst) {
            return;
        }
        let message = Message::RequestFrames {
            region: self.region,
            frames: n as u64,
        };
        if self
            .inner
            .send(&message, &[], Waiter::Grant(self.region))
            .is_err()
        {
            self.link.requesting.store(false, SeqCst);
        }
    }

    /// `Release(n)`: the frames given back (all of them, or none when the
    /// daemon cannot be told).
    pub fn release(&self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let message = Message::ReleaseFrames {
            region: self.region,
            frames: n as u64,
        };
        match self.inner.send(&message, &[], Waiter::Release(self.region)) {
            Ok(()) => n,
            Err(_) => 0,
        }
    }

    /// What the region gave back and what was taken, as [`HolderStats`].
    pub fn holder_stats(&self) -> HolderStats {
        HolderStats {
            min: self.link.min as usize,
            reclaimed: self.link.reclaimed.load(SeqCst),
            forced: self.link.forced.load(SeqCst),
            forced_incidents: self.link.forced_incidents.load(SeqCst),
            ..HolderStats::default()
        }
    }
}

/// A registered region, as a handle usable outside the region's lock (a
/// request waits for the daemon's answer, and the reader thread that
/// brings it may need the lock meanwhile).
pub(crate) struct DaemonRegion {
    inner: Arc<RegionState>,
    region: RegionId,
}

impl DaemonRegion {
    /// Asks the daemon to count `len` bytes at `offset` as pinned (against
    /// the user's pin quota).
    pub fn pin(&self, offset: usize, len: usize) -> Result<(), DaemonError> {
        self.pin_message(offset, len, true)
    }

    /// Tells the daemon the range is unpinned.
    pub fn unpin(&self, offset: usize, len: usize) -> Result<(), DaemonError> {
        self.pin_message(offset, len, false)
    }

    fn pin_message(&self, offset: usize, len: usize, pin: bool) -> Result<(), DaemonError> {
        let (region, offset, len) = (self.region, offset as u64, len as u64);
        let message = if pin {
            Message::Pin {
                region,
                offset,
                len,
            }
        } else {
            Message::Unpin {
                region,
                offset,
                len,
            }
        };
        match self.inner.call(&message, &[])? {
            Message::Pinned { .. } => Ok(()),
            other => Err(super::refusal(other, "Pinned")),
        }
    }
}

impl Membership {
    /// A handle to use outside the region's lock.
    pub fn handle(&self) -> DaemonRegion {
        DaemonRegion {
            inner: self.inner.clone(),
            region: self.region,
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.inner.regions_mut().remove(&self.region);
        // Not waited for: this may run on the reader thread itself.
        let message = Message::UnregisterRegion {
            region: self.region,
        };
        let _ = self.inner.send(&message, &[], Waiter::Nobody);
    }
}
