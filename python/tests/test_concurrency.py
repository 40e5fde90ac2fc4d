"""Faults from several Python threads and from multiprocessing workers."""

import multiprocessing as mp
import threading

import numpy as np
import pytest

import pagepilot
from conftest import file_bytes


def test_several_threads_faulting_at_once_read_the_file(data_file):
    path, data = data_file
    # 32 frames for 1024 pages, 8 threads: faults from every thread at once.
    with pagepilot.map_file(path, budget="128K", policy="clock") as r:
        view = r.array(np.uint8)
        errors = []
        start = threading.Barrier(8)

        def reader(seed):
            try:
                rng = np.random.default_rng(seed)
                start.wait()
                for _ in range(300):
                    off = int(rng.integers(0, len(data) - 4096))
                    # The copy runs in numpy with the GIL released.
                    got = view[off : off + 4096].copy()
                    if not np.array_equal(got, data[off : off + 4096]):
                        errors.append(f"thread {seed}: bytes at {off} differ")
                        return
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert r.stats()["missing_faults"] > 100
        del view


def test_threads_writing_disjoint_pages_all_reach_the_file(data_file):
    path, data = data_file
    with pagepilot.map_file(path, budget="64K", policy="clock", writable=True) as r:
        a = r.array(np.uint8)

        def writer(i):
            a[i::8 * 4096] = i + 1

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        del a
    expected = data.copy()
    for i in range(8):
        expected[i :: 8 * 4096] = i + 1
    assert np.array_equal(file_bytes(path), expected)


def _sum_of_region(region, q):
    """Worker: the region's bytes summed, and a sample of them."""
    a = np.frombuffer(region, dtype=np.uint8)
    q.put((int(a.sum(dtype=np.uint64)), bytes(a[12345:12345 + 100]), bytes(a[-100:])))


def _run_worker(ctx, region):
    q = ctx.Queue()
    p = ctx.Process(target=_sum_of_region, args=(region, q))
    p.start()
    got = q.get(timeout=60)
    p.join(timeout=60)
    assert p.exitcode == 0
    return got


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_workers_read_the_region_their_parent_mapped(data_file, method):
    path, data = data_file
    ctx = mp.get_context(method)
    with pagepilot.map_file(path, budget="256K", policy="mru") as r:
        np.frombuffer(r, dtype=np.uint8)[::4096].sum()  # some pages resident
        total, sample, tail = _run_worker(ctx, r)
        # The parent's region is still whole after the child.
        assert np.array_equal(np.frombuffer(r, dtype=np.uint8), data)
    assert total == int(data.sum(dtype=np.uint64))
    assert sample == bytes(data[12345:12345 + 100])
    assert tail == bytes(data[-100:])


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_see_what_the_parent_wrote_before_starting_them(data_file, method):
    path, data = data_file
    ctx = mp.get_context(method)
    with pagepilot.map_file(path, budget="256K", policy="clock", writable=True) as r:
        a = r.array(np.uint8)
        a[12345:12345 + 100] = 7
        a[-100:] = 9
        del a
        total, sample, tail = _run_worker(ctx, r)
    expected = data.copy()
    expected[12345:12345 + 100] = 7
    expected[-100:] = 9
    assert sample == bytes([7]) * 100
    assert tail == bytes([9]) * 100
    assert total == int(expected.sum(dtype=np.uint64))
