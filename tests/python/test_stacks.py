# SPDX-License-Identifier: MIT
"""Mixed Python/native stacks: Python frames (qualified function, file, line) take the place
of CPython's eval loop between the native frames of C extensions and of the interpreter
("trim and sandwich"), one group per eval-loop invocation when Python calls C calls Python;
generators, methods, exec'd code and deep recursion; and extension modules imported after
start() (their allocations must be hooked too). The C extension is numpy where the
interpreter under test has it, else ctypes (numpy's checks are then skipped)."""

import os

import pytest

from conftest import PROLOGUE, code_name, has_module

MIXED = PROLOGUE + """
import ctypes
try:
    import numpy as np
except ImportError:
    np = None

class Builder:
    def build(self):
        return np.ones(16 << 20, dtype=np.uint8) if np else (ctypes.c_uint8 * (16 << 20))()  # LINE_BUILD

def inner(i):
    return bytearray(4 << 20)                            # LINE_INNER

def outer():
    return list(map(inner, range(4)))                    # LINE_OUTER

def gen():
    for _ in range(2):
        yield bytearray(4 << 20)                         # LINE_GEN

def deep(n):
    if n == 0:
        return bytearray(4 << 20)                        # LINE_DEEP
    return deep(n - 1)

memprof.start(sampling_rate_kb=64)
b = Builder().build()
o = outer()
g = list(gen())
d = deep(300)
e = {}
exec("e['x'] = bytearray(4 << 20)", {"e": e})

snap = memprof.get_snapshot()
def stack_with(fn):
    for s in snap.top_allocators(50, user_code=False):
        for f in s.stack:
            if f.is_python and f.function == fn:
                return [(f.function, f.filename, f.lineno, f.is_python, f.module)
                        for f in s.stack]
    return None

emit(dict(
    build=stack_with(sys.argv[1]), inner=stack_with("inner"), gen=stack_with("gen"),
    deep=stack_with("deep"),
    sites=[[s.function, s.file, s.line] for s in snap.top_allocators(50)],
    eval_replaced=memprof.get_stats().raw["python_eval_frames_replaced"],
))
"""


def _line(code, marker):
    return next(i for i, l in enumerate(code.splitlines(), 1) if marker in l)


def _python(stack):
    return [f[0] for f in stack if f[3]]


def test_mixed_stacks(backend, tmp_path):
    build_name = code_name("Builder.build")
    r = backend.json(MIXED, name="mixed.py", args=[build_name])
    script = str(tmp_path / "mixed.py")
    assert r["eval_replaced"] > 0

    build = r["build"]
    assert build, r["sites"]
    names = [f[0] for f in build]
    i = names.index(build_name)
    assert build[i][1] == script and build[i][2] == _line(MIXED, "LINE_BUILD")
    # numpy's (or ctypes') native frames are leaf-side of the Python frame; the interpreter's
    # entry points root-side; no eval-loop frame is left.
    ext = "numpy" if has_module("numpy") else "_ctypes"
    assert any(f[4] and ext in f[4] for f in build[:i]), names
    assert not any(f[3] for f in build[:i] if f[4] and ext in f[4])
    assert "PyEval_EvalCode" in names[i:] or "Py_RunMain" in names[i:], names
    assert "_PyEval_EvalFrameDefault" not in names
    assert _python(build)[-1] == "<module>"

    # Python -> C (map, list) -> Python: inner's group sits in the inner eval frame, with
    # native frames between it and outer's group.
    inner = r["inner"]
    names = [f[0] for f in inner]
    ii, io = names.index("inner"), names.index("outer")
    assert ii < io
    assert any(not f[3] for f in inner[ii + 1:io]), names
    assert inner[ii][2] == _line(MIXED, "LINE_INNER")
    assert inner[io][2] == _line(MIXED, "LINE_OUTER")

    gen = r["gen"]
    assert gen and _python(gen)[0] == "gen"
    assert gen[[f[0] for f in gen].index("gen")][2] == _line(MIXED, "LINE_GEN")

    # 300 recursive calls: the capture keeps the innermost frames (128 at most).
    deep = r["deep"]
    assert deep and _python(deep)[0] == "deep"
    assert 100 <= _python(deep).count("deep") <= 128

    # exec'd code is attributed to "<string>", a user-code file (its function is "<module>",
    # like the script's own top level: sites are a list, not keyed by function).
    sites = r["sites"]
    assert ["<module>", "<string>", 1] in sites, sites
    assert [build_name, script, _line(MIXED, "LINE_BUILD")] in sites, sites
    assert ["inner", script, _line(MIXED, "LINE_INNER")] in sites, sites


LATE_IMPORT = PROLOGUE + """
assert "numpy" not in sys.modules and "_sqlite3" not in sys.modules
memprof.start(sampling_rate_kb=64)
import numpy as np                      # loaded after start
import sqlite3

def make_zeros():
    return np.zeros(32 << 20, dtype=np.uint8)          # calloc inside numpy

def make_empty():
    return np.empty(24 << 20, dtype=np.uint8)          # malloc inside numpy

def make_db():
    db = sqlite3.connect(":memory:")
    db.execute("create table t(x)")
    db.executemany("insert into t values (?)", ((b"x" * 1000,) for _ in range(20000)))
    db.commit()
    return db

a = make_zeros()
b = make_empty()
db = make_db()
snap = memprof.get_snapshot()
by_function = {}
for s in snap.top_allocators(50):      # one site per line: add up a function's lines
    by_function[s.function] = by_function.get(s.function, 0) + s.estimated_bytes
emit(by_function)
"""


def test_late_import_of_extension_modules(backend):
    if not has_module("numpy"):
        pytest.skip("numpy is not installed for this interpreter (sqlite3 alone: next test)")
    r = backend.json(LATE_IMPORT, name="late.py")
    MIB = 1 << 20
    assert 0.9 * 32 * MIB <= r.get("make_zeros", 0) <= 1.1 * 32 * MIB, r
    assert 0.9 * 24 * MIB <= r.get("make_empty", 0) <= 1.1 * 24 * MIB, r
    # sqlite3's pages come from its own malloc calls in libsqlite3 (20 MB of rows).
    assert r.get("make_db", 0) >= 10 * MIB, r


LATE_SQLITE = PROLOGUE + """
assert "_sqlite3" not in sys.modules
memprof.start(sampling_rate_kb=64)
import sqlite3                          # loaded after start

def make_db():
    db = sqlite3.connect(":memory:")
    db.execute("create table t(x)")
    db.executemany("insert into t values (?)", ((b"x" * 1000,) for _ in range(20000)))
    db.commit()
    return db

db = make_db()
snap = memprof.get_snapshot()
emit({"make_db": sum(s.estimated_bytes for s in snap.top_allocators(50)
                     if s.function == "make_db")})
"""


def test_late_import_of_sqlite3(backend):
    # sqlite3's pages come from its own malloc calls in libsqlite3, loaded after start().
    r = backend.json(LATE_SQLITE, name="late_sqlite.py")
    assert r["make_db"] >= 10 * (1 << 20), r


HOOKS = PROLOGUE + """
memprof.start(sampling_rate_kb=64)

def make_objects():
    return [{"k": str(i)} for i in range(100000)]   # pymalloc: through the binding's hooks

def make_buffers():
    return [bytearray(100000) for _ in range(100)]  # PyMem_RawMalloc-sized: malloc

o, b = make_objects(), make_buffers()
snap = memprof.get_snapshot()
emit([[(f.function, f.filename, f.module) for f in s.stack]
      for s in snap.top_allocators(50, user_code=False)])
"""


def test_binding_frames_absent(backend):
    # The binding marks its object as hook code (memprof_register_hook_code()): its PyMem
    # hooks (take_sample, obj_malloc_slow in pymem.c) are trimmed from every stack at capture,
    # like libmemprof's own frames, so no site is named after them (doc/guide.md, "Site
    # names").
    stacks = backend.json(HOOKS, name="hooks.py")
    assert stacks
    for stack in stacks:
        for function, filename, module in stack:
            assert not (filename or "").endswith("pymem.c"), stack
            assert "_memprof" not in os.path.basename(module or ""), stack
    # The objects' stacks start in CPython (its allocator called by the list comprehension).
    leaves = {s[0][0] for s in stacks if s}
    assert "take_sample" not in leaves and "obj_malloc_slow" not in leaves, leaves
