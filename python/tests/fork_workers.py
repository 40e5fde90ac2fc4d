"""What runs in the worker processes of ``test_fork.py`` (and in the
drivers it starts as processes of their own): a module without pytest, so
that a spawned or forkserver worker imports only numpy and pagepilot with
it. Every wait is bounded; every check compares bytes with a numpy shadow.
"""

import multiprocessing as mp
import os
import pathlib
import sys
import time

import numpy as np

import pagepilot

SIZE = 16 << 20
PAGE = pagepilot.PAGE_SIZE
WORKERS = 4
# Bounds on waits: generous (a 2-core CI machine), never reached when all is well.
JOIN = 30.0
RESUME = 10.0
STREAM_PAGES = SIZE // PAGE
SETUPS = ["per_cpu_handlers", "handler_threads", "faulting_thread", "pool", "daemon"]

# ---------------------------------------------------------------- checks


def float_file(path, seed):
    """A SIZE-byte file of float32 integers below 1000 (sums are exact)."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 1000, size=SIZE // 4).astype(np.float32)
    data.tofile(path)
    return data


def quarter(q, n):
    """What worker `q` writes to its quarter of `n` float32: distinct values."""
    return np.arange(q * n, (q + 1) * n, dtype=np.float32) + np.float32(0.5)


def pattern(page, rnd):
    """The byte every position of page `page` holds in round `rnd`."""
    return (page * 31 + rnd * 7 + 1) % 251


def differing(got, expected, what):
    """A message naming the bytes of `got` that differ from `expected`, or None."""
    got = np.asarray(got).view(np.uint8).reshape(-1)
    expected = np.asarray(expected).view(np.uint8).reshape(-1)
    bad = np.flatnonzero(got != expected)
    if len(bad) == 0:
        return None
    return f"{what}: {len(bad)} bytes differ, first at {bad[0]} (page {bad[0] // PAGE})"


def assert_same(got, expected, what):
    msg = differing(got, expected, what)
    assert msg is None, msg


def eventually(what, cond, limit=RESUME):
    deadline = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < deadline, f"not within {limit}s: {what}"
        time.sleep(0.02)


def join_all(procs, limit=JOIN):
    """Joins every process (bounded); kills what is left; all must exit 0."""
    deadline = time.monotonic() + limit
    try:
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
    codes = [p.exitcode for p in procs]
    assert codes == [0] * len(procs), f"worker exit codes {codes}"


def run(ctx, target, arglists):
    procs = [ctx.Process(target=target, args=args) for args in arglists]
    try:
        for p in procs:
            p.start()
    finally:
        join_all([p for p in procs if p.pid is not None])


# ------------------------------------------- the issue's scenario: 4 workers


def fill_quarter(region, q):
    """Worker: fills quarter `q` of the float32 view of `region`."""
    a = region.array("float32")
    n = len(a) // WORKERS
    a[q * n : (q + 1) * n] = quarter(q, n)


def fill_quarter_memmap(path, q):
    """Worker: the same, through numpy.memmap of the file (the reference)."""
    a = np.memmap(path, dtype=np.float32, mode="r+")
    n = len(a) // WORKERS
    a[q * n : (q + 1) * n] = quarter(q, n)
    del a


def options(setup, socket):
    """map_file's keyword options for `setup`."""
    if setup == "per_cpu_handlers":
        return {"daemon": False}
    if setup == "handler_threads":
        return {"handler_threads": 2, "daemon": False}
    if setup == "faulting_thread":
        return {"faulting_thread": True, "daemon": False}
    if setup == "pool":
        return {"pool": pagepilot.Pool("64MB"), "daemon": False}
    if setup == "daemon":
        client = pagepilot.connect(socket)
        return {"daemon": client}
    raise ValueError(setup)


def issue_scenario(path, memmap_path, method, setup, socket=None):
    """A 16 MiB file mapped writable under a budget that holds it all, read
    once; 4 workers each fill a quarter through the inherited (fork) or
    pickled (forkserver, spawn) region; the parent's sum is exact and every
    byte is the workers', with no flush or invalidate. Once they are gone the
    region is paged again, still right. Then, given `memmap_path`, the same
    with numpy.memmap (the kernel's MAP_SHARED) as the reference."""
    ctx = mp.get_context(method)
    original = np.fromfile(path, dtype=np.float32)
    n = len(original) // WORKERS
    expected = original.copy()
    for q in range(WORKERS):
        expected[q * n : (q + 1) * n] = quarter(q, n)
    opts = options(setup, socket)

    r = pagepilot.map_file(path, budget="64MB", policy="lru", writable=True, **opts)
    a = r.array("float32")
    assert a.sum(dtype=np.float64) == original.sum(dtype=np.float64)
    assert r.stats()["missing_faults"] >= SIZE // PAGE  # all of it resident
    run(ctx, fill_quarter, [(r, q) for q in range(WORKERS)])
    assert a.sum() == expected.sum()
    assert a.sum(dtype=np.float64) == expected.sum(dtype=np.float64)
    assert_same(a, expected, "the parent's view after the workers")
    assert r.stats()["shares"] >= 1
    eventually("the region is paged again", lambda: r.stats()["resumes"] >= 1)
    assert not r.stats()["shared"]
    assert_same(a, expected, "the parent's view paged again")
    # Every page read in twice: before the sharing, and after it ended (no
    # frame kept across it; none read while shared).
    assert r.stats()["missing_faults"] >= 2 * (SIZE // PAGE)
    del a
    r.close()
    assert_same(np.fromfile(path, dtype=np.float32), expected, "the file")

    if memmap_path is None:
        return
    m = np.memmap(memmap_path, dtype=np.float32, mode="r+")
    assert m.sum(dtype=np.float64) == original.sum(dtype=np.float64)
    run(ctx, fill_quarter_memmap, [(str(memmap_path), q) for q in range(WORKERS)])
    assert m.sum() == expected.sum()
    assert_same(m, expected, "numpy.memmap after the workers")
    del m


# ------------------------------------------------- a parent that exits first


def outliving_parent(path, child_wrote, parent_saw, marker, pidfile):
    """Driver (a process of its own): maps the file, stores unflushed, forks;
    checks the child's store while both live, stores again, and exits
    first. The child, once its parent is gone, checks both of the parent's
    stores, stores its own, and leaves a marker ("ok" or what went wrong)."""
    r = pagepilot.map_file(path, budget=SIZE, policy="lru", writable=True, daemon=False)
    b = r.array(np.uint8)
    shadow = np.fromfile(path, dtype=np.uint8)
    assert_same(b, shadow, "read once")
    q = SIZE // 4
    b[:q] = 1
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        msg = "the child did not finish"
        try:
            deadline = time.monotonic() + JOIN
            b[q : 2 * q] = 2
            pathlib.Path(child_wrote).touch()
            while os.getppid() == parent and time.monotonic() < deadline:
                time.sleep(0.01)
            if os.getppid() == parent:
                msg = "the parent did not exit"
            else:
                errs = [
                    differing(b[:q], np.full(q, 1, np.uint8), "before the fork"),
                    differing(b[2 * q : 3 * q], np.full(q, 3, np.uint8), "after the fork"),
                ]
                b[3 * q :] = 4
                errs = [e for e in errs if e]
                msg = "; ".join(errs) if errs else "ok"
        except BaseException as e:  # noqa: BLE001 - reported in the marker
            msg = repr(e)
        finally:
            # Whole or absent: written aside, then renamed.
            pathlib.Path(marker + ".part").write_text(msg)
            os.rename(marker + ".part", marker)
            os._exit(0)
    pathlib.Path(pidfile).write_text(str(pid))
    eventually("the child wrote", lambda: os.path.exists(child_wrote), JOIN)
    seen = differing(b[q : 2 * q], np.full(q, 2, np.uint8), "the child's store")
    pathlib.Path(parent_saw).write_text(seen or "ok")
    b[2 * q : 3 * q] = 3
    # Exits with the child running (the pager's exit handler runs).


# ------------------------------------ stores while the other side reads


def write_pages(region, first, end, slot):
    """Fills pages first..end-1 in order, publishing the count of pages done
    in word `slot` of page 0 after each."""
    pages = region.array(np.uint8).reshape(-1, PAGE)
    counter = region.array(np.uint64, shape=8)
    for p in range(first, end):
        pages[p] = pattern(p, 1)
        counter[slot] = p - first + 1


def read_pages(region, first, end, slot, limit):
    """Polls the counter in word `slot` of page 0 and checks every page up to
    it: the first stale page's number, -1 if the counter did not reach the
    end in `limit` seconds, or None if all was seen."""
    pages = region.array(np.uint8).reshape(-1, PAGE)
    counter = region.array(np.uint64, shape=8)
    checked = 0
    deadline = time.monotonic() + limit
    while checked < end - first:
        upto = int(counter[slot])
        for p in range(first + checked, first + upto):
            if not np.all(pages[p] == pattern(p, 1)):
                return p
        checked = upto
        if time.monotonic() > deadline:
            return -1
    return None


def stream_reader(region, first, end, slot):
    """Worker: exits 0 if it saw every page the parent published, else 1."""
    stale = read_pages(region, first, end, slot, JOIN / 2)
    if stale is not None:
        print(f"reader worker: page {stale} stale (-1: counter stuck)", file=sys.stderr)
        sys.exit(1)


# ------------------------------- pickled: forkserver and spawn workers


def pickled_worker(region, path, before, queue, go):
    """Worker: checks the region it was handed, the parent's unflushed
    stores, stores its own, then (once told) the parent's later stores."""
    errs = []
    try:
        if not isinstance(region, pagepilot.Region):
            errs.append(f"unpickled as {type(region)}")
        if region.stats() != {"shared": True, "len": len(before), "writable": True}:
            errs.append(f"stats {region.stats()}")
        if (len(region), str(region.path), region.writable) != (len(before), path, True):
            errs.append(f"len/path/writable {len(region)} {region.path} {region.writable}")
        b = region.array(np.uint8)
        errs.append(differing(b, before, "the parent's stores before pickling"))
        q = len(before) // 4
        b[q : 2 * q] = 2
        queue.put([e for e in errs if e])
        errs = []
        if not go.wait(JOIN):
            errs.append("the parent did not go on")
        later = np.full(q, 3, np.uint8)
        errs.append(differing(b[2 * q : 3 * q], later, "the parent's stores while running"))
        region.flush()
        del b
        with region:
            pass
        if not region.closed:
            errs.append("not closed by with")
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        errs.append(repr(e))
    queue.put([e for e in errs if e])
