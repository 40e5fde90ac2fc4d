//! The requests of a welcomed client: regions joining and leaving the frame
//! manager (HiPEC's Allocation and Deallocation) and RAPHA's controller,
//! `Request`/`Release`, frames returned after a reclaim order, pins (the
//! Cache Kernel's locked mappings) and status. Each checks the client's
//! quotas first; a refusal becomes an `Error` naming the request.

use pagepilot_frames::{Clock, FrameError, RateError, TaskId};
use pagepilot_protocol::{
    ClientId, ErrorCode, HolderId as WireHolder, Message, RegionId, RegisterRegion, PPM,
};

use crate::client::{faults_per_sec, Client, FaultReports, Region};
use crate::core::{to_u64, to_usize, Core, Outgoing};
use crate::error::Refusal;
use crate::pins::{pages, PinError, PinSet};

type Reply = Result<Vec<Outgoing>, Refusal>;

impl<C: Clock + Clone> Core<C> {
    pub(crate) fn request(&mut self, client: ClientId, message: Message) -> Reply {
        match message {
            Message::RegisterRegion(r) => self.register(client, r),
            Message::UnregisterRegion { region } => self.unregister(client, region),
            Message::RequestFrames { region, frames } => {
                self.request_frames(client, region, frames)
            }
            Message::ReleaseFrames { region, frames } => self.release(client, region, frames),
            Message::Returned { region, frames } => self.returned(client, region, frames),
            Message::Pin {
                region,
                offset,
                len,
            } => self.pin(client, region, offset, len),
            Message::Unpin {
                region,
                offset,
                len,
            } => self.unpin(client, region, offset, len),
            Message::Report {
                region,
                faults,
                postponed_faults,
            } => self.report(client, region, faults, postponed_faults),
            Message::Status => Ok(vec![Outgoing::send(
                client,
                Message::StatusReply(self.status()),
            )]),
            other => Err(Refusal::new(
                ErrorCode::UnexpectedMessage,
                None,
                format!("{} is not a request", other.kind()),
            )),
        }
    }

    fn client(&self, client: ClientId) -> Result<&Client, Refusal> {
        // The caller checked it exists; a refusal rather than a panic.
        self.clients
            .get(&client)
            .ok_or_else(|| Refusal::new(ErrorCode::Internal, None, "client vanished"))
    }

    fn region(&self, client: ClientId, region: RegionId) -> Result<&Region, Refusal> {
        self.client(client)?.regions.get(&region).ok_or_else(|| {
            Refusal::new(
                ErrorCode::UnknownRegion,
                Some(region),
                format!("no region {} registered by this client", region.0),
            )
        })
    }

    fn held(&self, region: &Region) -> u64 {
        self.frames
            .stats(region.holder)
            .map_or(0, |s| to_u64(s.held))
    }

    /// Frames a client's regions hold together.
    pub(crate) fn client_held(&self, client: &Client) -> u64 {
        client.regions.values().map(|r| self.held(r)).sum()
    }

    /// Frames a client's regions are committed to, counted against its
    /// quota: what each holds, or its `minFrame` when it is still owed
    /// frames to reach it.
    fn client_committed(&self, client: &Client) -> u64 {
        client
            .regions
            .values()
            .map(|r| self.held(r).max(r.min_frames))
            .fold(0, u64::saturating_add)
    }

    /// The client's quotas for a new region: its regions, its frames
    /// (committed, with the new minimum), its fault rate. Returns the
    /// region's fault rate.
    fn check_quotas(&self, c: &Client, r: &RegisterRegion) -> Result<u64, Refusal> {
        let (q, id) = (c.quotas, Some(r.region));
        let beyond = |text: String| Err(Refusal::new(ErrorCode::BeyondQuota, id, text));
        if c.regions.len() >= to_usize(u64::from(q.regions)) {
            return beyond(format!("the client's quota is {} regions", q.regions));
        }
        let committed = self.client_committed(c).saturating_add(r.min_frames);
        if committed > q.frames {
            return beyond(format!(
                "minFrame {} brings the client's frames to {committed}, its quota is {}",
                r.min_frames, q.frames
            ));
        }
        let rate = faults_per_sec(r.fault_limit, r.fault_period_us);
        let rates = c.fault_rate().saturating_add(rate);
        if rates > q.fault_rate {
            return beyond(format!(
                "a limit of {rate} faults/s brings the client's to {rates}, its quota is {}",
                q.fault_rate
            ));
        }
        Ok(rate)
    }

    /// RAPHA's admission control (Eq. 2, across every client) for a region
    /// with a fault limit or a processor reserve; `None` for one with
    /// neither.
    fn admit(&mut self, r: &RegisterRegion) -> Result<Option<TaskId>, Refusal> {
        if r.fault_limit == 0 && r.cpu_reserve_ppm == 0 {
            return Ok(None);
        }
        let pc = f64::from(r.cpu_reserve_ppm) / f64::from(PPM);
        let period_ns = match r.fault_period_us {
            0 => self
                .config
                .machine
                .fault_period_ms
                .saturating_mul(1_000_000),
            us => us.saturating_mul(1_000),
        };
        let code = |e: &RateError| match e {
            RateError::ReserveDoesNotFit { .. } => ErrorCode::ReserveDoesNotFit,
            RateError::IdsExhausted => ErrorCode::Internal,
            _ => ErrorCode::Malformed,
        };
        self.rate
            .admit(pc, r.fault_limit, period_ns)
            .map(Some)
            .map_err(|e| Refusal::new(code(&e), Some(r.region), e.to_string()))
    }

    fn register(&mut self, client: ClientId, r: RegisterRegion) -> Reply {
        let id = Some(r.region);
        let c = self.client(client)?;
        if c.regions.contains_key(&r.region) {
            let text = format!("region {} is already registered", r.region.0);
            return Err(Refusal::new(ErrorCode::RegionExists, id, text));
        }
        if r.budget_frames < r.min_frames
            || r.cpu_reserve_ppm > PPM
            || (r.fault_limit == 0) != (r.fault_period_us == 0)
        {
            let text = "inconsistent registration (budget below minimum, reserve above 1, or a limit without a period)";
            return Err(Refusal::new(ErrorCode::Malformed, id, text));
        }
        let rate = self.check_quotas(c, &r)?;
        // RAPHA first: a refusal by the frame manager can be undone there,
        // reclaim orders already asked of other holders could not.
        let task = self.admit(&r)?;
        let (holder, orders) = match self.frames.register(to_usize(r.min_frames)) {
            Ok(done) => done,
            Err(e) => {
                if let Some(task) = task {
                    let _ = self.rate.leave(task);
                }
                let code = match e {
                    FrameError::MinDoesNotFit { .. } => ErrorCode::MinFrameDoesNotFit,
                    _ => ErrorCode::Internal,
                };
                return Err(Refusal::new(code, id, e.to_string()));
            }
        };
        let region = Region {
            holder,
            task,
            min_frames: r.min_frames,
            budget_frames: r.budget_frames,
            fault_rate: rate,
            pins: PinSet::default(),
            files: r.files,
            reports: FaultReports::starting(self.rate.now_ns()),
        };
        let granted_frames = self.held(&region);
        self.holders.insert(holder, (client, r.region));
        if let Some(c) = self.clients.get_mut(&client) {
            c.regions.insert(r.region, region);
        }
        let reply = Message::Registered {
            region: r.region,
            holder: WireHolder(holder.0),
            granted_frames,
        };
        let mut out = vec![Outgoing::send(client, reply)];
        out.extend(self.orders(&orders));
        Ok(out)
    }

    fn unregister(&mut self, client: ClientId, region: RegionId) -> Reply {
        self.region(client, region)?;
        let short = self.short_of_minimum();
        let Some(r) = self
            .clients
            .get_mut(&client)
            .and_then(|c| c.regions.remove(&region))
        else {
            return Err(Refusal::internal(region, "region vanished"));
        };
        self.holders.remove(&r.holder);
        if let Some(task) = r.task {
            let _ = self.rate.leave(task);
        }
        let frames = self
            .frames
            .unregister(r.holder)
            .map_err(|e| Refusal::internal(region, e))?;
        let reply = Message::Unregistered {
            region,
            frames: to_u64(frames),
        };
        let mut out = vec![Outgoing::send(client, reply)];
        out.extend(self.grants_since(&short, None));
        Ok(out)
    }

    fn request_frames(&mut self, client: ClientId, region: RegionId, frames: u64) -> Reply {
        let r = self.region(client, region)?;
        let (holder, budget, held) = (r.holder, r.budget_frames, self.held(r));
        let c = self.client(client)?;
        let (quota, committed) = (c.quotas.frames, self.client_committed(c));
        let quota_room = quota.saturating_sub(committed);
        if quota_room == 0 {
            let text =
                format!("the client's regions hold {committed} frames, its quota is {quota}");
            return Err(Refusal::new(ErrorCode::BeyondQuota, Some(region), text));
        }
        let ask = frames.min(quota_room).min(budget.saturating_sub(held));
        let (granted, orders) = self
            .frames
            .request(holder, to_usize(ask))
            .map_err(|e| Refusal::internal(region, e))?;
        let reply = Message::Granted {
            region,
            frames: to_u64(granted),
            held_frames: self.frames.stats(holder).map_or(0, |s| to_u64(s.held)),
        };
        let mut out = vec![Outgoing::send(client, reply)];
        out.extend(self.orders(&orders));
        Ok(out)
    }

    /// Frames a region may give up: what it holds less its pinned pages.
    fn unpinned_held(&self, r: &Region) -> u64 {
        self.held(r).saturating_sub(r.pins.pages())
    }

    fn release(&mut self, client: ClientId, region: RegionId, frames: u64) -> Reply {
        let r = self.region(client, region)?;
        let (holder, n) = (r.holder, frames.min(self.unpinned_held(r)));
        let short = self.short_of_minimum();
        // Frames released while an order is pending answer the order first,
        // so that what is forced at its deadline never cuts below minFrame.
        let owed = to_u64(self.frames.asked_of(holder));
        let answered = n.min(owed);
        self.frames
            .returned(holder, to_usize(answered))
            .and_then(|()| self.frames.release(holder, to_usize(n - answered)))
            .map_err(|e| Refusal::internal(region, e))?;
        let held_frames = self.frames.stats(holder).map_or(0, |s| to_u64(s.held));
        let reply = Message::Released {
            region,
            held_frames,
        };
        let mut out = vec![Outgoing::send(client, reply)];
        out.extend(self.grants_since(&short, Some(holder)));
        Ok(out)
    }

    fn returned(&mut self, client: ClientId, region: RegionId, frames: u64) -> Reply {
        let r = self.region(client, region)?;
        let (holder, n) = (r.holder, frames.min(self.unpinned_held(r)));
        let short = self.short_of_minimum();
        self.frames
            .returned(holder, to_usize(n))
            .map_err(|e| Refusal::internal(region, e))?;
        Ok(self.grants_since(&short, Some(holder)))
    }

    /// A region's fault counts (a notification: answered only when
    /// refused), kept for status.
    fn report(&mut self, client: ClientId, region: RegionId, faults: u64, postponed: u64) -> Reply {
        self.region(client, region)?;
        let now = self.rate.now_ns();
        if let Some(r) = self
            .clients
            .get_mut(&client)
            .and_then(|c| c.regions.get_mut(&region))
        {
            r.reports.record(faults, postponed, now);
        }
        Ok(Vec::new())
    }

    fn pin(&mut self, client: ClientId, region: RegionId, offset: u64, len: u64) -> Reply {
        let id = Some(region);
        let r = self.region(client, region)?;
        let (first, end) = pages(offset, len).map_err(|e| bad_range(region, e))?;
        let added = r.pins.unpinned_in(first, end);
        let region_pinned = r.pins.pages().saturating_add(added);
        let resident = r.min_frames.min(self.held(r));
        if region_pinned > resident {
            let text = format!(
                "{region_pinned} pinned frames would pass the {resident} the region holds of its \
                 minFrame: pinned pages are resident and part of the guaranteed minimum"
            );
            return Err(Refusal::new(ErrorCode::PinQuota, id, text));
        }
        let c = self.client(client)?;
        let (pinned, quota) = (c.pinned().saturating_add(added), c.quotas.pinned_frames);
        if pinned > quota {
            let text =
                format!("{pinned} pinned frames would pass the client's pin quota of {quota}");
            return Err(Refusal::new(ErrorCode::PinQuota, id, text));
        }
        self.with_pins(client, region, |p| p.pin(first, end))
    }

    fn unpin(&mut self, client: ClientId, region: RegionId, offset: u64, len: u64) -> Reply {
        self.region(client, region)?;
        let (first, end) = pages(offset, len).map_err(|e| bad_range(region, e))?;
        self.with_pins(client, region, |p| p.unpin(first, end))
    }

    fn with_pins(
        &mut self,
        client: ClientId,
        region: RegionId,
        f: impl FnOnce(&mut PinSet) -> Result<u64, PinError>,
    ) -> Reply {
        let Some(r) = self
            .clients
            .get_mut(&client)
            .and_then(|c| c.regions.get_mut(&region))
        else {
            return Err(Refusal::internal(region, "region vanished"));
        };
        f(&mut r.pins).map_err(|e| bad_range(region, e))?;
        let reply = Message::Pinned {
            region,
            pinned_frames: r.pins.pages(),
        };
        Ok(vec![Outgoing::send(client, reply)])
    }
}

fn bad_range(region: RegionId, e: PinError) -> Refusal {
    let code = match e {
        PinError::TooManyRanges => ErrorCode::PinQuota,
        PinError::Empty { .. } | PinError::NotPinned { .. } => ErrorCode::BadRange,
    };
    Refusal::new(code, Some(region), e.to_string())
}
