//! Random conversations of several clients (connects, every kind of
//! message, valid or not, disconnects, time passing) never panic, answer
//! every request with exactly one reply, keep every message within the
//! protocol's bounds, keep each client within its quotas, and keep the
//! frame accounting exact: held + free == total always, free == total once
//! everyone has left or the daemon has shut down.

mod common;

use common::*;
use std::collections::BTreeMap;

use pagepilot_daemon::{AccountId, Config, Core, Credentials, Limits, Outgoing};
use pagepilot_frames::ManualClock;
use pagepilot_protocol::{
    encode, ClientId, ErrorCode, Kind, Message, RegionFiles, RegionId, RegisterRegion,
};
use proptest::prelude::*;

const CONFIG: &str = "
[machine]
budget_frames = 64
partition_burst_frames = 4
deadline_ms = 5
fault_unit_us = 100
fault_period_ms = 100

[default]
frames = 48
pinned_frames = 8
fault_rate = 2000
regions = 3

[uid.1]
frames = 20
pinned_frames = 4
regions = 2

[gid.2]
frames = 64
pinned_frames = 64
regions = 4
";

#[derive(Clone, Debug)]
enum Op {
    Connect { uid: u32, gid: u32, hello: bool },
    Send { who: usize, message: Message },
    Disconnect { who: usize },
    Advance { ms: u64 },
}

fn frames() -> impl Strategy<Value = u64> {
    prop_oneof![8 => 1u64..40, 1 => Just(0u64), 1 => any::<u64>()]
}

fn register() -> impl Strategy<Value = Message> {
    (
        0u32..2,
        0u64..24,
        0u64..40,
        0u64..30,
        prop_oneof![12 => Just(0u32), 6 => 0u32..300_000, 1 => any::<u32>()],
        prop::bool::weighted(0.1),
    )
        .prop_map(|(region, min, extra, limit, ppm, odd)| {
            let (fault_limit, fault_period_us) = match (limit % 3, odd) {
                (0, _) => (0, 0),
                (_, false) => (limit, 100_000),
                (_, true) => (limit, 0), // a limit without a period: inconsistent
            };
            Message::RegisterRegion(RegisterRegion {
                region: RegionId(region),
                min_frames: if odd && limit == 1 { u64::MAX } else { min },
                budget_frames: if odd && extra == 3 {
                    min / 2
                } else {
                    min + extra
                },
                fault_limit,
                fault_period_us,
                cpu_reserve_ppm: ppm,
                files: RegionFiles {
                    memory: odd,
                    backing: false,
                    dirty: odd,
                },
            })
        })
}

fn message() -> impl Strategy<Value = Message> {
    let region = || (0u32..2).prop_map(RegionId);
    let range = || (0u64..24, prop_oneof![1u64..6 * 4096, Just(0), any::<u64>()]);
    prop_oneof![
        1 => prop_oneof![Just(vec![1u16]), Just(vec![2u16]), Just(vec![1u16, 2])]
            .prop_map(|versions| Message::Hello { versions, pid: None }),
        4 => register(),
        2 => region().prop_map(|region| Message::UnregisterRegion { region }),
        4 => (region(), frames()).prop_map(|(region, frames)| Message::RequestFrames { region, frames }),
        2 => (region(), frames()).prop_map(|(region, frames)| Message::ReleaseFrames { region, frames }),
        3 => (region(), frames()).prop_map(|(region, frames)| Message::Returned { region, frames }),
        1 => (region(), 0u64..1000).prop_map(|(region, faults)| Message::Report { region, faults, postponed_faults: faults / 2 }),
        2 => (region(), range()).prop_map(|(region, (page, len))| Message::Pin { region, offset: page * 4096, len }),
        2 => (region(), range()).prop_map(|(region, (page, len))| Message::Unpin { region, offset: page * 4096, len }),
        1 => Just(Message::Status),
        1 => Just(Message::Goodbye),
        1 => (region(), frames()).prop_map(|(region, frames)| Message::Granted { region, frames, held_frames: frames }),
        1 => (region(), frames()).prop_map(|(region, frames)| Message::ReclaimOrder { region, frames, deadline_ms: 1 }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u32..3, 0u32..3, prop::bool::weighted(0.85))
            .prop_map(|(uid, gid, hello)| Op::Connect { uid, gid, hello }),
        12 => (any::<usize>(), message()).prop_map(|(who, message)| Op::Send { who, message }),
        1 => any::<usize>().prop_map(|who| Op::Disconnect { who }),
        2 => (0u64..8).prop_map(|ms| Op::Advance { ms }),
    ]
}

/// The kind of reply a request expects; `None` for a notification.
fn reply_kind(kind: Kind) -> Option<Kind> {
    Some(match kind {
        Kind::Hello => Kind::Welcome,
        Kind::Goodbye => Kind::Goodbye,
        Kind::RegisterRegion => Kind::Registered,
        Kind::UnregisterRegion => Kind::Unregistered,
        Kind::RequestFrames => Kind::Granted,
        Kind::ReleaseFrames => Kind::Released,
        Kind::Pin | Kind::Unpin => Kind::Pinned,
        Kind::Status => Kind::StatusReply,
        _ => return None,
    })
}

/// What a client receives that is not a reply: events.
fn is_event(m: &Message) -> bool {
    matches!(
        m,
        Message::ReclaimOrder { .. } | Message::Forced { .. } | Message::Settled { .. }
    )
}

struct World<'c> {
    config: Config,
    core: Core<&'c ManualClock>,
    /// Live clients and their credentials.
    live: Vec<(ClientId, Credentials)>,
}

impl World<'_> {
    fn check(&self, out: &[Outgoing], closed: Option<ClientId>) {
        for o in out {
            assert!(encode(&o.message).is_ok(), "out of bounds: {:?}", o.message);
            let known = self.live.iter().any(|(id, _)| *id == o.to) || Some(o.to) == closed;
            assert!(known, "sent to a client not connected: {o:?}");
            assert!(!o.close || Some(o.to) == closed, "close flag on {o:?}");
        }
        let c = &self.core;
        assert_eq!(c.held_frames() + c.free_frames(), c.total_frames());
        // Quotas hold per account, summed over all its connections, and
        // the core's running counts are exact.
        let committed_of = |id: ClientId| -> u64 {
            let status = c.status();
            let regions = status.clients.iter().filter(|s| s.client == id);
            regions
                .flat_map(|s| &s.regions)
                .map(|r| r.held_frames.max(r.min_frames))
                .sum()
        };
        let mut accounts: BTreeMap<AccountId, (u64, u64, u32, Limits, u64)> = BTreeMap::new();
        for (id, peer) in &self.live {
            let account = c.account_of(*id).unwrap();
            assert_eq!(account, self.config.account_for(peer.uid, peer.gid).0);
            let q = c.quotas_of(*id).unwrap();
            let a = accounts.entry(account).or_insert((0, 0, 0, q, 0));
            assert_eq!(a.3, q, "one account, one set of quotas");
            a.0 += c.frames_of(*id).unwrap();
            a.1 += c.pinned_of(*id).unwrap();
            a.2 += 1;
            a.4 += committed_of(*id);
        }
        for (account, (frames, pinned, connections, q, committed)) in accounts {
            let usage = c.usage(account);
            assert_eq!(
                usage.frames, committed,
                "{account}: its running count of frames"
            );
            assert!(
                frames <= usage.frames,
                "{account}: held {frames}, counted {usage:?}"
            );
            assert!(
                usage.frames <= q.frames,
                "{account} beyond its frames quota"
            );
            assert_eq!(usage.pinned_frames, pinned, "{account}");
            assert!(pinned <= q.pinned_frames, "{account} beyond its pin quota");
            assert_eq!(usage.connections, connections, "{account}");
        }
        let status = c.status();
        for r in status.clients.iter().flat_map(|c| &c.regions) {
            // Pinned pages are resident and inside the guaranteed minimum.
            assert!(r.pinned_frames <= r.held_frames.min(r.min_frames), "{r:?}");
        }
        assert!(encode(&Message::StatusReply(status)).is_ok());
    }

    fn send(&mut self, who: usize, message: Message) {
        let Some(&(id, _)) = self.live.get(who % self.live.len().max(1)) else {
            return;
        };
        let kind = message.kind();
        let out = self.core.on_message(id, message).unwrap();
        let mine: Vec<&Outgoing> = out.iter().filter(|o| o.to == id).collect();
        let closed = mine.iter().any(|o| o.close).then_some(id);
        match (
            kind.sent_by(pagepilot_protocol::Peer::Client),
            reply_kind(kind),
        ) {
            (true, Some(expected)) => {
                // Exactly one reply, first; anything else to it is an event.
                let reply = &out[0];
                assert_eq!(reply.to, id);
                match &reply.message {
                    Message::Error(e) => assert_eq!(e.request, Some(kind), "{e:?}"),
                    m => assert_eq!(m.kind(), expected, "{m:?}"),
                }
                assert!(mine[1..].iter().all(|o| is_event(&o.message)), "{mine:?}");
            }
            (true, None) => {
                // Returned, Report: silent unless refused.
                match mine.first().map(|o| &o.message) {
                    Some(Message::Error(e)) => assert_eq!((mine.len(), e.request), (1, Some(kind))),
                    _ => assert!(mine.iter().all(|o| is_event(&o.message)), "{mine:?}"),
                }
            }
            (false, _) => {
                assert_eq!(out.len(), 1);
                assert!(
                    matches!(&out[0].message, Message::Error(e) if e.code == ErrorCode::UnexpectedMessage)
                );
            }
        }
        if closed.is_some() {
            self.live.retain(|(c, _)| *c != id);
        }
        self.check(&out, closed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn test_random_conversations_never_panic_and_keep_the_accounting_exact(
        ops in prop::collection::vec(op(), 1..200),
        shutdown in any::<bool>(),
    ) {
        let clock = ManualClock::at(0);
        let config = Config::parse(CONFIG).unwrap();
        let mut w = World { core: core(CONFIG, &clock), config, live: Vec::new() };
        for op in ops {
            match op {
                Op::Connect { uid, gid, hello } => {
                    let peer = Credentials { pid: 100 + uid, uid, gid };
                    let id = w.core.connect(peer).unwrap();
                    assert!(w.live.iter().all(|(c, _)| *c != id), "ids are unique");
                    w.live.push((id, peer));
                    if hello {
                        w.send(w.live.len() - 1, Message::Hello { versions: vec![1], pid: None });
                    }
                }
                Op::Send { who, message } => w.send(who, message),
                Op::Disconnect { who } => {
                    if !w.live.is_empty() {
                        let (id, _) = w.live.remove(who % w.live.len());
                        let out = w.core.disconnect(id).unwrap();
                        assert!(out.iter().all(|o| matches!(o.message, Message::Settled { .. })));
                        w.check(&out, None);
                    }
                }
                Op::Advance { ms } => {
                    clock.advance(ms * MS);
                    let out = w.core.tick();
                    assert!(out.iter().all(|o| is_event(&o.message)), "{out:?}");
                    w.check(&out, None);
                }
            }
        }
        if shutdown {
            let out = w.core.shutdown();
            prop_assert_eq!(out.len(), w.live.len());
            prop_assert!(out.iter().all(|o| o.close));
            w.live.clear();
        }
        while let Some((id, _)) = w.live.pop() {
            let out = w.core.disconnect(id).unwrap();
            w.check(&out, None);
        }
        prop_assert_eq!(w.core.free_frames(), w.core.total_frames());
        prop_assert_eq!(w.core.held_frames(), 0);
        prop_assert_eq!(w.core.next_deadline_ns(), None);
        prop_assert!(w.core.status().clients.is_empty());
    }
}
