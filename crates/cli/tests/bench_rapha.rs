//! `pagepilot bench rapha` as a user runs it, at small sizes: a row per
//! configuration, the launcher under RAPHA's limit never faulting faster
//! than the limit allows (in process and with both tasks joined to a
//! daemon, which they tell nothing of their faults), the limits RAPHA's
//! equations give, the plot written; bad input refused with a named
//! error. No timing is asserted.

mod bench;

use bench::{assert_refused_naming, json, pagepilot};

#[test]
fn test_rapha_bench_reports_every_configuration_and_holds_the_launcher_to_its_limit() {
    let plot = std::env::temp_dir().join(format!("pagepilot-rapha-{}.svg", std::process::id()));
    let r = json(&[
        "bench",
        "rapha",
        "--decoder-mb",
        "4",
        "--decoder-budget-mb",
        "1",
        "--chunks",
        "4",
        "--launcher-mb",
        "8",
        "--launcher-budget-mb",
        "4",
        "--launcher-threads",
        "2",
        "--alone-ms",
        "200",
        "--launcher-fault-period-ms",
        "10",
        "--runs",
        "1",
        "--plot",
        plot.to_str().unwrap(),
        "--format",
        "json",
    ]);
    // Eq. 4: (1 - 22/33) / 100 us x 100 ms = 333 faults; the decoder's 2 x 4
    // per 33 ms are 25 per 100 ms; the launcher gets 308 per 100 ms, 30 per 10 ms.
    let l = &r["limits"];
    assert_eq!(l["system_fault_limit"], 333, "{l}");
    assert_eq!(l["decoder_fault_limit"], 8, "{l}");
    assert_eq!(l["launcher_fault_limit"], 30, "{l}");
    assert_eq!(l["launcher_fault_period_ms"], 10, "{l}");
    let rows = r["rows"].as_array().unwrap();
    let row = |name: &str| {
        rows.iter()
            .find(|x| x["config"] == name)
            .unwrap_or_else(|| panic!("no {name} row: {r}"))
    };
    let mut names = vec!["pagepilot", "rapha", "rapha+daemon"];
    if r["kernel_skipped"].is_null() {
        names.push("kernel");
    }
    assert_eq!(rows.len(), names.len(), "{r}");
    let pages = 8 * 256;
    for name in names {
        let x = row(name);
        // The decoder ran alone first (200 ms of 33 ms periods), then beside the launcher.
        assert!(x["alone"]["frames"].as_u64().unwrap() >= 3, "{x}");
        assert!(x["with_launcher"]["frames"].as_u64().unwrap() >= 1, "{x}");
        let misses = x["with_launcher"]["misses"].as_u64().unwrap();
        assert!(
            misses <= x["with_launcher"]["frames"].as_u64().unwrap(),
            "{x}"
        );
        assert!(x["launcher_ms"].as_f64().unwrap() > 0.0, "{x}");
        if name != "kernel" {
            // One page per fault, every page touched once.
            assert!(x["launcher_faults"].as_u64().unwrap() >= pages, "{x}");
        }
    }
    // Unlimited, nothing is postponed; limited, the launcher waits, and no
    // sample holds more faults than the limit allows over the periods it
    // spans, with or without the daemon.
    assert_eq!(row("pagepilot")["launcher_postponed"], 0);
    for name in ["rapha", "rapha+daemon"] {
        let rapha = row(name);
        assert!(rapha["launcher_postponed"].as_u64().unwrap() > 0, "{rapha}");
        let bound = rapha["launcher_sample_bound"].as_u64().unwrap();
        assert_eq!(bound, 30 * (10 + 1));
        let max = rapha["launcher_max_faults_per_sample"].as_u64().unwrap();
        assert!(
            max <= bound,
            "{name}: {max} faults in one sample, limit allows {bound}"
        );
        // Over its whole run: at most the limit per period it lasted (plus one).
        let periods = (rapha["launcher_ms"].as_f64().unwrap() / 10.0).ceil() as u64 + 1;
        let faults = rapha["launcher_faults"].as_u64().unwrap();
        assert!(
            faults <= 30 * periods,
            "{name}: {faults} faults in {periods} periods of 30"
        );
    }
    // Under the daemon: both processes registered and unregistered (the
    // daemon admitted the decoder's reserve beside the launcher's limit),
    // and sent nothing per fault: at most a fault count a second besides.
    let d = row("rapha+daemon");
    let launcher = d["launcher_messages"].as_u64().expect("launcher_messages");
    assert!(launcher >= 2, "{d}");
    let per_fault = d["launcher_messages_per_fault"].as_f64().unwrap();
    assert!(per_fault < 0.01, "{d}");
    let decoder = d["decoder_messages"].as_u64().expect("decoder_messages");
    let seconds = (0.2 + d["launcher_ms"].as_f64().unwrap() / 1000.0).ceil() as u64 + 2;
    assert!(
        (2..=2 + seconds).contains(&decoder),
        "{decoder} messages in about {seconds} s: {d}"
    );
    // The decoder's declared limit (2 faults per chunk a period) never binds
    // its one page per chunk.
    assert_eq!(d["decoder_postponed"], 0, "{d}");
    assert!(d["decoder_faults"].as_u64().unwrap() > 0, "{d}");
    for name in ["kernel", "pagepilot", "rapha"] {
        if let Some(x) = rows.iter().find(|x| x["config"] == name) {
            assert!(x["decoder_messages"].is_null(), "{x}");
        }
    }
    assert!(r["daemon_launcher_vs_rapha"].as_f64().unwrap() > 0.0, "{r}");
    // A timeline per configuration, and the plot of them.
    assert_eq!(r["timelines"].as_array().unwrap().len(), rows.len());
    let svg = std::fs::read_to_string(&plot).expect("plot written");
    assert!(svg.contains("<svg"), "not an SVG");
    let _ = std::fs::remove_file(&plot);
}

#[test]
fn test_rapha_bench_refuses_bad_input_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "rapha", "--period", "0"], "--period"),
        (&["bench", "rapha", "--compute-ms", "33"], "--compute-ms"),
        (&["bench", "rapha", "--runs", "0"], "--runs"),
        (&["bench", "rapha", "--chunk-kb", "6"], "--chunk-kb"),
        (
            &["bench", "rapha", "--launcher-fault-period-ms", "0"],
            "--launcher-fault-period-ms",
        ),
        (
            &["bench", "rapha", "--launcher-threads", "0"],
            "--launcher-threads",
        ),
        (&["bench", "rapha", "--period=-3"], "--period"),
    ];
    assert_refused_naming(cases);
    // The decoder's reserve leaves the launcher nothing: refused by admission (Eq. 2).
    let (out, _) = pagepilot(&[
        "bench",
        "rapha",
        "--compute-ms",
        "32",
        "--fault-unit-us",
        "5000",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Eq."), "{err}");
}
