# SPDX-License-Identifier: MIT
"""Threads: Python frames are captured per thread (each thread's own stack, also when it
allocates with the GIL released: numpy's calloc, or libc's called through ctypes where numpy
is not installed), estimates hold while several threads allocate and the
main thread takes snapshots concurrently, and short-lived threads are harmless."""

from conftest import PROLOGUE, code_name

THREADS = PROLOGUE + """
import ctypes, threading
try:
    import numpy as np
except ImportError:
    np = None
# Without numpy: the interpreter's raw calloc (allowed without the GIL), called through
# ctypes.CDLL, whose foreign calls release the GIL. (libc's calloc found by ctypes would be
# found by dlsym, which only the preload plugin intercepts, not the GOT backend.)
raw_calloc = ctypes.CDLL(None).PyMem_RawCalloc
raw_calloc.restype = ctypes.c_void_p
raw_calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]

N_THREADS = 4
ROUNDS = 40
BLOCK = 256 << 10
barrier = threading.Barrier(N_THREADS + 1)
kept = {}

def worker_a(tag):
    out = []
    barrier.wait()
    for _ in range(ROUNDS):
        out.append(bytearray(BLOCK))                       # LINE_A
        out.append([(i, tag) for i in range(200)])        # small objects, pymalloc
    kept[tag] = out

def worker_b(tag):
    out = []
    barrier.wait()
    for _ in range(ROUNDS):
        out.append(np.zeros(BLOCK, dtype=np.uint8) if np else raw_calloc(1, BLOCK))  # LINE_B: no GIL
    kept[tag] = out

started_early = threading.Thread(target=worker_a, args=("early",))
started_early.start()                                      # before memprof.start()
memprof.start(sampling_rate_kb=64)
threads = [started_early] + [
    threading.Thread(target=(worker_a, worker_b)[i % 2], args=(f"t{i}",))
    for i in range(1, N_THREADS)
]
for t in threads[1:]:
    t.start()
barrier.wait()
estimates = []
while any(t.is_alive() for t in threads):
    estimates.append(memprof.get_snapshot().estimated_heap_bytes)   # concurrently
for t in threads:
    t.join()

# 200 short-lived threads that allocate and exit.
def short():
    kept.setdefault("short", []).append(bytearray(64 << 10))
for _ in range(200):
    t = threading.Thread(target=short)
    t.start()
    t.join()

snap = memprof.get_snapshot()
sites = [dict(function=s.function, file=s.file, line=s.line, bytes=s.estimated_bytes,
              python=[f.function for f in s.stack if f.is_python])
         for s in snap.top_allocators(30)]
emit(dict(estimate=snap.estimated_heap_bytes, snapshots=len(estimates), sites=sites))
"""


def _line(marker):
    return next(i for i, l in enumerate(THREADS.splitlines(), 1) if marker in l)


def test_threads(backend, tmp_path):
    r = backend.json(THREADS, name="threads.py")
    script = str(tmp_path / "threads.py")
    block = 256 << 10
    by = {}
    for s in r["sites"]:
        by.setdefault((s["function"], s["line"]), s)
    a = by.get(("worker_a", _line("LINE_A")))
    b = by.get(("worker_b", _line("LINE_B")))
    assert a and b, r["sites"]
    assert a["file"] == script and b["file"] == script
    # A thread's stack ends in threading's bootstrap, not in the main thread's frames.
    assert a["python"][0] == "worker_a" and code_name("Thread._bootstrap") in a["python"]
    assert "<module>" not in a["python"]
    assert b["python"][0] == "worker_b"
    # worker_a ran in 2 threads (one started before memprof.start()), worker_b in 2.
    truth = 2 * 40 * block
    assert 0.85 * truth <= a["bytes"] <= 1.15 * truth, a["bytes"] / truth
    assert 0.85 * truth <= b["bytes"] <= 1.15 * truth, b["bytes"] / truth
    short = by.get(("short", next(s["line"] for s in r["sites"] if s["function"] == "short")))
    assert 0.7 * 200 * (64 << 10) <= short["bytes"] <= 1.3 * 200 * (64 << 10)


FORK = PROLOGUE + """
import threading

stop = False

def churn():
    keep = []
    while not stop:
        keep.append([(i, str(i)) for i in range(500)])   # samples keep coming
        if len(keep) > 50:
            keep.clear()

memprof.start(sampling_rate_kb=4)
threads = [threading.Thread(target=churn) for _ in range(2)]
for t in threads:
    t.start()
statuses = []
for _ in range(20):
    pid = os.fork()
    if pid == 0:
        # The child: its first samples need the binding's locks, which a parent thread may
        # have held at fork time.
        data = [(i, str(i)) for i in range(20000)]
        snap = memprof.get_snapshot()
        os._exit(0 if snap.live_samples >= 0 else 1)
    statuses.append(os.waitpid(pid, 0)[1])
stop = True
for t in threads:
    t.join()
emit(dict(statuses=statuses))
"""


def test_fork_while_threads_sample(py):
    r = py.json(FORK, name="fork.py")
    assert r["statuses"] == [0] * 20
