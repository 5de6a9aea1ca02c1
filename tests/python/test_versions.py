# SPDX-License-Identifier: MIT
"""What differs between CPython versions (bindings/python/src/frames_compat.h), checked under
the interpreter under test: the extension imported is the one built for it; Python frames
carry function, file and line through the constructs whose frames each version lays out
differently (methods, a class's __init__ reached by a specialized call, generators,
comprehensions, Python called from C); the interpreter's own shim frames (3.12's and 3.13's
C-stack shims, 3.13's __init__ shim) are not reported; and every eval-loop invocation marks
its first frame."""

from conftest import PROLOGUE, PYTHON_VERSION

EXTENSION = PROLOGUE + """
import sysconfig
from memprof import _memprof
emit(dict(version="%d.%d" % sys.version_info[:2], file=_memprof.__file__,
          suffix=sysconfig.get_config_var("EXT_SUFFIX"), state=memprof.get_stats().state))
"""


def test_extension_is_built_for_the_interpreter_under_test(py):
    r = py.json(EXTENSION, name="extension.py")
    assert r["version"] == PYTHON_VERSION
    assert r["file"].endswith("/memprof/_memprof" + r["suffix"]), r
    assert r["state"] == "uninitialized"


FRAMES = PROLOGUE + """
class Node:
    def __init__(self):
        self.payload = bytearray(1 << 20)                  # LINE_INIT

def make_nodes():
    return [Node() for _ in range(40)]                     # LINE_NODES

class Store:
    def fill(self):
        return bytearray(8 << 20)                          # LINE_METHOD

def chunks():
    for _ in range(4):
        yield bytearray(2 << 20)                           # LINE_GEN

def callback(_):
    return bytearray(2 << 20)                              # LINE_CALLBACK

def via_c():
    return list(map(callback, range(4)))                   # LINE_MAP

memprof.start(sampling_rate_kb=64)
for _ in range(100):                                       # warm up: 3.13 specializes the
    Node()                                                 # call of Node() (its __init__ shim)
nodes = make_nodes()
store = Store().fill()
gen = list(chunks())
mapped = via_c()
snap = memprof.get_snapshot()
out = {}
for s in snap.top_allocators(50, user_code=False):
    stack = [(f.function, f.filename, f.lineno, f.is_python) for f in s.stack]
    python = [x[:3] for x in stack if x[3]]
    out.setdefault(python[0][0] if python else "-", dict(python=python, stack=stack,
                                                         bytes=s.estimated_bytes))
emit(out)
"""


def _line(marker):
    return next(i for i, l in enumerate(FRAMES.splitlines(), 1) if marker in l)


def _qualified(cls, name):
    # Code objects have qualified names from 3.11 on; 3.10 reports the plain name.
    return name if PYTHON_VERSION == "3.10" else f"{cls}.{name}"


def _frames(backend, tmp_path):
    return backend.json(FRAMES, name="frames.py"), str(tmp_path / "frames.py")


def test_frames_of_a_specialized_init_call(py, tmp_path):
    r, script = _frames(py, tmp_path)
    init = r[_qualified("Node", "__init__")]
    assert tuple(init["python"][0]) == (_qualified("Node", "__init__"), script, _line("LINE_INIT"))
    callers = [f[0] for f in init["python"][1:]]
    # 3.12 and later inline the comprehension into make_nodes (PEP 709); before, it is a
    # <listcomp> frame of its own.
    assert "make_nodes" in callers and callers[-1] == "<module>", init
    assert ["make_nodes", script, _line("LINE_NODES")] in init["python"]
    assert 0.8 * (40 << 20) <= init["bytes"] <= 1.2 * (40 << 20)


def test_no_shim_frames(py, tmp_path):
    # Every Python frame of these stacks runs the script's code: no _Py_InitCleanup (3.13:
    # file and name "__init__") and no C-stack shim (3.12 and later: the interpreter's
    # trampoline code) among them.
    r, script = _frames(py, tmp_path)
    for name in [_qualified("Node", "__init__"), _qualified("Store", "fill"), "chunks",
                 "callback"]:
        assert {f[1] for f in r[name]["python"]} == {script}, r[name]


def test_frames_of_a_method_and_a_generator(py, tmp_path):
    r, script = _frames(py, tmp_path)
    method = r[_qualified("Store", "fill")]
    assert tuple(method["python"][0]) == (_qualified("Store", "fill"), script, _line("LINE_METHOD"))
    assert method["python"][-1][0] == "<module>"
    gen = r["chunks"]
    assert tuple(gen["python"][0]) == ("chunks", script, _line("LINE_GEN"))


def test_python_called_from_c_gets_its_own_group(py, tmp_path):
    # callback runs in an eval loop of its own, called by map() (C), called by via_c: the
    # entry marks put map's native frames between the two Python groups.
    r, script = _frames(py, tmp_path)
    site = r["callback"]
    assert [tuple(f) for f in site["python"][:2]] == [
        ("callback", script, _line("LINE_CALLBACK")), ("via_c", script, _line("LINE_MAP"))]
    names = [f[0] for f in site["stack"]]
    inner, outer = names.index("callback"), names.index("via_c")
    assert any(not f[3] for f in site["stack"][inner + 1:outer]), names
    assert "_PyEval_EvalFrameDefault" not in names
