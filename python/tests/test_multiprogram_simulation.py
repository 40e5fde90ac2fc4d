"""Global and pooled simulation from Python against the CLI's (`pagepilot
sim --global [--pool]`) on the same traces: the same counts."""

import json
import subprocess

import numpy as np
import pytest

import pagepilot
from conftest import pagepilot_cli

ROW_KEYS = ("policy", "frames", "process", "references", "faults", "cold_faults",
            "minor_faults", "elapsed")


@pytest.fixture
def traces(tmp_path):
    rng = np.random.default_rng(11)
    loop = np.tile(np.arange(0, 150), 40)
    mixed = np.concatenate([rng.integers(0, 400, size=3000), np.tile(np.arange(500, 560), 50)])
    paths = []
    for name, pages in (("loop.txt", loop), ("mixed.txt", mixed)):
        path = tmp_path / name
        path.write_text("".join(f"{p}\n" for p in pages))
        paths.append(path)
    return paths, [loop, mixed]


def _cli(*args):
    out = subprocess.run(
        [pagepilot_cli(), "sim", *map(str, args), "--format", "json"],
        check=True, capture_output=True, text=True, timeout=300,
    )
    return json.loads(out.stdout)


def _rows(rows):
    return [{k: r.get(k) for k in ROW_KEYS} for r in rows]


def test_global_simulation_equals_the_clis_on_the_same_traces(traces):
    paths, pages = traces
    cli = _cli(*paths, "--global", "--policy", "lru,fifo,clock", "--frames", "64,200",
               "--quantum", 500, "--service", 200)
    mine = pagepilot.simulate_global(paths, ["lru", "fifo", "clock"], [64, 200],
                                     quantum=500, service=200)
    assert _rows(mine) == _rows(cli)
    assert len(cli) == 3 * 2 * 3  # per policy and size: all, and each process
    assert {r["process"] for r in mine} == {"all", str(paths[0]), str(paths[1])}
    # Page numbers from numpy, named: the same counts.
    named = pagepilot.simulate_global(pages, ["lru", "fifo", "clock"], [64, 200],
                                      names=[str(p) for p in paths], quantum=500, service=200)
    assert _rows(named) == _rows(cli)


def test_pooled_simulation_equals_the_clis_on_the_same_traces(traces):
    paths, _ = traces
    cli = _cli(*paths, "--global", "--pool", 300, "--policy", "lru,clock",
               "--min-frames", "60,100", "--partition-burst", 80,
               "--quantum", 700, "--service", 300)
    mine = pagepilot.simulate_pooled(paths, 300, ["lru", "clock"], min_frames=[60, 100],
                                     partition_burst=80, quantum=700, service=300)
    assert mine == cli
    assert [p["policy"] for p in mine["processes"]] == ["lru", "clock"]
    assert all(p["faults"] > 0 for p in mine["processes"])


def test_pooled_simulation_with_fault_limits_equals_the_clis(traces):
    paths, _ = traces
    cli = _cli(*paths, "--global", "--pool", 200, "--fault-limit", 3,
               "--fault-period", 1000, "--reserve", "10,20", "--quantum", 300,
               "--service", 100)
    mine = pagepilot.simulate_pooled(paths, 200, fault_limit=3, fault_period=1000,
                                     reserve=[10, 20], quantum=300, service=100)
    assert mine == cli
    assert sum(p["postponed"] for p in mine["processes"]) > 0


def test_multiprogrammed_runs_refuse_what_the_cli_refuses(traces):
    paths, _ = traces
    with pytest.raises(pagepilot.SimulationError, match="not defined in global mode"):
        pagepilot.simulate_global(paths, "opt", 64)
    with pytest.raises(pagepilot.SimulationError, match="smaller than the sum"):
        pagepilot.simulate_pooled(paths, 100, min_frames=80)
    with pytest.raises(ValueError, match="3 values for 2 traces"):
        pagepilot.simulate_pooled(paths, 300, min_frames=[10, 20, 30])
    with pytest.raises(ValueError, match="fault_period without fault_limit"):
        pagepilot.simulate_pooled(paths, 300, fault_period=100)
