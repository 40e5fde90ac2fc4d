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

Regions of dataspaces (SawMill's model): managers make dataspaces
(:class:`PersistentManager`, :class:`CompressedManager`,
:class:`LazyCopyManager`, :class:`FarManager` on Redis, ...), stack them
(``Dataspace.transfer``), and :func:`map_dataspaces` attaches them::

    store = pagepilot.PersistentManager("/data/ds")
    ds = store.create("matrix", "64MB")
    tier = ds.transfer(pagepilot.CompressedManager("16MB"))  # compressed over persistent
    with pagepilot.map_dataspaces([tier], budget="4MB") as r:
        r.array(numpy.float64)[:] = 1.0

Regions pin pages (``Region.pin``) and report evictions
(``Region.subscribe_evictions``, ``Region.drain_evictions``);
:func:`simulate_global` and :func:`simulate_pooled` simulate several traces
as processes (``pagepilot sim --global [--pool]``).

Errors raise subclasses of :class:`PagepilotError` (:class:`MapError`,
:class:`FlushError`, :class:`ClosedError`, :class:`PolicyError`,
:class:`PoolError`, :class:`DaemonError`, :class:`TraceError`,
:class:`SimulationError`, :class:`DataspaceError`, :class:`PinError`) with
the C API's messages; bad sizes raise ``ValueError``, arguments of the wrong
type ``TypeError``.

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
from typing import Any as _Any
from typing import Literal as _Literal
from typing import overload as _overload

from . import _pagepilot
from ._pagepilot import (
    PAGE_SIZE,
    AnonymousManager,
    Attachment,
    ClosedError,
    Client,
    CompressedManager,
    DaemonError,
    Dataspace,
    DataspaceError,
    Eviction,
    FarManager,
    FileManager,
    FlushError,
    LazyCopyManager,
    Manager,
    MapError,
    PagepilotError,
    PersistentManager,
    PinError,
    PinnedManager,
    Policy,
    Pool,
    PolicyError,
    PoolError,
    Region,
    SimulationError,
    TraceError,
    connect,
    map_anon,
    map_dataspaces,
    map_file,
    parse_size,
)
from ._pagepilot import __version__ as __version__  # re-exported (PEP 484)

if _TYPE_CHECKING:
    # Types only (`_pagepilot.pyi`); pandas is optional, and typed only with
    # pandas-stubs installed (otherwise a DataFrame is `Any` to mypy).
    import pandas as _pandas

    from collections.abc import Sequence as _Sequence

    from ._pagepilot import _Frames, _Policies, _PolicyArg, _Record, _Size, _Trace

__all__ = [
    "PAGE_SIZE",
    "AnonymousManager",
    "Attachment",
    "ClosedError",
    "Client",
    "CompressedManager",
    "DaemonError",
    "Dataspace",
    "DataspaceError",
    "Eviction",
    "FarManager",
    "FileManager",
    "FlushError",
    "LazyCopyManager",
    "Manager",
    "MapError",
    "PagepilotError",
    "PersistentManager",
    "PinError",
    "PinnedManager",
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
    "map_dataspaces",
    "map_file",
    "parse_size",
    "simulate",
    "simulate_global",
    "simulate_pooled",
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


def simulate_global(
    traces: _Sequence[_Trace],
    policies: _Policies = ("lru", "fifo", "clock"),
    frames: _Frames = "auto",
    *,
    names: _Sequence[str] | None = None,
    quantum: int = 1_000_000,
    service: int = 400_000,
    trace_format: str | None = None,
    page_size: _Size | None = None,
    instructions: bool = False,
    collapse: bool = False,
) -> Records:
    """Multiprogrammed simulation under one global policy (``pagepilot sim
    --global``).

    The ``traces`` (each a path or page numbers, as in :func:`simulate`) run
    round-robin as processes, ``quantum`` references a turn; a missing
    fault blocks its process for ``service`` reference times while another
    runs, and one policy chooses among the pages of all of them. Returns
    :class:`Records`: for each policy and size, one record for the whole
    run (``process`` ``"all"``, with ``elapsed``) and one per process
    (``process``: its name in ``names``, else its path, else its index),
    with the counts ``pagepilot sim --global --format json`` prints.
    OPT is refused (the interleaving depends on the faults).
    """
    rows = _pagepilot._simulate_global(
        traces,
        policies,
        frames,
        names=None if names is None else list(names),
        quantum=quantum,
        service=service,
        trace_format=trace_format,
        page_size=page_size,
        instructions=instructions,
        collapse=collapse,
    )
    return Records(rows)


def simulate_pooled(
    traces: _Sequence[_Trace],
    pool: int,
    policies: _PolicyArg | _Sequence[_PolicyArg] | None = None,
    *,
    names: _Sequence[str] | None = None,
    min_frames: int | _Sequence[int] | None = None,
    partition_burst: int | None = None,
    reclaim_deadline: int | None = None,
    readahead_frames: int | _Sequence[int] | None = None,
    fault_limit: int | _Sequence[int] | None = None,
    fault_period: int | None = None,
    system_period: int | None = None,
    fault_unit: int = 1,
    reserve: float | _Sequence[float] | None = None,
    sample_every: int | None = None,
    quantum: int = 1_000_000,
    service: int = 400_000,
    trace_format: str | None = None,
    page_size: _Size | None = None,
    instructions: bool = False,
    collapse: bool = False,
) -> dict[str, _Any]:
    """Processes with their own policies in one frame pool (``pagepilot sim
    --global --pool FRAMES``).

    Each trace is a process with its own policy (``policies``: one for all
    or one per trace; default ``"clock"``) and ``min_frames`` guaranteed
    (default equal shares of the pool), drawing the frames above from a
    pool of ``pool`` frames (HiPEC's global frame manager:
    ``partition_burst``, ``reclaim_deadline``), optionally under RAPHA's
    fault limits (``fault_limit`` per ``fault_period``, ``system_period``,
    ``fault_unit``, ``reserve`` in percent). Lists take one value per trace
    or one for all, as the CLI's. Returns the run's report, the dict
    ``pagepilot sim --global --pool --format json`` prints: ``processes``
    (each with ``references``, ``faults``, ``evictions``, ``held_max``,
    ``requested``, ``granted``, ...), ``elapsed``, ``idle``, ``samples``.
    """
    def each(v: _Any) -> _Any:
        return v if v is None or isinstance(v, (int, float)) else list(v)

    run: dict[str, _Any] = _pagepilot._simulate_pooled(
        traces,
        pool,
        policies,
        names=None if names is None else list(names),
        min_frames=each(min_frames),
        partition_burst=partition_burst,
        reclaim_deadline=reclaim_deadline,
        readahead_frames=each(readahead_frames),
        fault_limit=each(fault_limit),
        fault_period=fault_period,
        system_period=system_period,
        fault_unit=fault_unit,
        reserve=each(reserve),
        sample_every=sample_every,
        quantum=quantum,
        service=service,
        trace_format=trace_format,
        page_size=page_size,
        instructions=instructions,
        collapse=collapse,
    )
    return run
