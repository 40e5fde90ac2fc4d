//! Policies by name: what the CLI, the simulator and the live pager accept.
//!
//! A spec is `NAME` or `NAME:key=value,key=value` (for example
//! `seq:L=50,M=20`). The simulator accepts every name; the live pager only
//! the policies that see what a live pager can observe, and maps the exact
//! names to their live approximations (see [`live_name`]).

use thiserror::Error;

use crate::builtin::{
    Arc, Car, Clock, ExactLru, ExactMru, FaultMru, Fifo, Opt, S3Fifo, Sieve, TwoQueue,
};
use crate::{Policy, ReferencePolicy};

/// What a policy is built for.
pub struct Setup<'a> {
    /// Page slots the engine will name.
    pub slots: usize,
    /// Frames the policy will hold.
    pub frames: usize,
    /// The whole reference string (slots), for policies that need the future.
    pub future: Option<&'a [u32]>,
}

/// A built policy, typed by what it needs to see.
pub enum Built {
    /// Runs live and in the simulator.
    Live(Box<dyn Policy>),
    /// Simulator-only: sees every reference or the future.
    Reference(Box<dyn ReferencePolicy>),
}

impl Built {
    /// The policy's name.
    pub fn name(&self) -> String {
        match self {
            Built::Live(p) => p.name(),
            Built::Reference(p) => p.name(),
        }
    }
}

/// Errors building a policy from its spec.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RegistryError {
    /// The name is not a built-in policy.
    #[error("unknown policy `{name}`; available: {}", available().join(", "))]
    Unknown {
        /// The name given.
        name: String,
    },
    /// A parameter was malformed, unknown or out of range.
    #[error("policy `{policy}`: bad parameter `{param}`: {why}")]
    BadParameter {
        /// The policy.
        policy: String,
        /// The parameter as given.
        param: String,
        /// What was wrong.
        why: String,
    },
    /// The policy needs the whole trace, which this engine cannot give.
    #[error("policy `{0}` needs the future reference string; it runs only in the simulator")]
    NeedsFuture(String),
    /// The policy needs every reference; a live pager only sees faults.
    #[error("policy `{0}` needs every reference and runs only in the simulator")]
    SimulatorOnly(String),
    /// A policy program that could not be loaded or was rejected.
    #[error("policy program: {0}")]
    Program(String),
}

/// A parsed policy spec: a name and its `key=value` parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The policy name, lower case.
    pub name: String,
    /// Parameters in the order given.
    pub params: Vec<(String, String)>,
}

impl Spec {
    /// Parses `NAME[:k=v,...]`.
    pub fn parse(text: &str) -> Result<Spec, RegistryError> {
        let (name, rest) = text.split_once(':').unwrap_or((text, ""));
        let name = name.trim().to_ascii_lowercase();
        let mut params = Vec::new();
        for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| RegistryError::BadParameter {
                    policy: name.clone(),
                    param: part.into(),
                    why: "expected key=value".into(),
                })?;
            params.push((k.trim().to_string(), v.trim().to_string()));
        }
        Ok(Spec { name, params })
    }

    /// Reads an unsigned parameter, with a default; rejects anything not in `keys`.
    pub fn usize_param(&self, key: &str, default: usize) -> Result<usize, RegistryError> {
        match self
            .params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
        {
            None => Ok(default),
            Some((k, v)) => v.parse().map_err(|_| RegistryError::BadParameter {
                policy: self.name.clone(),
                param: format!("{k}={v}"),
                why: "expected a non-negative integer".into(),
            }),
        }
    }

    /// Rejects parameters other than `keys`.
    pub fn only(&self, keys: &[&str]) -> Result<(), RegistryError> {
        match self
            .params
            .iter()
            .find(|(k, _)| !keys.iter().any(|x| x.eq_ignore_ascii_case(k)))
        {
            None => Ok(()),
            Some((k, v)) => Err(RegistryError::BadParameter {
                policy: self.name.clone(),
                param: format!("{k}={v}"),
                why: if keys.is_empty() {
                    "this policy takes no parameters".into()
                } else {
                    format!("known parameters: {}", keys.join(", "))
                },
            }),
        }
    }
}

/// One registry entry.
struct Entry {
    name: &'static str,
    about: &'static str,
    build: fn(&Spec, &Setup) -> Result<Built, RegistryError>,
}

fn live(p: impl Policy + 'static) -> Result<Built, RegistryError> {
    Ok(Built::Live(Box::new(p)))
}

fn reference(p: impl ReferencePolicy + 'static) -> Result<Built, RegistryError> {
    Ok(Built::Reference(Box::new(p)))
}

const ENTRIES: &[Entry] = &[
    Entry {
        name: "fifo",
        about: "first in, first out",
        build: |s, _| {
            s.only(&[])?;
            live(Fifo::new())
        },
    },
    Entry {
        name: "clock",
        about: "FIFO with second chance (live LRU)",
        build: |s, _| {
            s.only(&[])?;
            live(Clock::new())
        },
    },
    Entry {
        name: "lru",
        about: "exact LRU (simulator only)",
        build: |s, _| {
            s.only(&[])?;
            reference(ExactLru::new())
        },
    },
    Entry {
        name: "mru",
        about: "exact MRU (simulator only)",
        build: |s, _| {
            s.only(&[])?;
            reference(ExactMru::new())
        },
    },
    Entry {
        name: "mru-live",
        about: "MRU by faults, as the live pager runs it",
        build: |s, _| {
            s.only(&[])?;
            live(FaultMru::new())
        },
    },
    Entry {
        name: "opt",
        about: "Belady's optimum (simulator only)",
        build: |s, setup| {
            s.only(&[])?;
            let future = setup
                .future
                .ok_or_else(|| RegistryError::NeedsFuture("opt".into()))?;
            reference(Opt::new(future, setup.slots))
        },
    },
    Entry {
        name: "sieve",
        about: "SIEVE: FIFO with a visited bit and a sweeping hand (NSDI'24)",
        build: |s, _| {
            s.only(&[])?;
            live(Sieve::new())
        },
    },
    Entry {
        name: "s3fifo",
        about: "S3-FIFO: small, main and ghost FIFO queues (SOSP'23); small=percent",
        build: |s, _| {
            s.only(&["small"])?;
            let small = s.usize_param("small", 10)?;
            if !(1..=90).contains(&small) {
                return Err(RegistryError::BadParameter {
                    policy: s.name.clone(),
                    param: format!("small={small}"),
                    why: "expected a percentage in 1..=90".into(),
                });
            }
            live(S3Fifo::new(small))
        },
    },
    Entry {
        name: "arc",
        about: "ARC, adaptive replacement cache (simulator only; live: car)",
        build: |s, setup| {
            s.only(&[])?;
            reference(Arc::new(setup.frames))
        },
    },
    Entry {
        name: "2q",
        about: "2Q, full version: A1in FIFO, A1out ghosts, Am LRU (simulator only); kin=, kout= percent",
        build: |s, _| {
            s.only(&["kin", "kout"])?;
            let (kin, kout) = (s.usize_param("kin", 25)?, s.usize_param("kout", 50)?);
            for (key, value, max) in [("kin", kin, 100), ("kout", kout, 400)] {
                if !(1..=max).contains(&value) {
                    return Err(RegistryError::BadParameter {
                        policy: s.name.clone(),
                        param: format!("{key}={value}"),
                        why: format!("expected a percentage in 1..={max}"),
                    });
                }
            }
            reference(TwoQueue::new(kin, kout))
        },
    },
    Entry {
        name: "car",
        about: "CAR, clock with adaptive replacement (live ARC)",
        build: |s, _| {
            s.only(&[])?;
            live(Car::new())
        },
    },
    Entry {
        name: "seq",
        about: "SEQ: MRU inside fault sequences, exact LRU otherwise (simulator only); L,M,N,X",
        build: |s, setup| {
            let params = crate::builtin::SeqParams::from_spec(s)?;
            reference(crate::builtin::Seq::exact(params, setup.slots))
        },
    },
    Entry {
        name: "seq-live",
        about: "SEQ with a CLOCK fallback, as the live pager runs it; L,M,N,X",
        build: |s, setup| {
            let params = crate::builtin::SeqParams::from_spec(s)?;
            live(crate::builtin::Seq::live(params, setup.slots))
        },
    },
];

/// Names of every built-in policy.
pub fn available() -> Vec<&'static str> {
    ENTRIES.iter().map(|e| e.name).collect()
}

/// `(name, description)` of every built-in policy.
pub fn describe() -> Vec<(&'static str, &'static str)> {
    ENTRIES.iter().map(|e| (e.name, e.about)).collect()
}

/// The parameters each built-in policy accepts, as its spec spells them
/// (`seq:L=50`). Policies not listed take none.
const PARAMETERS: &[(&str, &[&str])] = &[
    ("s3fifo", &["small"]),
    ("2q", &["kin", "kout"]),
    ("seq", &["L", "M", "N", "X"]),
    ("seq-live", &["L", "M", "N", "X"]),
];

/// The parameters a built-in policy accepts (empty if it takes none), or
/// `None` if `name` is not a built-in policy.
pub fn parameters(name: &str) -> Option<&'static [&'static str]> {
    let name = name.trim().to_ascii_lowercase();
    let entry = ENTRIES.iter().find(|e| e.name == name)?;
    let declared = PARAMETERS.iter().find(|(n, _)| *n == entry.name);
    Some(declared.map_or(&[][..], |(_, params)| *params))
}

/// Builds any policy, for the simulator.
pub fn build(spec: &str, setup: &Setup) -> Result<Built, RegistryError> {
    if crate::program::is_program_spec(spec) {
        return live(crate::program::build_spec(spec, setup.slots, setup.frames)?);
    }
    build_parsed(&Spec::parse(spec)?, setup)
}

/// Builds a built-in policy from a parsed spec.
fn build_parsed(spec: &Spec, setup: &Setup) -> Result<Built, RegistryError> {
    let entry = ENTRIES
        .iter()
        .find(|e| e.name == spec.name)
        .ok_or_else(|| RegistryError::Unknown {
            name: spec.name.clone(),
        })?;
    (entry.build)(spec, setup)
}

/// The live approximation the pager runs for a simulator name: `lru` runs as
/// `clock`, `mru` as `mru-live`, `seq` as `seq-live`, `arc` as `car`. Other names map to
/// themselves.
pub fn live_name(name: &str) -> &str {
    match name {
        "lru" => "clock",
        "mru" => "mru-live",
        "seq" => "seq-live",
        "arc" => "car",
        other => other,
    }
}

/// Builds a policy for the live pager, mapping exact names to their live
/// approximations and refusing simulator-only policies.
pub fn build_live(spec: &str, setup: &Setup) -> Result<Box<dyn Policy>, RegistryError> {
    if crate::program::is_program_spec(spec) {
        let p = crate::program::build_spec(spec, setup.slots, setup.frames)?;
        return Ok(Box::new(p));
    }
    let mut parsed = Spec::parse(spec)?;
    parsed.name = live_name(&parsed.name).to_string();
    let live_setup = Setup {
        slots: setup.slots,
        frames: setup.frames,
        future: None,
    };
    match build_parsed(&parsed, &live_setup) {
        Ok(Built::Live(p)) => Ok(p),
        Ok(Built::Reference(p)) => Err(RegistryError::SimulatorOnly(p.name())),
        Err(RegistryError::NeedsFuture(n)) => Err(RegistryError::SimulatorOnly(n)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_unknown_policy_lists_available_ones() {
        let setup = Setup {
            slots: 4,
            frames: 2,
            future: None,
        };
        let err = build("lfu2", &setup).err().unwrap();
        let text = err.to_string();
        assert!(
            text.contains("lfu2") && text.contains("fifo") && text.contains("opt"),
            "{text}"
        );
    }

    #[test]
    fn test_live_registry_refuses_opt_and_maps_lru_to_clock() {
        let setup = Setup {
            slots: 4,
            frames: 2,
            future: None,
        };
        assert!(matches!(
            build_live("opt", &setup),
            Err(RegistryError::SimulatorOnly(_))
        ));
        assert_eq!(build_live("lru", &setup).unwrap().name(), "clock");
    }

    #[test]
    fn test_declared_parameters_are_the_ones_each_policy_accepts() {
        let setup = Setup {
            slots: 4,
            frames: 2,
            future: Some(&[0, 1, 2, 3]),
        };
        for name in available() {
            let params = parameters(name).unwrap();
            for p in params {
                assert!(
                    build(&format!("{name}:{p}=5"), &setup).is_ok(),
                    "{name}:{p}"
                );
            }
            let err = build(&format!("{name}:zz=1"), &setup).err().unwrap();
            let RegistryError::BadParameter { why, .. } = err else {
                panic!("{name}: {err}");
            };
            if params.is_empty() {
                assert!(why.contains("no parameters"), "{name}: {why}");
            } else {
                assert!(why.ends_with(&params.join(", ")), "{name}: {why}");
            }
        }
        assert_eq!(parameters("SEQ"), Some(&["L", "M", "N", "X"][..]));
        assert_eq!(parameters("nosuch"), None);
    }

    #[test]
    fn test_bad_parameter_is_named() {
        let setup = Setup {
            slots: 4,
            frames: 2,
            future: None,
        };
        let err = build("fifo:x=1", &setup).err().unwrap();
        assert!(matches!(err, RegistryError::BadParameter { .. }));
    }
}
