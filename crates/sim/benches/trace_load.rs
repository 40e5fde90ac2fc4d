//! Trace load speed per format, side by side in one run.
//!
//! `cargo bench -p pagepilot-sim --bench trace_load`; the trace length is
//! `PAGEPILOT_BENCH_REFS` (default 5 million references). Above 10 million
//! only the binary format (plain and zstd) is measured, so that
//! `PAGEPILOT_BENCH_REFS=50000000` does not write gigabytes of text.

// criterion_group! generates undocumented items.
#![allow(missing_docs)]

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pagepilot_sim::trace::{self, Format, Trace};

/// Two thirds sweeps over 100k pages, one third uniform over 1M pages, one
/// reference in seven a write: locality and misses both present.
fn synthetic(n: usize) -> Trace {
    let mut t = Trace::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let vpn = if i % 3 == 2 {
            0x10_0000 + x % 1_000_000
        } else {
            (i as u64 / 3) % 100_000
        };
        t.push(vpn, i % 7 == 0);
    }
    t.page_size = Some(4096);
    t
}

fn oracle_general(t: &Trace) -> Vec<u8> {
    let mut out = Vec::with_capacity(t.len() * 24);
    for (i, vpn) in t.vpns().enumerate() {
        out.extend_from_slice(&(i as u32).to_le_bytes());
        out.extend_from_slice(&vpn.to_le_bytes());
        out.extend_from_slice(&4096u32.to_le_bytes());
        out.extend_from_slice(&(-1i64).to_le_bytes());
    }
    out
}

fn bench(c: &mut Criterion) {
    let n: usize = std::env::var("PAGEPILOT_BENCH_REFS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000_000);
    let dir = std::env::temp_dir().join(format!("pagepilot-bench-traces-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t = synthetic(n);
    let path = |name: &str| -> PathBuf { dir.join(name) };
    trace::save(&t, &path("t.pptrace"), Format::Binary).unwrap();
    trace::save(&t, &path("t.pptrace.zst"), Format::Binary).unwrap();
    let mut names = vec!["t.pptrace", "t.pptrace.zst"];
    if n <= 10_000_000 {
        trace::save(&t, &path("t.txt"), Format::Text).unwrap();
        std::fs::write(path("t.oracleGeneral.bin"), oracle_general(&t)).unwrap();
        names.extend(["t.oracleGeneral.bin", "t.txt"]);
    }
    drop(t);

    let mut g = c.benchmark_group(format!("trace_load_{n}"));
    g.sample_size(10);
    g.throughput(Throughput::Elements(n as u64));
    for name in names {
        let p = path(name);
        g.bench_function(name, |b| {
            b.iter(|| {
                let loaded = trace::load(&p).unwrap();
                assert_eq!(loaded.len(), n);
                loaded
            })
        });
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

// Plots need fonts the workspace's plotters features leave out.
criterion_group! {
    name = benches;
    config = Criterion::default().without_plots();
    targets = bench
}
criterion_main!(benches);
