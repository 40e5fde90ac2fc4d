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

import fork_workers as fw
import pagepilot
from fork_workers import JOIN, PAGE, SETUPS, SIZE, STREAM_PAGES

TESTS = pathlib.Path(__file__).resolve().parent
# Forkserver workers start with these imported (the worker functions' module).
mp.get_context("forkserver").set_forkserver_preload(["fork_workers"])

# ---------------------------------------------------------------- helpers


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
    """Runs `fork_workers.<func>(*args)` in a fresh interpreter (a process of
    its own: the daemon's client, or a parent that must exit first)."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import fork_workers; "
        f"fork_workers.{func}(*json.loads(sys.argv[2]))"
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
        fw.eventually("the daemon listens", lambda: sock.exists() or proc.poll() is not None)
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
    fw.float_file(path, 1)
    # The memmap reference once per start method (it has no setup).
    memmap_path = None
    if setup == SETUPS[0]:
        memmap_path = str(tmp_path / "memmap.f32")
        fw.float_file(memmap_path, 1)
    if setup == "daemon":
        # A process of its own: joining the daemon is for the whole process.
        socket = request.getfixturevalue("daemon_socket")
        _drive("issue_scenario", str(path), memmap_path, method, setup, socket)
    else:
        fw.issue_scenario(path, memmap_path, method, setup)


# ------------------------------------------------------------- os.fork


def test_os_fork_child_and_parent_see_each_others_unflushed_stores(tmp_path):
    path = tmp_path / "data.f32"
    shadow = fw.float_file(path, 2).view(np.uint8).copy()
    with pagepilot.map_file(path, budget=SIZE, policy="lru", writable=True, daemon=False) as r:
        b = r.array(np.uint8)
        fw.assert_same(b, shadow, "read once")
        third = SIZE // 3 // PAGE * PAGE
        b[:third] = 11  # unflushed, before the fork
        shadow[:third] = 11
        assert r.stats()["writebacks"] == 0

        def child():
            if fw.differing(b, shadow, "the child's view") is not None:
                return 2
            b[third : 2 * third] = 22
            return 0

        pid = _fork(child)
        assert _reap(pid) == 0, "the child did not see the parent's unflushed stores"
        shadow[third : 2 * third] = 22
        fw.assert_same(b, shadow, "the parent's view after the child")
        del b


def test_a_grandchilds_stores_reach_the_parent(tmp_path):
    path = tmp_path / "data.f32"
    shadow = fw.float_file(path, 3).view(np.uint8).copy()
    # The whole file resident in the parent: a stale copy would show.
    with pagepilot.map_file(path, budget=SIZE, policy="lru", writable=True, daemon=False) as r:
        b = r.array(np.uint8)
        fw.assert_same(b, shadow, "read once")
        assert r.stats()["evictions"] == 0

        def grandchild():
            b[::3] = 33
            return 0

        def child():
            return _reap(_fork(grandchild))

        assert _reap(_fork(child)) == 0
        shadow[::3] = 33
        fw.assert_same(b, shadow, "the parent's view after the grandchild")
        del b


def test_a_child_outliving_its_parent_keeps_seeing_and_storing(tmp_path):
    path = tmp_path / "data.f32"
    shadow = fw.float_file(path, 4).view(np.uint8).copy()
    files = [str(tmp_path / n) for n in ("child_wrote", "parent_saw", "marker", "pid")]
    child_wrote, parent_saw, marker, pidfile = files
    try:
        _drive("outliving_parent", str(path), *files)
        assert pathlib.Path(parent_saw).read_text() == "ok"
        fw.eventually("the child left its marker", lambda: os.path.exists(marker), JOIN)
        assert pathlib.Path(marker).read_text() == "ok"
    finally:
        if os.path.exists(pidfile):
            _kill_if_alive(int(pathlib.Path(pidfile).read_text()))
    q = SIZE // 4
    for i, v in enumerate([1, 2, 3, 4]):
        shadow[i * q : (i + 1) * q] = v
    fw.assert_same(np.fromfile(path, dtype=np.uint8), shadow, "the file")


# ------------------------------------ stores while the other side reads


def _map_stream_file(tmp_path, seed):
    path = tmp_path / "data.f32"
    fw.float_file(path, seed)
    r = pagepilot.map_file(path, budget=SIZE, policy="lru", writable=True, daemon=False)
    np.asarray(r.array(np.uint8)).sum()  # all of it resident
    r.array(np.uint64, shape=8)[:] = 0
    return r


def test_the_parent_reading_sees_every_page_two_workers_publish(tmp_path):
    r = _map_stream_file(tmp_path, 5)
    ctx = mp.get_context("fork")
    half = STREAM_PAGES // 2
    ranges = [(1, half, 0), (half, STREAM_PAGES, 1)]
    procs = [ctx.Process(target=fw.write_pages, args=(r, *rg)) for rg in ranges]
    try:
        for p in procs:
            p.start()
        for first, end, slot in ranges:
            stale = fw.read_pages(r, first, end, slot, JOIN / 2)
            assert stale is None, f"page {stale} stale in the parent (-1: counter stuck)"
    finally:
        fw.join_all(procs)
    r.close()


def test_a_worker_reading_sees_every_page_the_parent_publishes(tmp_path):
    r = _map_stream_file(tmp_path, 6)
    ctx = mp.get_context("fork")
    p = ctx.Process(target=fw.stream_reader, args=(r, 1, STREAM_PAGES, 0))
    try:
        p.start()
        fw.write_pages(r, 1, STREAM_PAGES, 0)
    finally:
        fw.join_all([p])
    r.close()


# ------------------------------- pickled: forkserver and spawn workers


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_pickled_region_and_its_original_see_each_other_while_both_run(tmp_path, method):
    path = tmp_path / "data.f32"
    shadow = fw.float_file(path, 7).view(np.uint8).copy()
    ctx = mp.get_context(method)
    r = pagepilot.map_file(path, budget=SIZE, policy="lru", writable=True, daemon=False)
    b = r.array(np.uint8)
    fw.assert_same(b, shadow, "read once")
    quarter = SIZE // 4
    b[:quarter] = 1  # unflushed when pickled
    shadow[:quarter] = 1
    assert r.stats()["writebacks"] == 0
    queue, go = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=fw.pickled_worker, args=(r, str(path), shadow, queue, go))
    try:
        p.start()
        assert queue.get(timeout=JOIN) == []
        # The worker runs (it waits for `go`): its stores are seen now.
        assert p.is_alive()
        assert r.stats()["shared"]
        shadow[quarter : 2 * quarter] = 2
        fw.assert_same(b, shadow, "the parent's view while the worker runs")
        b[2 * quarter : 3 * quarter] = 3
        shadow[2 * quarter : 3 * quarter] = 3
        go.set()
        assert queue.get(timeout=JOIN) == []
    finally:
        go.set()
        fw.join_all([p])
    fw.eventually("the region is paged again", lambda: r.stats()["resumes"] >= 1)
    assert not r.stats()["shared"]
    fw.assert_same(b, shadow, "the parent's view paged again")
    del b
    r.close()
    fw.assert_same(np.fromfile(path, dtype=np.uint8), shadow, "the file")


def test_a_region_unpickled_in_the_same_process_is_a_coherent_region(tmp_path):
    path = tmp_path / "data.f32"
    shadow = fw.float_file(path, 8).view(np.uint8).copy()
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
    fw.assert_same(b, shadow, "the unpickled region")
    b[PAGE : 2 * PAGE] = 2
    a[2 * PAGE : 3 * PAGE] = 3
    shadow[PAGE : 2 * PAGE] = 2
    shadow[2 * PAGE : 3 * PAGE] = 3
    fw.assert_same(a, shadow, "the original")
    fw.assert_same(b, shadow, "the unpickled region")
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
    fw.eventually("the original is paged again", lambda: r.stats()["resumes"] == 1)
    fw.assert_same(a, shadow, "the original paged again")
    del a
    r.close()
    fw.assert_same(np.fromfile(path, dtype=np.uint8), shadow, "the file")


def test_a_read_only_region_unpickles_as_a_paged_region_of_its_own(data_file):
    path, data = data_file
    with pagepilot.map_file(path, budget="256K", policy="mru", daemon=False) as r:
        with pickle.loads(pickle.dumps(r)) as s:
            assert not s.writable and s.path == r.path and s.policy == "mru"
            fw.assert_same(np.frombuffer(s, dtype=np.uint8), data, "the unpickled region")
            assert s.stats()["missing_faults"] > 0 and not s.stats()["shared"]
        assert r.stats()["shares"] == 0 and not r.stats()["shared"]


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_handing_an_anonymous_region_to_a_worker_is_refused(method):
    ctx = mp.get_context(method)
    with pagepilot.map_anon("1MB", budget="256K", daemon=False) as r:
        p = ctx.Process(target=fw.fill_quarter, args=(r, 0))
        with pytest.raises(TypeError, match="anonymous region cannot be pickled"):
            p.start()
        assert p.pid is None
