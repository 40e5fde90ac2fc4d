//! `pagepilot run`'s configuration: which of an unmodified program's file
//! mappings pagepilot takes over, under which policy and budget, and where
//! it says what it did. The command (`pagepilot run`) checks it and puts it
//! in the environment; the interposer (`libpagepilot_run.so`) reads it back
//! in every process the program starts, so children, `exec` and shells
//! inherit it.

mod rule;
mod size;

use std::path::{Path, PathBuf};

pub use rule::{Rule, RuleError};
pub use size::{parse_size, SizeError};

/// The environment variables the configuration travels in.
pub mod env {
    /// Bytes for all taken-over mappings together (one pool).
    pub const BUDGET: &str = "PAGEPILOT_RUN_BUDGET";
    /// The policy of a file no rule names.
    pub const POLICY: &str = "PAGEPILOT_RUN_POLICY";
    /// The rules, one per line: `GLOB=POLICY[:BUDGET]`.
    pub const MAP: &str = "PAGEPILOT_RUN_MAP";
    /// Mappings smaller than this many bytes stay with the kernel.
    pub const MIN_SIZE: &str = "PAGEPILOT_RUN_MIN_SIZE";
    /// The log file (appended to); `-` is stderr.
    pub const LOG: &str = "PAGEPILOT_RUN_LOG";
    /// Set (to anything) when the interposer is active: tools and tests ask.
    pub const ACTIVE: &str = "PAGEPILOT_RUN";
}

/// The budget when none is given and no memory limit applies: a quarter
/// of the machine's memory.
pub const DEFAULT_BUDGET_SHARE_OF_MEMORY: u64 = 4;
/// The default `--min-size`: smaller mappings (shared libraries' data,
/// locale files, small indexes) are the kernel's; paging them buys nothing.
pub const DEFAULT_MIN_SIZE: u64 = 1 << 20;
/// The default policy: SEQ detects the loops and scans that LRU pays for on
/// every pass, and behaves as LRU elsewhere.
pub const DEFAULT_POLICY: &str = "seq";

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A rule is malformed or names an unknown policy.
    #[error(transparent)]
    Rule(#[from] RuleError),
    /// A size is not a size.
    #[error("{what}: {source}")]
    Size {
        /// The option or variable.
        what: &'static str,
        /// What is wrong with it.
        source: SizeError,
    },
    /// The default policy is unknown.
    #[error("--policy {spec:?}: {reason}")]
    Policy {
        /// The policy as given.
        spec: String,
        /// Why it was refused.
        reason: String,
    },
}

/// The whole configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Bytes for all taken-over mappings no rule gives a budget of their own.
    pub budget: Option<u64>,
    /// The policy of files no rule names.
    pub policy: String,
    /// Per-file rules, the first that matches wins.
    pub rules: Vec<Rule>,
    /// Mappings smaller than this stay with the kernel.
    pub min_size: u64,
    /// Where to log what was taken over and what was left (`-` is stderr).
    pub log: Option<PathBuf>,
}

/// What the rules say of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The policy.
    pub policy: String,
    /// Its own budget, or `None` for a share of the common one.
    pub budget: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            budget: None,
            policy: DEFAULT_POLICY.into(),
            rules: Vec::new(),
            min_size: DEFAULT_MIN_SIZE,
            log: None,
        }
    }
}

impl Config {
    /// Checks every policy the configuration names (the default's and the
    /// rules'), so that a bad one is refused before the program starts.
    pub fn check(&self) -> Result<(), ConfigError> {
        rule::check_policy(&self.policy).map_err(|reason| ConfigError::Policy {
            spec: self.policy.clone(),
            reason,
        })?;
        for r in &self.rules {
            r.check()?;
        }
        Ok(())
    }

    /// The policy and budget for `path`.
    pub fn choose(&self, path: &Path) -> Choice {
        self.rules
            .iter()
            .find(|r| r.matches(path))
            .map(|r| Choice {
                policy: r.policy.clone(),
                budget: r.budget,
            })
            .unwrap_or_else(|| Choice {
                policy: self.policy.clone(),
                budget: None,
            })
    }

    /// The configuration as environment variables.
    pub fn to_env(&self) -> Vec<(&'static str, String)> {
        let mut vars = vec![
            (env::POLICY, self.policy.clone()),
            (env::MIN_SIZE, self.min_size.to_string()),
            (env::ACTIVE, "1".into()),
        ];
        if let Some(b) = self.budget {
            vars.push((env::BUDGET, b.to_string()));
        }
        if !self.rules.is_empty() {
            let text: Vec<String> = self.rules.iter().map(Rule::to_string).collect();
            vars.push((env::MAP, text.join("\n")));
        }
        if let Some(l) = &self.log {
            vars.push((env::LOG, l.display().to_string()));
        }
        vars
    }

    /// The configuration from environment variables (`get` looks one up).
    /// Policies are not checked here: `pagepilot run` checked them, and a
    /// region whose policy fails is left to the kernel.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let size = |var: &'static str| -> Result<Option<u64>, ConfigError> {
            get(var)
                .filter(|s| !s.is_empty())
                .map(|s| parse_size(&s).map_err(|source| ConfigError::Size { what: var, source }))
                .transpose()
        };
        let mut config = Config {
            budget: size(env::BUDGET)?,
            ..Config::default()
        };
        if let Some(p) = get(env::POLICY).filter(|s| !s.is_empty()) {
            config.policy = p;
        }
        if let Some(m) = size(env::MIN_SIZE)? {
            config.min_size = m;
        }
        if let Some(rules) = get(env::MAP) {
            for line in rules.lines().filter(|l| !l.trim().is_empty()) {
                config.rules.push(line.parse()?);
            }
        }
        config.log = get(env::LOG).filter(|s| !s.is_empty()).map(PathBuf::from);
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn test_configuration_survives_the_environment() {
        let mut c = Config {
            budget: Some(64 << 20),
            policy: "mru".into(),
            min_size: 0,
            log: Some("/tmp/run.log".into()),
            ..Config::default()
        };
        c.rules.push("*.db=lru:16M".parse().unwrap());
        c.rules.push("/data/**=seq".parse().unwrap());
        let vars: HashMap<&str, String> = c.to_env().into_iter().collect();
        let back = Config::from_env(|k| vars.get(k).cloned()).unwrap();
        assert_eq!(back.budget, Some(64 << 20));
        assert_eq!(back.policy, "mru");
        assert_eq!(back.min_size, 0);
        assert_eq!(back.rules.len(), 2);
        assert_eq!(
            back.choose(Path::new("/x/a.db")),
            Choice {
                policy: "lru".into(),
                budget: Some(16 << 20)
            }
        );
        assert_eq!(back.choose(Path::new("/data/d/e")).policy, "seq");
        assert_eq!(back.choose(Path::new("/other")).policy, "mru");
    }

    #[test]
    fn test_unknown_default_policy_is_refused_by_name() {
        let c = Config {
            policy: "lfu9".into(),
            ..Config::default()
        };
        let e = c.check().unwrap_err().to_string();
        assert!(e.contains("lfu9"), "{e}");
    }

    #[test]
    fn test_bad_size_in_environment_names_the_variable() {
        let e = Config::from_env(|k| (k == env::BUDGET).then(|| "12Q".to_string()))
            .unwrap_err()
            .to_string();
        assert!(e.contains(env::BUDGET) && e.contains("12Q"), "{e}");
    }
}
