"""python/benchmarks/parallel_fill.py at a tiny size: both variants run, the
workers' stores are checked by the script itself (it exits with an error on a
wrong item), and pagepilot shared its region with them once."""

import json
import subprocess
import sys

from conftest import ROOT


def test_parallel_fill_script_checks_both_variants(tmp_path):
    script = ROOT / "python" / "benchmarks" / "parallel_fill.py"
    out = subprocess.run(
        [sys.executable, str(script), "--mb", "8", "--budget-mb", "2", "--workers", "2",
         "--runs", "1", "--no-cgroup", "--json", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)
    assert sorted(runs) == ["memmap", "pagepilot"]
    for variant, (run,) in runs.items():
        assert run["fill_s"] > 0 and run["check_s"] > 0, variant
    assert runs["pagepilot"][0]["stats"]["shares"] == 1
    assert list(tmp_path.iterdir()) == [], "the data file is left behind"
