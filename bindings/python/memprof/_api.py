# SPDX-License-Identifier: MIT
"""The Python API of libmemprof (doc/architecture.md, Decisions, says what it follows).

start()/stop()/get_snapshot()/get_stats()/shutdown() and the MemoryProfiler context manager
drive the process-wide libmemprof engine through the C extension ``memprof._memprof``; the
dataclasses here (HeapSnapshot, AllocationSample, StackFrame, AllocatorSite, UnwindHealth,
MemProfStats, and for the views of libmemprof 1.2 PeakInfo, HeapPoint and ViewSite) are
plain Python views of a snapshot and of the engine statistics.

Lifecycle: the engine is initialised by the first start() with its sampling rate, which then
holds for the life of the process; stop() pauses sampling (frees stay tracked) and a later
start() resumes; shutdown() is one-way. Estimates are plain ints (doc/architecture.md, Decisions) with their 95 %
intervals in separate ``*_low``/``*_high`` attributes.
"""

from __future__ import annotations

import array
import bisect
import gc
import os
import site
import sysconfig
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _memprof as _c

__all__ = [
    "AllocationSample",
    "AllocatorSite",
    "BlockSite",
    "FORMATS",
    "FramePointerHealth",
    "HeapPoint",
    "HeapSnapshot",
    "MemProfStats",
    "MemoryProfiler",
    "PeakInfo",
    "SiteDiff",
    "StackFrame",
    "UnwindHealth",
    "VIEWS",
    "ViewSite",
    "get_snapshot",
    "get_stats",
    "set_temporary_threshold",
    "shutdown",
    "start",
    "stop",
]

#: Output formats accepted by HeapSnapshot.save(), by name (doc/architecture.md, Decisions:
#: Format names): the library's own table (memprof_format_name()).
FORMATS: Dict[str, int] = dict(_c.FORMATS)

#: The file extension profiles of each format are written with (memprof_format_extension()).
EXTENSIONS: Dict[str, str] = dict(_c.EXTENSIONS)

#: The views HeapSnapshot.sites() ranks call sites by (memprof.h's memprof_view): live now,
#: allocated since sampling began, live at the peak, allocated and freed within the temporary
#: threshold, and the survivors of leak suspects.
VIEWS: Dict[str, int] = {
    "live": _c.VIEW_LIVE,
    "alloc": _c.VIEW_ALLOC,
    "peak": _c.VIEW_PEAK,
    "temporary": _c.VIEW_TEMPORARY,
    "leaks": _c.VIEW_LEAKS,
}

DEFAULT_SAMPLING_RATE_KB = _c.DEFAULT_SAMPLING_RATE // 1024
_MAX_RATE_BYTES = _c.MAX_RATE_BYTES

_STATES = {
    _c.STATE_UNINITIALIZED: "uninitialized",
    _c.STATE_INITIALIZED: "initialized",
    _c.STATE_ACTIVE: "active",
    _c.STATE_STOPPED: "stopped",
    _c.STATE_SHUTDOWN: "shutdown",
}
_UNWINDERS = {_c.UNWIND_FP: "fp", _c.UNWIND_DWARF: "dwarf"}


_lock = threading.RLock()  # serializes the lifecycle calls of Python threads


# ---- frames and samples ------------------------------------------------------------------


@dataclass(frozen=True)
class StackFrame:
    """One frame of an allocation's call stack.

    ``is_python`` frames come from the interpreter (function is the code object's qualified
    name, filename/lineno the source position) and stand in place of CPython's eval loop;
    the others are native frames (``module`` is the path of the shared object, ``address``
    the return address).
    """

    function: str
    filename: Optional[str]
    lineno: int
    module: Optional[str] = None
    is_python: bool = False
    inlined: bool = False
    address: int = 0
    unresolved: bool = False
    truncated: bool = False

    @property
    def file(self) -> Optional[str]:
        """Alias of ``filename`` (the spec's name)."""
        return self.filename

    @property
    def line(self) -> int:
        """Alias of ``lineno`` (the spec's name)."""
        return self.lineno

    @property
    def is_runtime(self) -> bool:
        """Alias of ``is_python``: an interpreter frame from the frame source."""
        return self.is_python

    def __str__(self) -> str:
        where = f" ({self.filename}:{self.lineno})" if self.filename else ""
        return f"{self.function}{where}"


@dataclass(frozen=True)
class AllocationSample:
    """A sampled allocation that was still live when the snapshot was taken."""

    size: int  #: exact size of the sampled allocation, in bytes
    estimated_bytes: int  #: bytes it stands for: size / p(size)
    estimated_count: float  #: allocations it stands for: 1 / p(size)
    timestamp_ns: int  #: CLOCK_MONOTONIC time of the allocation (time.monotonic_ns())
    stack_id: int
    stack: List[StackFrame] = field(repr=False)
    gc_epoch: Optional[int] = None  #: GC cycles started before it (gc_tracking), else None

    @property
    def weight(self) -> float:
        """How many allocations this sample represents (the inverse sampling probability)."""
        return self.estimated_count


@dataclass(frozen=True)
class UnwindHealth:
    """How well native stacks were captured (the spec's FramePointerHealth).

    Python frames come from the interpreter, not from unwinding; these numbers are about the
    native part of the stacks (C extensions, the interpreter, libc).
    """

    unwinder: str  #: "dwarf" or "fp"
    total_native_stacks: int  #: samples taken
    shallow_stacks: int  #: samples with fewer than 4 native frames
    truncated_stacks: int  #: samples cut at the maximum depth or where unwinding stopped
    avg_native_depth: float
    min_native_depth: int
    unwind_confidence: float  #: share of samples neither shallow nor truncated (0..1)

    @property
    def shallow_stack_warnings(self) -> int:
        """The spec's name of ``shallow_stacks``."""
        return self.shallow_stacks

    @property
    def truncation_rate(self) -> float:
        """Share of samples whose native stack is shallow or truncated."""
        return 1.0 - self.unwind_confidence if self.total_native_stacks else 0.0

    @property
    def confidence(self) -> str:
        """'high' (under 5 % bad stacks), 'medium' (under 20 %) or 'low'."""
        rate = self.truncation_rate
        return "high" if rate < 0.05 else "medium" if rate < 0.20 else "low"

    @property
    def recommendation(self) -> Optional[str]:
        """What to do when the confidence is not high, else None."""
        if self.confidence == "high":
            return None
        if self.truncated_stacks >= self.shallow_stacks:
            what = "cut at the maximum depth"
            hint = "start(max_frames=...) or --max-frames raises it (up to 256)"
        elif self.unwinder == "fp":
            what = "shallow"
            hint = 'start(unwind="dwarf") walks code without frame pointers'
        else:
            what = "shallow"
            hint = "rebuild the C extensions involved with unwind tables"
        return (
            f"{self.truncation_rate:.1%} of the native stacks are shallow or truncated, "
            f"mostly {what}; {hint}"
        )


#: The spec's name.
FramePointerHealth = UnwindHealth


class _ReadableAsDict:
    """Lets a dataclass be read as a dict too (``site["function"]``, ``site.get("file")``,
    ``dict(site)``), as in the spec's examples of top_allocators()."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default) if key in self.__dataclass_fields__ else default

    def keys(self) -> List[str]:
        return list(self.__dataclass_fields__)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AllocatorSite(_ReadableAsDict):
    """An allocation site of HeapSnapshot.top_allocators(): every live sample attributed to
    the same function, file and line, with the combined estimate.

    The site of a stack is its innermost Python frame in the program's own code (not in the
    standard library or installed packages: a numpy array is attributed to the line of
    your code that made it, not to numpy's ``ones``); with ``user_code=False``, or when every
    Python frame is library code, its innermost Python frame; for a stack without Python
    frames, its innermost native frame that is not an allocator entry point. It can be read as a dict too
    (``site["function"]``, ``site.get("file")``, ``dict(site)``), as in the spec's examples.
    """

    function: str
    file: Optional[str]
    line: int
    is_python: bool
    estimated_bytes: int  #: estimated live bytes
    estimated_bytes_low: int  #: 95 % interval of estimated_bytes
    estimated_bytes_high: int
    count: int  #: estimated live allocations
    samples: int  #: live samples behind the estimate
    allocated_bytes: int  #: estimated bytes ever allocated here while profiling
    allocated_count: int
    stack: List[StackFrame] = field(repr=False)  #: the heaviest stack of this site


@dataclass(frozen=True)
class ViewSite(_ReadableAsDict):
    """A call site as one view sees it (HeapSnapshot.sites()): one distinct call stack, with
    the view's own numbers.

    ``function``, ``file``, ``line`` and ``is_python`` name the frame the stack is attributed
    to, by the rule of AllocatorSite (the innermost Python frame in the program's own code,
    unless ``user_code=False``); unlike top_allocators(), stacks are not merged by that frame,
    because each has its own lifetimes and leak statistic. Estimates are plain ints with their
    95 % interval in ``bytes_low``/``bytes_high``; ``estimated_bytes`` & co. are aliases, so
    code written for AllocatorSite reads a ViewSite too.
    """

    view: str  #: the view that ranked it: live, alloc, peak, temporary or leaks
    function: str
    file: Optional[str]
    line: int
    is_python: bool
    bytes: int  #: the view's estimated bytes
    bytes_low: int  #: 95 % interval of bytes
    bytes_high: int
    count: int  #: the view's estimated allocations (0 in the leaks view)
    samples: int  #: samples behind the estimate
    #: median lifetime, in seconds, of the site's freed samples (the upper edge of its
    #: power-of-4 bucket); None when none was freed
    lifetime_p50: Optional[float]
    lifetime_p90: Optional[float]  #: 90th percentile of the same
    leak_rate: float  #: leaks view: estimated bytes per second leaked; 0.0 otherwise
    low_information: bool  #: few samples of small blocks: read bytes as an order of magnitude
    leak_suspect: bool  #: live samples allocated at a steady rate through the run
    stack_id: int
    stack: List[StackFrame] = field(repr=False)

    @property
    def estimated_bytes(self) -> int:
        """Alias of ``bytes`` (AllocatorSite's name)."""
        return self.bytes

    @property
    def estimated_bytes_low(self) -> int:
        return self.bytes_low

    @property
    def estimated_bytes_high(self) -> int:
        return self.bytes_high


@dataclass(frozen=True)
class SiteDiff(_ReadableAsDict):
    """One entry of HeapSnapshot.compare_to(): a site (or a file, or a whole stack, by the
    key asked for) and how it changed from the older snapshot to this one, in the shape of
    tracemalloc's StatisticDiff.

    ``size``/``count`` are this snapshot's estimated live bytes and allocations there,
    ``size_diff``/``count_diff`` their change since the older one (estimates both, so a
    difference within a site's interval is noise); ``allocated_bytes``/``allocated_count``
    are what was allocated there between the two snapshots, freed since or not.
    """

    function: Optional[str]  #: the site's function (None with key="filename")
    file: Optional[str]
    line: int  #: 0 with key="filename"
    is_python: bool
    size: int
    size_diff: int
    count: int
    count_diff: int
    allocated_bytes: int
    allocated_count: int
    stack: List[StackFrame] = field(repr=False)  #: the heaviest stack of the entry


@dataclass(frozen=True)
class BlockSite(_ReadableAsDict):
    """A site of what a MemoryProfiler block did (MemoryProfiler.top_allocators()): bytes the
    block allocated there, and of those the bytes still live when the block ended."""

    function: str
    file: Optional[str]
    line: int
    is_python: bool
    estimated_bytes: int  #: estimated bytes the block allocated here that were live at its end
    estimated_bytes_low: int  #: 95 % interval of estimated_bytes
    estimated_bytes_high: int
    count: int  #: estimated allocations of the block live at its end
    samples: int  #: live samples behind the estimate
    allocated_bytes: int  #: estimated bytes the block allocated here, freed or not
    allocated_count: int
    stack: List[StackFrame] = field(repr=False)  #: the heaviest stack of this site


@dataclass(frozen=True)
class PeakInfo:
    """The peak of the estimated live heap (HeapSnapshot.peak).

    The engine records the per-site picture whenever the estimate climbs more than 1/64
    above the last recorded peak, so ``bytes`` is within about 1.6 % of the highest estimate
    reached; when the snapshot's own live heap is larger, that is the peak. Times count from
    the first start() of the process.
    """

    bytes: int  #: estimated live bytes at the peak
    bytes_low: int  #: 95 % interval of bytes
    bytes_high: int
    count: int  #: estimated live allocations at the peak
    samples: int  #: live samples at the peak
    time_seconds: float  #: when the peak was reached
    duration_seconds: float  #: from the first start to the snapshot
    allocated_bytes: int  #: estimated bytes allocated from the first start on
    temporary_threshold_seconds: float  #: the threshold the temporary view used


class HeapPoint(NamedTuple):
    """One point of the heap over time (HeapSnapshot.series): a tuple ``(time_seconds,
    live_bytes, allocated_bytes)``."""

    time_seconds: float  #: since the first start()
    live_bytes: int  #: estimated live bytes then
    allocated_bytes: int  #: estimated bytes allocated up to then


def _interval(est: float, var: float) -> Tuple[int, int]:
    half = 1.959964 * (var if var > 0 else 0.0) ** 0.5
    return max(0, round(est - half)), max(0, round(est + half))


def _frame(t: tuple) -> StackFrame:
    function, filename, line, flags, module, address, load_bias = t
    runtime = bool(flags & _c.FRAME_RUNTIME)
    if function is None:  # as the writers label it: module+offset in the ELF file
        base = os.path.basename(module) if module else None
        function = f"{base}+{address - load_bias:#x}" if base else "[unknown]"
    return StackFrame(
        function=function,
        filename=filename,
        lineno=line,
        module=module,
        is_python=runtime,
        inlined=bool(flags & _c.FRAME_INLINED),
        address=address,
        unresolved=bool(flags & _c.FRAME_UNRESOLVED),
        truncated=bool(flags & _c.FRAME_TRUNCATED),
    )


def _library_dirs() -> Tuple[str, ...]:
    """Directories of installed Python code: the standard library and site packages."""
    dirs = set()
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            dirs.add(os.path.realpath(paths[key]))
    try:
        dirs.update(os.path.realpath(d) for d in site.getsitepackages())
        dirs.add(os.path.realpath(site.getusersitepackages()))
    except AttributeError:  # a virtualenv's old site.py
        pass
    dirs.add(os.path.dirname(os.path.realpath(__file__)))  # this package
    return tuple(d.rstrip(os.sep) + os.sep for d in dirs)


_LIBRARY_DIRS: Optional[Tuple[str, ...]] = None


def _is_library_file(filename: Optional[str]) -> bool:
    """Whether a Python frame's file is installed library code rather than the program's."""
    global _LIBRARY_DIRS
    if not filename:
        return True
    if filename.startswith("<frozen "):
        return True
    if filename.startswith("<"):  # <string>, <stdin>: code the program compiled itself
        return False
    if _LIBRARY_DIRS is None:
        _LIBRARY_DIRS = _library_dirs()
    path = os.path.realpath(filename)
    return path.startswith(_LIBRARY_DIRS) or any(
        part in ("site-packages", "dist-packages") for part in path.split(os.sep)
    )


def _site_frame(stack: Sequence[StackFrame], user_code: bool = True) -> Optional[StackFrame]:
    """The frame a stack is attributed to (see AllocatorSite)."""
    python = [f for f in stack if f.is_python]
    if user_code:
        for f in python:
            if not _is_library_file(f.filename):
                return f
    if python:
        return python[0]
    for f in stack:
        # Allocators and their wrappers never name a site: the library's list
        # (memprof_is_allocator_function(), MEMPROF_WRAPPERS included).
        if f.unresolved or (f.function and _c.is_allocator_function(f.function)):
            continue
        base = os.path.basename(f.module or "")
        if base.startswith(("libmemprof", "_memprof")):
            continue
        return f
    return stack[0] if stack else None


# ---- GC epochs (bindings/python/README.md) ---------------------------------------------------


class _GcEpochs:
    """Records the CLOCK_MONOTONIC time of every garbage collection start (gc.callbacks),
    so that a sample's GC epoch is the number of collections started before it. The times
    are kept in an array of 64-bit ints (8 bytes per collection)."""

    def __init__(self) -> None:
        self.starts = array.array("q")
        self.enabled = False

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.starts.append(time.monotonic_ns())

    def enable(self) -> None:
        if not self.enabled:
            gc.callbacks.append(self._callback)
            self.enabled = True

    def epoch_at(self, timestamp_ns: int) -> int:
        return bisect.bisect_left(self.starts, timestamp_ns)

    @property
    def current(self) -> int:
        return len(self.starts)


_gc_epochs = _GcEpochs()


# ---- snapshots -----------------------------------------------------------------------------


@dataclass
class HeapSnapshot:
    """The live sampled allocations at one moment, with estimates for the whole heap.

    ``estimated_heap_bytes`` estimates the live bytes allocated while profiling was active
    (malloc and friends, and Python's small-object allocator through the PyMem hooks), with
    its 95 % interval in ``estimated_heap_bytes_low``/``_high``; it is reliable from about
    100 live samples on (``low_confidence`` says when there are fewer).
    """

    samples: List[AllocationSample] = field(repr=False)
    total_samples: int  #: allocations sampled since the engine was initialised
    live_samples: int
    estimated_heap_bytes: int
    estimated_heap_bytes_low: int
    estimated_heap_bytes_high: int
    estimated_count: int  #: estimated live allocations
    estimated_count_low: int
    estimated_count_high: int
    low_confidence: bool  #: fewer than 100 live samples: treat the estimates as rough
    sampling_rate_bytes: int
    timestamp: float  #: time.time() when the snapshot was taken
    timestamp_ns: int  #: CLOCK_MONOTONIC time of the snapshot (comparable to samples')
    unwind_health: UnwindHealth
    gc_epochs_during_profile: Optional[int] = None  #: collections seen (gc_tracking), else None
    _handle: Any = field(default=None, repr=False, compare=False)
    _sites: List[tuple] = field(default_factory=list, repr=False, compare=False)
    _stacks: Dict[int, Tuple[StackFrame, ...]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _peak: Optional[PeakInfo] = field(default=None, repr=False, compare=False)
    _series: Optional[Tuple[HeapPoint, ...]] = field(default=None, repr=False, compare=False)

    @property
    def sampling_rate_kb(self) -> float:
        return self.sampling_rate_bytes / 1024

    @property
    def frame_pointer_health(self) -> UnwindHealth:
        """The spec's name of ``unwind_health``."""
        return self.unwind_health

    def stack(self, stack_id: int) -> List[StackFrame]:
        """The resolved frames of a stack id, leaf (allocating function) first."""
        cached = self._stacks.get(stack_id)
        if cached is None:
            cached = tuple(_frame(t) for t in self._handle.stack(stack_id))
            self._stacks[stack_id] = cached
        return list(cached)

    def _require_handle(self, what: str) -> Any:
        if self._handle is None:
            raise RuntimeError(f"{what}: this HeapSnapshot has no libmemprof snapshot behind it")
        return self._handle

    @property
    def peak(self) -> PeakInfo:
        """The peak of the estimated live heap since the first start() (PeakInfo)."""
        if self._peak is None:
            p = self._require_handle("peak").peak()
            self._peak = PeakInfo(
                bytes=p["bytes"],
                bytes_low=p["bytes_low"],
                bytes_high=p["bytes_high"],
                count=p["count"],
                samples=p["samples"],
                time_seconds=p["time_ns"] / 1e9,
                duration_seconds=p["duration_ns"] / 1e9,
                allocated_bytes=p["allocated_bytes"],
                temporary_threshold_seconds=p["temporary_threshold_ns"] / 1e9,
            )
        return self._peak

    @property
    def series(self) -> List[HeapPoint]:
        """The heap over time: HeapPoint tuples ``(time_seconds, live_bytes,
        allocated_bytes)``, oldest first, the last one the snapshot's own. At most about
        1,000 points however long the run: neighbours are merged as it grows, keeping the
        higher one, so the peak stays in the series."""
        if self._series is None:
            self._series = tuple(
                HeapPoint(t / 1e9, live, alloc)
                for t, live, alloc in self._require_handle("series").series()
            )
        return list(self._series)

    def sites(
        self, view: str = "live", n: Optional[int] = None, user_code: bool = True
    ) -> List[ViewSite]:
        """The call sites a view ranks, largest first, as ViewSite objects (one per distinct
        call stack).

        ``view`` is one of VIEWS: 'live' (live at the snapshot), 'alloc' (allocated since
        sampling began, freed or not), 'peak' (live at the peak, see ``peak``), 'temporary'
        (allocated and freed within the temporary threshold, set_temporary_threshold()) or
        'leaks' (the survivors of leak suspects: sites whose live samples were allocated at
        a steady rate through the run). Only sites with a non-zero value in the view are
        listed; ``n`` keeps the first n (None: all). ``user_code`` chooses the frame that
        names a site, as for top_allocators().

        Raises ValueError for an unknown view or a bad ``n``.
        """
        if not isinstance(view, str) or view not in VIEWS:
            raise ValueError(
                f"sites(view={view!r}): expected one of {', '.join(map(repr, VIEWS))}"
            )
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise ValueError(f"sites(n={n!r}): expected a non-negative int or None")
        raw = self._require_handle("sites").view_sites(VIEWS[view], -1 if n is None else n)
        out = []
        for sid, flags, b, lo, hi, count, samples, p50, p90, rate in raw:
            stack = self.stack(sid)
            top = _site_frame(stack, user_code)
            out.append(
                ViewSite(
                    view=view,
                    function=top.function if top else "[unknown]",
                    file=top.filename if top else None,
                    line=top.lineno if top else 0,
                    is_python=top.is_python if top else False,
                    bytes=b,
                    bytes_low=lo,
                    bytes_high=hi,
                    count=count,
                    samples=samples,
                    lifetime_p50=p50 / 1e9 if p50 else None,
                    lifetime_p90=p90 / 1e9 if p90 else None,
                    leak_rate=rate,
                    low_information=bool(flags & _c.SITE_LOW_INFORMATION),
                    leak_suspect=bool(flags & _c.SITE_LEAK_SUSPECT),
                    stack_id=sid,
                    stack=stack,
                )
            )
        return out

    def top_allocators(
        self, n: int = 10, by: str = "live", user_code: bool = True
    ) -> List[AllocatorSite]:
        """The top ``n`` allocation sites by estimated live bytes (``by="live"``) or by
        estimated bytes allocated while profiling (``by="allocated"``).

        Call stacks attributed to the same site (function, file, line; see AllocatorSite for
        the rule and ``user_code``) are combined: their estimates add up and so do their
        variances.
        """
        if by not in ("live", "allocated"):
            raise ValueError(f"top_allocators(by={by!r}): expected 'live' or 'allocated'")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"top_allocators(n={n!r}): expected a non-negative int")
        groups: Dict[tuple, dict] = {}
        for (sid, lsamp, lbytes, _lo, lhi, lcount, asamp, abytes, acount) in self._sites:
            if (lsamp if by == "live" else asamp) == 0:
                continue
            stack = self.stack(sid)
            top = _site_frame(stack, user_code)
            if top is None:
                key = ("[unknown]", None, 0, False)
            else:
                key = (top.function, top.filename, top.lineno, top.is_python)
            g = groups.setdefault(
                key,
                dict(bytes=0, var=0.0, count=0, samples=0, abytes=0, acount=0, heaviest=-1,
                     stack=stack),
            )
            sd = (lhi - lbytes) / 1.959964
            g["bytes"] += lbytes
            g["var"] += sd * sd
            g["count"] += lcount
            g["samples"] += lsamp
            g["abytes"] += abytes
            g["acount"] += acount
            weight = lbytes if by == "live" else abytes
            if weight > g["heaviest"]:
                g["heaviest"], g["stack"] = weight, stack
        sites = []
        for (function, file, line, is_python), g in groups.items():
            low, high = _interval(g["bytes"], g["var"])
            sites.append(
                AllocatorSite(
                    function=function,
                    file=file,
                    line=line,
                    is_python=is_python,
                    estimated_bytes=g["bytes"],
                    estimated_bytes_low=low,
                    estimated_bytes_high=high,
                    count=g["count"],
                    samples=g["samples"],
                    allocated_bytes=g["abytes"],
                    allocated_count=g["acount"],
                    stack=g["stack"],
                )
            )
        key = (lambda s: s.estimated_bytes) if by == "live" else (lambda s: s.allocated_bytes)
        sites.sort(key=key, reverse=True)
        return sites[:n]

    def save(self, path: Union[str, "os.PathLike[str]", bytes], format: Optional[str] = None) -> None:
        """Writes the snapshot to ``path``.

        ``format`` is one of 'pprof' (gzip'ed profile.proto, ``.pb.gz``), 'speedscope'
        (``.json``), 'collapsed' (``.folded``/``.collapsed``), 'text' (``.txt``) or 'html'
        (``.html``); None picks it from the extension (text when there is none). The file is
        written under a temporary name and renamed (mode 0600).

        Raises ValueError for an unknown format, NotImplementedError when this build of
        libmemprof has no writer for the format, and OSError when the file cannot be written.
        """
        if format is None:
            code = _c.FORMAT_AUTO
        elif isinstance(format, str) and format in FORMATS:
            code = FORMATS[format]
        else:
            raise ValueError(
                f"save(format={format!r}): expected one of {', '.join(FORMATS)} or None"
            )
        if self._handle is None:
            raise RuntimeError("save(): this HeapSnapshot has no libmemprof snapshot behind it")
        self._handle.write(os.fspath(path), code)

    def compare_to(
        self, old: "HeapSnapshot", key: str = "lineno", user_code: bool = True
    ) -> List[SiteDiff]:
        """What changed since ``old``, an earlier snapshot of this process, per site: the
        counterpart of tracemalloc's ``Snapshot.compare_to(old, key_type)``.

        ``key`` groups the call stacks as tracemalloc does: 'lineno' by the frame a stack is
        attributed to (function, file and line, the rule of top_allocators(), ``user_code``
        as there), 'filename' by that frame's file, 'traceback' not at all (one entry per
        distinct call stack). Entries are SiteDiff objects sorted as tracemalloc sorts them:
        by the absolute size difference, then size, the absolute count difference and count,
        largest first; entries with no change and nothing live are left out.

        Raises ValueError for an unknown key, or when ``old`` is not an older snapshot of
        this process.
        """
        if key not in ("lineno", "filename", "traceback"):
            raise ValueError(
                f"compare_to(key={key!r}): expected 'lineno', 'filename' or 'traceback'"
            )
        if not isinstance(old, HeapSnapshot) or old.timestamp_ns > self.timestamp_ns:
            raise ValueError("compare_to(old): expected an older HeapSnapshot of this process")
        before = {t[0]: t for t in old._sites}
        groups: Dict[tuple, dict] = {}
        for t in self._sites:
            sid, _ls, lbytes, _lo, _hi, lcount, _as, abytes, acount = t
            o = before.pop(sid, None)
            self._diff_into(groups, key, user_code, self.stack(sid), lbytes, lcount,
                            lbytes - (o[2] if o else 0), lcount - (o[5] if o else 0),
                            abytes - (o[7] if o else 0), acount - (o[8] if o else 0))
        for sid, o in before.items():  # cannot happen (sites are never forgotten); be safe
            stack = old.stack(sid) if old._handle is not None else []
            self._diff_into(groups, key, user_code, stack, 0, 0, -o[2], -o[5], 0, 0)
        out = [
            SiteDiff(function=k[0], file=k[1], line=k[2], is_python=k[3], size=g["size"],
                     size_diff=g["size_diff"], count=g["count"], count_diff=g["count_diff"],
                     allocated_bytes=g["abytes"], allocated_count=g["acount"],
                     stack=g["stack"])
            for k, g in groups.items()
            if g["size"] or g["size_diff"] or g["count_diff"] or g["abytes"]
        ]
        out.sort(key=lambda d: (abs(d.size_diff), d.size, abs(d.count_diff), d.count),
                 reverse=True)
        return out

    @staticmethod
    def _diff_into(groups: Dict[tuple, dict], key: str, user_code: bool,
                   stack: List[StackFrame], size: int, count: int, size_diff: int,
                   count_diff: int, abytes: int, acount: int) -> None:
        top = _site_frame(stack, user_code)
        if top is None:
            k: tuple = ("[unknown]", None, 0, False)
        elif key == "filename":
            k = (None, top.filename, 0, top.is_python)
        else:
            k = (top.function, top.filename, top.lineno, top.is_python)
        if key == "traceback":
            k = k + (tuple(stack),)
        g = groups.setdefault(k, dict(size=0, size_diff=0, count=0, count_diff=0, abytes=0,
                                      acount=0, heaviest=-1, stack=stack))
        g["size"] += size
        g["size_diff"] += size_diff
        g["count"] += count
        g["count_diff"] += count_diff
        g["abytes"] += abytes
        g["acount"] += acount
        if abs(size_diff) > g["heaviest"]:
            g["heaviest"], g["stack"] = abs(size_diff), stack

    def allocations_surviving_gc(self, min_epochs: int = 1) -> List[AllocationSample]:
        """Live samples allocated before at least ``min_epochs`` garbage collections started
        (bindings/python/README.md; needs ``start(gc_tracking=True)``): candidates for
        leaks."""
        if self.gc_epochs_during_profile is None:
            raise RuntimeError(
                "allocations_surviving_gc() needs GC tracking: start(gc_tracking=True) or "
                "MemoryProfiler(gc_tracking=True)"
            )
        current = self.gc_epochs_during_profile
        return [
            s for s in self.samples if s.gc_epoch is not None and s.gc_epoch + min_epochs <= current
        ]


@dataclass(frozen=True)
class MemProfStats:
    """Engine statistics (memprof_get_stats()) and the binding's own counters."""

    state: str  #: uninitialized, initialized, active, stopped or shutdown
    sampling_rate_bytes: int
    total_samples: int
    live_samples: int
    freed_samples: int
    unique_stacks: int
    estimated_heap_bytes: int
    heap_map_capacity: int
    heap_map_used: int
    heap_map_load_percent: float
    heap_map_full_drops: int
    stack_table_capacity: int
    stack_table_overflows: int
    bloom_rebuilds: int
    death_during_birth: int
    reentrant_skips: int
    truncated_stacks: int
    shallow_stacks: int
    profiler_bytes: int
    unwinder: str
    unwind_confidence: float
    resolved_addresses: int
    unresolved_addresses: int
    python_frames_interned: int  #: distinct (code object, line) pairs seen in samples
    pymem_samples: int  #: samples taken from Python's small-object allocator
    pymem_obj_mode: str  #: how PYMEM_DOMAIN_OBJ is reported ("pymalloc", "off ...", ...)
    pymem_mem_mode: str  #: same for PYMEM_DOMAIN_MEM
    pymem_hooks_outermost: bool  #: no other allocator hook (e.g. tracemalloc) wraps ours
    raw: Dict[str, Any] = field(repr=False, compare=False)  #: every counter, as read

    @property
    def sampling_rate_kb(self) -> float:
        return self.sampling_rate_bytes / 1024

    @property
    def collisions(self) -> int:
        """The spec's heap-map "collisions": here, tombstones reused by inserts."""
        return int(self.raw.get("tombstones_reused", 0))


def _stats_from(raw: Dict[str, Any]) -> MemProfStats:
    cap = raw["heap_map_capacity"]
    return MemProfStats(
        state=_STATES.get(raw["state"], str(raw["state"])),
        sampling_rate_bytes=raw["sampling_rate"],
        total_samples=raw["total_samples"],
        live_samples=raw["live_samples"],
        freed_samples=raw["freed_samples"],
        unique_stacks=raw["unique_stacks"],
        estimated_heap_bytes=raw["estimated_live_bytes"],
        heap_map_capacity=cap,
        heap_map_used=raw["heap_map_used"],
        heap_map_load_percent=100.0 * raw["heap_map_used"] / cap if cap else 0.0,
        heap_map_full_drops=raw["heap_map_full_drops"],
        stack_table_capacity=raw["stack_table_capacity"],
        stack_table_overflows=raw["stack_table_overflows"],
        bloom_rebuilds=raw["bloom_rebuilds"],
        death_during_birth=raw["death_during_birth"],
        reentrant_skips=raw["reentrant_skips"],
        truncated_stacks=raw["truncated_stacks"],
        shallow_stacks=raw["shallow_stacks"],
        profiler_bytes=raw["profiler_bytes"],
        unwinder=_UNWINDERS.get(raw["unwinder"], "none"),
        unwind_confidence=raw["unwind_confidence_permille"] / 1000.0,
        resolved_addresses=raw["resolved_addresses"],
        unresolved_addresses=raw["unresolved_addresses"],
        python_frames_interned=raw["python_frames_interned"],
        pymem_samples=raw["pymem_samples"],
        pymem_obj_mode=raw["pymem_obj_mode"],
        pymem_mem_mode=raw["pymem_mem_mode"],
        pymem_hooks_outermost=bool(raw["pymem_hooks_outermost"]),
        raw=raw,
    )


def _health_from(raw: Dict[str, Any]) -> UnwindHealth:
    total = raw["total_samples"]
    return UnwindHealth(
        unwinder=_UNWINDERS.get(raw["unwinder"], "none"),
        total_native_stacks=total,
        shallow_stacks=raw["shallow_stacks"],
        truncated_stacks=raw["truncated_stacks"],
        avg_native_depth=raw["stack_depth_total"] / total if total else 0.0,
        min_native_depth=raw["stack_depth_min"],
        unwind_confidence=raw["unwind_confidence_permille"] / 1000.0 if total else 1.0,
    )


# ---- the lifecycle -------------------------------------------------------------------------


def _rate_bytes_from_kb(sampling_rate_kb: Any) -> int:
    if isinstance(sampling_rate_kb, bool) or not isinstance(sampling_rate_kb, int):
        raise ValueError(
            f"sampling_rate_kb must be a positive int (KiB), not {sampling_rate_kb!r}"
        )
    if sampling_rate_kb < 1 or sampling_rate_kb * 1024 > _MAX_RATE_BYTES:
        raise ValueError(
            f"sampling_rate_kb must be between 1 and {_MAX_RATE_BYTES // 1024} KiB, "
            f"not {sampling_rate_kb}"
        )
    return sampling_rate_kb * 1024


_UNWIND_CODES = {None: 0, "dwarf": _c.UNWIND_DWARF, "fp": _c.UNWIND_FP}


def _check_engine_options(max_frames: Any, unwind: Any) -> None:
    if max_frames is not None and (
        isinstance(max_frames, bool) or not isinstance(max_frames, int) or not 1 <= max_frames <= 256
    ):
        raise ValueError(f"max_frames must be an int from 1 to 256, not {max_frames!r}")
    if unwind not in _UNWIND_CODES:
        raise ValueError(f"unwind must be 'dwarf', 'fp' or None, not {unwind!r}")


_joined_said = False  # the "joined the running profile" message is given once


def _start_bytes(rate_bytes: Optional[int], gc_tracking: bool = False,
                 max_frames: Optional[int] = None, unwind: Optional[str] = None) -> None:
    """start() with a rate in bytes (None = the default, or the rate in force)."""
    global _joined_said
    _check_engine_options(max_frames, unwind)
    with _lock:
        _c.install()
        rc = _c.init(
            rate_bytes if rate_bytes is not None else _c.DEFAULT_SAMPLING_RATE,
            max_frames or 0,
            _UNWIND_CODES[unwind],
        )
        if rc == _c.JOINED:
            # memprof run, LD_PRELOAD or memprof attach profiles this process: join it.
            if gc_tracking:
                _gc_epochs.enable()
            _c.start()
            if not _joined_said:
                _joined_said = True
                current = _c.stats()["sampling_rate"]
                warnings.warn(
                    f"memprof.start(): joined the running profile (memprof run, the preload "
                    f"plugin or memprof attach) at its sampling rate, {current} bytes "
                    f"({current / 1024:g} KiB); it is written by whoever started it",
                    RuntimeWarning,
                    stacklevel=3,
                )
            return
        if rc != 0 and rate_bytes is not None:
            current = _c.stats()["sampling_rate"]
            if current != rate_bytes:
                warnings.warn(
                    f"memprof.start(): the sampling rate is fixed when the profiler is first "
                    f"initialised and stays {current} bytes ({current / 1024:g} KiB) for the life "
                    f"of the process; the requested {rate_bytes} bytes "
                    f"({rate_bytes / 1024:g} KiB) is ignored",
                    RuntimeWarning,
                    stacklevel=3,
                )
        if gc_tracking:
            _gc_epochs.enable()
        _c.start()


def _join_running_profile() -> bool:
    """Joins the profile memprof run's plugin started, for memprof run's bootstrap
    (bindings/python/bootstrap): the Python frame source and the PyMem hooks from now on,
    silently. Does nothing unless the engine reports MEMPROF_JOINED; returns whether it
    joined."""
    with _lock:
        _c.install()
        if _c.init(_c.DEFAULT_SAMPLING_RATE) == _c.JOINED:
            _c.start()
            return True
        return False


def _write_exit_profile() -> None:
    """The launcher's exit-time profile, written at the program's end: memprof run's
    bootstrap registers this as the first atexit handler, so it runs last, after the
    program's own handlers and before the interpreter's finalization frees the program's
    objects (which the process's exit, where the plugin would write it, comes after)."""
    _c.write_exit_profile()


def start(
    sampling_rate_kb: Optional[int] = None,
    *,
    gc_tracking: bool = False,
    max_frames: Optional[int] = None,
    unwind: Optional[str] = None,
) -> None:
    """Starts (or resumes) sampling allocations.

    Args:
        sampling_rate_kb: mean KiB allocated between samples. The first start() initialises
            the profiler with it (None means 512 KiB); the rate then holds for the life of the
            process: a later start() after stop() resumes, and passing a different rate then
            only emits a RuntimeWarning (None keeps the rate in force silently). Lower rates
            give tighter estimates at a higher cost.
        gc_tracking: also record garbage-collection starts, for
            HeapSnapshot.allocations_surviving_gc() (bindings/python/README.md). Once on, stays
            on.
        max_frames: native frames captured per sample (1..256; None = 64). Python frames
            (up to 128) come on top; deep native stacks (imports, C code calling back into
            Python) are cut beyond it and counted in the stats as truncated.
        unwind: how native stacks are walked: "dwarf" (None's default when libmemprof has
            libunwind: complete stacks through code without frame pointers, as in Debian's
            python3) or "fp" (frame pointers: faster, but stops at such code).
        max_frames and unwind, like the rate, only take effect at the first start().

    Under ``memprof run`` (or the LD_PRELOAD plugin, or ``memprof attach``) start() joins
    the profile already running instead: Python frames and the PyMem hooks join it, its
    rate holds (a RuntimeWarning says so once), and it is written by whoever started it;
    stop() and shutdown() then leave it running.

    Raises:
        RuntimeError: profiling is already active (started by an earlier start(), or by
            another user of libmemprof in this process), or shutdown() was called;
            NotImplementedError (a RuntimeError) when no allocator interposition backend is
            available in this process.
        ValueError: sampling_rate_kb is not an int between 1 and 2**30, or max_frames or
            unwind is out of range.
    """
    rate = None if sampling_rate_kb is None else _rate_bytes_from_kb(sampling_rate_kb)
    _start_bytes(rate, gc_tracking, max_frames, unwind)


def stop() -> None:
    """Stops sampling new allocations. Frees keep being tracked, so a block freed after
    stop() leaves the profile; the data is kept (start() resumes, get_snapshot() works).

    Raises RuntimeError if profiling is not running.
    """
    with _lock:
        _c.stop()


def shutdown() -> None:
    """Ends profiling for the life of the process (one-way): no more sampling or free
    tracking, and start() raises RuntimeError afterwards. Snapshots taken before stay
    usable. Not registered with atexit: at exit the profiler simply stops with the process
    (and the LD_PRELOAD plugin, when present, still writes its exit-time profile)."""
    with _lock:
        _c.shutdown()


def set_temporary_threshold(seconds: Optional[float]) -> None:
    """Sets the lifetime under which a freed allocation counts as temporary (the
    'temporary' view of HeapSnapshot.sites()), in seconds; 0 or None restores the default
    (1 ms). It applies to frees from then on, in any state, for the whole process. A
    snapshot's ``peak.temporary_threshold_seconds`` says which threshold was in force.

    Raises ValueError unless ``seconds`` is a finite number from 0 up to about 584 years
    (2**64 ns).
    """
    if seconds is None:
        ns = 0
    else:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise ValueError(
                f"set_temporary_threshold(): seconds must be a number or None, not {seconds!r}"
            )
        if not 0 <= seconds < 2**64 / 1e9:  # also refuses NaN
            raise ValueError(
                f"set_temporary_threshold(): seconds must be from 0 to {2**64 / 1e9:.4g}, "
                f"not {seconds!r}"
            )
        ns = min(round(seconds * 1e9), 2**64 - 1)
        if ns == 0 and seconds > 0:
            ns = 1  # a positive threshold under 1 ns must not mean "the default"
    _c.set_temporary_threshold(ns)


def get_stats() -> MemProfStats:
    """The profiler's statistics; works in every state (all zero before the first start)."""
    return _stats_from(_c.stats())


def get_snapshot() -> HeapSnapshot:
    """A snapshot of the live sampled allocations, with their resolved stacks.

    Works while profiling is active and after stop(). Raises RuntimeError before the first
    start() and after shutdown().
    """
    handle = _c.snapshot()
    tracking = _gc_epochs.enabled
    snap = _snapshot_of(handle, keep=True)
    snap.gc_epochs_during_profile = _gc_epochs.current if tracking else None
    samples = []
    for size, ebytes, ecount, ts, sid in handle.samples():
        samples.append(
            AllocationSample(
                size=size,
                estimated_bytes=ebytes,
                estimated_count=ecount,
                timestamp_ns=ts,
                stack_id=sid,
                stack=snap.stack(sid),
                gc_epoch=_gc_epochs.epoch_at(ts) if tracking else None,
            )
        )
    snap.samples = samples
    return snap


def _snapshot_of(handle: Any, keep: bool) -> HeapSnapshot:
    """The HeapSnapshot of the library's snapshot `handle`, without its samples: its
    estimates, health and sites, and the handle itself if `keep` (to resolve stacks)."""
    est = handle.estimate()
    raw = _c.stats()
    return HeapSnapshot(
        samples=[],
        total_samples=raw["total_samples"],
        live_samples=est["live_samples"],
        estimated_heap_bytes=est["bytes"],
        estimated_heap_bytes_low=est["bytes_low"],
        estimated_heap_bytes_high=est["bytes_high"],
        estimated_count=est["count"],
        estimated_count_low=est["count_low"],
        estimated_count_high=est["count_high"],
        low_confidence=est["low_confidence"],
        sampling_rate_bytes=est["sampling_rate"],
        timestamp=time.time(),
        timestamp_ns=est["timestamp_ns"],
        unwind_health=_health_from(raw),
        _handle=handle if keep else None,
        _sites=handle.sites(),
    )


def _snapshot_without_samples() -> HeapSnapshot:
    """A snapshot whose samples are not read (nor their stacks resolved): what a
    MemoryProfiler needs at entry, its sites' counters, at little cost on a large heap. The
    library's snapshot is released at once (its copy of the live samples is not needed)."""
    return _snapshot_of(_c.snapshot(), keep=False)


class MemoryProfiler:
    """Context manager: profiles a block and tells what the block itself did.

    On entry it starts profiling (arguments as for start()) unless profiling is already
    active (an outer block, start(), or memprof run, which it then joins) and notes the
    state of the heap; on exit it takes a snapshot (``.snapshot``, the whole heap) and stops
    profiling if it started it. What the block did is a difference against its entry, not
    everything since profiling began, so a second block does not report the first one's
    data:

    - ``allocated_bytes``/``allocated_count``: estimated bytes and allocations the block
      made, freed or not (each site's allocation counters at exit minus at entry);
    - ``live_bytes`` (with ``live_bytes_low``/``_high``) and ``live_count``: of those, what was
      still live when it ended (the live samples allocated after entry);
    - ``top_allocators(n, by)``: the same per site, as BlockSite objects;
    - ``compare()``: tracemalloc-style differences per site between entry and exit
      (HeapSnapshot.compare_to()), which also shows what the block freed of older memory.

    Example::

        with memprof.MemoryProfiler(sampling_rate_kb=256) as mp:
            build_index()
        print(mp.allocated_bytes, mp.live_bytes, mp.top_allocators(3))
        mp.snapshot.save("index.pb.gz")
    """

    def __init__(
        self,
        sampling_rate_kb: Optional[int] = None,
        *,
        gc_tracking: bool = False,
        max_frames: Optional[int] = None,
        unwind: Optional[str] = None,
    ):
        if sampling_rate_kb is not None:
            _rate_bytes_from_kb(sampling_rate_kb)  # fail early, at construction
        _check_engine_options(max_frames, unwind)
        self._sampling_rate_kb = sampling_rate_kb
        self._options = dict(gc_tracking=gc_tracking, max_frames=max_frames, unwind=unwind)
        self._snapshot: Optional[HeapSnapshot] = None
        self._entry: Optional[HeapSnapshot] = None
        self._entry_ns = 0
        self._started = False

    def __enter__(self) -> "MemoryProfiler":
        self._snapshot = None
        with _lock:
            if _c.stats()["state"] == _c.STATE_ACTIVE:
                # Already profiling: join what runs (memprof run's hooks on, if that is it).
                if _c.init(_c.DEFAULT_SAMPLING_RATE) == _c.JOINED:
                    _start_bytes(None, **self._options)
                elif self._options["gc_tracking"]:
                    _gc_epochs.enable()
            else:
                start(self._sampling_rate_kb, **self._options)
                self._started = True
        # The entry's sites (their allocation counters), then the time from which a live
        # sample is the block's: samples carry their allocation time on this clock.
        self._entry = _snapshot_without_samples()
        self._entry_ns = time.monotonic_ns()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._snapshot = get_snapshot()
        finally:
            if self._started:
                self._started = False
                stop()

    @property
    def snapshot(self) -> Optional[HeapSnapshot]:
        """The snapshot taken on exit, of the whole heap (None before)."""
        return self._snapshot

    def _done(self, what: str) -> HeapSnapshot:
        if self._snapshot is None or self._entry is None:
            raise RuntimeError(f"MemoryProfiler.{what}: the block has not ended yet")
        return self._snapshot

    def _block_samples(self) -> List[AllocationSample]:
        return [s for s in self._done("live_bytes").samples if s.timestamp_ns >= self._entry_ns]

    @property
    def live_bytes(self) -> int:
        """Estimated bytes the block allocated that were still live when it ended."""
        return sum(s.estimated_bytes for s in self._block_samples())

    @property
    def live_bytes_low(self) -> int:
        """Lower end of the 95 % interval of live_bytes."""
        return self._live_interval()[0]

    @property
    def live_bytes_high(self) -> int:
        """Upper end of the 95 % interval of live_bytes."""
        return self._live_interval()[1]

    def _live_interval(self) -> Tuple[int, int]:
        samples = self._block_samples()
        # Each sample's weight w = size / p has variance w * (w - size) (Horvitz-Thompson).
        est = sum(s.estimated_bytes for s in samples)
        var = sum(s.estimated_bytes * (s.estimated_bytes - s.size) for s in samples)
        return _interval(est, var)

    @property
    def live_count(self) -> int:
        """Estimated allocations the block made that were still live when it ended."""
        return round(sum(s.estimated_count for s in self._block_samples()))

    @property
    def allocated_bytes(self) -> int:
        """Estimated bytes the block allocated, freed or not."""
        return sum(g["abytes"] for g in self._groups(True).values())

    @property
    def allocated_count(self) -> int:
        """Estimated allocations the block made, freed or not."""
        return sum(g["acount"] for g in self._groups(True).values())

    def compare(self, key: str = "lineno", user_code: bool = True) -> List[SiteDiff]:
        """The exit snapshot compared with the entry's (HeapSnapshot.compare_to())."""
        return self._done("compare()").compare_to(self._entry, key, user_code)

    def _groups(self, user_code: bool) -> Dict[tuple, dict]:
        snap = self._done("allocated_bytes")
        entry = {t[0]: t for t in self._entry._sites}
        groups: Dict[tuple, dict] = {}

        def group(stack: List[StackFrame]) -> dict:
            top = _site_frame(stack, user_code)
            key = (("[unknown]", None, 0, False) if top is None
                   else (top.function, top.filename, top.lineno, top.is_python))
            return groups.setdefault(key, dict(bytes=0, var=0.0, count=0.0, samples=0,
                                                abytes=0, acount=0, heaviest=-1, stack=stack))

        for sid, _ls, _lb, _lo, _hi, _lc, asamp, abytes, acount in snap._sites:
            o = entry.get(sid)
            if asamp - (o[6] if o else 0) <= 0:
                continue
            stack = snap.stack(sid)
            g = group(stack)
            g["abytes"] += abytes - (o[7] if o else 0)
            g["acount"] += acount - (o[8] if o else 0)
            if abytes - (o[7] if o else 0) > g["heaviest"]:
                g["heaviest"], g["stack"] = abytes - (o[7] if o else 0), stack
        for s in self._block_samples():
            g = group(s.stack)
            g["bytes"] += s.estimated_bytes
            g["var"] += s.estimated_bytes * (s.estimated_bytes - s.size)
            g["count"] += s.estimated_count
            g["samples"] += 1
        return groups

    def top_allocators(
        self, n: int = 10, by: str = "live", user_code: bool = True
    ) -> List[BlockSite]:
        """The block's top ``n`` sites, by estimated bytes it left live (``by="live"``) or
        allocated (``by="allocated"``), as BlockSite objects; sites are grouped as in
        HeapSnapshot.top_allocators()."""
        if by not in ("live", "allocated"):
            raise ValueError(f"top_allocators(by={by!r}): expected 'live' or 'allocated'")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"top_allocators(n={n!r}): expected a non-negative int")
        sites = []
        for (function, file, line, is_python), g in self._groups(user_code).items():
            if (g["bytes"] if by == "live" else g["abytes"]) <= 0:
                continue
            low, high = _interval(g["bytes"], g["var"])
            sites.append(BlockSite(
                function=function, file=file, line=line, is_python=is_python,
                estimated_bytes=g["bytes"], estimated_bytes_low=low, estimated_bytes_high=high,
                count=round(g["count"]), samples=g["samples"], allocated_bytes=g["abytes"],
                allocated_count=g["acount"], stack=g["stack"]))
        sites.sort(key=(lambda x: x.estimated_bytes) if by == "live"
                   else (lambda x: x.allocated_bytes), reverse=True)
        return sites[:n]
