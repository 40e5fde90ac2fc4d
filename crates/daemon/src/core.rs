//! The system resource manager's core: clients connect, send protocol
//! messages, leave or die; the core answers with the messages to send. It
//! owns HiPEC's global frame manager and RAPHA's rate controller across all
//! clients, and makes no system call: the I/O loop feeds it events and sends
//! what it returns.
//!
//! Dependency order (the Cache Kernel's unloading): a client's regions are
//! unloaded before the client; a region's frames return to the pool when it
//! is unloaded, and may then settle newcomers still short of their
//! `minFrame`, who are sent `Settled`.

use std::collections::BTreeMap;

use pagepilot_frames::{Clock, FrameManager, HolderId, RateControl, Reclaim};
use pagepilot_protocol::{
    negotiate, ClientId, ErrorCode, Kind, Message, Peer, RegionId, SUPPORTED_VERSIONS,
};

use crate::accounts::{Accounts, QuotaError, Usage};
use crate::client::{Client, Credentials, Region, Session};
use crate::config::Config;
use crate::error::{CoreError, Refusal};
use crate::limits::AccountId;

/// A message for a client, and whether its connection ends once it is sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// The client it goes to.
    pub to: ClientId,
    /// What to send.
    pub message: Message,
    /// Close the connection after sending it (a `Goodbye`, or a `Hello`
    /// refused for want of a common version). The core has forgotten the
    /// client already.
    pub close: bool,
}

impl Outgoing {
    pub(crate) fn send(to: ClientId, message: Message) -> Outgoing {
        Outgoing {
            to,
            message,
            close: false,
        }
    }
}

/// The daemon's core, generic over its clock (a monotonic clock live, a
/// `ManualClock` in tests).
#[derive(Debug)]
pub struct Core<C: Clock + Clone> {
    pub(crate) config: Config,
    pub(crate) frames: FrameManager<C>,
    pub(crate) rate: RateControl<C>,
    pub(crate) clients: BTreeMap<ClientId, Client>,
    /// What each user (or shared group) uses over all its connections.
    pub(crate) accounts: Accounts,
    /// Which client's region each holder is: where reclaim orders go.
    pub(crate) holders: BTreeMap<HolderId, (ClientId, RegionId)>,
    next_client: u32,
}

/// Frames as the frame manager counts them.
pub(crate) fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Frames as the protocol counts them.
pub(crate) fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

impl<C: Clock + Clone> Core<C> {
    /// A core handing out `config`'s budget, timed by `clock`.
    pub fn new(config: Config, clock: C) -> Result<Core<C>, CoreError> {
        let m = &config.machine;
        let budget = usize::try_from(m.budget_frames)
            .map_err(|_| CoreError::BudgetTooLarge(m.budget_frames))?;
        let frames = FrameManager::new(budget, clock.clone())?
            .with_partition_burst(to_usize(m.partition_burst_frames))
            .with_deadline_ns(u64::from(m.deadline_ms) * 1_000_000);
        let rate = RateControl::new(
            m.fault_unit_us.saturating_mul(1_000),
            m.fault_period_ms.saturating_mul(1_000_000),
            clock,
        )?;
        Ok(Core {
            config,
            frames,
            rate,
            clients: BTreeMap::new(),
            accounts: Accounts::new(),
            holders: BTreeMap::new(),
            next_client: 1,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Frames in the budget.
    pub fn total_frames(&self) -> u64 {
        to_u64(self.frames.total())
    }

    /// Frames no region holds.
    pub fn free_frames(&self) -> u64 {
        to_u64(self.frames.free())
    }

    /// Frames the regions hold, summed over every client.
    pub fn held_frames(&self) -> u64 {
        to_u64(self.frames.held())
    }

    /// Bounds the descriptors the daemon holds for all its clients
    /// together (the server sets it from `RLIMIT_NOFILE`): connections and
    /// registrations that would pass it are refused.
    pub fn set_descriptor_budget(&mut self, descriptors: u64) {
        self.accounts.set_descriptor_budget(descriptors);
    }

    /// What an account uses now, over all its connections.
    pub fn usage(&self, account: AccountId) -> Usage {
        self.accounts.usage(account)
    }

    /// Clients connected.
    pub fn clients(&self) -> impl Iterator<Item = ClientId> + '_ {
        self.clients.keys().copied()
    }

    /// Where a client is in its conversation.
    pub fn session(&self, client: ClientId) -> Option<Session> {
        self.clients.get(&client).map(|c| c.session)
    }

    /// When `tick` next has work (the earliest reclamation deadline),
    /// clock nanoseconds; `None` when no reclamation is pending.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        self.frames.next_deadline_ns()
    }

    /// A process connected: it is given an id and draws from its account
    /// (its uid's, or its shared group's) with that account's quotas (its
    /// uid's entry, else its gid's, else the default). Refused when the
    /// account holds all the connections or descriptors it may. It must say
    /// `Hello` next.
    pub fn connect(&mut self, peer: Credentials) -> Result<ClientId, QuotaError> {
        let (account, limits) = self.config.account_for(peer.uid, peer.gid);
        let limits = self.accounts.connect(account, limits)?;
        let mut id = self.next_client;
        while id == 0 || self.clients.contains_key(&ClientId(id)) {
            id = id.wrapping_add(1);
        }
        self.next_client = id.wrapping_add(1);
        let client = Client::new(peer, account, limits);
        self.clients.insert(ClientId(id), client);
        Ok(ClientId(id))
    }

    /// The account a client draws from.
    pub fn account_of(&self, client: ClientId) -> Option<AccountId> {
        self.clients.get(&client).map(|c| c.account)
    }

    /// The quotas of a client's account.
    pub fn quotas_of(&self, client: ClientId) -> Option<crate::Limits> {
        self.clients.get(&client).map(|c| c.quotas)
    }

    /// A message from `client`: every request is answered by exactly one
    /// reply, first in the list (its own, or an `Error` naming it); a
    /// `Returned` or a `Report` only when refused. What the request causes follows, to
    /// whichever clients it concerns: `ReclaimOrder`s (FAFR, with the
    /// deadline), and `Settled` to regions still short of their `minFrame`
    /// that frames coming free reach.
    pub fn on_message(
        &mut self,
        client: ClientId,
        message: Message,
    ) -> Result<Vec<Outgoing>, CoreError> {
        let session = self
            .clients
            .get(&client)
            .ok_or(CoreError::UnknownClient(client))?
            .session;
        let kind = message.kind();
        let result = match (session, message) {
            _ if !kind.sent_by(Peer::Client) => Err(Refusal::new(
                ErrorCode::UnexpectedMessage,
                None,
                format!("{kind} is not a message a client sends"),
            )),
            (_, Message::Goodbye) => return Ok(self.goodbye(client)),
            (Session::Connected, Message::Hello { versions, .. }) => {
                return Ok(self.hello(client, &versions))
            }
            (Session::Welcomed { .. }, Message::Hello { .. }) => Err(Refusal::new(
                ErrorCode::UnexpectedMessage,
                None,
                "Hello was already received",
            )),
            (Session::Connected, _) => Err(Refusal::new(
                ErrorCode::UnexpectedMessage,
                None,
                format!("{kind} before Hello"),
            )),
            (Session::Welcomed { .. }, message) => self.request(client, message),
        };
        Ok(result.unwrap_or_else(|r| {
            vec![Outgoing::send(
                client,
                Message::error(r.code, Some(kind), r.region, &r.text),
            )]
        }))
    }

    fn hello(&mut self, client: ClientId, versions: &[u16]) -> Vec<Outgoing> {
        let Some(version) = negotiate(versions, SUPPORTED_VERSIONS) else {
            self.unload(client);
            let text = format!(
                "no protocol version in common: the client speaks {versions:?}, \
                 the daemon {SUPPORTED_VERSIONS:?}"
            );
            let error = Message::error(
                ErrorCode::UnsupportedVersion,
                Some(Kind::Hello),
                None,
                &text,
            );
            return vec![Outgoing {
                to: client,
                message: error,
                close: true,
            }];
        };
        let Some(c) = self.clients.get_mut(&client) else {
            return Vec::new();
        };
        c.session = Session::Welcomed { version };
        let welcome = Message::Welcome {
            version,
            client,
            quotas: c.quotas.quotas(),
        };
        vec![Outgoing::send(client, welcome)]
    }

    fn goodbye(&mut self, client: ClientId) -> Vec<Outgoing> {
        let mut out = vec![Outgoing {
            to: client,
            message: Message::Goodbye,
            close: true,
        }];
        out.extend(self.unload(client));
        out
    }

    /// A client left or died (its socket closed, its process gone): its
    /// regions are unloaded, their frames return to the pool, their
    /// reserves leave RAPHA's controller, then the client is forgotten.
    /// Returns the grants the freed frames make to newcomers.
    pub fn disconnect(&mut self, client: ClientId) -> Result<Vec<Outgoing>, CoreError> {
        if !self.clients.contains_key(&client) {
            return Err(CoreError::UnknownClient(client));
        }
        Ok(self.unload(client))
    }

    /// The daemon is stopping: every client is unloaded and told
    /// (`Error` `ShuttingDown`, then its connection closed). Afterwards every
    /// frame is free.
    pub fn shutdown(&mut self) -> Vec<Outgoing> {
        let clients: Vec<ClientId> = self.clients.keys().copied().collect();
        let mut out = Vec::new();
        for client in clients {
            self.unload(client);
            let error = Message::error(
                ErrorCode::ShuttingDown,
                None,
                None,
                "the daemon is stopping",
            );
            out.push(Outgoing {
                to: client,
                message: error,
                close: true,
            });
        }
        out
    }

    fn unload(&mut self, client: ClientId) -> Vec<Outgoing> {
        let short = self.short_of_minimum();
        let Some(c) = self.clients.remove(&client) else {
            return Vec::new();
        };
        for region in c.regions.into_values() {
            self.drop_region(c.account, region);
        }
        self.accounts.disconnect(c.account);
        self.grants_since(&short, None)
    }

    /// A region leaves: its holder's frames return to the pool, its task
    /// leaves RAPHA's controller, its account is credited. Returns the
    /// frames it held.
    pub(crate) fn drop_region(&mut self, account: AccountId, region: Region) -> usize {
        // The holder and the task are the core's own: they exist.
        let frames = self.frames.unregister(region.holder).unwrap_or(0);
        if let Some(task) = region.task {
            let _ = self.rate.leave(task);
        }
        self.holders.remove(&region.holder);
        let pinned = region.pins.pages();
        self.accounts
            .remove_region(account, region.cost, region.committed, pinned);
        frames
    }

    /// Recounts what a holder's region is committed to (after the frame
    /// manager changed what it holds) and its account with it.
    pub(crate) fn recommit(&mut self, holder: HolderId) {
        let Some(&(client, region)) = self.holders.get(&holder) else {
            return;
        };
        let Ok(s) = self.frames.stats(holder) else {
            return;
        };
        let now = to_u64(s.held.max(s.min));
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        let account = c.account;
        if let Some(r) = c.regions.get_mut(&region) {
            let before = std::mem::replace(&mut r.committed, now);
            self.accounts.recommit(account, before, now);
        }
    }

    /// Time passed: the reclamations whose deadline passed are taken by
    /// force, and their clients told (`Forced`: the client's pager must
    /// shrink by that many pages); frames forced may settle newcomers.
    pub fn tick(&mut self) -> Vec<Outgoing> {
        let short = self.short_of_minimum();
        let forced = self.frames.force_overdue().forced;
        let mut out = Vec::new();
        for (holder, frames) in forced {
            self.recommit(holder);
            if let (Some(&(to, region)), true) = (self.holders.get(&holder), frames > 0) {
                let frames = to_u64(frames);
                let held_frames = self.frames.stats(holder).map_or(0, |s| to_u64(s.held));
                out.push(Outgoing::send(
                    to,
                    Message::Forced {
                        region,
                        frames,
                        held_frames,
                    },
                ));
            }
        }
        out.extend(self.grants_since(&short, None));
        out
    }

    /// Reclaim orders to the clients whose regions hold the frames.
    pub(crate) fn orders(&self, orders: &[Reclaim]) -> Vec<Outgoing> {
        let now = self.rate.now_ns();
        orders
            .iter()
            .filter(|r| r.frames > 0)
            .filter_map(|r| {
                let &(to, region) = self.holders.get(&r.holder)?;
                let ms = r.deadline_ns.saturating_sub(now).div_ceil(1_000_000);
                let deadline_ms = u32::try_from(ms)
                    .unwrap_or(u32::MAX)
                    .clamp(1, pagepilot_protocol::MAX_DEADLINE_MS);
                let message = Message::ReclaimOrder {
                    region,
                    frames: to_u64(r.frames),
                    deadline_ms,
                };
                Some(Outgoing::send(to, message))
            })
            .collect()
    }

    /// Holders below their `minFrame` (newcomers waiting for frames), with
    /// what they hold: only those the pool owes frames can be settled.
    pub(crate) fn short_of_minimum(&self) -> Vec<(HolderId, usize)> {
        self.frames.short_of_minimum().collect()
    }

    /// `Settled` to each holder of `short` that received frames since
    /// (HiPEC: frames coming free go to newcomers short of their minimum),
    /// except `acting`, whose own reply says what it holds. Their accounts
    /// are recounted: frames owed may arrive on top of frames requested.
    pub(crate) fn grants_since(
        &mut self,
        short: &[(HolderId, usize)],
        acting: Option<HolderId>,
    ) -> Vec<Outgoing> {
        for &(h, _) in short {
            self.recommit(h);
        }
        short
            .iter()
            .filter(|(h, _)| Some(*h) != acting)
            .filter_map(|&(h, before)| {
                let held = self.frames.stats(h).ok()?.held;
                let &(to, region) = self.holders.get(&h)?;
                let frames = to_u64(held.checked_sub(before).filter(|&n| n > 0)?);
                let held_frames = to_u64(held);
                Some(Outgoing::send(
                    to,
                    Message::Settled {
                        region,
                        frames,
                        held_frames,
                    },
                ))
            })
            .collect()
    }
}
