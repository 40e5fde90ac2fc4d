"""Persistent dataspaces from Python: bytes written through a region come
back after unmap and in a fresh process; create, list and delete, and the
refusals, with the errno the C API gives."""

import errno
import subprocess
import sys

import numpy as np
import pytest

import pagepilot
from conftest import file_bytes

PAGE = pagepilot.PAGE_SIZE

_READER = """
import hashlib, sys
import numpy, pagepilot
store = pagepilot.PersistentManager(sys.argv[1])
ds = store.dataspace(sys.argv[2])
with pagepilot.map_dataspaces([ds], budget="64K", policy="lru") as r:
    a = r.array(numpy.uint8)
    print(ds.size, hashlib.sha256(a.tobytes()).hexdigest())
    del a
"""


def test_bytes_written_through_a_persistent_dataspace_read_back_after_unmap_and_in_a_fresh_process(tmp_path):
    import hashlib

    store = pagepilot.PersistentManager(tmp_path)
    ds = store.create("matrix", 256 * PAGE)
    data = np.random.default_rng(1).integers(0, 256, size=256 * PAGE, dtype=np.uint8)
    # 16 frames for 256 pages: most pages are written back by eviction.
    with pagepilot.map_dataspaces([ds], budget=16 * PAGE, policy="clock") as r:
        r.array(np.uint8)[:] = data
        assert r.stats()["evictions"] >= 256 - 16
    assert np.array_equal(file_bytes(tmp_path / "matrix.pages"), data)
    with pagepilot.map_dataspaces([store.dataspace("matrix")], budget="64K") as r:
        assert np.array_equal(np.frombuffer(r, dtype=np.uint8), data)
    out = subprocess.run(
        [sys.executable, "-c", _READER, str(tmp_path), "matrix"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(256 * PAGE), hashlib.sha256(data.tobytes()).hexdigest()]


def test_persistent_dataspaces_are_created_listed_and_deleted(tmp_path):
    store = pagepilot.PersistentManager(tmp_path)
    assert store.names() == []
    a = store.create("a", "1MB")
    store.create("b", 3 * PAGE)
    assert store.names() == ["a", "b"]
    assert (a.id, a.size, a.manager.name) == ("a", 1 << 20, "persistent")
    assert store.dataspace("b").size == 3 * PAGE
    assert store.dir == tmp_path
    with pytest.raises(pagepilot.DataspaceError) as e:
        store.create("a", PAGE)
    assert e.value.errno == errno.EEXIST and e.value.manager == "persistent"
    a.delete()
    assert store.names() == ["b"]
    assert not (tmp_path / "a.pages").exists()
    with pytest.raises(pagepilot.DataspaceError) as e:
        store.delete("a")
    assert e.value.errno == errno.ENOENT
    store.delete("b")
    assert store.names() == []


def test_bad_names_missing_and_busy_dataspaces_are_refused_with_the_c_apis_errno(tmp_path):
    store = pagepilot.PersistentManager(tmp_path)
    with pytest.raises(pagepilot.DataspaceError, match="bad dataspace name") as e:
        store.create("../escape", PAGE)
    assert e.value.errno == errno.EINVAL
    with pytest.raises(pagepilot.DataspaceError, match="missing") as e:
        store.dataspace("missing")
    assert e.value.errno == errno.ENOENT
    ds = store.create("busy", 4 * PAGE)
    with pagepilot.map_dataspaces([ds], budget="16K") as r:
        with pytest.raises(pagepilot.MapError, match="open already") as e:
            pagepilot.map_dataspaces([ds], budget="16K")
        assert e.value.errno == errno.EBUSY
        with pytest.raises(pagepilot.DataspaceError, match="open") as e:
            ds.delete()
        assert e.value.errno == errno.EBUSY
        assert r.path is None and "busy" in repr(r)
    ds.delete()
    with pytest.raises(TypeError, match="dataspace name"):
        store.dataspace(3)
    with pytest.raises(TypeError, match="attachments"):
        pagepilot.map_dataspaces(["busy"], budget="16K")
    with pytest.raises(pagepilot.MapError) as e:
        pagepilot.map_dataspaces([], budget="16K")
    assert e.value.errno == errno.EINVAL


def test_attachments_place_dataspaces_at_offsets_of_one_region(tmp_path):
    store = pagepilot.PersistentManager(tmp_path)
    head, body = store.create("head", PAGE), store.create("body", 8 * PAGE)
    with pagepilot.map_dataspaces(
        [head, body.attach(at=4 * PAGE, offset=2 * PAGE, len=4 * PAGE)], budget="16K"
    ) as r:
        assert len(r) == 8 * PAGE
        m = memoryview(r)
        m[0] = 1
        m[4 * PAGE] = 2  # body's page 2
        m[2 * PAGE] = 9  # between attachments: zero, never stored
        m.release()
    assert file_bytes(tmp_path / "head.pages")[0] == 1
    body_bytes = file_bytes(tmp_path / "body.pages")
    assert body_bytes[2 * PAGE] == 2 and body_bytes.sum() == 2
    a = body.attach(at="16K", read_only=True)
    assert (a.at, a.offset, a.len, a.read_only) == (4 * PAGE, 0, None, True)
    with pagepilot.map_dataspaces([a], budget="16K") as r:
        assert not r.writable
        assert memoryview(r)[6 * PAGE] == 2
