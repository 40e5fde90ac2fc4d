#!/usr/bin/env python3
"""A numpy array four times larger than its memory budget, scanned
repeatedly: pagepilot under MRU against the kernel's numpy.memmap in a
memory cgroup (v1, /sys/fs/cgroup/memory) limited to the same budget.

Each run starts cold: pagepilot maps the file afresh (its reads bypass the
page cache), the kernel's run starts after the page cache was dropped, in a
child process whose cgroup limit is the budget on top of what the child
already uses (the interpreter and numpy), as `pagepilot bench` does. A run
scans the whole array `--passes` times (a sum of every element); the table
shows each engine's median run of `--runs`, side by side. Root needed for
the kernel's side (cgroups, drop_caches); without it that side is skipped.

    python3 examples/python/scan_vs_memmap.py --budget 32MB --passes 4 --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import pagepilot

CGROUP_ROOT = "/sys/fs/cgroup/memory"


def make_file(path: str, nbytes: int) -> None:
    """Writes `nbytes` of float64 values 0, 1, 2, ... (checksum known)."""
    n = nbytes // 8
    chunk = 1 << 20
    with open(path, "wb") as f:
        for start in range(0, n, chunk):
            np.arange(start, min(n, start + chunk), dtype=np.float64).tofile(f)
        f.flush()
        os.fsync(f.fileno())


def scan(a: np.ndarray, passes: int) -> tuple[float, list[float]]:
    """Sums the array `passes` times: (the sum, seconds per pass)."""
    times = []
    total = 0.0
    for _ in range(passes):
        t = time.perf_counter()
        total = float(a.sum())
        times.append(time.perf_counter() - t)
    return total, times


def pagepilot_run(path: str, budget: int, policy: str, passes: int) -> dict:
    t = time.perf_counter()
    with pagepilot.map_file(path, budget=budget, policy=policy) as r:
        a = r.array(np.float64)
        total, times = scan(a, passes)
        stats = r.stats()
        del a
    return {
        "seconds": time.perf_counter() - t,
        "passes": times,
        "sum": total,
        "bytes_read": stats["bytes_read"],
        "faults": stats["missing_faults"],
    }


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def memmap_child(path: str, cgroup: str, budget: int, passes: int) -> None:
    """In the child: join the cgroup, limit it, scan through numpy.memmap."""
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
    with open(os.path.join(cgroup, "memory.usage_in_bytes")) as f:
        baseline = int(f.read())
    with open(os.path.join(cgroup, "memory.limit_in_bytes"), "w") as f:
        f.write(str(budget + baseline))
    t = time.perf_counter()
    a = np.memmap(path, dtype=np.float64, mode="r")
    total, times = scan(a, passes)
    del a
    seconds = time.perf_counter() - t
    with open(os.path.join(cgroup, "memory.max_usage_in_bytes")) as f:
        peak = int(f.read()) - baseline
    print(json.dumps({"seconds": seconds, "passes": times, "sum": total,
                      "baseline": baseline, "peak_above_baseline": peak}))


def memmap_run(path: str, budget: int, passes: int) -> dict:
    cgroup = os.path.join(CGROUP_ROOT, f"pagepilot-py-{os.getpid()}")
    os.mkdir(cgroup)
    try:
        drop_caches()
        out = subprocess.run(
            [sys.executable, __file__, "--child-memmap", path, "--cgroup", cgroup,
             "--budget", str(budget), "--passes", str(passes)],
            check=True, capture_output=True, text=True,
        ).stdout
        return json.loads(out)
    finally:
        try:
            with open(os.path.join(cgroup, "memory.force_empty"), "w") as f:
                f.write("0")
        except OSError:
            pass
        for _ in range(50):
            try:
                os.rmdir(cgroup)
                break
            except OSError:
                time.sleep(0.02)


def kernel_available() -> str | None:
    if not os.path.exists(os.path.join(CGROUP_ROOT, "memory.limit_in_bytes")):
        return f"the cgroup v1 memory controller is not mounted at {CGROUP_ROOT}"
    if not os.access(CGROUP_ROOT, os.W_OK) or not os.access("/proc/sys/vm/drop_caches", os.W_OK):
        return "creating memory cgroups and dropping the page cache need root"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", default="32MB", help="memory budget (default 32MB)")
    ap.add_argument("--ratio", type=int, default=4, help="array size / budget (default 4)")
    ap.add_argument("--passes", type=int, default=4, help="scans per run (default 4)")
    ap.add_argument("--runs", type=int, default=5, help="runs per engine; the median is shown")
    ap.add_argument("--policy", default="mru", help="pagepilot's policy (default mru)")
    ap.add_argument("--dir", default="/var/tmp", help="where the data file goes (not tmpfs)")
    ap.add_argument("--json", action="store_true", help="print every run as JSON too")
    ap.add_argument("--child-memmap", help=argparse.SUPPRESS)
    ap.add_argument("--cgroup", help=argparse.SUPPRESS)
    args = ap.parse_args()
    budget = pagepilot.parse_size(args.budget, "budget")
    if args.child_memmap:
        memmap_child(args.child_memmap, args.cgroup, budget, args.passes)
        return

    size = budget * args.ratio
    n = size // 8
    expected = float(n * (n - 1) // 2)
    why_not = kernel_available()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="pp-scan-") as d:
        path = os.path.join(d, "array.f64")
        make_file(path, size)
        runs = {"pagepilot": [], "memmap": []}
        for _ in range(args.runs):
            # Alternate the engines: drift on a noisy machine hits both.
            runs["pagepilot"].append(pagepilot_run(path, budget, args.policy, args.passes))
            if why_not is None:
                runs["memmap"].append(memmap_run(path, budget, args.passes))
    for engine, rs in runs.items():
        for r in rs:
            if r["sum"] != expected:
                sys.exit(f"{engine}: sum {r['sum']} != {expected}")

    mib = 1 << 20
    print(f"array {size / mib:.0f} MiB of float64, budget {budget / mib:.0f} MiB "
          f"({args.ratio}x), {args.passes} passes per run, median of {args.runs} runs")
    print(f"{'engine':<28} {'run (s)':>8} {'first pass':>11} {'later passes':>13} {'GB/s':>6}")
    medians = {}
    for engine, rs in runs.items():
        if not rs:
            continue
        med = statistics.median(r["seconds"] for r in rs)
        first = statistics.median(r["passes"][0] for r in rs)
        later = statistics.median(statistics.mean(r["passes"][1:]) for r in rs) if args.passes > 1 else float("nan")
        medians[engine] = med
        label = f"pagepilot {args.policy}" if engine == "pagepilot" else "numpy.memmap (kernel, cgroup)"
        gbs = size * args.passes / med / 1e9
        print(f"{label:<28} {med:>8.3f} {first:>11.3f} {later:>13.3f} {gbs:>6.2f}")
    if "memmap" in medians:
        print(f"memmap / pagepilot: {medians['memmap'] / medians['pagepilot']:.2f}x")
    else:
        print(f"numpy.memmap skipped: {why_not}")
    if args.json:
        print(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
