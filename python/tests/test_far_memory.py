"""Far memory from Python: dataspaces whose pages live on a Redis Cluster
(PAGEPILOT_REDIS_CLUSTER, as scripts/test exports it, or one started here
with scripts/redis-cluster), with the round trips the Rust manager counts,
and the replica-wait option accepted with replicas and refused without."""

import errno
import os
import shutil
import socket
import subprocess
import time
import uuid

import numpy as np
import pytest

import pagepilot
from conftest import ROOT

PAGE = pagepilot.PAGE_SIZE
WINDOW = 64  # pages per round trip (the far manager's default)


def _free_base(n):
    """`n` consecutive free loopback ports whose bus ports (+10000) are free."""
    # Processes start at different points of 24000-29999 and wrap, so every
    # pid searches the whole span (a start past its end once found nothing).
    low, high = 24000, 30000 - n
    start = low + (os.getpid() * 20) % (high - low)
    for offset in range(0, high - low, n):
        base = low + (start - low + offset) % (high - low)
        ports = [p for q in range(base, base + n) for p in (q, q + 10000)]
        try:
            socks = []
            for p in ports:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The seed list of a cluster of three primaries with a replica each."""
    seeds = os.environ.get("PAGEPILOT_REDIS_CLUSTER")
    if seeds:
        yield seeds
        return
    script = ROOT / "scripts" / "redis-cluster"
    directory = tmp_path_factory.mktemp("far") / "cluster"
    out = subprocess.run(
        [str(script), "start", "--port", str(_free_base(6)), str(directory)],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    try:
        yield out.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(script), "stop", str(directory)], timeout=60)


@pytest.fixture
def lone_server(tmp_path):
    """One redis-server without replicas: "redis://127.0.0.1:PORT"."""
    port = _free_base(1)
    proc = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}"
    try:
        probe = pagepilot.FarManager(url, retry_for=0.05)
        for _ in range(100):
            try:
                probe.ping()
                break
            except pagepilot.DataspaceError:
                time.sleep(0.05)
        yield url
    finally:
        proc.kill()
        proc.wait()


def _name():
    return f"py-{uuid.uuid4().hex[:12]}"


def test_bytes_round_trip_through_far_memory_with_the_counted_round_trips(cluster):
    # Requests counted apart from their retries (a busy shared cluster may
    # make a request be sent again).
    far = pagepilot.FarManager(cluster)
    ds = far.create(_name(), 4 * WINDOW * PAGE)
    assert far.round_trips - far.retries == 1  # SET NX of the metadata
    data = np.random.default_rng(3).integers(0, 256, size=2 * WINDOW * PAGE, dtype=np.uint8)
    try:
        with pagepilot.map_dataspaces([ds], budget="2MB", fault_around_pages=WINDOW) as r:
            assert far.round_trips - far.retries == 2  # open: metadata and written windows
            a = r.array(np.uint8)
            assert int(a.sum()) == 0
            assert far.round_trips - far.retries == 2  # windows never written: no round trip
            a[: WINDOW * PAGE] = data[: WINDOW * PAGE]
            r.flush()
            assert far.round_trips - far.retries == 4  # a window's first write: SETBIT, then MSET
            a[WINDOW * PAGE: 2 * WINDOW * PAGE] = data[WINDOW * PAGE:]
            r.flush()
            assert far.round_trips - far.retries == 6
            a[: WINDOW * PAGE] = data[: WINDOW * PAGE]
            a[0] ^= 0xFF
            a[0] ^= 0xFF
            r.flush()
            assert far.round_trips - far.retries == 7  # a marked window: one MSET
            del a
        # A fresh manager, as another process would open it.
        other = pagepilot.FarManager(cluster)
        same = other.dataspace(ds.id)
        assert same.size == 4 * WINDOW * PAGE and other.round_trips - other.retries == 1
        with pagepilot.map_dataspaces([same], budget="2MB", fault_around_pages=WINDOW) as r:
            a = np.frombuffer(r, dtype=np.uint8)
            assert other.round_trips - other.retries == 2
            assert np.array_equal(a[: WINDOW * PAGE], data[: WINDOW * PAGE])
            assert other.round_trips - other.retries == 3  # one window: one MGET
            assert np.array_equal(a[: 2 * WINDOW * PAGE], data)
            assert int(a[2 * WINDOW * PAGE:].sum()) == 0
            del a
        assert ds.stats()["round_trips"] == far.round_trips
    finally:
        ds.delete()
    with pytest.raises(pagepilot.DataspaceError) as e:
        far.dataspace(ds.id)
    assert e.value.errno == errno.ENOENT and e.value.manager == "redis"


def test_far_dataspaces_are_refused_as_the_rust_manager_refuses(cluster):
    far = pagepilot.FarManager(cluster)
    name = _name()
    ds = far.create(name, PAGE)
    try:
        with pytest.raises(pagepilot.DataspaceError) as e:
            far.create(name, PAGE)
        assert e.value.errno == errno.EEXIST
        with pagepilot.map_dataspaces([ds], budget="64K"):
            with pytest.raises(pagepilot.DataspaceError) as e:
                ds.delete()
            assert e.value.errno == errno.EBUSY
    finally:
        ds.delete()
    with pytest.raises(pagepilot.DataspaceError, match="far dataspace name"):
        far.create("no{braces}", PAGE)
    with pytest.raises(ValueError, match="window"):
        pagepilot.FarManager(cluster, window=0)


def test_the_replica_wait_is_accepted_where_the_cluster_has_replicas(cluster):
    far = pagepilot.FarManager(cluster, replica_wait=(1, 0.5))
    ds = far.create(_name(), WINDOW * PAGE)
    try:
        with pagepilot.map_dataspaces([ds], budget="1MB") as r:
            r.array(np.uint8)[:] = 9
        # Accepted: the write-backs waited for a replica and the unmap
        # succeeded (a replica that lagged makes one be sent again, which
        # a busy shared cluster does: retries are not counted against it).
        with pagepilot.map_dataspaces([pagepilot.FarManager(cluster).dataspace(ds.id)],
                                      budget="1MB") as r:
            assert (np.frombuffer(r, dtype=np.uint8) == 9).all()
    finally:
        ds.delete()


def test_the_replica_wait_is_refused_with_a_clear_error_where_the_server_has_no_replica(lone_server):
    far = pagepilot.FarManager(lone_server, replica_wait=(1, 0.1), retry_for=0.3)
    with pytest.raises(pagepilot.DataspaceError,
                       match=r"WAIT: 0 of 1 replica\(s\) acknowledged the write") as e:
        far.create(_name(), PAGE)
    assert e.value.errno == errno.ETIMEDOUT
    assert far.retries > 0
    with pytest.raises(ValueError, match="at least one replica"):
        pagepilot.FarManager(lone_server, replica_wait=(0, 0.1))
    with pytest.raises(ValueError, match="shorter than the reply timeout"):
        pagepilot.FarManager(lone_server, replica_wait=(1, 5.0))


def test_a_replica_wait_made_a_property_of_one_dataspace_binds_every_opener(cluster, lone_server):
    # On a cluster with replicas: made waited by a manager without a wait,
    # written, read back by another.
    far = pagepilot.FarManager(cluster)
    ds = far.create(_name(), WINDOW * PAGE, replica_wait=(1, 0.5))
    try:
        with pagepilot.map_dataspaces([ds], budget="1MB") as r:
            r.array(np.uint8)[:] = 5
        with pagepilot.map_dataspaces([pagepilot.FarManager(cluster).dataspace(ds.id)],
                                      budget="1MB") as r:
            assert (np.frombuffer(r, dtype=np.uint8) == 5).all()
    finally:
        ds.delete()
    # On a server without replicas, its metadata's own write already waits.
    plain = pagepilot.FarManager(lone_server, retry_for=0.3)
    with pytest.raises(pagepilot.DataspaceError,
                       match=r"0 of 1 replica\(s\) acknowledged") as e:
        plain.create(_name(), PAGE, replica_wait=(1, 0.05))
    assert e.value.errno == errno.ETIMEDOUT
    with pytest.raises(ValueError, match="at least one replica"):
        plain.create(_name(), PAGE, replica_wait=(0, 0.05))
