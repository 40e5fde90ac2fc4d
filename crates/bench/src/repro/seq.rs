//! SEQ (Glass and Cao): fault curves (Figures 1-2), inter-fault times
//! (3-4), space-time graphs (5-8), parameter sensitivity (9-10) and global
//! replacement (11), from the simulator over the traces of [`super::seq_traces`].
//! The paper states most results as which curve overlaps which; the claims
//! below turn that into ratios of warm faults (first touches left out, as in
//! the paper) summed over the memory sizes below the footprint.

use pagepilot_policy::registry::{self, Setup};
use pagepilot_sim::plot::{self, PageAxis, Series};
use pagepilot_sim::report::Row;
use pagepilot_sim::sweep::{self, Parallelism};
use pagepilot_sim::{global, Access, Machine, Trace};

use super::report::{Claim, Relation};
use super::seq_traces::Named;
use super::{command_line, strings, Ctx, ExpError, Outcome};
use crate::measure::ratio;
use pagepilot_sim::synthetic::Behaviour;

fn fail(e: impl std::error::Error) -> ExpError {
    ExpError::Fail(pagepilot_policy::chain(&e).to_string())
}

fn warm(r: &Row) -> u64 {
    r.faults.saturating_sub(r.cold_faults)
}

fn frames_of(cx: &Ctx, distinct: usize) -> Vec<usize> {
    sweep::auto_frames(distinct, cx.size.pick(6, 10, 20))
}

fn run(trace: &Trace, specs: &[String], frames: &[usize]) -> Result<Vec<Row>, ExpError> {
    sweep::sweep(trace, specs, frames, Parallelism::AllCores, &|_| {}).map_err(fail)
}

/// Warm faults of `policy`'s rows below the footprint, summed.
fn total(rows: &[Row], policy: &str, footprint: usize) -> f64 {
    rows.iter()
        .filter(|r| {
            r.policy == policy
                && r.frames < footprint
                && r.process.as_deref().is_none_or(|p| p == "all")
        })
        .map(warm)
        .sum::<u64>() as f64
}

/// Warm faults per million references, one series per policy.
fn series(rows: &[Row], inter_fault: bool) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.process.as_deref().is_none_or(|p| p == "all"))
    {
        let w = warm(r) as f64;
        let y = if inter_fault {
            if w == 0.0 {
                continue;
            }
            r.references as f64 / w
        } else {
            w * 1e6 / r.references.max(1) as f64
        };
        match out.iter_mut().find(|s| s.label == r.policy) {
            Some(s) => s.points.push((r.frames as u64, y)),
            None => out.push(Series {
                label: r.policy.clone(),
                points: vec![(r.frames as u64, y)],
            }),
        }
    }
    out
}

fn frames_arg(frames: &[usize]) -> String {
    frames
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// A trace's name, its rows and its footprint.
type Curves = Vec<(String, Vec<Row>, usize)>;

/// Curves of LRU, SEQ and OPT on every trace; `inter_fault` picks the metric.
fn curves(cx: &Ctx, inter_fault: bool) -> Result<(Outcome, Curves), ExpError> {
    let traces = cx.traces()?;
    let specs = strings(&["lru", "seq", "opt"]);
    let mut o = Outcome::default();
    let mut all = Vec::new();
    let metric = if inter_fault {
        "inter-fault"
    } else {
        "fault-rate"
    };
    for t in traces.all() {
        let frames = frames_of(cx, t.trace.distinct());
        let rows = run(&t.trace, &specs, &frames)?;
        let fig = format!("seq-{metric}-{}.png", t.name);
        let s = series(&rows, inter_fault);
        let title = format!(
            "{} ({} refs, {} pages)",
            t.name,
            t.trace.len(),
            t.trace.distinct()
        );
        if inter_fault {
            plot::interfault_curves(&s, &title, &cx.file(&fig)).map_err(fail)?;
        } else {
            plot::fault_rate_curves(&s, &title, &cx.file(&fig)).map_err(fail)?;
        }
        o.figures.push(fig.clone());
        let trace_path = cx.file(&t.file).display().to_string();
        o.commands.push(command_line(
            &["plot", "curves"],
            &strings(&[
                &trace_path,
                "--policy",
                "lru,seq,opt",
                "--frames",
                &frames_arg(&frames),
                "--metric",
                metric,
                "-o",
                &cx.file(&fig).display().to_string(),
            ]),
        ));
        all.push((t.name.clone(), rows, t.trace.distinct()));
    }
    o.commands.extend(traces.real_commands.iter().cloned());
    for why in traces.missing() {
        o.notes.push(format!("no real trace: {why}"));
    }
    o.data = serde_json::to_value(all.iter().map(|(n, r, _)| (n, r)).collect::<Vec<_>>())
        .unwrap_or_default();
    Ok((o, all))
}

/// Figures 1-2.
pub(super) fn fault_curves(cx: &Ctx) -> Result<Outcome, ExpError> {
    let (mut o, all) = curves(cx, false)?;
    let get = |name: &str| all.iter().find(|(n, _, _)| n == name);
    if let Some((_, rows, fp)) = get("sweep") {
        let (seq, opt, lru) = (
            total(rows, "seq", *fp),
            total(rows, "opt", *fp),
            total(rows, "lru", *fp),
        );
        o.claims.push(Claim::new(
            "sweep (es, gnuplot): SEQ / OPT warm faults",
            "Figure 1",
            Relation::About,
            1.0,
            ratio(seq, opt),
            "x",
        ));
        o.claims.push(Claim::new(
            "sweep (es, gnuplot): SEQ / LRU warm faults",
            "Figure 1",
            Relation::AtMost,
            1.0,
            ratio(seq, lru),
            "x",
        ));
    }
    if let Some((_, rows, fp)) = get("scattered") {
        let (seq, lru) = (total(rows, "seq", *fp), total(rows, "lru", *fp));
        o.claims.push(Claim::new(
            "scattered (coral, gcc): SEQ / LRU warm faults",
            "Figure 1",
            Relation::About,
            1.0,
            ratio(seq, lru),
            "x",
        ));
    }
    if let Some((_, rows, fp)) = get("up-down") {
        let (seq, lru) = (total(rows, "seq", *fp), total(rows, "lru", *fp));
        o.claims.push(Claim::new(
            "up-down (applu): SEQ / LRU warm faults",
            "Figure 2",
            Relation::AtMost,
            1.0,
            ratio(seq, lru),
            "x",
        ));
    }
    for name in ["gzip", "sqlite"] {
        let real = get(name);
        let of = |policy| real.map(|(_, rows, fp)| total(rows, policy, *fp));
        let (seq, lru, opt) = (of("seq"), of("lru"), of("opt"));
        let claim = |what: &str, rel, value: Option<f64>| {
            let c = Claim::new(
                format!("real program ({name}): SEQ / {what} warm faults"),
                "Figures 1-2",
                rel,
                1.0,
                value,
                "x",
            );
            match real {
                Some(_) => c,
                None => c.with_note("no such real trace in this run"),
            }
        };
        let pair = |a: Option<f64>, b: Option<f64>| a.zip(b).and_then(|(a, b)| ratio(a, b));
        o.claims
            .push(claim("LRU", Relation::AtMost, pair(seq, lru)));
        // Figure 1: near OPT for programs that loop as es and gnuplot do.
        o.claims.push(claim("OPT", Relation::About, pair(seq, opt)));
    }
    Ok(o)
}

/// Figures 3-4.
pub(super) fn inter_fault(cx: &Ctx) -> Result<Outcome, ExpError> {
    let (mut o, all) = curves(cx, true)?;
    for (name, rows, fp) in &all {
        let (seq, lru) = (total(rows, "seq", *fp), total(rows, "lru", *fp));
        // Mean inter-fault time is references / faults: the ratio of times is the inverse.
        let (rel, src) = match name.as_str() {
            "scattered" => (Relation::About, "Figure 3"),
            _ => (Relation::AtLeast, "Figures 3-4"),
        };
        o.claims.push(Claim::new(
            format!("{name}: SEQ / LRU mean inter-fault time"),
            src,
            rel,
            1.0,
            ratio(lru, seq),
            "x",
        ));
    }
    Ok(o)
}

/// Runs `policy` with `frames` over `t`, returning (time, page rank) of warm
/// faults and of victims.
type Points = Vec<(u64, u32)>;
fn faults_and_victims(
    t: &Trace,
    policy: &str,
    frames: usize,
) -> Result<(Points, Points), ExpError> {
    let axis = PageAxis::new(&t.pages);
    let setup = Setup {
        slots: t.distinct(),
        frames,
        future: Some(&t.refs),
    };
    let mut machine = Machine::new(t, registry::build(policy, &setup).map_err(fail)?, frames, 0);
    let (mut faults, mut victims) = (Vec::new(), Vec::new());
    for (i, &s) in t.refs.iter().enumerate() {
        if let Access::Missing { cold, victim, .. } = machine.access(s, false, i as u64) {
            if !cold {
                faults.push((i as u64, axis.rank(s)));
            }
            if let Some(v) = victim {
                victims.push((i as u64, axis.rank(v.slot)));
            }
        }
    }
    Ok((faults, victims))
}

fn spacetime_pair(
    cx: &Ctx,
    t: &Named,
    frames: usize,
    o: &mut Outcome,
) -> Result<(Points, Points), ExpError> {
    let (faults, victims) = faults_and_victims(&t.trace, "seq", frames)?;
    let extent = plot::Extent {
        duration: t.trace.len() as u64,
        pages: t.trace.distinct() as u32,
    };
    let trace_path = cx.file(&t.file).display().to_string();
    for (what, points) in [("faults", &faults), ("victims", &victims)] {
        let fig = format!("seq-spacetime-{}-{what}.png", t.name);
        let title = format!("{}: {what} under SEQ, {frames} frames", t.name);
        plot::spacetime(points.iter().copied(), extent, &title, &cx.file(&fig)).map_err(fail)?;
        o.figures.push(fig.clone());
        o.commands.push(command_line(
            &["plot", "spacetime"],
            &strings(&[
                &trace_path,
                "--what",
                what,
                "--policy",
                "seq",
                "--frames",
                &frames.to_string(),
                "-o",
                &cx.file(&fig).display().to_string(),
            ]),
        ));
    }
    Ok((faults, victims))
}

/// Figures 5-8.
pub(super) fn space_time(cx: &Ctx) -> Result<Outcome, ExpError> {
    let traces = cx.traces()?;
    let mut o = Outcome::default();
    let sweep_t = traces
        .get("sweep")
        .ok_or_else(|| ExpError::Fail("no sweep trace".into()))?;
    let half = sweep_t.trace.distinct() / 2;
    let (faults, _) = spacetime_pair(cx, sweep_t, half, &mut o)?;
    let low = faults.iter().filter(|(_, p)| (*p as usize) < half).count() as f64;
    o.claims.push(
        Claim::new(
            "sweep (es), half its pages: share of warm faults in the lower half",
            "Figure 5",
            Relation::About,
            0.0,
            ratio(low, faults.len() as f64),
            "",
        )
        .with_note(
            "paper: the lower half stays resident; ours, following its rules: M head pages \
             left in no sequence per sweep, so M more low faults each sweep (docs/repro.md)",
        ),
    );
    let ud = traces
        .get("up-down")
        .ok_or_else(|| ExpError::Fail("no up-down trace".into()))?;
    let frames = ud.trace.distinct() * 2 / 5;
    let (_, victims) = spacetime_pair(cx, ud, frames, &mut o)?;
    // Ranks are dense over the touched pages; a region's offset is rank mod its pages.
    let region = match ud.workload.as_ref().map(|w| &w.behaviour) {
        Some(Behaviour::UpDown { region_pages, .. }) => *region_pages as u32,
        _ => return Err(ExpError::Fail("up-down trace without its geometry".into())),
    };
    let middle = victims
        .iter()
        .filter(|(_, p)| {
            let off = p % region;
            off >= region / 4 && off < region * 3 / 4
        })
        .count() as f64;
    o.claims.push(
        Claim::new(
            "up-down (applu), 40% of its pages: share of victims in the middle half of each region",
            "Figures 7-8",
            Relation::AtLeast,
            0.5,
            ratio(middle, victims.len() as f64),
            "",
        )
        .with_note(
            "paper: the regions' ends stay resident, the middles are the source of replacements",
        ),
    );
    o.notes
        .push("First-touch faults are left out of the fault graphs, as in the paper.".into());
    Ok(o)
}

/// Figures 9-10 (and §4.2's N and X).
pub(super) fn parameters(cx: &Ctx) -> Result<Outcome, ExpError> {
    let traces = cx.traces()?;
    let lmx = ["seq", "seq:L=50,M=20", "seq:L=50,M=50", "seq:X=50"];
    let ns = ["seq:N=2", "seq", "seq:N=20"];
    let mut specs = strings(&["lru"]);
    specs.extend(strings(&lmx));
    specs.extend(strings(&ns[..1]));
    specs.extend(strings(&ns[2..]));
    let mut o = Outcome::default();
    let mut data = Vec::new();
    for t in &traces.synthetic {
        let fp = t.trace.distinct();
        let frames = frames_of(cx, fp);
        let rows = run(&t.trace, &specs, &frames)?;
        let fig = format!("seq-parameters-{}.png", t.name);
        plot::fault_rate_curves(
            &series(&rows, false),
            &format!("{}: SEQ parameters", t.name),
            &cx.file(&fig),
        )
        .map_err(fail)?;
        o.figures.push(fig.clone());
        let trace_path = cx.file(&t.file).display().to_string();
        o.commands.push(command_line(
            &["plot", "curves"],
            &strings(&[
                &trace_path,
                "--policy",
                &specs.join(","),
                "--frames",
                &frames_arg(&frames),
                "-o",
                &cx.file(&fig).display().to_string(),
            ]),
        ));
        let spread = |set: &[&str]| {
            let v: Vec<f64> = set.iter().map(|p| total(&rows, p, fp)).collect();
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
            ratio(hi, lo)
        };
        if t.name == "up-down" {
            o.claims.push(Claim::new(
                "up-down (applu): SEQ L=50,M=50 / LRU",
                "Figure 9",
                Relation::About,
                1.0,
                ratio(total(&rows, "seq:L=50,M=50", fp), total(&rows, "lru", fp)),
                "x",
            ));
        } else {
            o.claims.push(Claim::new(
                format!("{}: most / fewest faults over (L,M) and X settings", t.name),
                "Figures 9-10",
                Relation::About,
                1.0,
                spread(&lmx),
                "x",
            ));
        }
        o.claims.push(Claim::new(
            format!("{}: most / fewest faults over N = 2, 5, 20", t.name),
            "Section 4.2",
            Relation::About,
            1.0,
            spread(&ns),
            "x",
        ));
        data.push((t.name.clone(), rows));
    }
    o.data = serde_json::to_value(data).unwrap_or_default();
    Ok(o)
}

/// Figure 11.
pub(super) fn global(cx: &Ctx) -> Result<Outcome, ExpError> {
    let traces = cx.traces()?;
    let get = |n: &str| {
        traces
            .get(n)
            .ok_or_else(|| ExpError::Fail(format!("no {n} trace")))
    };
    let mut mixes: Vec<(&str, Vec<&Named>, Relation)> = vec![
        (
            "sweep+scattered",
            vec![get("sweep")?, get("scattered")?],
            Relation::AtMost,
        ),
        (
            "scattered+scattered2",
            vec![get("scattered")?, &traces.scattered2],
            Relation::About,
        ),
    ];
    // Two real programs, one of them looping (quick and full runs).
    let real = |n: &str| traces.all().into_iter().find(|t| t.name == n);
    if let (Some(sqlite), Some(gzip)) = (real("sqlite"), real("gzip")) {
        mixes.push(("sqlite+gzip", vec![sqlite, gzip], Relation::AtMost));
    }
    let schedule = global::Schedule {
        quantum: 10_000,
        service: 4_000,
    };
    let specs = strings(&["lru", "seq"]);
    let mut o = Outcome::default();
    let mut data = Vec::new();
    for (name, members, rel) in mixes {
        let ts: Vec<Trace> = members.iter().map(|m| m.trace.clone()).collect();
        let names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
        let fp: usize = ts.iter().map(Trace::distinct).sum();
        let frames = frames_of(cx, fp);
        let rows = global::sweep(&ts, &names, &specs, &frames, schedule, &|_| {}).map_err(fail)?;
        let fig = format!("seq-global-{name}.png");
        plot::fault_rate_curves(
            &series(&rows, false),
            &format!("global: {name}"),
            &cx.file(&fig),
        )
        .map_err(fail)?;
        o.figures.push(fig.clone());
        let mut argv: Vec<String> = members
            .iter()
            .map(|m| cx.file(&m.file).display().to_string())
            .collect();
        argv.extend(strings(&[
            "--global",
            "--policy",
            "lru,seq",
            "--frames",
            &frames_arg(&frames),
            "--quantum",
            "10000",
            "--service",
            "4000",
            "--plot",
            &cx.file(&fig).display().to_string(),
        ]));
        o.commands.push(command_line(&["sim"], &argv));
        let src = match (name, rel) {
            ("sqlite+gzip", _) => "Figure 11 (a looping program, real)",
            (_, Relation::AtMost) => "Figure 11 (vortex+gnuplot)",
            _ => "Figure 11 (gcc+vortex)",
        };
        o.claims.push(Claim::new(
            format!("{name}: global SEQ / global LRU warm faults"),
            src,
            rel,
            1.0,
            ratio(total(&rows, "seq", fp), total(&rows, "lru", fp)),
            "x",
        ));
        data.push((name, rows));
    }
    o.notes.push("Processes run round-robin, 10,000 references a turn, a fault blocking its process for 4,000 reference times.".into());
    o.data = serde_json::to_value(data).unwrap_or_default();
    Ok(o)
}
