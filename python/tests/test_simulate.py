"""The simulator from Python against the CLI, and policy programs."""

import json
import pickle
import subprocess

import numpy as np
import pytest

import pagepilot
from conftest import ROOT, pagepilot_cli

KEYS = ("policy", "frames", "references", "faults", "cold_faults", "minor_faults")


def _loops_trace(n=20000, seed=3):
    """Loops of several lengths mixed with random pages: the policies differ."""
    rng = np.random.default_rng(seed)
    parts = []
    while sum(len(p) for p in parts) < n:
        kind = rng.integers(0, 3)
        if kind == 0:
            start, length = rng.integers(0, 400), rng.integers(20, 200)
            parts.append(np.tile(np.arange(start, start + length), 3))
        elif kind == 1:
            parts.append(rng.integers(0, 600, size=200))
        else:
            parts.append(np.arange(1000, 1000 + rng.integers(50, 300)))
    return np.concatenate(parts)[:n].astype(np.uint64)


@pytest.fixture
def trace_file(tmp_path):
    pages = _loops_trace()
    path = tmp_path / "loops.txt"
    path.write_text("".join(f"{p}\n" for p in pages))
    return path, pages


def _cli_rows(path, policies, frames):
    out = subprocess.run(
        [pagepilot_cli(), "sim", str(path), "--policy", ",".join(policies),
         "--frames", ",".join(map(str, frames)), "--format", "json"],
        check=True, capture_output=True, text=True,
    ).stdout
    return [{k: r[k] for k in KEYS} for r in json.loads(out)]


def test_counts_equal_the_clis_on_the_same_trace(trace_file):
    path, pages = trace_file
    policies = ["lru", "fifo", "clock", "seq", "mru", "opt", "arc"]
    frames = [16, 64, 200, 500]
    cli = _cli_rows(path, policies, frames)
    from_path = pagepilot.simulate(path, policies=policies, frames=frames)
    from_array = pagepilot.simulate(pages, policies=policies, frames=frames)
    assert [{k: r[k] for k in KEYS} for r in from_path] == cli
    assert [{k: r[k] for k in KEYS} for r in from_array] == cli
    assert len(cli) == len(policies) * len(frames)


def test_a_policy_program_simulates_like_the_clis_program_file(trace_file):
    path, _ = trace_file
    source = (ROOT / "policies" / "fifo2.hp").read_text()
    program = pagepilot.Policy.compile(source, name="fifo2")
    cli = _cli_rows(path, [str(ROOT / "policies" / "fifo2.hp")], [32, 128])
    rows = pagepilot.simulate(path, policies=[program], frames=[32, 128])
    assert [r["policy"] for r in rows] == ["fifo2", "fifo2"]
    for mine, theirs in zip(rows, cli):
        assert {k: mine[k] for k in KEYS[1:]} == {k: theirs[k] for k in KEYS[1:]}


def test_the_one_pass_curve_matches_simulate(trace_file):
    _, pages = trace_file
    for policy in ("lru", "opt"):
        points = pagepilot.curve(pages, policy)
        distinct = len(np.unique(pages))
        assert [p["frames"] for p in points] == list(range(1, distinct + 1))
        faults = [p["faults"] for p in points]
        assert faults == sorted(faults, reverse=True)  # inclusion property
        assert faults[-1] == distinct  # everything fits: cold faults only
        sizes = [8, 100, 300]
        sim = pagepilot.simulate(pages, policies=[policy], frames=sizes)
        assert [points[n - 1]["faults"] for n in sizes] == [r["faults"] for r in sim]
    with pytest.raises(pagepilot.SimulationError, match="lru.*opt"):
        pagepilot.curve(pages, "clock")


def test_records_convert_to_a_dataframe(trace_file):
    # pandas is installed by scripts/setup: a missing one fails here.
    import pandas  # noqa: F401
    _, pages = trace_file
    df = pagepilot.simulate(pages, policies=["lru", "clock"], frames=[10, 20], dataframe=True)
    assert list(df["policy"]) == ["lru", "lru", "clock", "clock"]
    rows = pagepilot.simulate(pages, policies="lru", frames=10)
    assert rows.dataframe()["faults"].iloc[0] == rows[0]["faults"]


def test_bad_traces_and_arguments_raise(tmp_path):
    with pytest.raises(ValueError, match="non-negative; found -3 at index 1"):
        pagepilot.simulate(np.array([1, -3, 4]), policies="lru", frames=2)
    with pytest.raises(TypeError, match="integers"):
        pagepilot.simulate(np.array([1.5, 2.0]), policies="lru", frames=2)
    with pytest.raises(pagepilot.SimulationError, match="no references"):
        pagepilot.simulate(np.array([], dtype=np.uint64), policies="lru", frames=2)
    with pytest.raises(pagepilot.SimulationError, match="unknown policy `nope`"):
        pagepilot.simulate([1, 2, 3], policies=["lru", "nope"], frames=2)
    with pytest.raises(ValueError, match="`0` is not a positive number of frames"):
        pagepilot.simulate([1, 2, 3], policies="lru", frames=[0, 2])
    with pytest.raises(pagepilot.TraceError, match="missing.txt"):
        pagepilot.simulate(tmp_path / "missing.txt", policies="lru", frames=2)
    bad = tmp_path / "bad.txt"
    bad.write_text("1\n2\nthree\n")
    with pytest.raises(pagepilot.TraceError, match="3"):
        pagepilot.simulate(bad, policies="lru", frames=2)


def test_compile_errors_carry_line_and_column():
    source = "queue q;\n\nevent PageFault() {\n    victim = @;\n}\n"
    with pytest.raises(pagepilot.PolicyError) as e:
        pagepilot.Policy.compile(source, name="broken")
    assert (e.value.line, e.value.column) == (4, 14)
    assert str(e.value).startswith("broken:4:14: ")


def test_a_program_the_checker_rejects_raises_policy_error_without_position():
    # No event handles PageFault: compiles, but the checker refuses it.
    with pytest.raises(pagepilot.PolicyError, match="rejected") as e:
        pagepilot.Policy.compile("queue q;\nevent Other() {\n}\n")
    assert e.value.line is None


def test_a_compiled_policy_pages_a_live_region(data_file):
    path, data = data_file
    mru = pagepilot.Policy.compile((ROOT / "policies" / "mru.hp").read_text(), name="mru-program")
    with pagepilot.map_file(path, budget="128K", policy=mru) as r:
        assert np.array_equal(np.frombuffer(r, dtype=np.uint8), data)
        assert "mru-program" in r.stats()["policy"]
    again = pickle.loads(pickle.dumps(mru))
    assert again.name == "mru-program" and again.events == mru.events
    assert "PageFault" in dict(mru.events)
    assert pagepilot.Policy.load(ROOT / "policies" / "seq.hp").name == "seq"
