# SPDX-License-Identifier: MIT
"""memprof: a sampling heap profiler for Python programs (libmemprof's Python binding).

It samples allocations (malloc and friends, and Python's own small-object allocator) as a
Poisson process over allocated bytes, records each sample's call stack — Python frames
(function, file, line) merged with the native frames of C extensions and the interpreter —
and estimates which call paths hold how much live memory, cheaply enough to leave on.

    import memprof
    memprof.start(sampling_rate_kb=512)
    ...
    snap = memprof.get_snapshot()
    print(snap.estimated_heap_bytes, snap.top_allocators(5))
    print(snap.peak.bytes, snap.sites("peak")[:3])   # also "alloc", "temporary", "leaks"
    snap.save("heap.pb.gz")          # pprof; or .json (speedscope), .folded, .txt, .html
    memprof.stop()

Or from the command line: ``python3 -m memprof run script.py [args]``.
"""

from ._api import (
    FORMATS,
    VIEWS,
    AllocationSample,
    AllocatorSite,
    BlockSite,
    FramePointerHealth,
    HeapPoint,
    HeapSnapshot,
    MemoryProfiler,
    MemProfStats,
    PeakInfo,
    SiteDiff,
    StackFrame,
    UnwindHealth,
    ViewSite,
    get_snapshot,
    get_stats,
    set_temporary_threshold,
    shutdown,
    start,
    stop,
)
from ._memprof import LIBRARY_VERSION as __version__

__all__ = [
    "FORMATS",
    "AllocationSample",
    "AllocatorSite",
    "BlockSite",
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
