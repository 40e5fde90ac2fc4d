"""Type stubs of the extension module ``pagepilot._pagepilot`` (the crate
``crates/python``), PEP 561: shipped in the wheel beside ``py.typed``.

Every name the module defines at run time has an entry here, and every
method, property and parameter name matches the runtime's:
``python/tests/test_typing.py`` compares them (a name added to the crate
without a stub fails the tests). The classes' ``__module__`` is
``pagepilot``: the package re-exports them (``pagepilot/__init__.py``).
"""

import os
import pathlib
from collections.abc import Callable, Iterable, Sequence
from typing import (
    Any,
    Final,
    Literal,
    Self,
    SupportsIndex,
    TypeAlias,
    TypeVar,
    final,
    overload,
)

import numpy
import numpy.typing as npt
from typing_extensions import disjoint_base

# A size: an int (or anything with ``__index__``, numpy integers included),
# or a string with a unit ("40MB", "4 KiB", "1.5G"; every unit a power of
# 1024).
_Size: TypeAlias = SupportsIndex | str
# A path: str, bytes or os.PathLike.
_Path: TypeAlias = str | bytes | os.PathLike[str] | os.PathLike[bytes]
# A policy: a built-in name or spec ("mru", "seq:L=20,M=20"), a policy
# program's path, or a checked `Policy`.
_PolicyArg: TypeAlias = str | os.PathLike[str] | os.PathLike[bytes] | Policy
# The policies of `simulate`: one, or several.
_Policies: TypeAlias = _PolicyArg | Iterable[_PolicyArg]
# Memory sizes in frames: one, several, or "auto" (20 sizes up to the
# trace's footprint).
_Frames: TypeAlias = SupportsIndex | Iterable[SupportsIndex] | Literal["auto"]
# A trace: a file in any format the CLI reads, or page numbers (a
# one-dimensional numpy array of non-negative integers, a list).
_Trace: TypeAlias = _Path | Sequence[SupportsIndex] | npt.NDArray[numpy.integer[Any]]
# One result record of the simulator (a dict of the JSON `pagepilot sim`
# prints: str, int and float values).
_Record: TypeAlias = dict[str, Any]
# A shape of `Region.array`.
_Shape: TypeAlias = SupportsIndex | tuple[SupportsIndex, ...]
_Order: TypeAlias = Literal["C", "F", "A"]
# A dataspace's id as its manager names it: a name (persistent, far), a
# path (file) or a number (anonymous, compressed, lazy copy, pinned).
_DataspaceId: TypeAlias = str | int | pathlib.Path
# A dataspace argument: a handle, or its id in its manager's form.
_DataspaceArg: TypeAlias = Dataspace | str | int | os.PathLike[str]
# A value per process of `_simulate_pooled`: one for all, or one each.
_PerTrace: TypeAlias = int | list[int]
_ScalarT = TypeVar("_ScalarT", bound=numpy.generic)

# As PyO3 sets it: every name the module adds.
__all__ = [
    "PagepilotError",
    "MapError",
    "FlushError",
    "ClosedError",
    "PolicyError",
    "PoolError",
    "DaemonError",
    "TraceError",
    "SimulationError",
    "DataspaceError",
    "PinError",
    "Region",
    "Pool",
    "Client",
    "Policy",
    "Manager",
    "PersistentManager",
    "CompressedManager",
    "LazyCopyManager",
    "AnonymousManager",
    "FileManager",
    "PinnedManager",
    "FarManager",
    "Dataspace",
    "Attachment",
    "Eviction",
    "map_file",
    "map_anon",
    "map_dataspaces",
    "_remap",
    "_open_shared",
    "connect",
    "_simulate",
    "_curve",
    "_simulate_global",
    "_simulate_pooled",
    "parse_size",
    "PAGE_SIZE",
    "__version__",
]

PAGE_SIZE: Final[int]
"""The page size in bytes (4096)."""
__version__: Final[str]

class PagepilotError(Exception):
    """Base class of every error pagepilot raises."""

class MapError(PagepilotError):
    """A region could not be mapped; nothing was mapped."""

    errno: int
    """The system's errno when it said why, EINVAL for a bad argument."""

class FlushError(PagepilotError):
    """Dirty pages could not be written back; they stay in memory and dirty."""

    errno: int
    pages: list[tuple[int, int]]
    """(page, errno) of each page that failed."""

class ClosedError(PagepilotError):
    """The region (or pool) was closed: it cannot be used any more."""

class PolicyError(PagepilotError):
    """A policy program that does not compile or that the checker rejects."""

    line: int | None
    """The line of a syntax error (None for the checker's)."""
    column: int | None

class PoolError(PagepilotError):
    """A frame pool could not be made."""

class DaemonError(PagepilotError):
    """The pagepilot daemon could not be reached or refused."""

    errno: int
    """As the C API's ``pp_connect``: ENOENT or ECONNREFUSED when no daemon
    listens."""

class TraceError(PagepilotError):
    """A trace could not be read."""

class SimulationError(PagepilotError):
    """The simulator refused its arguments (unknown policy, no frames)."""

class DataspaceError(PagepilotError):
    """A dataspace manager refused an operation; nothing changed."""

    errno: int
    """ENOENT (no such dataspace), EEXIST, EBUSY (open or mapped), ENOTSUP
    (not offered by the manager), ELOOP (a stacking cycle), EDQUOT (a
    pinned manager's quota), EINVAL (a bad name), the system's otherwise."""
    manager: str
    """The manager's name ("persistent", "compressed", "redis", ...)."""

class PinError(PagepilotError):
    """Pages could not be pinned or unpinned; nothing changed."""

    errno: int
    """EINVAL (outside the region, or not pinned), ENOMEM (past the budget
    less one frame), EIO (unreadable), EDQUOT (the daemon's pin quota)."""

@final
class Region:
    """A mapped region (from `map_file` or `map_anon`): its memory through
    the buffer protocol, paged under a frame budget by a policy."""

    def __len__(self) -> int: ...
    # The buffer protocol (PEP 688): `memoryview(region)`,
    # `numpy.frombuffer(region)`. Python 3.11's classes have the C slots
    # but not these attributes; 3.12 adds them.
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __release_buffer__(self, buffer: memoryview, /) -> None: ...
    @property
    def address(self) -> int:
        """The address of the region's first byte."""
    @property
    def writable(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> pathlib.Path | None:
        """The backing file (None for anonymous memory)."""
    @property
    def policy(self) -> str: ...
    @property
    def exports(self) -> int:
        """Buffer views of the region not released yet."""
    def flush(self) -> None: ...
    def invalidate(self) -> None: ...
    def prefault(self, offset: _Size, length: _Size, write: bool = False) -> None: ...
    def set_budget(self, budget: _Size) -> None: ...
    def stats(self) -> dict[str, Any]: ...
    def pin(self, offset: _Size, length: _Size) -> None:
        """Pins the pages of the range: in memory, never evicted until unpinned."""
    def unpin(self, offset: _Size, length: _Size) -> None: ...
    def subscribe_evictions(self, capacity: int = 4096) -> None:
        """Queues an `Eviction` for every page evicted from now on (0: off)."""
    def drain_evictions(self, max: int | None = None) -> list[Eviction]: ...
    @overload
    def array(
        self,
        dtype: None = None,
        shape: _Shape | None = None,
        offset: _Size | None = None,
        order: _Order = "C",
    ) -> npt.NDArray[numpy.uint8]: ...
    @overload
    def array(
        self,
        dtype: type[_ScalarT] | numpy.dtype[_ScalarT],
        shape: _Shape | None = None,
        offset: _Size | None = None,
        order: _Order = "C",
    ) -> npt.NDArray[_ScalarT]: ...
    @overload
    def array(
        self,
        dtype: npt.DTypeLike,
        shape: _Shape | None = None,
        offset: _Size | None = None,
        order: _Order = "C",
    ) -> npt.NDArray[Any]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *_exc: object) -> Literal[False]: ...
    def __reduce__(self) -> tuple[Callable[..., Region], tuple[Any, ...]]: ...

@final
class Pool:
    """Frames shared by the regions mapped with ``pool=``."""

    def __new__(
        cls,
        budget: _Size,
        partition_burst: _Size | None = None,
        deadline_ms: float | None = None,
    ) -> Self: ...
    def stats(self) -> dict[str, Any]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *_exc: object) -> Literal[False]: ...

@final
class Client:
    """A connection to the pagepilot daemon (from `connect`)."""

    @property
    def path(self) -> pathlib.Path: ...
    @property
    def connected(self) -> bool: ...
    @property
    def messages_sent(self) -> int: ...

@final
class Policy:
    """A checked policy program, usable wherever a policy name is."""

    @staticmethod
    def compile(source: str, name: str = "program") -> Policy: ...
    @staticmethod
    def assemble(text: str, name: str = "program") -> Policy: ...
    @staticmethod
    def load(path: _Path) -> Policy: ...
    @property
    def name(self) -> str: ...
    @property
    def spec(self) -> str: ...
    @property
    def events(self) -> list[tuple[str, int]]:
        """The program's events and their lengths: [("PageFault", 12), ...]."""
    def disassemble(self) -> str: ...
    def __reduce__(self) -> tuple[Callable[..., Policy], tuple[Any, ...]]: ...

@disjoint_base
class Manager:
    """A dataspace manager (made by a subclass, not constructed itself)."""

    @property
    def name(self) -> str:
        """"persistent", "compressed", "lazy-copy", "anonymous", "file",
        "pinned" or "redis"."""
    def dataspace(self, id: _DataspaceArg) -> Dataspace:
        """The existing dataspace `id`; `DataspaceError` (ENOENT) if none."""
    def delete(self, id: _DataspaceArg) -> None: ...
    def interrogate(self) -> dict[str, list[str]]:
        """{"operations": [...], "flavours": [...]}, lower-case names."""

@final
class PersistentManager(Manager):
    """Named dataspaces that outlive the process, in a directory."""

    def __new__(cls, dir: _Path | None = None) -> Self: ...
    @property
    def dir(self) -> pathlib.Path: ...
    def create(self, name: str, size: _Size) -> Dataspace: ...
    def names(self) -> list[str]:
        """The names of the directory's dataspaces, sorted."""

@final
class CompressedManager(Manager):
    """Compressed tiers in memory over lower dataspaces, sharing one budget."""

    def __new__(cls, budget: _Size, *, dir: _Path | None = None) -> Self: ...
    def create(self, size: _Size) -> Dataspace: ...
    @property
    def budget(self) -> int: ...

@final
class LazyCopyManager(Manager):
    """Lazy copies: unmodified pages read through to the source."""

    def __new__(cls, *, dir: _Path | None = None) -> Self: ...
    def copy(self, source: Dataspace) -> Dataspace: ...

@final
class AnonymousManager(Manager):
    """Zero-filled dataspaces in swap files; takes transferred dataspaces."""

    def __new__(cls, *, dir: _Path | None = None) -> Self: ...
    def create(self, size: _Size) -> Dataspace: ...

@final
class FileManager(Manager):
    """Files, by path."""

    def __new__(cls) -> Self: ...
    def create(self, path: _Path, size: _Size) -> Dataspace: ...

@final
class PinnedManager(Manager):
    """Pins the dataspaces transferred to it, up to `quota` bytes."""

    def __new__(cls, quota: _Size) -> Self: ...
    @property
    def quota(self) -> int: ...
    @property
    def pinned_bytes(self) -> int: ...

@final
class FarManager(Manager):
    """Far memory: named dataspaces whose pages live in Redis."""

    def __new__(
        cls,
        seeds: str | Sequence[str],
        *,
        window: int | None = None,
        replica_wait: tuple[int, float] | None = None,
        connections: int | None = None,
        retry_for: float | None = None,
        connect_timeout: float | None = None,
        response_timeout: float | None = None,
    ) -> Self: ...
    def create(
        self, name: str, size: _Size, *, replica_wait: tuple[int, float] | None = None
    ) -> Dataspace: ...
    @property
    def round_trips(self) -> int: ...
    @property
    def retries(self) -> int: ...
    def ping(self) -> float: ...

@final
class Dataspace:
    """A dataspace of a manager (from `create`, `dataspace`, `copy`,
    `transfer`)."""

    @property
    def manager(self) -> Manager: ...
    @property
    def id(self) -> _DataspaceId: ...
    @property
    def size(self) -> int: ...
    @property
    def stack(self) -> list[str]:
        """The managers it is served through, bottom first."""
    def transfer(self, to: Manager) -> Dataspace: ...
    def delete(self) -> None: ...
    def stats(self) -> dict[str, int]: ...
    def attach(
        self,
        *,
        at: _Size | None = None,
        offset: _Size | None = None,
        len: _Size | None = None,
        read_only: bool = False,
    ) -> Attachment: ...

@final
class Attachment:
    """A dataspace's bytes `offset..offset+len` at the region's byte `at`."""

    @property
    def dataspace(self) -> Dataspace: ...
    @property
    def at(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def len(self) -> int | None: ...
    @property
    def read_only(self) -> bool: ...

@final
class Eviction:
    """One page a region evicted."""

    @property
    def offset(self) -> int: ...
    @property
    def referenced(self) -> bool: ...
    @property
    def modified(self) -> bool: ...

def map_dataspaces(
    attachments: Iterable[Dataspace | Attachment],
    budget: _Size,
    policy: _PolicyArg | None = None,
    *,
    fault_around_pages: int = 0,
    readahead_max_pages: int = 0,
    handler_threads: int = 0,
    swap_dir: _Path | None = None,
    faulting_thread: bool = False,
    zero_around_max_pages: int = 0,
    pool: Pool | None = None,
    fault_limit: int = 0,
    fault_period_us: int = 0,
    min_frames: int = 0,
    cpu_reserve: float = 0.0,
    daemon: Client | bool | None = None,
) -> Region: ...
def map_file(
    path: _Path,
    budget: _Size,
    policy: _PolicyArg | None = None,
    writable: bool = False,
    *,
    len: _Size | None = None,
    fault_around_pages: int = 0,
    readahead_max_pages: int = 0,
    handler_threads: int = 0,
    swap_dir: _Path | None = None,
    faulting_thread: bool = False,
    zero_around_max_pages: int = 0,
    pool: Pool | None = None,
    fault_limit: int = 0,
    fault_period_us: int = 0,
    min_frames: int = 0,
    cpu_reserve: float = 0.0,
    daemon: Client | bool | None = None,
) -> Region: ...
def map_anon(
    size: _Size,
    budget: _Size,
    policy: _PolicyArg | None = None,
    *,
    fault_around_pages: int = 0,
    readahead_max_pages: int = 0,
    handler_threads: int = 0,
    swap_dir: _Path | None = None,
    faulting_thread: bool = False,
    zero_around_max_pages: int = 0,
    pool: Pool | None = None,
    fault_limit: int = 0,
    fault_period_us: int = 0,
    min_frames: int = 0,
    cpu_reserve: float = 0.0,
    daemon: Client | bool | None = None,
) -> Region: ...
def connect(path: _Path) -> Client: ...
def parse_size(size: _Size, what: str = "size") -> int: ...

# The package's own helpers (`pagepilot.simulate` and `pagepilot.curve`
# wrap the first two; unpickling calls the others).
def _simulate(
    trace: _Trace,
    policies: _Policies,
    frames: _Frames,
    trace_format: str | None = None,
    page_size: _Size | None = None,
    instructions: bool = False,
    collapse: bool = False,
) -> list[_Record]: ...
def _curve(
    trace: _Trace,
    policy: str,
    frames: _Frames | None = None,
    trace_format: str | None = None,
    page_size: _Size | None = None,
    instructions: bool = False,
    collapse: bool = False,
) -> list[_Record]: ...
def _simulate_global(
    traces: Sequence[_Trace],
    policies: _Policies,
    frames: _Frames,
    names: list[str] | None = None,
    quantum: int = 1_000_000,
    service: int = 400_000,
    trace_format: str | None = None,
    page_size: _Size | None = None,
    instructions: bool = False,
    collapse: bool = False,
) -> list[_Record]: ...
def _simulate_pooled(
    traces: Sequence[_Trace],
    pool: int,
    policies: _PolicyArg | Sequence[_PolicyArg] | None = None,
    names: list[str] | None = None,
    min_frames: _PerTrace | None = None,
    partition_burst: int | None = None,
    reclaim_deadline: int | None = None,
    readahead_frames: _PerTrace | None = None,
    fault_limit: _PerTrace | None = None,
    fault_period: int | None = None,
    system_period: int | None = None,
    fault_unit: int = 1,
    reserve: float | list[float] | None = None,
    sample_every: int | None = None,
    quantum: int = 1_000_000,
    service: int = 400_000,
    trace_format: str | None = None,
    page_size: _Size | None = None,
    instructions: bool = False,
    collapse: bool = False,
) -> dict[str, Any]: ...
def _remap(
    path: _Path,
    budget: _Size,
    policy: _PolicyArg,
    writable: bool,
    len: _Size | None = None,
) -> Region: ...
def _open_shared(
    path: _Path, len: int, writable: bool, lease: str, policy: str
) -> Region: ...
