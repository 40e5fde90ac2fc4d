//! The requests of a welcomed client: regions joining and leaving the frame
//! manager (HiPEC's Allocation and Deallocation) and RAPHA's controller,
//! `Request`/`Release`, frames returned after a reclaim order, pins (the
//! Cache Kernel's locked mappings) and status. Each checks the client's
//! quotas first; a refusal becomes an `Error` naming the request.

use pagepilot_frames::{Clock, FrameError, RateError, TaskId};
use pagepilot_protocol::{
    ClientId, ErrorCode, HolderId as WireHolder, Message, RegionId, RegisterRegion, PPM,
};

use crate::accounts::{QuotaError, RegionCost};
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
        let cost = RegionCost {
            fault_rate: faults_per_sec(r.fault_limit, r.fault_period_us),
            cpu_reserve_ppm: u64::from(r.cpu_reserve_ppm),
            descriptors: u64::from(r.files.count()),
        };
        let account = c.account;
        self.accounts
            .check_region(account, r.min_frames, cost)
            .map_err(|e| beyond(id, &e))?;
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
            cost,
            // What it holds is within its minimum until it asks for more.
            committed: r.min_frames,
            pins: PinSet::default(),
            files: r.files,
            reports: FaultReports::starting(self.rate.now_ns()),
        };
        let granted_frames = self.held(&region);
        self.accounts.add_region(account, cost, region.committed);
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
        let Some((account, r)) = self
            .clients
            .get_mut(&client)
            .and_then(|c| Some((c.account, c.regions.remove(&region)?)))
        else {
            return Err(Refusal::internal(region, "region vanished"));
        };
        let frames = self.drop_region(account, r);
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
        let account = self.client(client)?.account;
        // Frames granted while the region is still owed some of its
        // minimum come on top of those: every one needs room.
        let room = self
            .accounts
            .frame_room(account)
            .map_err(|e| beyond(Some(region), &e))?;
        let ask = frames.min(room).min(budget.saturating_sub(held));
        let (granted, orders) = self
            .frames
            .request(holder, to_usize(ask))
            .map_err(|e| Refusal::internal(region, e))?;
        self.recommit(holder);
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
        self.recommit(holder);
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
        self.recommit(holder);
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
        let account = self.client(client)?.account;
        self.accounts
            .check_pins(account, added)
            .map_err(|e| Refusal::new(ErrorCode::PinQuota, id, e.to_string()))?;
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
        let before = r.pins.pages();
        f(&mut r.pins).map_err(|e| bad_range(region, e))?;
        let after = r.pins.pages();
        let reply = Message::Pinned {
            region,
            pinned_frames: after,
        };
        if let Some(account) = self.account_of(client) {
            self.accounts.repin(
                account,
                after.saturating_sub(before),
                before.saturating_sub(after),
            );
        }
        Ok(vec![Outgoing::send(client, reply)])
    }
}

/// A quota of the client's account refused a request.
fn beyond(region: Option<RegionId>, e: &QuotaError) -> Refusal {
    Refusal::new(ErrorCode::BeyondQuota, region, e.to_string())
}

fn bad_range(region: RegionId, e: PinError) -> Refusal {
    let code = match e {
        PinError::TooManyRanges => ErrorCode::PinQuota,
        PinError::Empty { .. } | PinError::NotPinned { .. } => ErrorCode::BadRange,
    };
    Refusal::new(code, Some(region), e.to_string())
}
