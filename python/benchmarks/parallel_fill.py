"""Forked workers filling one array, from Python: numpy.memmap against pagepilot.

The Python side of `pagepilot bench parallel-fill` (docs/bench-live.md): a
file of --mb (256) MB viewed as float32, the parent reads it once, forks
--workers (4) multiprocessing workers ("fork" start method) that each fill a
slice with a pattern (chunks of 64 Ki items), joins them, then checks every
item while summing (a mismatch is an error, not a time). Variants:

- memmap:    numpy.memmap(path, dtype=float32, mode="r+")
- pagepilot: pagepilot.map_file(path, budget="64MB", writable=True).array("float32")
             (public API, default options; forked workers see one memory)

Each run of each variant is a fresh Python process (this script with --one)
inside a fresh cgroup v1 memory cgroup: it imports numpy and pagepilot,
moves itself into the cgroup (writes its pid to cgroup.procs), then sets
memory.limit_in_bytes to --budget-mb plus what it has charged there by then,
as the Rust bench's children do; the workers, forked inside, are charged to
it too. The page cache is dropped before each run. Variants alternate;
medians are printed, with each variant's wall time (fill and check) over
numpy.memmap's in the same run. Needs root (cgroups, drop_caches); with
--no-cgroup it runs without a limit (and says so), and without root the page
cache is not dropped.

    python3 python/benchmarks/parallel_fill.py --dir /var/tmp --runs 5
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHUNK = 1 << 16  # items per pattern chunk: 256 KiB of float32
MEMORY_ROOT = "/sys/fs/cgroup/memory"
VARIANTS = ("memmap", "pagepilot")


def pattern(np, lo, hi, seed):
    """Items lo..hi of the pattern `seed`: integers below 2**24, exact in float32."""
    i = np.arange(lo, hi, dtype=np.int64)
    return ((i * 40503 + seed) & 0xFFFFFF).astype(np.float32)


def fill(np, arr, lo, hi, seed):
    for s in range(lo, hi, CHUNK):
        e = min(s + CHUNK, hi)
        arr[s:e] = pattern(np, s, e, seed)


def check(np, arr, seed, phase):
    """Sums the array; with a seed, every item must hold the pattern."""
    total = 0.0
    n = arr.shape[0]
    for s in range(0, n, CHUNK):
        e = min(s + CHUNK, n)
        got = arr[s:e]
        if seed is not None:
            want = pattern(np, s, e, seed)
            if not np.array_equal(got, want):
                bad = np.nonzero(got != want)[0]
                raise SystemExit(
                    f"{phase}: {bad.size} item(s) differ in items {s}..{e}, first at item "
                    f"{s + bad[0]}: {got[bad[0]]} instead of {want[bad[0]]}"
                )
        total += float(got.sum(dtype=np.float64))
    return total


def read_number(path):
    with open(path) as f:
        return int(f.read().strip())


def one(args):
    """One run of one variant, in this process; prints its times as JSON."""
    import multiprocessing as mp

    import numpy as np
    import pagepilot

    baseline = 0
    if args.cgroup:
        with open(os.path.join(args.cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        baseline = read_number(os.path.join(args.cgroup, "memory.usage_in_bytes"))
        with open(os.path.join(args.cgroup, "memory.limit_in_bytes"), "w") as f:
            f.write(str((args.budget_mb + args.slack_mb) * 2**20 + baseline))
    fd = os.open(args.path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    region = None
    if args.one == "memmap":
        arr = np.memmap(args.path, dtype=np.float32, mode="r+")
    else:
        region = pagepilot.map_file(args.path, budget=f"{args.budget_mb}MB", writable=True)
        arr = region.array("float32")
    n = arr.shape[0]
    previous = args.previous if args.previous >= 0 else None

    t0 = time.perf_counter()
    check(np, arr, previous, "read")
    read_s = time.perf_counter() - t0

    ctx = mp.get_context("fork")
    t0 = time.perf_counter()
    per = (n + args.workers - 1) // args.workers
    workers = [
        ctx.Process(target=fill, args=(np, arr, w * per, min((w + 1) * per, n), args.seed))
        for w in range(args.workers)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    bad = [w.exitcode for w in workers if w.exitcode != 0]
    if bad:
        raise SystemExit(f"workers failed: exit codes {bad}")
    fill_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    total = check(np, arr, args.seed, "check")
    check_s = time.perf_counter() - t0

    peak = 0
    if args.cgroup:
        peak = read_number(os.path.join(args.cgroup, "memory.max_usage_in_bytes")) - baseline
    stats = {}
    if region is not None:
        s = region.stats()
        stats = {k: s[k] for k in ("shares", "resumes", "missing_faults") if k in s}
    del arr
    if region is not None:
        region.close()
    print(json.dumps({
        "read_s": read_s, "fill_s": fill_s, "check_s": check_s, "wall_s": fill_s + check_s,
        "sum": total, "baseline_bytes": baseline, "peak_bytes": peak, "stats": stats,
    }))


def make_file(path, mb):
    block = b"\x00" * (1 << 20)
    with open(path, "wb") as f:
        for _ in range(mb):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def run_one(args, variant, seed, previous):
    cg = None
    if not args.no_cgroup:
        cg = os.path.join(MEMORY_ROOT, f"pagepilot-py-{os.getpid()}-{seed}")
        os.mkdir(cg)
    try:
        os.sync()
        if os.access("/proc/sys/vm/drop_caches", os.W_OK):
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        cmd = [sys.executable, os.path.abspath(__file__), "--one", variant, "--path", args.path,
               "--budget-mb", str(args.budget_mb), "--slack-mb", str(args.slack_mb),
               "--workers", str(args.workers),
               "--seed", str(seed), "--previous", str(previous)]
        if cg:
            cmd += ["--cgroup", cg]
        out = subprocess.run(cmd, stdout=subprocess.PIPE, timeout=args.timeout_s)
        if out.returncode == -9:
            print(f"{variant}: killed (its cgroup's OOM killer): counted, not measured",
                  file=sys.stderr)
            return None
        if out.returncode != 0:
            raise SystemExit(f"{variant} run failed ({out.returncode})")
        return json.loads(out.stdout)
    finally:
        if cg:
            for _ in range(50):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.02)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mb", type=int, default=256, help="array (file) size, MB")
    p.add_argument("--budget-mb", type=int, default=64, help="cgroup limit and pagepilot budget, MB")
    p.add_argument("--slack-mb", type=int, default=16,
                   help="MB the cgroup allows beyond the budget: the interpreter's own memory "
                        "(the workers' copies of the heap they touch, numpy's temporaries)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--dir", default="/var/tmp", help="directory of the data file (a disk)")
    p.add_argument("--no-cgroup", action="store_true", help="run without a memory cgroup")
    p.add_argument("--timeout-s", type=int, default=600)
    p.add_argument("--json", action="store_true", help="print every run as JSON")
    # Internal: one run of one variant.
    p.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    p.add_argument("--cgroup", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--previous", type=int, default=-1, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        return one(args)
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            raise SystemExit(f"--variants: {v!r} is not one of {VARIANTS}")
    args.path = os.path.join(args.dir, f"pagepilot-py-{os.getpid()}-parallel-fill.dat")
    make_file(args.path, args.mb)
    runs = {v: [] for v in variants}
    previous = -1
    try:
        for r in range(args.runs):
            for k in range(len(variants)):
                v = variants[(r + k) % len(variants)]
                seed = 1 + r * len(variants) + k
                run = run_one(args, v, seed, previous)
                runs[v].append(run)
                # A killed run left the array half filled: the next first read checks nothing.
                previous = seed if run else -1
    finally:
        os.unlink(args.path)
    if args.json:
        print(json.dumps(runs, indent=1))
        return
    limit = "no memory cgroup" if args.no_cgroup else f"{args.budget_mb} MB memory cgroup"
    print(f"parallel fill from Python: {args.workers} forked workers fill a {args.mb} MB float32 "
          f"file; {limit}; median of {args.runs}")
    print(f"{'variant':>10} {'wall s':>8} {'fill s':>8} {'check s':>8} {'read s':>8} "
          f"{'wall/memmap':>12} {'check/memmap':>13} {'peak MB':>8} {'oom':>4}")
    ref = runs.get("memmap")
    for v in variants:
        done = [x for x in runs[v] if x]
        if not done:
            print(f"{v:>10} every run killed")
            continue
        med = lambda key: statistics.median(x[key] for x in done)
        def vs(key):
            pairs = [a[key] / b[key] for a, b in zip(runs[v], ref or []) if a and b]
            return f"{statistics.median(pairs):.2f}" if pairs else "-"
        print(f"{v:>10} {med('wall_s'):>8.2f} {med('fill_s'):>8.2f} {med('check_s'):>8.2f} "
              f"{med('read_s'):>8.2f} {vs('wall_s'):>12} {vs('check_s'):>13} "
              f"{med('peak_bytes') / 2**20:>8.1f} {len(runs[v]) - len(done):>4}")


if __name__ == "__main__":
    main()
