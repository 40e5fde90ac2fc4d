//! A per-file rule, `GLOB=POLICY[:BUDGET]`: files whose path matches GLOB
//! are paged by POLICY, with BUDGET bytes of their own if given.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::size::parse_size;

/// One `--map` rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// The rule as written (for messages and the environment).
    text: String,
    pattern: glob::Pattern,
    /// The policy: a built-in name (with parameters) or a policy program.
    pub policy: String,
    /// Bytes of its own, or `None` for a share of `--budget`.
    pub budget: Option<u64>,
}

/// Why a rule was refused; every variant names the rule.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    /// No `=` between the glob and the policy.
    #[error("rule {0:?}: expected GLOB=POLICY[:BUDGET]")]
    Shape(String),
    /// The glob does not parse.
    #[error("rule {rule:?}: bad glob: {reason}")]
    Glob {
        /// The rule.
        rule: String,
        /// The glob parser's message.
        reason: String,
    },
    /// The budget is not a size, or is below one page.
    #[error("rule {rule:?}: budget {budget:?} is not a size of at least 4K")]
    Budget {
        /// The rule.
        rule: String,
        /// The budget as written.
        budget: String,
    },
    /// The policy is unknown or its program does not verify.
    #[error("rule {rule:?}: policy {policy:?}: {reason}")]
    Policy {
        /// The rule.
        rule: String,
        /// The policy as written.
        policy: String,
        /// Why it was refused.
        reason: String,
    },
}

impl FromStr for Rule {
    type Err = RuleError;

    fn from_str(text: &str) -> Result<Rule, RuleError> {
        // The glob ends at the first `=`: a policy's parameters hold `=`
        // too (`seq:L=50`).
        let (glob, rest) = text
            .split_once('=')
            .filter(|(g, p)| !g.is_empty() && !p.is_empty())
            .ok_or_else(|| RuleError::Shape(text.into()))?;
        let (policy, budget) = policy_and_budget(rest);
        let pattern = glob::Pattern::new(glob).map_err(|e| RuleError::Glob {
            rule: text.into(),
            reason: e.to_string(),
        })?;
        let budget = match budget {
            Some(b) => match parse_size(b) {
                Ok(n) if n >= 4096 => Some(n),
                _ => {
                    return Err(RuleError::Budget {
                        rule: text.into(),
                        budget: b.into(),
                    })
                }
            },
            None => None,
        };
        Ok(Rule {
            text: text.into(),
            pattern,
            policy: policy.into(),
            budget,
        })
    }
}

/// Splits `POLICY[:BUDGET]`: the budget is the part after the last `:`
/// when it starts with a digit (`lru:16M`); otherwise (`seq:L=50`) the
/// whole is the policy.
fn policy_and_budget(rest: &str) -> (&str, Option<&str>) {
    match rest.rsplit_once(':') {
        Some((p, b)) if !p.is_empty() && b.starts_with(|c: char| c.is_ascii_digit()) => {
            (p, Some(b))
        }
        _ => (rest, None),
    }
}

impl Rule {
    /// Whether the rule applies to `path` (absolute, as the file was opened
    /// or resolved). A glob without `/` matches the file's name alone.
    pub fn matches(&self, path: &Path) -> bool {
        let opts = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        if self.pattern.as_str().contains('/') {
            self.pattern.matches_path_with(path, opts)
        } else {
            path.file_name()
                .is_some_and(|n| self.pattern.matches_with(&n.to_string_lossy(), opts))
        }
    }

    /// Checks that the policy builds.
    pub fn check(&self) -> Result<(), RuleError> {
        check_policy(&self.policy).map_err(|reason| RuleError::Policy {
            rule: self.text.clone(),
            policy: self.policy.clone(),
            reason,
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Builds `spec` as the live pager would (a small setup), and says why not.
pub(crate) fn check_policy(spec: &str) -> Result<(), String> {
    let setup = pagepilot_policy::registry::Setup {
        slots: 64,
        frames: 16,
        future: None,
    };
    pagepilot_policy::registry::build_live(spec, &setup)
        .map(drop)
        .map_err(|e| pagepilot_policy::chain(&e).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_rule_parts_are_split_around_policy_parameters() {
        let r: Rule = "*.db=lru:16M".parse().unwrap();
        assert_eq!((r.policy.as_str(), r.budget), ("lru", Some(16 << 20)));
        let r: Rule = "big*=seq:L=50,M=20".parse().unwrap();
        assert_eq!((r.policy.as_str(), r.budget), ("seq:L=50,M=20", None));
        let r: Rule = "/d/*.bin=seq:L=50:1G".parse().unwrap();
        assert_eq!((r.policy.as_str(), r.budget), ("seq:L=50", Some(1 << 30)));
    }

    #[test]
    fn test_glob_without_slash_matches_the_file_name() {
        let r: Rule = "*.db=lru".parse().unwrap();
        assert!(r.matches(Path::new("/var/lib/x/a.db")));
        assert!(!r.matches(Path::new("/var/lib/x/a.db-wal")));
        let r: Rule = "/data/*.db=lru".parse().unwrap();
        assert!(r.matches(Path::new("/data/a.db")));
        assert!(!r.matches(Path::new("/data/sub/a.db")));
    }

    #[test]
    fn test_malformed_rules_are_refused_naming_the_rule() {
        for (text, part) in [
            ("nopolicy", "GLOB=POLICY"),
            ("=lru", "GLOB=POLICY"),
            ("a[=lru", "bad glob"),
            ("*.db=lru:0", "budget"),
            ("*.db=lru:12Q", "budget"),
        ] {
            let e = text.parse::<Rule>().unwrap_err().to_string();
            assert!(e.contains(text) && e.contains(part), "{text}: {e}");
        }
        let r: Rule = "*.db=lfu9".parse().unwrap();
        let e = r.check().unwrap_err().to_string();
        assert!(e.contains("*.db=lfu9") && e.contains("lfu9"), "{e}");
    }
}
