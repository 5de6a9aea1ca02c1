# SPDX-License-Identifier: MIT
"""Debian's python3 under the preload plugin: native stacks through the interpreter are
complete (>= 12 frames, naming _PyEval_EvalFrameDefault), read back through the C API
(ctypes) while the data is still live. Usage: python3 python_stacks.py OUTPUT.folded"""
import ctypes
import sys

lib = ctypes.CDLL("libmemprof.so.1")


def build(n):
    return [("x" * 2000) + str(i) for i in range(n)]


def outer():
    return build(20000)


data = outer()
snap = ctypes.c_void_p()
assert lib.memprof_get_snapshot(ctypes.byref(snap)) == 0, "no snapshot: not under the plugin?"
assert lib.memprof_snapshot_write(snap, sys.argv[1].encode(), 3) == 0  # collapsed
lib.memprof_free_snapshot(snap)

best = None
with open(sys.argv[1]) as f:
    for line in f:
        stack, value = line.rsplit(" ", 1)
        frames = stack.split(";")
        if "_PyEval_EvalFrameDefault" in frames and (best is None or int(value) > best[1]):
            best = (frames, int(value))
assert best is not None, "no stack through _PyEval_EvalFrameDefault"
frames, value = best
print(f"{len(frames)} frames, {value} bytes: {';'.join(frames)}")
# At least 10: a run of python3's frames without symbols is one "python3.11+?" frame.
assert len(frames) >= 10, f"only {len(frames)} frames"
assert frames[0] == "_start" or "main" in ";".join(frames), "stack does not reach the root"
# 20000 strings of ~2 KB are live: the deepest Python-allocation stack holds most of it.
assert value > 20000 * 2000 * 0.8, value
print(len(data))
