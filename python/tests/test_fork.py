"""Forked and spawned workers see one memory: a store by the parent or a
worker to a writable file region is seen by the other at its next load,
with no flush or invalidate, as with two ``MAP_SHARED`` mappings of the file
(``crates/pager/src/sharing.rs``; pickling: ``crates/python/src/pickle.rs``).

Each worker is a separate process (``multiprocessing`` or ``os.fork``);
every byte is checked against a numpy shadow. Every wait is bounded, and a
child still alive at the end of a test is killed.
"""

import json
import multiprocessing as mp
import os
import pathlib
import pickle
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import pagepilot

SIZE = 16 << 20
PAGE = pagepilot.PAGE_SIZE
WORKERS = 4
# Bounds on waits: generous (a 2-core CI machine), never reached when all is well.
JOIN = 30.0
RESUME = 10.0
TESTS = pathlib.Path(__file__).resolve().parent

# ---------------------------------------------------------------- helpers


def _float_file(path, seed):
    """A SIZE-byte file of float32 integers below 1000 (sums are exact)."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 1000, size=SIZE // 4).astype(np.float32)
    data.tofile(path)
    return data


def _quarter(q, n):
    """What worker `q` writes to its quarter of `n` float32: distinct values."""
    return np.arange(q * n, (q + 1) * n, dtype=np.float32) + np.float32(0.5)


def _pattern(page, rnd):
    """The byte every position of page `page` holds in round `rnd`."""
    return (page * 31 + rnd * 7 + 1) % 251


def _differing(got, expected, what):
    """A message naming the bytes of `got` that differ from `expected`, or None."""
    got = np.asarray(got).view(np.uint8).reshape(-1)
    expected = np.asarray(expected).view(np.uint8).reshape(-1)
    bad = np.flatnonzero(got != expected)
    if len(bad) == 0:
        return None
    return f"{what}: {len(bad)} bytes differ, first at {bad[0]} (page {bad[0] // PAGE})"


def _assert_same(got, expected, what):
    msg = _differing(got, expected, what)
    assert msg is None, msg


def _eventually(what, cond, limit=RESUME):
    deadline = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < deadline, f"not within {limit}s: {what}"
        time.sleep(0.02)


def _join_all(procs, limit=JOIN):
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


def _run(ctx, target, arglists):
    procs = [ctx.Process(target=target, args=args) for args in arglists]
    try:
        for p in procs:
            p.start()
    finally:
        _join_all([p for p in procs if p.pid is not None])


def _fork(child):
    """os.fork: the child runs `child()` (its return value, or 1 if it
    raises, is its exit status) and never returns into pytest."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = child()
        except BaseException:  # noqa: BLE001 - reported on stderr, then exit
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def _reap(pid, limit=JOIN):
    """The exit status of child `pid`, killed if it outlives `limit`."""
    deadline = time.monotonic() + limit
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"child {pid} still running after {limit}s: killed")
        time.sleep(0.01)


def _kill_if_alive(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _drive(func, *args, limit=60):
    """Runs `test_fork.<func>(*args)` in a fresh interpreter (a process of
    its own: the daemon's client, or a parent that must exit first)."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import test_fork; "
        f"test_fork.{func}(*json.loads(sys.argv[2]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(TESTS), json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=limit,
    )
    assert out.returncode == 0, f"{func} failed:\n{out.stdout}\n{out.stderr}"
    return out


# ------------------------------------------- the issue's scenario: 4 workers


def _fill_quarter(region, q):
    """Worker: fills quarter `q` of the float32 view of `region`."""
    a = region.array("float32")
    n = len(a) // WORKERS
    a[q * n : (q + 1) * n] = _quarter(q, n)


def _fill_quarter_memmap(path, q):
    """Worker: the same, through numpy.memmap of the file (the reference)."""
    a = np.memmap(path, dtype=np.float32, mode="r+")
    n = len(a) // WORKERS
    a[q * n : (q + 1) * n] = _quarter(q, n)
    del a


SETUPS = ["per_cpu_handlers", "handler_threads", "faulting_thread", "pool", "daemon"]


def _options(setup, socket):
    """map_file's keyword options for `setup` (and what to keep alive)."""
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


def _issue_scenario(path, memmap_path, method, setup, socket=None):
    """A 16 MiB file mapped writable under a budget that holds it all, read
    once; 4 workers each fill a quarter through the inherited (fork) or
    pickled (forkserver, spawn) region; the parent's sum is exact and every
    byte is the workers', with no flush or invalidate. Once they are gone the
    region is paged again, still right. Then the same with numpy.memmap."""
    ctx = mp.get_context(method)
    original = np.fromfile(path, dtype=np.float32)
    n = len(original) // WORKERS
    expected = original.copy()
    for q in range(WORKERS):
        expected[q * n : (q + 1) * n] = _quarter(q, n)
    opts = _options(setup, socket)

    r = pagepilot.map_file(path, budget="64MB", policy="lru", writable=True, **opts)
    a = r.array("float32")
    assert a.sum(dtype=np.float64) == original.sum(dtype=np.float64)
    assert r.stats()["missing_faults"] >= SIZE // PAGE  # all of it resident
    _run(ctx, _fill_quarter, [(r, q) for q in range(WORKERS)])
    assert a.sum() == expected.sum()
    assert a.sum(dtype=np.float64) == expected.sum(dtype=np.float64)
    _assert_same(a, expected, "the parent's view after the workers")
    assert r.stats()["shares"] >= 1
    _eventually("the region is paged again", lambda: r.stats()["resumes"] >= 1)
    assert not r.stats()["shared"]
    _assert_same(a, expected, "the parent's view paged again")
    # Every page read in twice: before the sharing, and after it ended (no
    # frame kept across it; none read while shared).
    assert r.stats()["missing_faults"] >= 2 * (SIZE // PAGE)
    del a
    r.close()
    _assert_same(np.fromfile(path, dtype=np.float32), expected, "the file")

    # The reference: numpy.memmap, the kernel's MAP_SHARED.
    m = np.memmap(memmap_path, dtype=np.float32, mode="r+")
    assert m.sum(dtype=np.float64) == original.sum(dtype=np.float64)
    _run(ctx, _fill_quarter_memmap, [(str(memmap_path), q) for q in range(WORKERS)])
    assert m.sum() == expected.sum()
    _assert_same(m, expected, "numpy.memmap after the workers")
    del m


@pytest.fixture(scope="module")
def daemon_socket(tmp_path_factory):
    """A real `pagepilot daemon` on a temporary socket, stopped at the end."""
    from conftest import pagepilot_cli

    d = tmp_path_factory.mktemp("daemon")
    sock = d / "d.sock"
    log = open(d / "daemon.log", "wb")
    proc = subprocess.Popen(
        [pagepilot_cli(), "daemon", "--foreground", "--socket", str(sock),
         "--budget", "256M", "--user", "root"],
        stdout=log,
        stderr=log,
    )
    try:
        _eventually("the daemon listens", lambda: sock.exists() or proc.poll() is not None)
        assert proc.poll() is None, (d / "daemon.log").read_text()
        yield str(sock)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_four_workers_filling_quarters_are_all_seen_by_the_parent_without_flush(
    tmp_path, method, setup, request
):
    path = tmp_path / "data.f32"
    memmap_path = tmp_path / "memmap.f32"
    _float_file(path, 1)
    _float_file(memmap_path, 1)
    if setup == "daemon":
        # A process of its own: joining the daemon is for the whole process.
        socket = request.getfixturevalue("daemon_socket")
        _drive("_issue_scenario", str(path), str(memmap_path), method, setup, socket)
    else:
        _issue_scenario(path, memmap_path, method, setup)


# ------------------------------------------------------------- os.fork


def test_os_fork_child_and_parent_see_each_others_unflushed_stores(tmp_path):
    path = tmp_path / "data.f32"
    shadow = _float_file(path, 2).view(np.uint8).copy()
    with pagepilot.map_file(path, budget=SIZE, policy="lru", writable=True, daemon=False) as r:
        b = r.array(np.uint8)
        _assert_same(b, shadow, "read once")
        third = SIZE // 3 // PAGE * PAGE
        b[:third] = 11  # unflushed, before the fork
        shadow[:third] = 11
        assert r.stats()["writebacks"] == 0

        def child():
            if _differing(b, shadow, "the child's view") is not None:
                return 2
            b[third : 2 * third] = 22
            return 0

        pid = _fork(child)
        assert _reap(pid) == 0, "the child did not see the parent's unflushed stores"
        shadow[third : 2 * third] = 22
        _assert_same(b, shadow, "the parent's view after the child")
        del b


def test_a_grandchilds_stores_reach_the_parent(tmp_path):
    path = tmp_path / "data.f32"
    shadow = _float_file(path, 3).view(np.uint8).copy()
    # The whole file resident in the parent: a stale copy would show.
    with pagepilot.map_file(path, budget=SIZE, policy="lru", writable=True, daemon=False) as r:
        b = r.array(np.uint8)
        _assert_same(b, shadow, "read once")
        assert r.stats()["evictions"] == 0

        def grandchild():
            b[::3] = 33
            return 0

        def child():
            return _reap(_fork(grandchild))

        assert _reap(_fork(child)) == 0
        shadow[::3] = 33
        _assert_same(b, shadow, "the parent's view after the grandchild")
        del b


def _outliving_parent(path, child_wrote, parent_saw, marker, pidfile):
    """Driver (a process of its own): maps the file, stores unflushed, forks;
    checks the child's store while both live, stores again, and exits
    first. The child, once its parent is gone, checks both of the parent's
    stores, stores its own, and leaves a marker ("ok" or what went wrong)."""
    r = pagepilot.map_file(path, budget=SIZE, policy="lru", writable=True, daemon=False)
    b = r.array(np.uint8)
    shadow = np.fromfile(path, dtype=np.uint8)
    _assert_same(b, shadow, "read once")
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
                    _differing(b[:q], np.full(q, 1, np.uint8), "before the fork"),
                    _differing(b[2 * q : 3 * q], np.full(q, 3, np.uint8), "after the fork"),
                ]
                b[3 * q :] = 4
                errs = [e for e in errs if e]
                msg = "; ".join(errs) if errs else "ok"
        except BaseException as e:  # noqa: BLE001 - reported in the marker
            msg = repr(e)
        finally:
            pathlib.Path(marker).write_text(msg)
            os._exit(0)
    pathlib.Path(pidfile).write_text(str(pid))
    _eventually("the child wrote", lambda: os.path.exists(child_wrote), JOIN)
    seen = _differing(b[q : 2 * q], np.full(q, 2, np.uint8), "the child's store")
    pathlib.Path(parent_saw).write_text(seen or "ok")
    b[2 * q : 3 * q] = 3
    # Exits with the child running (the pager's exit handler runs).


def test_a_child_outliving_its_parent_keeps_seeing_and_storing(tmp_path):
    path = tmp_path / "data.f32"
    shadow = _float_file(path, 4).view(np.uint8).copy()
    files = [str(tmp_path / n) for n in ("child_wrote", "parent_saw", "marker", "pid")]
    child_wrote, parent_saw, marker, pidfile = files
    try:
        _drive("_outliving_parent", str(path), *files)
        assert pathlib.Path(parent_saw).read_text() == "ok"
        _eventually("the child left its marker", lambda: os.path.exists(marker), JOIN)
        time.sleep(0.05)  # the marker's text is written right after it is made
        assert pathlib.Path(marker).read_text() == "ok"
    finally:
        if os.path.exists(pidfile):
            _kill_if_alive(int(pathlib.Path(pidfile).read_text()))
    q = SIZE // 4
    for i, v in enumerate([1, 2, 3, 4]):
        shadow[i * q : (i + 1) * q] = v
    _assert_same(np.fromfile(path, dtype=np.uint8), shadow, "the file")


# ------------------------------------ stores while the other side reads


STREAM_PAGES = SIZE // PAGE


def _write_pages(region, first, end, slot):
    """Fills pages first..end-1 in order, publishing the count of pages done
    in word `slot` of page 0 after each."""
    pages = region.array(np.uint8).reshape(-1, PAGE)
    counter = region.array(np.uint64, shape=8)
    for p in range(first, end):
        pages[p] = _pattern(p, 1)
        counter[slot] = p - first + 1


def _read_pages(region, first, end, slot, limit):
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
            if not np.all(pages[p] == _pattern(p, 1)):
                return p
        checked = upto
        if time.monotonic() > deadline:
            return -1
    return None


def _stream_reader(region, first, end, slot):
    """Worker: exits 0 if it saw every page the parent published, else 1."""
    stale = _read_pages(region, first, end, slot, JOIN / 2)
    if stale is not None:
        print(f"reader worker: page {stale} stale (-1: counter stuck)", file=sys.stderr)
        sys.exit(1)


def _map_stream_file(tmp_path, seed):
    path = tmp_path / "data.f32"
    _float_file(path, seed)
    r = pagepilot.map_file(path, budget=SIZE, policy="lru", writable=True, daemon=False)
    np.asarray(r.array(np.uint8)).sum()  # all of it resident
    r.array(np.uint64, shape=8)[:] = 0
    return r


def test_the_parent_reading_sees_every_page_two_workers_publish(tmp_path):
    r = _map_stream_file(tmp_path, 5)
    ctx = mp.get_context("fork")
    half = STREAM_PAGES // 2
    ranges = [(1, half, 0), (half, STREAM_PAGES, 1)]
    procs = [ctx.Process(target=_write_pages, args=(r, *rg)) for rg in ranges]
    try:
        for p in procs:
            p.start()
        for first, end, slot in ranges:
            stale = _read_pages(r, first, end, slot, JOIN / 2)
            assert stale is None, f"page {stale} stale in the parent (-1: counter stuck)"
    finally:
        _join_all(procs)
    r.close()


def test_a_worker_reading_sees_every_page_the_parent_publishes(tmp_path):
    r = _map_stream_file(tmp_path, 6)
    ctx = mp.get_context("fork")
    p = ctx.Process(target=_stream_reader, args=(r, 1, STREAM_PAGES, 0))
    try:
        p.start()
        _write_pages(r, 1, STREAM_PAGES, 0)
    finally:
        _join_all([p])
    r.close()


# ------------------------------- pickled: forkserver and spawn workers


def _pickled_worker(region, path, before, queue, go):
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
        errs.append(_differing(b, before, "the parent's stores before pickling"))
        quarter = len(before) // 4
        b[quarter : 2 * quarter] = 2
        queue.put([e for e in errs if e])
        errs = []
        if not go.wait(JOIN):
            errs.append("the parent did not go on")
        errs.append(_differing(b[2 * quarter : 3 * quarter], np.full(quarter, 3, np.uint8),
                               "the parent's stores while the worker runs"))
        region.flush()
        del b
        with region:
            pass
        if not region.closed:
            errs.append("not closed by with")
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        errs.append(repr(e))
    queue.put([e for e in errs if e])


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_pickled_region_and_its_original_see_each_other_while_both_run(tmp_path, method):
    path = tmp_path / "data.f32"
    shadow = _float_file(path, 7).view(np.uint8).copy()
    ctx = mp.get_context(method)
    r = pagepilot.map_file(path, budget=SIZE, policy="lru", writable=True, daemon=False)
    b = r.array(np.uint8)
    _assert_same(b, shadow, "read once")
    quarter = SIZE // 4
    b[:quarter] = 1  # unflushed when pickled
    shadow[:quarter] = 1
    assert r.stats()["writebacks"] == 0
    queue, go = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=_pickled_worker, args=(r, str(path), shadow, queue, go))
    try:
        p.start()
        assert queue.get(timeout=JOIN) == []
        # The worker runs (it waits for `go`): its stores are seen now.
        assert p.is_alive()
        assert r.stats()["shared"]
        shadow[quarter : 2 * quarter] = 2
        _assert_same(b, shadow, "the parent's view while the worker runs")
        b[2 * quarter : 3 * quarter] = 3
        shadow[2 * quarter : 3 * quarter] = 3
        go.set()
        assert queue.get(timeout=JOIN) == []
    finally:
        go.set()
        _join_all([p])
    _eventually("the region is paged again", lambda: r.stats()["resumes"] >= 1)
    assert not r.stats()["shared"]
    _assert_same(b, shadow, "the parent's view paged again")
    del b
    r.close()
    _assert_same(np.fromfile(path, dtype=np.uint8), shadow, "the file")


def test_a_region_unpickled_in_the_same_process_is_a_coherent_region(tmp_path):
    path = tmp_path / "data.f32"
    shadow = _float_file(path, 8).view(np.uint8).copy()
    r = pagepilot.map_file(path, budget=SIZE, policy="lru", writable=True, daemon=False)
    a = r.array(np.uint8)
    a[:PAGE] = 1
    shadow[:PAGE] = 1
    s = pickle.loads(pickle.dumps(r))
    assert isinstance(s, pagepilot.Region)
    assert s.stats() == {"shared": True, "len": SIZE, "writable": True}
    assert r.stats()["shared"] and r.stats()["shares"] == 1
    assert (len(s), s.path, s.writable, s.policy) == (SIZE, r.path, True, "lru")
    assert s.address != r.address and "shared" in repr(s)
    b = s.array(np.uint8)
    _assert_same(b, shadow, "the unpickled region")
    b[PAGE : 2 * PAGE] = 2
    a[2 * PAGE : 3 * PAGE] = 3
    shadow[PAGE : 2 * PAGE] = 2
    shadow[2 * PAGE : 3 * PAGE] = 3
    _assert_same(a, shadow, "the original")
    _assert_same(b, shadow, "the unpickled region")
    with pytest.raises(TypeError, match="cannot be pickled again"):
        pickle.dumps(s)
    with pytest.raises(pagepilot.PagepilotError, match="set_budget"):
        s.set_budget("1MB")
    with pytest.raises(ValueError, match="exceed"):
        s.prefault(SIZE - PAGE, 2 * PAGE)
    s.prefault(0, SIZE, write=True)
    s.flush()
    s.invalidate()
    with s:
        pass
    assert s.closed and s.exports == 1
    with pytest.raises(pagepilot.ClosedError):
        s.stats()
    # The view taken before close() keeps the mapping, and the lease.
    b[3 * PAGE : 4 * PAGE] = 4
    shadow[3 * PAGE : 4 * PAGE] = 4
    time.sleep(0.3)  # three of the watcher's rounds
    assert r.stats()["resumes"] == 0
    del b
    assert s.exports == 0
    _eventually("the original is paged again", lambda: r.stats()["resumes"] == 1)
    _assert_same(a, shadow, "the original paged again")
    del a
    r.close()
    _assert_same(np.fromfile(path, dtype=np.uint8), shadow, "the file")


def test_a_read_only_region_unpickles_as_a_paged_region_of_its_own(data_file):
    path, data = data_file
    with pagepilot.map_file(path, budget="256K", policy="mru", daemon=False) as r:
        with pickle.loads(pickle.dumps(r)) as s:
            assert not s.writable and s.path == r.path and s.policy == "mru"
            _assert_same(np.frombuffer(s, dtype=np.uint8), data, "the unpickled region")
            assert s.stats()["missing_faults"] > 0 and not s.stats()["shared"]
        assert r.stats()["shares"] == 0 and not r.stats()["shared"]


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_handing_an_anonymous_region_to_a_worker_is_refused(method):
    ctx = mp.get_context(method)
    with pagepilot.map_anon("1MB", budget="256K", daemon=False) as r:
        p = ctx.Process(target=_fill_quarter, args=(r, 0))
        with pytest.raises(TypeError, match="anonymous region cannot be pickled"):
            p.start()
        assert p.pid is None
