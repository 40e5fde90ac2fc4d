//! `pagepilot repro` as a user runs it, at the hidden `--smoke` size (the
//! smallest sizes, well under a minute; `--quick` takes minutes and is run
//! by hand, docs/repro.md): every experiment leaves its entry in
//! `report.json` with the paper's numbers and ours, its figures as valid
//! PNGs, its section in `report.md`; an unknown experiment is refused by
//! name. No number is asserted: the machines are shared and noisy.

mod bench;

use std::path::Path;

use bench::pagepilot;
use serde_json::Value;

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

fn experiment_names() -> Vec<String> {
    let (out, _) = pagepilot(&["repro", "--list"]);
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn run_repro(dir: &Path, extra: &[&str]) -> Value {
    let dir_arg = dir.display().to_string();
    let mut args = vec!["repro", "--smoke", "--out", &dir_arg];
    args.extend_from_slice(extra);
    let (out, _) = pagepilot(&args);
    assert!(
        out.status.success(),
        "pagepilot {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.join("report.json")).expect("report.json");
    serde_json::from_str(&text).expect("report.json parses")
}

fn assert_valid_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(bytes.len() > 1000, "{} is nearly empty", path.display());
    assert_eq!(&bytes[..8], PNG_MAGIC, "{} is not a PNG", path.display());
}

#[test]
fn test_repro_smoke_gives_every_experiment_its_numbers_figures_and_commands() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_repro(dir.path(), &[]);
    let names = experiment_names();
    assert!(names.len() >= 12, "{names:?}");
    let entries = report["experiments"].as_array().expect("experiments");
    let got: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(got, names, "one entry per experiment, in order");
    assert!(report["wall_s"].as_f64().unwrap() > 0.0);
    let markdown = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(markdown.contains("| experiment | paper | quantity |"));
    for e in entries {
        let name = e["name"].as_str().unwrap();
        assert!(
            markdown.contains(&format!("## {name}:")),
            "no section for {name}"
        );
        match e["status"]["state"].as_str().unwrap() {
            "skipped" => {
                let reason = e["status"]["reason"].as_str().unwrap();
                assert!(!reason.is_empty(), "{name}: skipped without a reason");
                continue;
            }
            "ran" => {}
            other => panic!("{name}: {other}: {e}"),
        }
        let claims = e["claims"].as_array().unwrap();
        assert!(!claims.is_empty(), "{name}: no claims");
        for c in claims {
            assert!(
                c["paper"].as_f64().is_some_and(f64::is_finite),
                "{name}: {c}"
            );
            assert!(c.get("measured").is_some(), "{name}: {c}");
        }
        assert!(
            claims.iter().any(|c| c["measured"].as_f64().is_some()),
            "{name}: nothing measured"
        );
        let commands = e["commands"].as_array().unwrap();
        assert!(!commands.is_empty(), "{name}: no command");
        for c in commands {
            assert!(c.as_str().unwrap().starts_with("pagepilot "), "{name}: {c}");
        }
        for f in e["figures"].as_array().unwrap() {
            let f = f.as_str().unwrap();
            assert_valid_png(&dir.path().join(f));
            assert!(
                markdown.contains(&format!("]({f})")),
                "{f} not in report.md"
            );
        }
    }
    // The experiments that draw figures drew them.
    for name in [
        "hipec-throughput",
        "hipec-join-sim",
        "seq-fault-curves",
        "seq-inter-fault",
        "seq-space-time",
        "seq-parameters",
        "seq-global",
    ] {
        let e = entries.iter().find(|e| e["name"] == name).unwrap();
        assert!(
            !e["figures"].as_array().unwrap().is_empty(),
            "{name}: no figure"
        );
    }
}

#[test]
fn test_repro_only_runs_the_experiments_named() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_repro(dir.path(), &["--only", "seq-global,hipec-join-sim"]);
    let got: Vec<&str> = report["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(got, ["seq-global", "hipec-join-sim"]);
}

#[test]
fn test_repro_refuses_an_unknown_experiment_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("never");
    let out_arg = out_dir.display().to_string();
    let (out, _) = pagepilot(&[
        "repro",
        "--smoke",
        "--out",
        &out_arg,
        "--only",
        "seq-global,nosuch",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an unknown experiment was accepted");
    assert!(err.contains("`nosuch`"), "error does not name it: {err}");
    assert!(
        err.contains("seq-global"),
        "error does not list the experiments: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        !out_dir.exists(),
        "a report directory was made for a refused run"
    );
}
