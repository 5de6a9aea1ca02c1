# SPDX-License-Identifier: MIT
"""The lifecycle (doc/architecture.md, Decisions: Lifecycle) seen from Python:
errors for calls in the wrong state, resume after stop, frees tracked after stop, shutdown
being one-way, frees of objects allocated before the hooks went in, and a profiler already
started by the preload plugin."""

import pytest

from conftest import PROLOGUE, _runner, listcomp_frames

ERRORS = PROLOGUE + """
def err(fn, *a, **k):
    try:
        fn(*a, **k)
    except Exception as e:
        return [type(e).__name__, str(e), isinstance(e, RuntimeError)]
    return None

out = {}
out["stats_before"] = memprof.get_stats().state
out["snapshot_before"] = err(memprof.get_snapshot)
out["stop_before"] = err(memprof.stop)
memprof.start(sampling_rate_kb=64)
out["start_twice"] = err(memprof.start)
out["state_active"] = memprof.get_stats().state
memprof.stop()
out["stop_twice"] = err(memprof.stop)
out["state_stopped"] = memprof.get_stats().state
out["snapshot_stopped"] = err(memprof.get_snapshot)
memprof.start()
keep = bytearray(4 << 20)
snap = memprof.get_snapshot()
memprof.shutdown()
memprof.shutdown()   # harmless
out["state_shutdown"] = memprof.get_stats().state
out["start_after_shutdown"] = err(memprof.start)
out["stop_after_shutdown"] = err(memprof.stop)
out["snapshot_after_shutdown"] = err(memprof.get_snapshot)
path = os.path.join(sys.argv[1], "after.txt")
snap.save(path)                      # a snapshot taken before stays usable
out["saved_after_shutdown"] = os.path.getsize(path)
out["old_estimate"] = snap.estimated_heap_bytes
junk = [bytearray(1000) for _ in range(1000)]   # the program keeps working
emit(out)
"""


def test_wrong_state_errors(py, tmp_path):
    r = py.json(ERRORS, name="errors.py", args=[str(tmp_path)])
    assert r["stats_before"] == "uninitialized"
    for key, words in [
        ("snapshot_before", "memprof.start()"),
        ("stop_before", "never started"),
        ("start_twice", "already active"),
        ("stop_twice", "not running"),
        ("start_after_shutdown", "shutdown"),
        ("stop_after_shutdown", "shutdown"),
        ("snapshot_after_shutdown", "shutdown"),
    ]:
        name, msg, is_runtime = r[key]
        assert is_runtime, (key, name, msg)
        assert words in msg, (key, msg)
    assert r["state_active"] == "active"
    assert r["state_stopped"] == "stopped"
    assert r["snapshot_stopped"] is None
    assert r["state_shutdown"] == "shutdown"
    assert r["saved_after_shutdown"] > 0
    assert r["old_estimate"] >= 4 << 20


SHUTDOWN_FIRST = PROLOGUE + """
memprof.shutdown()
try:
    memprof.start()
except RuntimeError as e:
    emit(dict(msg=str(e)))
"""


def test_shutdown_before_start(py):
    assert "shutdown" in py.json(SHUTDOWN_FIRST)["msg"]


RESUME = PROLOGUE + """
def first():
    return bytearray(16 << 20)

def between():
    return bytearray(16 << 20)

def second():
    return bytearray(16 << 20)

memprof.start(sampling_rate_kb=64)
a = first()
memprof.stop()
b = between()                     # not sampled: stopped
memprof.start()
c = second()
snap = memprof.get_snapshot()
fns = {s.function: s.estimated_bytes for s in snap.top_allocators(10)}
memprof.stop()
del a                             # frees are tracked after stop
after = memprof.get_snapshot()
fns_after = {s.function: s.estimated_bytes for s in after.top_allocators(10)}
emit(dict(fns=fns, fns_after=fns_after, total=snap.estimated_heap_bytes,
          total_after=after.estimated_heap_bytes))
"""


def test_resume_and_frees_after_stop(backend):
    r = backend.json(RESUME, name="resume.py")
    assert r["fns"].get("first", 0) >= 16 << 20
    assert r["fns"].get("second", 0) >= 16 << 20
    assert "between" not in r["fns"]
    assert "first" not in r["fns_after"]
    assert r["fns_after"].get("second", 0) >= 16 << 20
    assert r["total"] - r["total_after"] >= 15 << 20


PREEXISTING = PROLOGUE + """
import gc
old_objects = [(i, str(i)) for i in range(300_000)]      # before the hooks exist
old_blocks = [bytearray(5000) for _ in range(2000)]
memprof.start(sampling_rate_kb=32)
del old_objects, old_blocks                              # their frees reach the hooks
gc.collect()
fresh = [(i, str(i)) for i in range(100_000)]
snap = memprof.get_snapshot()
stats = memprof.get_stats()
emit(dict(estimate=snap.estimated_heap_bytes, freed=stats.freed_samples,
          live=snap.live_samples))
"""


def test_frees_of_blocks_from_before_start_are_harmless(backend):
    r = backend.json(PREEXISTING, name="preexisting.py")
    # Only `fresh` (~100k tuples + strings, ~13 MB) is live; nothing from before counts.
    assert r["estimate"] < 40 << 20
    assert r["live"] > 0


JOINS_THE_PLUGIN = PROLOGUE + """
import warnings
def make():
    return bytearray(32 << 20)

def small():
    return [dict(a="x%d" % i) for i in range(100000)]

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    memprof.start(sampling_rate_kb=64)      # under the plugin: joins, at the plugin's rate
    memprof.start()                          # again: still joined, said once only
x = make()
y = small()
memprof.stop()                               # leaves the plugin's profile running
state_after_stop = memprof.get_stats().state
memprof.shutdown()                           # so does this
snap = memprof.get_snapshot()
stats = memprof.get_stats()
emit(dict(warnings=[str(w.message) for w in caught], after_stop=state_after_stop,
          state=stats.state, pymem=stats.pymem_samples,
          fns=[s.function for s in snap.top_allocators(5)]))
"""


def test_start_under_the_preload_plugin_joins_its_profile(tmp_path):
    runner = _runner("preload", tmp_path)
    r = runner.json(JOINS_THE_PLUGIN, env={"MEMPROF_START": "1"})
    assert len(r["warnings"]) == 1, r["warnings"]
    assert "joined the running profile" in r["warnings"][0]
    assert "524288 bytes" in r["warnings"][0] and "ignored" not in r["warnings"][0]
    assert r["after_stop"] == "active" and r["state"] == "active"
    # The frame source and the PyMem hooks joined too: Python frames, pymalloc samples.
    assert "make" in r["fns"] and listcomp_frames("small")[0] in r["fns"]
    assert r["pymem"] > 0
