//! `pagepilot bench appel-li` as a user runs it, with few repetitions: every
//! primitive of SawMill's Table 1 measured on raw Linux and on both
//! userfaultfd sides, ratios, the paper's columns; bad arguments refused
//! naming the argument. No timing is asserted.

mod bench;

use bench::{assert_refused_naming, json, pagepilot};

const PRIMITIVES: [&str; 7] = [
    "prot1",
    "prot100",
    "unprot100",
    "trap",
    "fault",
    "appel1",
    "appel2",
];

fn positive(v: &serde_json::Value) -> bool {
    v.as_f64().is_some_and(|x| x.is_finite() && x > 0.0)
}

#[test]
fn test_appel_li_bench_measures_every_primitive_both_ways_with_ratios() {
    let r = json(&[
        "bench", "appel-li", "--reps", "200", "--runs", "2", "--format", "json",
    ]);
    assert_eq!(
        r["sides"],
        serde_json::json!(["linux", "uffd-thread", "uffd-sigbus"])
    );
    assert_eq!(r["handler_cpu"], "same", "{r}");
    let rows = r["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|x| x["primitive"].as_str().unwrap())
        .collect();
    assert_eq!(names, PRIMITIVES, "{r}");
    for row in rows {
        for field in [
            "linux_us",
            "uffd_thread_us",
            "uffd_sigbus_us",
            "ratio_thread",
            "ratio_sigbus",
        ] {
            assert!(positive(&row[field]), "{field} of {row}");
        }
        for col in ["osf1", "mach", "spin", "sawmill"] {
            assert!(positive(&row["paper_us"][col]), "paper {col} of {row}");
        }
        for side in row["runs_us"].as_array().unwrap() {
            let runs = side.as_array().unwrap();
            assert_eq!(runs.len(), 2, "{row}");
            assert!(runs.iter().all(positive), "{row}");
        }
    }
}

#[test]
fn test_appel_li_bench_text_table_has_the_papers_columns() {
    let (out, _) = pagepilot(&["bench", "appel-li", "--reps", "50", "--runs", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "OSF/1",
        "Mach",
        "SPIN",
        "SawMill",
        "uffd-thread",
        "uffd-sigbus",
    ] {
        assert!(text.contains(word), "{word} missing: {text}");
    }
    for p in PRIMITIVES {
        assert!(
            text.lines().any(|l| l.starts_with(p)),
            "{p} missing: {text}"
        );
    }
}

#[test]
fn test_appel_li_bench_refuses_bad_arguments_naming_them() {
    assert_refused_naming(&[
        (&["bench", "appel-li", "--reps", "0"][..], "--reps"),
        (&["bench", "appel-li", "--runs", "0"][..], "--runs"),
        (&["bench", "appel-li", "--reps", "2000000"][..], "--reps"),
        (&["bench", "appel-li", "--runs", "many"][..], "--runs"),
        (&["bench", "appel-li", "--format", "xml"][..], "--format"),
        (
            &["bench", "appel-li", "--handler-cpu", "third"][..],
            "--handler-cpu",
        ),
    ]);
}
