//! The list of experiments, in run order, and `--only`'s choice among them.

use super::{cache_kernel, hipec, rapha, sawmill, seq, Ctx, ExpError, Outcome, ReproError};

/// What runs an experiment.
type Run = fn(&Ctx) -> Result<Outcome, ExpError>;

/// One experiment.
pub(super) struct Experiment {
    /// Its name for `--only`.
    pub(super) name: &'static str,
    /// The paper.
    pub(super) paper: &'static str,
    /// The paper's figures or tables.
    pub(super) figure: &'static str,
    /// What it measures.
    pub(super) title: &'static str,
    /// What runs it.
    pub(super) run: Run,
}

/// Every experiment, in run order.
const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: "hipec-policy",
        paper: "HiPEC",
        figure: "Tables 3-4",
        title: "cost of a policy program's PageFault event against the native policy",
        run: hipec::policy,
    },
    Experiment {
        name: "hipec-throughput",
        paper: "HiPEC",
        figure: "Figure 5",
        title: "AIM-like throughput of non-specific applications, with and without pagepilot",
        run: hipec::throughput,
    },
    Experiment {
        name: "hipec-join-sim",
        paper: "HiPEC",
        figure: "Figure 6",
        title: "nested-loops join faults, analytic against the simulator",
        run: hipec::join_sim,
    },
    Experiment {
        name: "hipec-join-live",
        paper: "HiPEC",
        figure: "Figure 6",
        title: "nested-loops join, live, LRU and MRU against the kernel",
        run: hipec::join_live,
    },
    Experiment {
        name: "seq-fault-curves",
        paper: "SEQ",
        figure: "Figures 1-2",
        title: "fault rate against memory size, LRU / SEQ / OPT",
        run: seq::fault_curves,
    },
    Experiment {
        name: "seq-inter-fault",
        paper: "SEQ",
        figure: "Figures 3-4",
        title: "mean inter-fault time against memory size",
        run: seq::inter_fault,
    },
    Experiment {
        name: "seq-space-time",
        paper: "SEQ",
        figure: "Figures 5-8",
        title: "space-time graphs of SEQ's faults and victims",
        run: seq::space_time,
    },
    Experiment {
        name: "seq-parameters",
        paper: "SEQ",
        figure: "Figures 9-10",
        title: "sensitivity to L, M, N and X",
        run: seq::parameters,
    },
    Experiment {
        name: "seq-global",
        paper: "SEQ",
        figure: "Figure 11",
        title: "global LRU against global SEQ, multiprogrammed",
        run: seq::global,
    },
    Experiment {
        name: "rapha",
        paper: "RAPHA",
        figure: "Figures 8-11",
        title: "fault dispersion, resident set and deadline misses",
        run: rapha::run,
    },
    Experiment {
        name: "sawmill-appel-li",
        paper: "SawMill",
        figure: "Table 1",
        title: "Appel-Li virtual memory primitives",
        run: sawmill::run,
    },
    Experiment {
        name: "cache-kernel-faults",
        paper: "Cache Kernel",
        figure: "Section 5 and Table 2",
        title: "a fault's cost split into transfer and mapping load",
        run: cache_kernel::faults,
    },
    Experiment {
        name: "cache-kernel-writeback",
        paper: "Cache Kernel",
        figure: "Table 2",
        title: "page-in cost with and without write-back",
        run: cache_kernel::writeback,
    },
];

/// The experiments' names, in run order.
pub fn experiment_names() -> Vec<&'static str> {
    EXPERIMENTS.iter().map(|e| e.name).collect()
}

/// The experiments `only` names (all of them if none), in the order given.
pub(super) fn selected(only: &[String]) -> Result<Vec<&'static Experiment>, ReproError> {
    if only.is_empty() {
        return Ok(EXPERIMENTS.iter().collect());
    }
    let mut chosen = Vec::new();
    for name in only.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let e = EXPERIMENTS.iter().find(|e| e.name == name).ok_or_else(|| {
            ReproError::UnknownExperiment {
                name: name.to_string(),
                known: experiment_names().join(", "),
            }
        })?;
        if !chosen.iter().any(|c: &&Experiment| c.name == e.name) {
            chosen.push(e);
        }
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repro::strings;

    #[test]
    fn test_unknown_experiment_is_refused_by_name() {
        let err = selected(&strings(&["seq-global", "nosuch"])).err().unwrap();
        assert!(matches!(&err, ReproError::UnknownExperiment { name, .. } if name == "nosuch"));
        assert_eq!(selected(&strings(&["rapha", "rapha"])).unwrap().len(), 1);
        assert_eq!(selected(&[]).unwrap().len(), EXPERIMENTS.len());
    }
}
