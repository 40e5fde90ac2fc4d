//! The daemon's configuration: the machine's frame budget, how reclamation
//! and RAPHA's system limit run, and the quotas the system resource manager
//! hands out per user and per group (the Cache Kernel's SRM), from a TOML
//! file:
//!
//! ```toml
//! [machine]
//! budget_frames = 65536          # the frames the daemon hands out (required)
//! partition_burst_frames = 32768 # HiPEC's watermark (default: half the budget)
//! deadline_ms = 100              # time to give frames back before force
//! fault_unit_us = 10             # RAPHA's fault_unit: processor time of one fault
//! fault_period_ms = 100          # RAPHA's system period
//!
//! [default]                      # each user with no entry below, over all its connections
//! frames = 16384                 # frames its regions may hold together (default: half the budget)
//! pinned_frames = 0              # of those, frames it may pin (locked)
//! fault_rate = 20000             # faults/s its regions' limits may add up to (default: 20% of a processor)
//! cpu_reserve_ppm = 200000       # RAPHA processor reserve its regions may add up to (default: 20%)
//! regions = 64                   # regions it may register
//! connections = 32               # connections it may hold open
//! descriptors = 256              # descriptors the daemon may hold for it (2 per connection, 1 per region file)
//!
//! [uid.1000]                     # a user; fields left out come from [default]
//! frames = 4096
//!
//! [gid.100]                      # a group, for users with no entry of their own
//! pinned_frames = 64
//! shared = true                  # its members draw from one account, not one each
//! ```
//!
//! Quotas are per account: a user (every connection of one uid adds up), or
//! a group whose entry says `shared`. The defaults leave room for others: no
//! single user holds the whole machine unless the configuration says so.
//!
//! Parsing is pure (the caller reads the file). Every refusal is a
//! [`ConfigError`] naming the field and its line.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use pagepilot_protocol::{MAX_DEADLINE_MS, MAX_FAULT_RATE, MAX_FRAMES, MAX_REGIONS, PPM};

use crate::limits::{AccountId, Limits};
use serde::Deserialize;
use toml::Spanned;

/// Regions a user may register when the configuration says nothing.
pub const DEFAULT_REGIONS: u32 = 64;
/// Connections a user may hold open when the configuration says nothing.
pub const DEFAULT_CONNECTIONS: u32 = 32;
/// Descriptors the daemon holds for a user when the configuration says
/// nothing: its connections' (two each: the socket and a pidfd) and its
/// regions' files (up to three each).
pub const DEFAULT_DESCRIPTORS: u32 = 256;
/// The share of a processor a user's reserves, and separately its fault
/// limits, may take when the configuration says nothing, parts per million.
pub const DEFAULT_PROCESSOR_SHARE_PPM: u32 = 200_000;
/// The most connections or descriptors a quota may name.
pub const MAX_CONNECTIONS: u64 = 1 << 20;
/// Reclamation deadline when the configuration says nothing, milliseconds.
pub const DEFAULT_DEADLINE_MS: u32 = 100;
/// RAPHA's `fault_unit` when the configuration says nothing, microseconds.
pub const DEFAULT_FAULT_UNIT_US: u64 = 10;
/// RAPHA's system period when the configuration says nothing, milliseconds.
pub const DEFAULT_FAULT_PERIOD_MS: u64 = 100;
/// The longest system fault period: one hour, milliseconds.
pub const MAX_FAULT_PERIOD_MS: u64 = 3_600_000;
/// The largest `fault_unit`: one second, microseconds.
pub const MAX_FAULT_UNIT_US: u64 = 1_000_000;

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not TOML, or not the shape described above (an unknown field, a
    /// negative number, a missing `[machine]`).
    #[error("config{}: {message}", at(*line))]
    Syntax {
        /// The line (from 1), when known.
        line: Option<usize>,
        /// The TOML parser's explanation.
        message: String,
    },
    /// A number outside its bounds.
    #[error("config{}: {field} = {value} is outside {min}..={max}", at(*line))]
    OutOfRange {
        /// The field, as a TOML path (`uid.1000.pinned_frames`).
        field: String,
        /// The line (from 1); `None` for a value inherited or defaulted.
        line: Option<usize>,
        /// The value.
        value: u64,
        /// The smallest value allowed.
        min: u64,
        /// The largest value allowed.
        max: u64,
    },
    /// A `[uid.X]` or `[gid.X]` whose `X` is not a user or group number.
    #[error("config{}: {table}.{key}: not a number in 0..=4294967295", at(*line))]
    BadId {
        /// `uid` or `gid`.
        table: &'static str,
        /// The key found.
        key: String,
        /// The line (from 1), when known.
        line: Option<usize>,
    },
}

fn at(line: Option<usize>) -> String {
    line.map(|l| format!(" line {l}")).unwrap_or_default()
}

/// How the frame manager and RAPHA's controller run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// Frames the daemon hands out.
    pub budget_frames: u64,
    /// HiPEC's `partition_burst`: frames held above minimums before the
    /// excess is reclaimed.
    pub partition_burst_frames: u64,
    /// Time a holder has to give frames back before they are forced.
    pub deadline_ms: u32,
    /// RAPHA's `fault_unit`: the processor time one fault takes.
    pub fault_unit_us: u64,
    /// RAPHA's system fault period.
    pub fault_period_ms: u64,
}

/// The daemon's configuration, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The machine's budget and timing.
    pub machine: Machine,
    /// Quotas of users with neither a uid nor a gid entry.
    pub default_quotas: Limits,
    /// Quotas per user id.
    pub uid: BTreeMap<u32, Limits>,
    /// Quotas per group id (a client's primary group, from `SO_PEERCRED`).
    pub gid: BTreeMap<u32, Limits>,
    /// Groups whose members share one account (`shared = true`).
    pub shared_gids: BTreeSet<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Required unless the budget comes from elsewhere (`--budget`).
    #[serde(default)]
    machine: MachineFile,
    #[serde(default)]
    default: QuotaFile,
    #[serde(default)]
    uid: BTreeMap<Spanned<String>, QuotaFile>,
    #[serde(default)]
    gid: BTreeMap<Spanned<String>, QuotaFile>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct MachineFile {
    budget_frames: Option<Spanned<u64>>,
    partition_burst_frames: Option<Spanned<u64>>,
    deadline_ms: Option<Spanned<u64>>,
    fault_unit_us: Option<Spanned<u64>>,
    fault_period_ms: Option<Spanned<u64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct QuotaFile {
    frames: Option<Spanned<u64>>,
    pinned_frames: Option<Spanned<u64>>,
    fault_rate: Option<Spanned<u64>>,
    regions: Option<Spanned<u64>>,
    cpu_reserve_ppm: Option<Spanned<u64>>,
    connections: Option<Spanned<u64>>,
    descriptors: Option<Spanned<u64>>,
    /// Only in `[gid.X]`: its members share one account.
    shared: Option<Spanned<bool>>,
}

/// Checks numbers against bounds, naming fields with their lines.
struct Checker<'a> {
    text: &'a str,
}

impl Checker<'_> {
    fn line(&self, span: Range<usize>) -> usize {
        let end = span.start.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    /// The value of an optional field (else `default`), within `min..=max`.
    fn field(
        &self,
        field: &str,
        value: &Option<Spanned<u64>>,
        default: u64,
        (min, max): (u64, u64),
    ) -> Result<u64, ConfigError> {
        let (v, line) = match value {
            Some(s) => (*s.get_ref(), Some(self.line(s.span()))),
            None => (default, None),
        };
        if (min..=max).contains(&v) {
            Ok(v)
        } else {
            Err(ConfigError::OutOfRange {
                field: field.to_owned(),
                line,
                value: v,
                min,
                max,
            })
        }
    }

    fn quotas(
        &self,
        path: &str,
        q: &QuotaFile,
        base: &Limits,
        budget: u64,
    ) -> Result<Limits, ConfigError> {
        let f = |name: &str| format!("{path}.{name}");
        let frames = self.field(&f("frames"), &q.frames, base.frames, (0, budget))?;
        let pinned_frames = self.field(
            &f("pinned_frames"),
            &q.pinned_frames,
            base.pinned_frames.min(frames),
            (0, frames),
        )?;
        let fault_rate = self.field(
            &f("fault_rate"),
            &q.fault_rate,
            base.fault_rate,
            (0, MAX_FAULT_RATE),
        )?;
        let small = |name: &str, value: &Option<Spanned<u64>>, base: u32, max: u64| {
            let v = self.field(&f(name), value, u64::from(base), (0, max))?;
            // Within a u32 bound, checked above.
            Ok(u32::try_from(v).unwrap_or(u32::MAX))
        };
        Ok(Limits {
            frames,
            pinned_frames,
            fault_rate,
            regions: small("regions", &q.regions, base.regions, u64::from(MAX_REGIONS))?,
            cpu_reserve_ppm: small(
                "cpu_reserve_ppm",
                &q.cpu_reserve_ppm,
                base.cpu_reserve_ppm,
                u64::from(PPM),
            )?,
            connections: small(
                "connections",
                &q.connections,
                base.connections,
                MAX_CONNECTIONS,
            )?,
            descriptors: small(
                "descriptors",
                &q.descriptors,
                base.descriptors,
                MAX_CONNECTIONS,
            )?,
        })
    }

    fn table(
        &self,
        name: &'static str,
        entries: &BTreeMap<Spanned<String>, QuotaFile>,
        base: &Limits,
        budget: u64,
    ) -> Result<BTreeMap<u32, Limits>, ConfigError> {
        let mut out = BTreeMap::new();
        for (key, q) in entries {
            if let (Some(shared), "uid") = (&q.shared, name) {
                return Err(ConfigError::Syntax {
                    line: Some(self.line(shared.span())),
                    message: format!(
                        "uid.{}.shared: only a [gid.X] entry may be shared",
                        key.get_ref()
                    ),
                });
            }
            let id: u32 = key.get_ref().parse().map_err(|_| ConfigError::BadId {
                table: name,
                key: key.get_ref().clone(),
                line: Some(self.line(key.span())),
            })?;
            let path = format!("{name}.{id}");
            out.insert(id, self.quotas(&path, q, base, budget)?);
        }
        Ok(out)
    }
}

impl Config {
    /// Parses and validates a configuration file's text.
    ///
    /// Bounds: `budget_frames` in 1..=2^40; `partition_burst_frames` at most
    /// the budget; `deadline_ms` in 1..=600 000; `fault_unit_us` in
    /// 1..=1 000 000; `fault_period_ms` in 1..=3 600 000; every quota's
    /// `frames` at most the budget, `pinned_frames` at most its `frames`,
    /// `fault_rate` at most 2^32, `regions` at most 2^20.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse_with_budget(text, None)
    }

    /// As [`Config::parse`], the budget `budget_frames` (when given)
    /// replacing the file's `[machine] budget_frames`, which may then be
    /// left out (`pagepilot daemon --budget`). Defaults that follow from
    /// the budget (`partition_burst_frames`, quotas' `frames`) follow this
    /// one, and quotas are checked against it.
    pub fn parse_with_budget(
        text: &str,
        budget_frames: Option<u64>,
    ) -> Result<Config, ConfigError> {
        let file: File = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| Checker { text }.line(s));
            ConfigError::Syntax {
                line,
                message: e.message().trim().to_owned(),
            }
        })?;
        let c = Checker { text };
        let m = &file.machine;
        let budget = match (budget_frames, &m.budget_frames) {
            (Some(b), _) => c.field("budget", &None, b, (1, MAX_FRAMES))?,
            (None, Some(b)) => c.field(
                "machine.budget_frames",
                &Some(b.clone()),
                0,
                (1, MAX_FRAMES),
            )?,
            (None, None) => {
                return Err(ConfigError::Syntax {
                    line: None,
                    message: "missing field `budget_frames` in [machine]".to_owned(),
                })
            }
        };
        let machine = Machine {
            budget_frames: budget,
            partition_burst_frames: c.field(
                "machine.partition_burst_frames",
                &m.partition_burst_frames,
                budget / 2,
                (0, budget),
            )?,
            deadline_ms: u32::try_from(c.field(
                "machine.deadline_ms",
                &m.deadline_ms,
                u64::from(DEFAULT_DEADLINE_MS),
                (1, u64::from(MAX_DEADLINE_MS)),
            )?)
            .unwrap_or(MAX_DEADLINE_MS),
            fault_unit_us: c.field(
                "machine.fault_unit_us",
                &m.fault_unit_us,
                DEFAULT_FAULT_UNIT_US,
                (1, MAX_FAULT_UNIT_US),
            )?,
            fault_period_ms: c.field(
                "machine.fault_period_ms",
                &m.fault_period_ms,
                DEFAULT_FAULT_PERIOD_MS,
                (1, MAX_FAULT_PERIOD_MS),
            )?,
        };
        if file.default.shared.is_some() {
            return Err(ConfigError::Syntax {
                line: None,
                message: "default.shared: only a [gid.X] entry may be shared".to_owned(),
            });
        }
        let defaults = Limits::defaults(budget, machine.fault_unit_us);
        let default_quotas = c.quotas("default", &file.default, &defaults, budget)?;
        let shared_gids = file
            .gid
            .iter()
            .filter(|(_, q)| q.shared.as_ref().is_some_and(|s| *s.get_ref()))
            .filter_map(|(k, _)| k.get_ref().parse().ok())
            .collect();
        Ok(Config {
            uid: c.table("uid", &file.uid, &default_quotas, budget)?,
            gid: c.table("gid", &file.gid, &default_quotas, budget)?,
            shared_gids,
            default_quotas,
            machine,
        })
    }

    /// A configuration with a budget and nothing else, for one trusted
    /// user or tests: every user may hold the whole budget, no pins, no
    /// fault-rate or reserve bound, 64 regions. A daemon serving several
    /// users wants [`Config::parse`]'s defaults instead.
    pub fn with_budget(budget_frames: u64) -> Result<Config, ConfigError> {
        Config::parse(&format!(
            "[machine]\nbudget_frames = {budget_frames}\n[default]\nframes = {budget_frames}\n\
             fault_rate = {MAX_FAULT_RATE}\ncpu_reserve_ppm = {PPM}\n"
        ))
    }

    /// The quotas of a user: its uid's entry, else its group's, else the
    /// default.
    pub fn quotas_for(&self, uid: u32, gid: u32) -> Limits {
        self.account_for(uid, gid).1
    }

    /// The account a process of `uid` and primary group `gid` draws from,
    /// and its quotas: its uid's entry, else its group's (shared by the
    /// group's members when the entry says so), else the default.
    pub fn account_for(&self, uid: u32, gid: u32) -> (AccountId, Limits) {
        if let Some(l) = self.uid.get(&uid) {
            return (AccountId::User(uid), *l);
        }
        match self.gid.get(&gid) {
            Some(l) if self.shared_gids.contains(&gid) => (AccountId::Group(gid), *l),
            Some(l) => (AccountId::User(uid), *l),
            None => (AccountId::User(uid), self.default_quotas),
        }
    }
}
