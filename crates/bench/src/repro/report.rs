//! The reproduction report: one [`Entry`] per experiment, written as
//! `report.json` (every number) and `report.md` (a summary table of paper
//! against ours, then one section per experiment with its figures and the
//! commands that reproduce it).

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

/// How our measurement is expected to relate to the paper's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// About the same: within 25% (or within 0.05 of a paper value of 0).
    About,
    /// At most the paper's number.
    AtMost,
    /// At least the paper's number.
    AtLeast,
}

impl Relation {
    fn symbol(self) -> &'static str {
        match self {
            Relation::About => "~",
            Relation::AtMost => "<=",
            Relation::AtLeast => ">=",
        }
    }

    /// Whether `measured` stands in this relation to `paper`.
    pub fn holds(self, paper: f64, measured: f64) -> bool {
        match self {
            Relation::About if paper == 0.0 => measured.abs() <= 0.05,
            Relation::About => (measured / paper - 1.0).abs() <= 0.25,
            Relation::AtMost => measured <= paper,
            Relation::AtLeast => measured >= paper,
        }
    }
}

/// One number of a paper set beside ours.
#[derive(Clone, Debug, Serialize)]
pub struct Claim {
    /// What is compared, e.g. `MRU faults / PF_m, outer 60 MB`.
    pub quantity: String,
    /// Where in the paper, e.g. `Figure 6`.
    pub source: &'static str,
    /// How ours should relate to the paper's.
    pub relation: Relation,
    /// The paper's number.
    pub paper: f64,
    /// Ours; `None` when this run could not measure it (the note says why).
    pub measured: Option<f64>,
    /// Unit of both numbers (`x` for a ratio).
    pub unit: &'static str,
    /// Whether ours stands in `relation` to the paper's.
    pub agrees: Option<bool>,
    /// Remarks (what differs from the paper's setting).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Claim {
    /// A claim with our measurement (or none) and its agreement computed.
    pub fn new(
        quantity: impl Into<String>,
        source: &'static str,
        relation: Relation,
        paper: f64,
        measured: Option<f64>,
        unit: &'static str,
    ) -> Claim {
        let measured = measured.filter(|m| m.is_finite());
        Claim {
            quantity: quantity.into(),
            source,
            relation,
            paper,
            measured,
            unit,
            agrees: measured.map(|m| relation.holds(paper, m)),
            note: None,
        }
    }

    /// The same with a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Claim {
        self.note = Some(note.into());
        self
    }
}

/// Whether an experiment ran.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Status {
    /// It ran; its claims and figures are in the entry.
    Ran,
    /// It could not run on this machine.
    Skipped {
        /// Why.
        reason: String,
    },
    /// It started and failed.
    Failed {
        /// The error.
        error: String,
    },
}

/// One experiment's results.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    /// Its name for `--only`.
    pub name: &'static str,
    /// The paper (`HiPEC`, `SEQ`, `RAPHA`, `SawMill`, `Cache Kernel`).
    pub paper: &'static str,
    /// The paper's figures or tables it reproduces.
    pub figure: &'static str,
    /// What it measures, one line.
    pub title: &'static str,
    /// Whether it ran.
    pub status: Status,
    /// Wall time, seconds.
    pub seconds: f64,
    /// The paper's numbers beside ours.
    pub claims: Vec<Claim>,
    /// Figures, file names in the report's directory.
    pub figures: Vec<String>,
    /// The `pagepilot ...` command lines that reproduce it.
    pub commands: Vec<String>,
    /// Remarks.
    pub notes: Vec<String>,
    /// The underlying benchmark's or simulation's own report.
    pub data: serde_json::Value,
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// UTC date and time of the start, `YYYY-MM-DD HH:MM UTC`.
    pub started: String,
    /// `smoke`, `quick` or `full`.
    pub size: &'static str,
    /// The command line of this run.
    pub command: String,
    /// `/proc/loadavg` before.
    pub load_before: [f64; 3],
    /// `/proc/loadavg` after.
    pub load_after: [f64; 3],
    /// Processors online.
    pub cpus: usize,
    /// Wall time of the whole run, seconds.
    pub wall_s: f64,
    /// One entry per experiment run or skipped.
    pub experiments: Vec<Entry>,
}

fn number(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

fn verdict(c: &Claim) -> &'static str {
    match c.agrees {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

impl Report {
    /// The Markdown summary table: one row per claim, or per experiment
    /// without claims (skipped or failed).
    pub fn summary_table(&self) -> String {
        let mut s = String::from(
            "| experiment | paper | quantity | paper's | ours | agrees |\n|---|---|---|---|---|---|\n",
        );
        for e in &self.experiments {
            let state = match &e.status {
                Status::Ran => None,
                Status::Skipped { reason } => Some(format!("skipped: {reason}")),
                Status::Failed { error } => Some(format!("FAILED: {error}")),
            };
            if let Some(state) = state {
                let _ = writeln!(
                    s,
                    "| {} | {} {} | {} | | | |",
                    e.name,
                    e.paper,
                    e.figure,
                    state.replace('|', "/")
                );
                continue;
            }
            for c in &e.claims {
                let ours = c.measured.map_or("-".into(), number);
                let _ = writeln!(
                    s,
                    "| {} | {} {} | {} | {} {}{} | {}{} | {} |",
                    e.name,
                    e.paper,
                    c.source,
                    c.quantity.replace('|', "/"),
                    c.relation.symbol(),
                    number(c.paper),
                    c.unit,
                    ours,
                    if c.measured.is_some() { c.unit } else { "" },
                    verdict(c)
                );
            }
        }
        s
    }

    /// The whole Markdown report.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# pagepilot: the five papers' experiments, reproduced\n");
        let _ = writeln!(
            s,
            "Run `{}` started {}, size `{}`, {} CPUs, load average {:.2} / {:.2} / {:.2} before and {:.2} / {:.2} / {:.2} after; wall time {:.0} s.\n",
            self.command,
            self.started,
            self.size,
            self.cpus,
            self.load_before[0],
            self.load_before[1],
            self.load_before[2],
            self.load_after[0],
            self.load_after[1],
            self.load_after[2],
            self.wall_s
        );
        s.push_str(
            "Paper's numbers come from their 1990s machines: compare ratios, not absolute times. \
             `agrees` applies the relation in the paper's column (`~`: within 25%; `<=`, `>=`). \
             Every number is also in `report.json`.\n\n## Summary\n\n",
        );
        s.push_str(&self.summary_table());
        for e in &self.experiments {
            let _ = writeln!(
                s,
                "\n## {}: {} {} ({})\n",
                e.name, e.paper, e.figure, e.title
            );
            match &e.status {
                Status::Ran => {
                    let _ = writeln!(s, "Ran in {:.1} s.\n", e.seconds);
                }
                Status::Skipped { reason } => {
                    let _ = writeln!(s, "**Skipped**: {reason}\n");
                }
                Status::Failed { error } => {
                    let _ = writeln!(s, "**Failed** after {:.1} s: {error}\n", e.seconds);
                }
            }
            if !e.claims.is_empty() {
                s.push_str("| quantity | source | paper's | ours | agrees | note |\n|---|---|---|---|---|---|\n");
                for c in &e.claims {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} {}{} | {} | {} | {} |",
                        c.quantity,
                        c.source,
                        c.relation.symbol(),
                        number(c.paper),
                        c.unit,
                        c.measured
                            .map_or("-".into(), |m| format!("{}{}", number(m), c.unit)),
                        verdict(c),
                        c.note.as_deref().unwrap_or("")
                    );
                }
                s.push('\n');
            }
            for f in &e.figures {
                let _ = writeln!(s, "![{f}]({f})\n");
            }
            for n in &e.notes {
                let _ = writeln!(s, "- {n}");
            }
            if !e.commands.is_empty() {
                s.push_str("\nReproduce with:\n\n```sh\n");
                for c in &e.commands {
                    let _ = writeln!(s, "{c}");
                }
                s.push_str("```\n");
            }
        }
        s
    }

    /// Writes `report.md` and `report.json` into `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::write(dir.join("report.md"), self.markdown())?;
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(dir.join("report.json"), json + "\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_relations_hold_within_their_tolerance() {
        assert!(Relation::About.holds(1.0, 1.2));
        assert!(!Relation::About.holds(1.0, 1.3));
        assert!(Relation::About.holds(0.0, 0.04));
        assert!(!Relation::About.holds(0.0, 0.2));
        assert!(Relation::AtMost.holds(1.0, 0.5));
        assert!(!Relation::AtLeast.holds(1.0, 0.5));
    }

    #[test]
    fn test_a_claim_without_a_measurement_has_no_verdict() {
        let c = Claim::new("x", "Table 2", Relation::About, 3.2, None, "x");
        assert_eq!(c.agrees, None);
        let c = Claim::new("x", "Table 2", Relation::About, 3.2, Some(f64::NAN), "x");
        assert_eq!(c.measured, None);
        assert_eq!(
            Claim::new("x", "T", Relation::About, 3.2, Some(3.0), "x").agrees,
            Some(true)
        );
    }
}
