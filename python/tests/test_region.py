"""Regions from Python: contents, writes, views, close, stats."""

import gc

import numpy as np
import pytest

import pagepilot
from conftest import file_bytes


def test_buffer_contents_equal_the_file_after_random_reads(data_file):
    path, data = data_file
    # 16 frames for 1024 pages: most reads fault and evict.
    with pagepilot.map_file(path, budget="64KiB", policy="clock") as r:
        view = np.frombuffer(r, dtype=np.uint8)
        assert len(view) == len(data) == len(r)
        rng = np.random.default_rng(5)
        for off in rng.integers(0, len(data) - 64, size=2000):
            assert bytes(view[off : off + 64]) == bytes(data[off : off + 64])
        assert np.array_equal(view, data)
        stats = r.stats()
        assert stats["budget_frames"] == 16
        assert stats["missing_faults"] > 0
        del view


def test_array_views_like_memmap(data_file):
    path, data = data_file
    with pagepilot.map_file(path, budget="256KB", policy="mru") as r:
        a = r.array(np.uint32, shape=(256, 1024), offset=4096)
        expected = np.frombuffer(data.tobytes()[4096 : 4096 + 256 * 1024 * 4], dtype=np.uint32)
        assert a.shape == (256, 1024)
        assert np.array_equal(a.ravel(), expected)
        assert not a.flags.writeable  # a read-only mapping
        whole = r.array(np.float64)
        assert whole.shape == (len(data) // 8,)
        with pytest.raises(ValueError, match="needs more than"):
            r.array(np.uint64, shape=(len(data),))
        with pytest.raises(ValueError, match="offset"):
            r.array(np.uint8, offset=len(data) + 1)
        del a, whole


def test_writes_through_numpy_reach_the_file_after_flush(data_file):
    path, data = data_file
    r = pagepilot.map_file(path, budget="128K", policy="clock", writable=True)
    a = r.array(np.uint8)
    assert a.flags.writeable
    rng = np.random.default_rng(9)
    offsets = rng.integers(0, len(data), size=500)
    a[offsets] = 0xAB
    a[: 1 << 20] ^= 0x5A  # 256 pages dirty, far above the 32-frame budget
    expected = data.copy()
    expected[offsets] = 0xAB
    expected[: 1 << 20] ^= 0x5A
    r.flush()
    assert np.array_equal(file_bytes(path), expected)
    del a
    r.close()


def test_writes_reach_the_file_when_the_context_manager_exits(data_file):
    path, data = data_file
    with pagepilot.map_file(path, budget="1MiB", policy="mru", writable=True) as r:
        a = r.array(np.uint64)
        a[::7] = 0x0123456789ABCDEF
        expected = data.copy().view(np.uint64)
        expected[::7] = 0x0123456789ABCDEF
        del a
    assert r.closed
    assert np.array_equal(file_bytes(path).view(np.uint64), expected)


def test_anonymous_memory_is_zero_filled_and_keeps_writes_beyond_the_budget():
    with pagepilot.map_anon("8MB", budget="1MB", policy="clock") as r:
        a = r.array(np.int64)
        assert not a[::4096].any()
        a[:] = np.arange(len(a))
        assert np.array_equal(a, np.arange(len(a)))  # paged out and back in
        assert r.stats()["evictions"] > 0
        del a


def test_a_closed_region_raises_instead_of_faulting(data_file):
    path, _ = data_file
    r = pagepilot.map_file(path, budget="1M")
    r.close()
    r.close()  # a second close does nothing
    for touch in (
        lambda: memoryview(r),
        lambda: np.frombuffer(r, dtype=np.uint8),
        lambda: r.array(np.uint8),
        lambda: r.stats(),
        lambda: r.flush(),
        lambda: len(r),
        lambda: r.address,
    ):
        with pytest.raises(pagepilot.ClosedError, match="closed"):
            touch()
    with pytest.raises(pagepilot.ClosedError):
        with r:
            pass


def test_closing_with_views_alive_unmaps_when_the_last_view_goes(data_file):
    path, data = data_file
    r = pagepilot.map_file(path, budget="256K", policy="clock")
    a = np.frombuffer(r, dtype=np.uint8)
    m = memoryview(r)
    assert r.exports == 2
    r.close()
    assert r.closed
    # The views still read the file: the memory stays mapped for them.
    assert np.array_equal(a, data)
    assert bytes(m[100:200]) == bytes(data[100:200])
    with pytest.raises(pagepilot.ClosedError):
        np.frombuffer(r, dtype=np.uint8)
    m.release()
    assert r.exports == 1
    del a
    gc.collect()
    assert r.exports == 0


def test_read_only_regions_refuse_writable_buffers(data_file):
    path, _ = data_file
    with pagepilot.map_file(path, budget="1M") as r:
        m = memoryview(r)
        assert m.readonly
        with pytest.raises(TypeError):
            m[0] = 1
        m.release()
        a = np.frombuffer(r, dtype=np.uint8)
        with pytest.raises(ValueError):
            a[0] = 1
        del a


def test_stats_is_a_dict_of_the_c_api_fields(data_file):
    path, _ = data_file
    with pagepilot.map_file(path, budget=64 * 4096, policy="seq") as r:
        np.frombuffer(r, dtype=np.uint8).sum()
        s = r.stats()
        assert isinstance(s, dict)
        for key in ("missing_faults", "evictions", "budget_frames", "pages", "policy"):
            assert key in s, key
        assert s["pages"] == 1024
        assert s["budget_frames"] == 64


def test_options_of_the_c_api_are_keywords(data_file):
    path, data = data_file
    with pagepilot.map_file(
        path,
        "512K",
        "clock",
        len="1MiB",
        fault_around_pages=1,
        readahead_max_pages=1,
        handler_threads=2,
        zero_around_max_pages=1,
    ) as r:
        assert len(r) == 1 << 20
        assert np.array_equal(np.frombuffer(r, dtype=np.uint8), data[: 1 << 20])
        assert r.stats()["handler_threads"] == 2
    with pytest.raises(TypeError):
        pagepilot.map_file(path, "1M", no_such_option=1)


def test_set_budget_shrinks_the_frames(data_file):
    path, _ = data_file
    with pagepilot.map_file(path, budget="1M", policy="clock") as r:
        np.frombuffer(r, dtype=np.uint8).sum()
        r.set_budget("64K")
        assert r.stats()["budget_frames"] == 16
        assert r.stats()["frames_in_use"] <= 16


def test_sizes_accept_ints_and_strings_with_units():
    assert pagepilot.parse_size("40MB") == 40 << 20
    assert pagepilot.parse_size("4 KiB") == 4096
    assert pagepilot.parse_size(12345) == 12345
    assert pagepilot.parse_size(np.int64(8192)) == 8192
    assert pagepilot.parse_size("1.5G") == 3 << 29
