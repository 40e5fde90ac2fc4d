#!/usr/bin/env python3
"""pagepilot's main API, with type annotations: `mypy --strict` checks this
file against the stubs the package ships (PEP 561: `py.typed` and
`_pagepilot.pyi`), and it runs (it makes its own data in a temporary
directory; the live pager needs /dev/userfaultfd).

    python3 examples/python/typed_example.py
    python3 -m mypy --strict examples/python/typed_example.py

`python/tests/test_typing.py` does both.
"""

from __future__ import annotations

import errno
import pathlib
import tempfile
from typing import Any

import numpy as np
import numpy.typing as npt

import pagepilot

MRU_SOURCE = """
queue loaded;
event PageFault() {
    if (free == 0) {
        victim = mru(loaded);
    }
    enqueue(loaded, fault);
}
event ReclaimFrame() {
    victim = mru(loaded);
}
"""


def write_floats(path: pathlib.Path, count: int) -> npt.NDArray[np.float64]:
    """Writes float64 values 0, 1, 2, ... to `path` and returns them."""
    values = np.arange(count, dtype=np.float64)
    values.tofile(path)
    return values


def scan_file(path: pathlib.Path, expected: npt.NDArray[np.float64]) -> float:
    """Sums a file of float64 through a region whose budget is a quarter of
    the file, paged by MRU: `array(np.float64)` is typed
    `NDArray[np.float64]`."""
    budget: int = pagepilot.parse_size("256K")
    with pagepilot.map_file(path, budget=budget, policy="mru") as region:
        assert not region.writable and region.path == path
        a: npt.NDArray[np.float64] = region.array(np.float64)
        total = float(a.sum())
        assert total == float(expected.sum())
        first: memoryview = memoryview(region)[:8]  # the buffer protocol
        assert bytes(first) == expected[:1].tobytes()
        first.release()
        del a
        stats: dict[str, Any] = region.stats()
        assert stats["bytes_read"] >= expected.nbytes  # read past the page cache
    assert region.closed
    return total


def write_through(path: pathlib.Path) -> None:
    """Writes a page through a writable region and flushes it to the file."""
    with pagepilot.map_file(path, "64K", "clock", writable=True) as region:
        page: npt.NDArray[np.uint8] = region.array(shape=pagepilot.PAGE_SIZE)
        page[:] = 7
        region.flush()
    assert path.read_bytes()[: pagepilot.PAGE_SIZE] == bytes([7]) * pagepilot.PAGE_SIZE


def anonymous_in_a_pool() -> int:
    """Two anonymous regions drawing frames from one pool."""
    with pagepilot.Pool("128K") as pool:
        regions: list[pagepilot.Region] = [
            pagepilot.map_anon("1MB", "64K", "clock", pool=pool) for _ in range(2)
        ]
        for i, r in enumerate(regions):
            ints: npt.NDArray[np.int64] = r.array(np.int64, shape=(16, 8))
            ints[:, 0] = i + 1
            assert int(ints.sum()) == 16 * (i + 1)
            del ints
        frames: int = pool.stats()["total_frames"]
        for r in regions:
            r.close()
    return frames


def policy_program() -> pagepilot.Policy:
    """A policy program compiled and checked; a broken one says where."""
    mru = pagepilot.Policy.compile(MRU_SOURCE, name="mru-program")
    events: list[tuple[str, int]] = mru.events
    assert [name for name, _ in events] == ["PageFault", "ReclaimFrame"]
    try:
        pagepilot.Policy.compile("queue q;\nevent PageFault() {\n  victim = ;\n}\n")
    except pagepilot.PolicyError as e:
        line: int | None = e.line
        assert line == 3
    else:
        raise AssertionError("a syntax error compiled")
    return mru


def simulate(mru: pagepilot.Policy) -> list[tuple[str, int, int]]:
    """The simulator on page numbers: (policy, frames, faults) rows."""
    pages = np.tile(np.arange(64, dtype=np.uint64), 10)  # a cyclic scan
    rows: pagepilot.Records = pagepilot.simulate(
        pages, policies=["lru", mru, "opt"], frames=[32, 64]
    )
    out = [(str(r["policy"]), int(r["frames"]), int(r["faults"])) for r in rows]
    curve = pagepilot.curve(pages, "lru", frames=[32, 63, 64])
    assert [int(r["faults"]) for r in curve] == [640, 640, 64]
    return out


def errors(missing: pathlib.Path) -> None:
    """Failures raise typed exceptions carrying errno."""
    try:
        pagepilot.map_file(missing, "1MB")
    except pagepilot.MapError as e:
        code: int = e.errno
        assert code == errno.ENOENT
    else:
        raise AssertionError("a missing file was mapped")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = pathlib.Path(tmp) / "data.f64"
        expected = write_floats(data, 1 << 17)  # 1 MiB
        print(f"sum through a region: {scan_file(data, expected):.0f}")
        write_through(data)
        print(f"pool frames: {anonymous_in_a_pool()}")
        mru = policy_program()
        for policy, frames, faults in simulate(mru):
            print(f"{policy:>12} {frames:>3} frames: {faults} faults")
        errors(pathlib.Path(tmp) / "missing.bin")
    print("ok")


if __name__ == "__main__":
    main()
