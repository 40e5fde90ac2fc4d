//! What the daemon holds and for whom: the `StatusReply` of `pagepilot
//! status`, within the protocol's bounds so that it always encodes.

use pagepilot_frames::Clock;
use pagepilot_protocol::{
    ClientId, ClientStatus, HolderId as WireHolder, RegionFiles, RegionId, RegionStatus,
    StatusReply, MAX_STATUS_CLIENTS, MAX_STATUS_REGIONS,
};

use crate::core::{to_u64, Core};

impl<C: Clock + Clone> Core<C> {
    /// Every client (pid, uid from `SO_PEERCRED`) and its regions: frames
    /// held, `minFrame`, pinned, RAPHA's counts, frames reclaimed and
    /// forced. At most 256 clients and 512 regions are listed; `truncated`
    /// says when some were left out.
    ///
    /// Faults are served inside each client and never cross the socket:
    /// `faults_per_sec` and `postponed_faults` come from the counts clients
    /// send (`Report`): the rate between the last two reports (the first
    /// against the registration), the postponed faults of the last one; 0
    /// for a region that never reported.
    pub fn status(&self) -> StatusReply {
        let mut truncated = self.clients.len() > MAX_STATUS_CLIENTS;
        let mut budget = MAX_STATUS_REGIONS;
        let mut clients = Vec::new();
        for (&client, c) in self.clients.iter().take(MAX_STATUS_CLIENTS) {
            truncated |= c.regions.len() > budget;
            let regions: Vec<RegionStatus> = c
                .regions
                .iter()
                .take(budget)
                .map(|(&region, r)| {
                    let s = self.frames.stats(r.holder).cloned().unwrap_or_default();
                    RegionStatus {
                        region,
                        holder: WireHolder(r.holder.0),
                        min_frames: r.min_frames,
                        held_frames: to_u64(s.held),
                        pinned_frames: r.pins.pages(),
                        faults_per_sec: r.reports.faults_per_sec(),
                        postponed_faults: r.reports.last.postponed,
                        reclaimed_frames: s.reclaimed,
                        forced_frames: s.forced,
                    }
                })
                .collect();
            budget -= regions.len();
            clients.push(ClientStatus {
                client,
                pid: c.peer.pid,
                uid: c.peer.uid,
                regions,
            });
        }
        StatusReply {
            total_frames: self.total_frames(),
            free_frames: self.free_frames(),
            truncated,
            clients,
        }
    }

    /// The descriptors a region announced at registration (the I/O loop
    /// keeps them, and closes them once the region is unregistered).
    pub fn region_files(&self, client: ClientId, region: RegionId) -> Option<RegionFiles> {
        Some(self.clients.get(&client)?.regions.get(&region)?.files)
    }

    /// Frames a client's regions hold together; `None` for no such client.
    pub fn frames_of(&self, client: ClientId) -> Option<u64> {
        Some(self.client_held(self.clients.get(&client)?))
    }

    /// Pages a client has pinned over its regions; `None` for no such client.
    pub fn pinned_of(&self, client: ClientId) -> Option<u64> {
        Some(self.clients.get(&client)?.pinned())
    }
}
