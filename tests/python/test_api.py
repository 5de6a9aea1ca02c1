# SPDX-License-Identifier: MIT
"""The Python API (doc/architecture.md, Decisions): the functions, the dataclasses and
their fields, argument checking, the MemoryProfiler context manager, save() formats, GC
epoch tracking (bindings/python/README.md), and the pure-Python helpers (in this process,
without starting the profiler)."""

import dataclasses

import pytest

from conftest import PROLOGUE, in_process, listcomp_frames

import memprof
from memprof import _api, _cli


@in_process
def test_public_names():
    for name in ["start", "stop", "get_snapshot", "get_stats", "shutdown", "MemoryProfiler",
                 "HeapSnapshot", "AllocationSample", "StackFrame", "MemProfStats",
                 "AllocatorSite", "UnwindHealth", "FramePointerHealth", "FORMATS"]:
        assert hasattr(memprof, name), name
    assert set(memprof.FORMATS) == {"pprof", "speedscope", "collapsed", "text", "html"}
    assert memprof.__version__


@in_process
def test_dataclass_fields():
    fields = {f.name for f in dataclasses.fields(memprof.HeapSnapshot)}
    assert {"samples", "total_samples", "live_samples", "estimated_heap_bytes",
            "estimated_heap_bytes_low", "estimated_heap_bytes_high", "timestamp",
            "timestamp_ns", "unwind_health"} <= fields
    fields = {f.name for f in dataclasses.fields(memprof.StackFrame)}
    assert {"function", "filename", "lineno", "module", "is_python", "inlined"} <= fields
    fields = {f.name for f in dataclasses.fields(memprof.AllocationSample)}
    assert {"size", "estimated_bytes", "timestamp_ns", "stack", "gc_epoch"} <= fields
    fields = {f.name for f in dataclasses.fields(memprof.AllocatorSite)}
    assert {"function", "file", "line", "estimated_bytes", "estimated_bytes_low",
            "estimated_bytes_high", "count", "samples", "stack"} <= fields


@in_process
def test_stats_before_start_in_this_process():
    # get_stats() works in every state; the pytest process never starts the profiler.
    s = memprof.get_stats()
    assert s.state == "uninitialized"
    assert s.total_samples == 0


@in_process
@pytest.mark.parametrize("bad", [0, -1, 1 << 31, 1.5, "64", True])
def test_bad_rate_is_value_error(bad):
    with pytest.raises(ValueError, match="sampling_rate_kb"):
        memprof.start(sampling_rate_kb=bad)
    with pytest.raises(ValueError, match="sampling_rate_kb"):
        memprof.MemoryProfiler(sampling_rate_kb=bad)


@in_process
def test_format_tables_come_from_the_library():
    assert memprof.FORMATS == {"pprof": 1, "speedscope": 2, "collapsed": 3, "text": 4, "html": 5}
    assert _api.EXTENSIONS["pprof"] == ".pb.gz" and _api.EXTENSIONS["collapsed"] == ".folded"
    assert _cli._format_from_path("x.collapsed") == "collapsed"
    assert _cli._format_from_path("x.htm") == "html"
    assert _cli._format_from_path("x.bin") is None


@in_process
def test_cli_rate_parsing():
    assert _cli.parse_rate("65536") == 65536
    assert _cli.parse_rate("64K") == 65536
    assert _cli.parse_rate("1m") == 1 << 20
    assert _cli.parse_rate("2G") == 2 << 30
    assert _cli.parse_rate("64KiB") == 65536  # the library's grammar, as memprof run -r
    for bad in ["", "0", "x", "1T", "-5", "1.5M", str((1 << 40) + 1)]:
        with pytest.raises(_cli.UsageError):
            _cli.parse_rate(bad)


@in_process
def test_library_file_classification():
    import json as json_module
    assert _api._is_library_file(json_module.__file__)
    assert _api._is_library_file(pytest.__file__)
    assert _api._is_library_file("<frozen importlib._bootstrap>")
    assert not _api._is_library_file("/home/user/app/main.py")
    assert not _api._is_library_file("<string>")


API = PROLOGUE + """
import dataclasses, warnings

def hold():
    return [bytearray(100_000) for _ in range(200)]   # ~20 MB in 200 blocks

memprof.start(sampling_rate_kb=64)
kept = hold()
snap = memprof.get_snapshot()
stats = memprof.get_stats()
top = snap.top_allocators(3)
site = top[0]
# Dict-style access to a site, as in the spec's examples.
assert site["function"] == site.function and site.get("file") == site.file
assert dict(site)["estimated_bytes"] == site.estimated_bytes
try:
    site["nope"]
except KeyError:
    pass
else:
    raise AssertionError("KeyError expected")
for bad in [dict(format="png"), dict(format=1)]:
    try:
        snap.save(os.path.join(sys.argv[1], "x"), **bad)
    except ValueError as e:
        assert "format" in str(e)
    else:
        raise AssertionError("ValueError expected")
try:
    snap.save(os.path.join(sys.argv[1], "no-such-dir", "x.txt"))
except OSError as e:
    oserror = type(e).__name__
try:
    snap.top_allocators(by="size")
except ValueError:
    pass
else:
    raise AssertionError("ValueError expected")
try:
    snap.allocations_surviving_gc()
except RuntimeError as e:
    assert "gc_tracking" in str(e)
sample = max(snap.samples, key=lambda s: s.size)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    memprof.stop()
    memprof.start(sampling_rate_kb=128)   # different rate: a warning, the rate stays
    memprof.stop()
    memprof.start()                       # None keeps the rate silently
    memprof.stop()
    memprof.start(sampling_rate_kb=64)    # the same rate: silent
rate_warnings = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]
emit(dict(
    estimate=snap.estimated_heap_bytes, low=snap.estimated_heap_bytes_low,
    high=snap.estimated_heap_bytes_high, count=snap.estimated_count,
    live=snap.live_samples, total=snap.total_samples, nsamples=len(snap.samples),
    rate=snap.sampling_rate_bytes, ts=snap.timestamp_ns, wall=snap.timestamp,
    low_confidence=snap.low_confidence,
    health=dict(unwinder=snap.unwind_health.unwinder,
                confidence=snap.frame_pointer_health.confidence,
                total=snap.unwind_health.total_native_stacks),
    stats=dict(state=stats.state, rate=stats.sampling_rate_bytes, total=stats.total_samples,
               live=stats.live_samples, kb=stats.sampling_rate_kb,
               frames=stats.python_frames_interned),
    top=[dict(function=s.function, file=s.file, line=s.line, bytes=s.estimated_bytes,
              low=s.estimated_bytes_low, high=s.estimated_bytes_high, count=s.count,
              samples=s.samples, python=s.is_python) for s in top],
    sample=dict(size=sample.size, est=sample.estimated_bytes, ts=sample.timestamp_ns,
                weight=sample.weight, stack=[str(f) for f in sample.stack],
                python=[f.function for f in sample.stack if f.is_python]),
    oserror=oserror, rate_warnings=rate_warnings,
    final_rate=memprof.get_stats().sampling_rate_bytes,
))
"""


def test_api_roundtrip(py, tmp_path):
    r = py.json(API, name="api.py", args=[str(tmp_path)])
    truth = 200 * 100_000
    assert 0.8 * truth <= r["estimate"] <= 1.3 * truth
    assert r["low"] <= r["estimate"] <= r["high"]
    assert r["live"] == r["nsamples"] > 0
    assert r["total"] >= r["live"]
    assert r["rate"] == 65536 and r["stats"]["rate"] == 65536 and r["stats"]["kb"] == 64
    assert r["stats"]["state"] == "active"
    assert r["stats"]["frames"] > 0
    assert r["health"]["unwinder"] in ("dwarf", "fp")
    assert r["health"]["confidence"] in ("high", "medium", "low")
    assert r["ts"] > 0 and r["wall"] > 1.6e9
    site = r["top"][0]
    assert site["function"] == listcomp_frames("hold")[0]
    assert site["file"].endswith("api.py") and site["python"]
    assert site["low"] <= site["bytes"] <= site["high"]
    assert site["count"] >= 150  # plus ~1000 per sampled small block (the bytearray objects)
    assert r["sample"]["size"] >= 100_000
    assert r["sample"]["weight"] >= 1.0
    frames = listcomp_frames("hold")
    assert r["sample"]["python"][:len(frames)] == frames
    assert r["sample"]["python"][-1] == "<module>"
    assert r["oserror"] in ("FileNotFoundError", "OSError")
    assert len(r["rate_warnings"]) == 1 and "65536 bytes" in r["rate_warnings"][0]
    assert r["final_rate"] == 65536


CONTEXT = PROLOGUE + """
with memprof.MemoryProfiler(sampling_rate_kb=64) as mp:
    assert mp.snapshot is None
    data = bytearray(8 << 20)
after = memprof.get_stats().state
snap = mp.snapshot
path = os.path.join(sys.argv[1], "ctx.folded")
snap.save(path)
text = open(path).read()
emit(dict(state=after, estimate=snap.estimated_heap_bytes, folded=text.splitlines()[:50]))
"""


def test_memory_profiler_context_manager(py, tmp_path):
    r = py.json(CONTEXT, name="ctx.py", args=[str(tmp_path)])
    assert r["state"] == "stopped"
    assert r["estimate"] >= 8 << 20
    # Collapsed stacks: bare function names, Python frames included, value last.
    assert any("<module>" in line for line in r["folded"])


GC = PROLOGUE + """
import gc
memprof.start(sampling_rate_kb=16, gc_tracking=True)
old = [bytearray(64 << 10) for _ in range(64)]        # before three collections
for _ in range(3):
    gc.collect()
new = [bytearray(64 << 10) for _ in range(64)]        # after them
snap = memprof.get_snapshot()
survivors = snap.allocations_surviving_gc(min_epochs=3)
emit(dict(epochs=snap.gc_epochs_during_profile,
          survivors=len(survivors), all=len([s for s in snap.samples if s.size > 65000]),
          epochs_seen=sorted({s.gc_epoch for s in snap.samples if s.size > 65000})))
"""


def test_gc_epoch_tracking(py):
    r = py.json(GC, name="gc_epochs.py")
    assert r["epochs"] >= 3
    assert r["survivors"] >= 50  # the 64 old blocks (all sampled at this rate, nearly)
    assert r["all"] >= 100
    assert r["epochs_seen"][0] == 0 and r["epochs_seen"][-1] >= 3


@in_process
@pytest.mark.parametrize("kwargs", [dict(max_frames=0), dict(max_frames=257),
                                    dict(max_frames=True), dict(unwind="lbr")])
def test_bad_engine_options_are_value_errors(kwargs):
    with pytest.raises(ValueError):
        memprof.start(**kwargs)
    with pytest.raises(ValueError):
        memprof.MemoryProfiler(**kwargs)


ENGINE_OPTIONS = PROLOGUE + """
def deep(n):
    if n == 0:
        return [bytearray(1 << 20) for _ in range(8)]
    return deep(n - 1)

memprof.start(sampling_rate_kb=64, max_frames=8, unwind=sys.argv[1])
keep = deep(30)
snap = memprof.get_snapshot()
stats = memprof.get_stats()
# Captured frames: inlined ones are expanded from one captured address when debug
# information is installed (pyenv's libpython has it).
native = max(len([f for f in s.stack if not f.is_python and not f.inlined])
             for s in snap.samples)
emit(dict(unwinder=stats.unwinder, truncated=stats.truncated_stacks, native=native,
          python=max(len([f for f in s.stack if f.is_python]) for s in snap.samples)))
"""


@pytest.mark.parametrize("unwind", ["fp", "dwarf"])
def test_engine_options(py, unwind):
    r = py.json(ENGINE_OPTIONS, name="options.py", args=[unwind])
    assert r["unwinder"] == unwind
    assert r["native"] <= 8          # max_frames bounds the native part
    assert r["python"] >= 31         # Python frames come on top
    if unwind == "dwarf":
        assert r["truncated"] > 0
