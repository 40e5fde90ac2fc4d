//! `pagepilot demo`: the embedded default workload, section by section.
//!
//! Each section is a function in [`SECTIONS`] that prints its own part of the
//! report and writes its files into the output directory; later sections (the
//! live pager) append themselves to that list.

use std::io::Write;
use std::path::{Path, PathBuf};

use pagepilot_sim::plot::{self, Metric, Panel};
use pagepilot_sim::synthetic::{self, Workload};

use super::plot::{auto_frames, series, sweep, write_spacetime, Curve, View};
use super::CmdResult;

/// Arguments of `pagepilot demo`.
#[derive(clap::Args)]
pub struct Args {
    /// Directory for the plots (created if missing).
    #[arg(long, default_value = "pagepilot-demo")]
    out: PathBuf,
    /// Seed of the synthetic workloads.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// What every section gets.
pub struct Context<'a> {
    /// Directory for files.
    pub out: &'a Path,
    /// Seed of the synthetic workloads.
    pub seed: u64,
}

/// A demo section: a heading and what it runs.
type Section = (&'static str, fn(&Context) -> CmdResult);

/// The demo's sections, in order.
const SECTIONS: &[Section] = &[
    (
        "Simulation: LRU, SEQ and OPT on the three behaviour classes of the SEQ paper",
        simulation,
    ),
    (
        "Space-time graphs: each workload's references and SEQ's replacement victims",
        spacetime,
    ),
    (
        "Live: the nested-loops join of HiPEC, paged by pagepilot and by the kernel under the same budget",
        live_join,
    ),
];

/// The live section: the join on real memory, against the kernel under a
/// memory cgroup of the same size.
fn live_join(_cx: &Context) -> CmdResult {
    let mut out = std::io::stdout().lock();
    Ok(super::bench::join::demo_join(&mut out)?)
}

/// The policy whose replacement decisions the space-time section shows.
const VICTIMS_OF: &str = "seq";

/// The policies compared in the simulation section.
const POLICIES: [&str; 3] = ["lru", "seq", "opt"];

/// Memory sizes per workload, evenly up to its footprint.
const SIZES: usize = 8;

/// Runs `pagepilot demo`.
pub fn run(args: Args) -> CmdResult {
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let cx = Context {
        out: &args.out,
        seed: args.seed,
    };
    for (heading, section) in SECTIONS {
        say(&format!("== {heading}\n\n"))?;
        section(&cx)?;
        say("\n")?;
    }
    Ok(())
}

/// Writes to standard output, reporting a closed pipe as an error rather
/// than panicking as `println!` does.
pub fn say(text: &str) -> CmdResult {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

fn simulation(cx: &Context) -> CmdResult {
    let mix = synthetic::default_mix(cx.seed);
    let (table, files) = simulate_mix(&mix, &POLICIES, cx.out)?;
    say(&table)?;
    for f in files {
        say(&format!("wrote {}\n", f.display()))?;
    }
    Ok(())
}

fn spacetime(cx: &Context) -> CmdResult {
    let mix = synthetic::default_mix(cx.seed);
    for f in spacetime_graphs(&mix, VICTIMS_OF, cx.out)? {
        say(&format!("wrote {}\n", f.display()))?;
    }
    Ok(())
}

/// Writes, for each workload, the space-time graph of its references and of
/// `policy`'s victims with half the workload's footprint in frames.
fn spacetime_graphs(
    mix: &[Workload],
    policy: &str,
    out: &Path,
) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    let mut files = Vec::new();
    for w in mix {
        let trace = w.generate()?;
        let frames = (trace.distinct() / 2).max(1);
        let file = w.name.replace(|c: char| !c.is_ascii_alphanumeric(), "-");
        for (view, name) in [
            (View::References, format!("references-{file}.png")),
            (
                View::Victims { policy, frames },
                format!("victims-{policy}-{file}.png"),
            ),
        ] {
            let path = out.join(name);
            write_spacetime(
                &trace,
                &view,
                &format!("{}: {}", w.name, view.describe()),
                &path,
            )?;
            files.push(path);
        }
    }
    Ok(files)
}

/// Runs every workload through `policies` at [`SIZES`] memory sizes and
/// writes the fault-rate and inter-fault plots into `out`; returns the table
/// of results and the plots' paths.
fn simulate_mix(
    mix: &[Workload],
    policies: &[&str],
    out: &Path,
) -> Result<(String, Vec<PathBuf>), Box<dyn std::error::Error>> {
    let mut results: Vec<(String, Vec<Curve>)> = Vec::new();
    for w in mix {
        let trace = w.generate()?;
        let frames = auto_frames(trace.distinct(), SIZES);
        results.push((w.name.clone(), sweep(&trace, policies, &frames)?));
    }
    let table = format_table(&results);
    let mut files = Vec::new();
    for (metric, name) in [
        (Metric::FaultRate, "fault-rate.png"),
        (Metric::InterFault, "inter-fault.png"),
    ] {
        let panels: Vec<Panel> = results
            .iter()
            .map(|(workload, curves)| Panel {
                title: workload.clone(),
                series: series(curves, metric),
            })
            .collect();
        let path = out.join(name);
        let title = match metric {
            Metric::FaultRate => "Fault rate against memory size",
            Metric::InterFault => "Mean inter-fault time against memory size",
        };
        plot::curve_panels(&panels, metric, title, &path)?;
        files.push(path);
    }
    Ok((table, files))
}

/// The aligned table: one row per workload, memory size and policy.
fn format_table(results: &[(String, Vec<Curve>)]) -> String {
    let header = [
        "workload",
        "policy",
        "frames",
        "references",
        "faults",
        "cold",
        "faults/M refs",
    ];
    let mut rows: Vec<[String; 7]> = Vec::new();
    for (workload, curves) in results {
        // Sizes across the policies, so the policies sit side by side.
        let sizes = curves.first().map_or(0, |c| c.runs.len());
        for i in 0..sizes {
            for c in curves {
                let (frames, counters) = &c.runs[i];
                let rate = counters.faults as f64 * 1e6 / counters.references.max(1) as f64;
                rows.push([
                    workload.clone(),
                    c.policy.clone(),
                    frames.to_string(),
                    counters.references.to_string(),
                    counters.faults.to_string(),
                    counters.cold_faults.to_string(),
                    format!("{rate:.0}"),
                ]);
            }
        }
    }
    let mut width = header.map(str::len);
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: [&str; 7]| {
        let (text, numbers) = cells.split_at(2);
        let mut s = format!(
            "{:<w0$}  {:<w1$}",
            text[0],
            text[1],
            w0 = width[0],
            w1 = width[1]
        );
        for (cell, w) in numbers.iter().zip(&width[2..]) {
            s += &format!("  {cell:>w$}");
        }
        s.trim_end().to_string() + "\n"
    };
    let mut table = line(header);
    let mut previous: Option<&str> = None;
    for row in &rows {
        if previous.is_some_and(|p| p != row[0]) {
            table.push('\n');
        }
        previous = Some(&row[0]);
        table += &line(row.each_ref().map(String::as_str));
    }
    table + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagepilot_sim::synthetic::Behaviour;

    #[test]
    fn test_demo_simulation_writes_both_plots() {
        let dir = std::env::temp_dir().join(format!("pagepilot-demo-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let small = vec![Workload {
            name: "small sweep".into(),
            behaviour: Behaviour::Sweep {
                pages: 64,
                sweeps: 5,
            },
            base: 0,
            seed: 1,
        }];
        let (table, files) = simulate_mix(&small, &["lru", "opt"], &dir).unwrap();
        assert_eq!(files.len(), 2);
        // Header plus 2 policies x 8 sizes, every line as wide as the header
        // or the widest row, numbers right-aligned.
        let lines: Vec<&str> = table.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 1 + 2 * SIZES);
        assert!(lines[0].starts_with("workload") && lines[0].ends_with("faults/M refs"));
        let widths: Vec<usize> = lines.iter().map(|l| l.len()).collect();
        assert!(widths.iter().all(|&w| w == widths[0]), "{table}");
        // A 64-page sweep with 64 frames faults only on first touch.
        assert!(lines
            .last()
            .unwrap()
            .ends_with(&format!("{}", 64 * 1_000_000 / 320)));
        for f in &files {
            let bytes = std::fs::read(f).unwrap();
            assert!(bytes.starts_with(b"\x89PNG"), "{}", f.display());
        }
        let graphs = spacetime_graphs(&small, "lru", &dir).unwrap();
        let names: Vec<_> = graphs
            .iter()
            .map(|f| f.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(
            names,
            ["references-small-sweep.png", "victims-lru-small-sweep.png"]
        );
        for f in &graphs {
            assert!(std::fs::read(f).unwrap().starts_with(b"\x89PNG"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
