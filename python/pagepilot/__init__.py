"""pagepilot: application-controlled virtual memory for Python.

Map a file (or anonymous memory) larger than your memory budget into a
*region* whose paging you control: a frame budget, a replacement policy
(built-in, or a checked policy program), and reads that bypass the kernel's
page cache. A region exports its memory through the buffer protocol, so
numpy views it without copying::

    import numpy, pagepilot
    with pagepilot.map_file("data.f64", budget="40MB", policy="mru") as r:
        a = r.array(numpy.float64)          # like numpy.memmap, paged by pagepilot
        total = a.sum()

The simulator evaluates the same policies offline on a trace::

    rows = pagepilot.simulate("trace.txt", policies=["lru", "seq", "opt"], frames=[512, 1024])
    rows.dataframe()                         # a pandas DataFrame, when pandas is installed

Errors raise subclasses of :class:`PagepilotError` (:class:`MapError`,
:class:`FlushError`, :class:`ClosedError`, :class:`PolicyError`,
:class:`PoolError`, :class:`DaemonError`, :class:`TraceError`,
:class:`SimulationError`) with the C API's messages; bad sizes raise
``ValueError``, arguments of the wrong type ``TypeError``.

A closed region's object raises :class:`ClosedError`; views exported before
``close()`` (numpy arrays, memoryviews) keep the memory mapped until they are
released, and the region is unmapped then (see ``docs/python.md``).

Worker processes share a writable file region as they would a ``MAP_SHARED``
mapping: a child after ``fork``, or a ``spawn``/``forkserver`` worker the
region was passed to (pickled), sees the parent's stores and the parent its
stores, with no flush; the parent pages the region again once they are
gone. A read-only region is mapped again, paged, in the worker; an anonymous
one cannot be pickled.

The package is typed (PEP 561: ``py.typed`` and the extension's stubs,
``_pagepilot.pyi``): ``mypy --strict`` checks code that uses it, e.g.
``region.array(numpy.float64)`` is an ``NDArray[float64]``. See
``python/README.md``, "Types".
"""

# Every helper is imported under a private name: the namespace holds the
# API (`__all__`) and nothing else (python/tests/test_typing.py checks).
from __future__ import annotations as _annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Literal as _Literal
from typing import overload as _overload

from . import _pagepilot
from ._pagepilot import (
    PAGE_SIZE,
    ClosedError,
    Client,
    DaemonError,
    FlushError,
    MapError,
    PagepilotError,
    Policy,
    Pool,
    PolicyError,
    PoolError,
    Region,
    SimulationError,
    TraceError,
    connect,
    map_anon,
    map_file,
    parse_size,
)
from ._pagepilot import __version__ as __version__  # re-exported (PEP 484)

if _TYPE_CHECKING:
    # Types only (`_pagepilot.pyi`); pandas is optional, and typed only with
    # pandas-stubs installed (otherwise a DataFrame is `Any` to mypy).
    import pandas as _pandas

    from ._pagepilot import _Frames, _Policies, _Record, _Size, _Trace

__all__ = [
    "PAGE_SIZE",
    "ClosedError",
    "Client",
    "DaemonError",
    "FlushError",
    "MapError",
    "PagepilotError",
    "Policy",
    "PolicyError",
    "Pool",
    "PoolError",
    "Region",
    "Records",
    "SimulationError",
    "TraceError",
    "connect",
    "curve",
    "map_anon",
    "map_file",
    "parse_size",
    "simulate",
]


class Records(list["_Record"]):
    """A list of result records (dicts), one per (policy, memory size).

    ``dataframe()`` converts them to a pandas DataFrame (pandas is optional:
    ``ImportError`` says so when it is missing).
    """

    def dataframe(self) -> _pandas.DataFrame:
        """The records as a ``pandas.DataFrame``, one row per record."""
        try:
            import pandas
        except ImportError as e:  # pragma: no cover - depends on the machine
            raise ImportError(
                "Records.dataframe() needs pandas: pip install pandas"
            ) from e
        return pandas.DataFrame(list(self))


def _maybe_frame(
    records: Records, dataframe: bool | None
) -> Records | _pandas.DataFrame:
    if dataframe is None or dataframe is False:
        return records
    return records.dataframe()


@_overload
def simulate(
    trace: _Trace,
    policies: _Policies = ...,
    frames: _Frames = ...,
    *,
    trace_format: str | None = ...,
    page_size: _Size | None = ...,
    instructions: bool = ...,
    collapse: bool = ...,
    dataframe: _Literal[False] | None = ...,
) -> Records: ...
@_overload
def simulate(
    trace: _Trace,
    policies: _Policies = ...,
    frames: _Frames = ...,
    *,
    trace_format: str | None = ...,
    page_size: _Size | None = ...,
    instructions: bool = ...,
    collapse: bool = ...,
    dataframe: _Literal[True],
) -> _pandas.DataFrame: ...
@_overload
def simulate(
    trace: _Trace,
    policies: _Policies = ...,
    frames: _Frames = ...,
    *,
    trace_format: str | None = ...,
    page_size: _Size | None = ...,
    instructions: bool = ...,
    collapse: bool = ...,
    dataframe: bool | None = ...,
) -> Records | _pandas.DataFrame: ...


def simulate(
    trace: _Trace,
    policies: _Policies = ("lru", "seq", "opt"),
    frames: _Frames = "auto",
    *,
    trace_format: str | None = None,
    page_size: _Size | None = None,
    instructions: bool = False,
    collapse: bool = False,
    dataframe: bool | None = None,
) -> Records | _pandas.DataFrame:
    """Simulate policies over a page-reference trace (``pagepilot sim``).

    ``trace``: a path to a trace in any format the CLI reads (text, lackey,
    binary, oracle-general, lcs-txt, ``.zst`` compressed; ``trace_format``,
    ``page_size``, ``instructions`` and ``collapse`` as the CLI's ``--from``,
    ``--page-size``, ``--instructions`` and ``--collapse``), or a sequence of
    page numbers (a numpy array of non-negative integers, a list).

    ``policies``: names or specs (``"lru"``, ``"seq:L=20,M=20"``,
    ``"clock"``, ``"opt"``), program paths, or :class:`Policy` objects.
    ``frames``: memory sizes in frames, or ``"auto"`` (20 sizes up to the
    footprint).

    Returns :class:`Records`: one dict per (policy, size) with ``policy``,
    ``frames``, ``references``, ``faults`` (first touches included),
    ``cold_faults``, ``minor_faults``, ``faults_per_million`` and
    ``mean_inter_fault`` -- the numbers ``pagepilot sim --format json``
    prints. ``dataframe=True`` returns a pandas DataFrame instead. The GIL is
    released while the simulator runs (on every core).
    """
    rows = _pagepilot._simulate(
        trace,
        policies,
        frames,
        trace_format=trace_format,
        page_size=page_size,
        instructions=instructions,
        collapse=collapse,
    )
    return _maybe_frame(Records(rows), dataframe)


@_overload
def curve(
    trace: _Trace,
    policy: _Literal["lru", "opt"] = ...,
    frames: _Frames | None = ...,
    *,
    trace_format: str | None = ...,
    page_size: _Size | None = ...,
    instructions: bool = ...,
    collapse: bool = ...,
    dataframe: _Literal[False] | None = ...,
) -> Records: ...
@_overload
def curve(
    trace: _Trace,
    policy: _Literal["lru", "opt"] = ...,
    frames: _Frames | None = ...,
    *,
    trace_format: str | None = ...,
    page_size: _Size | None = ...,
    instructions: bool = ...,
    collapse: bool = ...,
    dataframe: _Literal[True],
) -> _pandas.DataFrame: ...
@_overload
def curve(
    trace: _Trace,
    policy: _Literal["lru", "opt"] = ...,
    frames: _Frames | None = ...,
    *,
    trace_format: str | None = ...,
    page_size: _Size | None = ...,
    instructions: bool = ...,
    collapse: bool = ...,
    dataframe: bool | None = ...,
) -> Records | _pandas.DataFrame: ...


def curve(
    trace: _Trace,
    policy: _Literal["lru", "opt"] = "lru",
    frames: _Frames | None = None,
    *,
    trace_format: str | None = None,
    page_size: _Size | None = None,
    instructions: bool = False,
    collapse: bool = False,
    dataframe: bool | None = None,
) -> Records | _pandas.DataFrame:
    """The whole fault curve of ``"lru"`` or ``"opt"`` in one pass.

    Both are stack algorithms: one pass over the trace gives the fault count
    at every memory size. Returns :class:`Records` with ``frames``,
    ``references``, ``faults``, ``cold_faults``, ``evictions`` and
    ``faults_per_million`` for each size in ``frames`` (default: every size
    from 1 frame to the trace's footprint). ``trace`` as in :func:`simulate`.
    """
    rows = _pagepilot._curve(
        trace,
        policy,
        frames,
        trace_format=trace_format,
        page_size=page_size,
        instructions=instructions,
        collapse=collapse,
    )
    return _maybe_frame(Records(rows), dataframe)
