"""Compressed, lazy-copy and stacked dataspaces from Python, against the
Rust API: the same operations give the same counts."""

import errno
import json
import subprocess

import numpy as np
import pytest

import pagepilot
from conftest import file_bytes, rust_example

PAGE = pagepilot.PAGE_SIZE
COUNTS = ("pages", "zero_pages", "dirty_pages", "reads_kept", "pages_written",
          "evictions_to_lower", "synced_to_lower", "reads_from_tier", "reads_from_lower")


def _mixed_pages(n=64):
    """Noise on even pages, one repeated byte on odd ones, one zero page."""
    a = np.full((n, PAGE), ord("x"), dtype=np.uint8)
    a[::2] = np.random.default_rng(5).integers(0, 256, size=(n // 2, PAGE), dtype=np.uint8)
    a[5] = 0
    return a.reshape(-1)


def test_compressed_counts_equal_the_rust_apis_for_the_same_operations(tmp_path):
    data = _mixed_pages()
    data_file = tmp_path / "data.bin"
    data.tofile(data_file)
    tier, budget = 16 * PAGE, 8 * PAGE
    (tmp_path / "rust").mkdir()
    out = subprocess.run(
        [rust_example("dataspace_counts"), str(tmp_path / "rust"), str(data_file),
         str(tier), str(budget)],
        capture_output=True, text=True, timeout=120, check=True,
    )
    rust = json.loads(out.stdout)

    # The same, from Python: a persistent dataspace handed to a compressed
    # manager, written whole through a region of 8 frames, flushed, read.
    store = pagepilot.PersistentManager(tmp_path / "py")
    (tmp_path / "py").mkdir()
    base = store.create("base", data.size)
    compressed = pagepilot.CompressedManager(tier)
    ds = base.transfer(compressed)
    with pagepilot.map_dataspaces([ds], budget=budget, policy="clock") as r:
        a = r.array(np.uint8)
        a[:] = data
        r.flush()
        same = bool(np.array_equal(a, data))
        del a
        region = r.stats()
    stats = ds.stats()
    mine = {"same": same, "region_evictions": region["evictions"],
            "region_missing_faults": region["missing_faults"]}
    mine.update({k: stats[k] for k in COUNTS})
    assert mine == rust
    assert rust["same"] and rust["evictions_to_lower"] > 0 and rust["reads_kept"] > 0
    assert stats["budget_bytes"] == tier == compressed.budget
    assert stats["pool_bytes"] <= tier


def test_a_compressed_tier_over_a_persistent_dataspace_writes_through_to_its_file(tmp_path):
    data = _mixed_pages(128)
    store = pagepilot.PersistentManager(tmp_path)
    base = store.create("base", data.size)
    tier = base.transfer(pagepilot.CompressedManager(32 * PAGE))
    assert [s.split(" manager")[0] for s in tier.stack] == ["persistent", "compressed"]
    with pagepilot.map_dataspaces([tier], budget=16 * PAGE) as r:
        r.array(np.uint8)[:] = data
    # Closing the region synced the tier down: the persistent file has it.
    assert np.array_equal(file_bytes(tmp_path / "base.pages"), data)
    stats = tier.stats()
    assert stats["dirty_pages"] == 0
    assert stats["evictions_to_lower"] + stats["synced_to_lower"] >= 127  # the zero page aside
    # The persistent dataspace is the compressed manager's until deleted there.
    with pytest.raises(pagepilot.MapError) as e:
        pagepilot.map_dataspaces([store.dataspace("base")], budget="64K")
    assert e.value.errno == errno.EBUSY
    tier.delete()
    with pagepilot.map_dataspaces([store.dataspace("base")], budget="64K") as r:
        assert np.array_equal(np.frombuffer(r, dtype=np.uint8), data)


def test_a_lazy_copy_leaves_its_source_unchanged(tmp_path):
    data = _mixed_pages(32)
    store = pagepilot.PersistentManager(tmp_path)
    source = store.create("source", data.size)
    with pagepilot.map_dataspaces([source], budget="64K") as r:
        r.array(np.uint8)[:] = data
    copies = pagepilot.LazyCopyManager(dir=tmp_path)
    copy = copies.copy(source)
    assert copy.size == data.size and copy.manager is copies
    with pagepilot.map_dataspaces([copy], budget=8 * PAGE) as r:
        a = r.array(np.uint8)
        assert np.array_equal(a, data)  # read through to the source
        a[: 16 * PAGE] = 7  # half the copy's pages its own
        del a
    stats = copy.stats()
    assert stats["pages_written"] == 16
    assert stats["reads_source"] >= 32
    assert stats["depth"] == 2
    assert np.array_equal(file_bytes(tmp_path / "source.pages"), data)
    with pagepilot.map_dataspaces([copy], budget=8 * PAGE) as r:
        a = np.frombuffer(r, dtype=np.uint8)
        assert (a[: 16 * PAGE] == 7).all()
        assert np.array_equal(a[16 * PAGE:], data[16 * PAGE:])
        del a
    copy.delete()  # releases the source
    with pagepilot.map_dataspaces([source], budget="64K") as r:
        assert np.array_equal(np.frombuffer(r, dtype=np.uint8), data)


def test_stacking_refuses_cycles_and_managers_that_take_no_dataspaces(tmp_path):
    store = pagepilot.PersistentManager(tmp_path)
    compressed = pagepilot.CompressedManager("1MB")
    copies = pagepilot.LazyCopyManager(dir=tmp_path)
    over = store.create("base", 4 * PAGE).transfer(compressed).transfer(copies)
    with pytest.raises(pagepilot.DataspaceError, match="already stacked") as e:
        over.transfer(compressed)
    assert e.value.errno == errno.ELOOP
    with pytest.raises(pagepilot.DataspaceError, match="does not support") as e:
        over.transfer(store)
    assert e.value.errno == errno.ENOTSUP
    assert "operations" in compressed.interrogate()
    assert "stacked" in copies.interrogate()["flavours"]


def test_persistence_below_anonymous_memory_and_a_pinned_dataspace(tmp_path):
    store = pagepilot.PersistentManager(tmp_path)
    anon = pagepilot.AnonymousManager(dir=tmp_path)
    ds = store.create("kept", 8 * PAGE).transfer(anon)
    with pagepilot.map_dataspaces([ds], budget="16K") as r:
        memoryview(r)[3 * PAGE] = 42
    assert file_bytes(tmp_path / "kept.pages")[3 * PAGE] == 42

    pinned = pagepilot.PinnedManager(16 * PAGE)
    with pytest.raises(pagepilot.DataspaceError, match="quota") as e:
        anon.create(32 * PAGE).transfer(pinned)
    assert e.value.errno == errno.EDQUOT
    hot = anon.create(8 * PAGE).transfer(pinned)
    assert pinned.pinned_bytes == 8 * PAGE and pinned.quota == 16 * PAGE
    cold = anon.create(64 * PAGE)
    with pagepilot.map_dataspaces(
        [hot, cold.attach(at=8 * PAGE)], budget=12 * PAGE, policy="fifo"
    ) as r:
        r.subscribe_evictions()
        a = r.array(np.uint8)
        for _ in range(3):
            a[:] = 1
        del a
        stats = r.stats()
        assert stats["pinned_pages"] == 8
        offsets = [e.offset for e in r.drain_evictions()]
    assert len(offsets) == stats["evictions"] > 0
    assert min(offsets) >= 8 * PAGE  # the pinned dataspace's pages: never
