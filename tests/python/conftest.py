# SPDX-License-Identifier: MIT
"""Shared fixtures of the Python binding's tests (suite 'python').

The profiler is one engine per process and shutdown() is one-way, so every test that
profiles runs its workload in a fresh interpreter and reads back a JSON result printed on its
last line. That interpreter is the one under test, PYTHON: MEMPROF_TEST_PYTHON (set by
tests/python/meson.build for each interpreter the binding is built for), else the one running
pytest (Debian's /usr/bin/python3 under meson). Tests that check the package inside the
pytest process itself are marked ``in_process`` and run only when the two are the same
interpreter (the other interpreters may have no pytest).

Backends. A workload runs either with nothing preloaded ("got": memprof.start() patches the
allocator GOT slots itself) or under the preload plugin with MEMPROF_START=0 ("preload": the
plugin's hooks idle until the binding's start()). Tests that take the ``backend`` fixture
run with both; a backend that is not available is skipped with the reason. Others use
``py``, which picks "got" when it works and "preload" otherwise.

Environment (set by tests/python/meson.build): PYTHONPATH (the staged package),
LD_LIBRARY_PATH (libmemprof.so), MEMPROF_TEST_PRELOAD (the plugin's path, when built),
MEMPROF_TEST_PYTHON and MEMPROF_TEST_PYTHON_VERSION (the interpreter under test, "3.12").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Dict, Optional, Sequence

import pytest

PRELOAD = os.environ.get("MEMPROF_TEST_PRELOAD", "")
PYTHON = os.environ.get("MEMPROF_TEST_PYTHON") or sys.executable
PYTHON_VERSION = os.environ.get("MEMPROF_TEST_PYTHON_VERSION") or "%d.%d" % sys.version_info[:2]

in_process = pytest.mark.skipif(
    os.path.realpath(PYTHON) != os.path.realpath(sys.executable),
    reason=f"checks the package in pytest's own interpreter, not {PYTHON}",
)


def _version() -> tuple:
    return tuple(int(x) for x in PYTHON_VERSION.split("."))


def code_name(qualname: str) -> str:
    """The name frames of the function with this qualified name are reported under: the
    qualified name from 3.11 on, the plain name in 3.10 (its code objects have no
    co_qualname)."""
    return qualname.rsplit(".", 1)[-1] if _version() < (3, 11) else qualname


def listcomp_frames(enclosing: str) -> list:
    """The Python frames, innermost first, that a list comprehension in function `enclosing`
    runs in: its own frame, then enclosing's; from 3.12 on only enclosing's (comprehensions
    are inlined, PEP 709)."""
    if _version() >= (3, 12):
        return [code_name(enclosing)]
    return [code_name(enclosing + ".<locals>.<listcomp>"), code_name(enclosing)]


@lru_cache(maxsize=None)
def has_module(name: str) -> bool:
    """Whether the interpreter under test can import this module (numpy, for instance)."""
    r = subprocess.run([PYTHON, "-c", f"import {name}"], env=base_env(),
                       capture_output=True, timeout=60)
    return r.returncode == 0


def base_env() -> Dict[str, str]:
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("MEMPROF_") and k != "MEMPROF_TEST_PRELOAD":
            del env[k]
    env.pop("LD_PRELOAD", None)
    env.pop("PYTHONMALLOC", None)
    env.pop("PYTHONTRACEMALLOC", None)
    env["MALLOC_PERTURB_"] = "0"  # meson sets a random one: glibc would touch big blocks
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def backend_env(backend: str) -> Dict[str, str]:
    env = base_env()
    if backend == "preload":
        env["LD_PRELOAD"] = PRELOAD
        env["MEMPROF_START"] = "0"
    return env


_PROBE = "import memprof\ntry:\n    memprof.start()\nexcept RuntimeError as e:\n    print(e)\nelse:\n    print('ok')\n"


@lru_cache(maxsize=None)
def backend_unavailable(backend: str) -> Optional[str]:
    """None if memprof.start() works with this backend, else why not."""
    if backend == "preload" and not (PRELOAD and os.path.exists(PRELOAD)):
        return "the preload plugin was not built (MEMPROF_TEST_PRELOAD is not set)"
    r = subprocess.run(
        [PYTHON, "-c", _PROBE], env=backend_env(backend), capture_output=True,
        text=True, timeout=60,
    )
    out = (r.stdout.strip().splitlines() or [""])[-1]
    if r.returncode == 0 and out == "ok":
        return None
    detail = out or r.stderr.strip()[-300:]
    if backend == "got":
        return f"memprof.start() without LD_PRELOAD fails in this build ({detail})"
    return f"memprof.start() under the preload plugin fails ({detail})"


class Runner:
    """Runs Python workloads in fresh interpreters with one backend."""

    def __init__(self, backend: str, tmp_path: Path):
        self.backend = backend
        self.tmp_path = tmp_path
        self._n = 0

    def env(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        env = backend_env(self.backend)
        if extra:
            env.update(extra)
        return env

    def script(self, code: str, name: Optional[str] = None) -> Path:
        self._n += 1
        path = self.tmp_path / (name or f"workload{self._n}.py")
        path.write_text(textwrap.dedent(code))
        return path

    def run(
        self,
        args: Sequence[str],
        env: Optional[Dict[str, str]] = None,
        check: bool = True,
        timeout: float = 180,
        cwd: Optional[Path] = None,
    ) -> subprocess.CompletedProcess:
        r = subprocess.run(
            [PYTHON, *args], env=self.env(env), capture_output=True, text=True,
            timeout=timeout, cwd=str(cwd or self.tmp_path),
        )
        if check and r.returncode != 0:
            pytest.fail(
                f"{' '.join(args)} ({self.backend}) exited with {r.returncode}\n"
                f"--- stdout\n{r.stdout[-4000:]}\n--- stderr\n{r.stderr[-4000:]}"
            )
        return r

    def json(self, code: str, env: Optional[Dict[str, str]] = None, name: Optional[str] = None,
             args: Sequence[str] = ()) -> dict:
        """Runs `code` as a script; returns the JSON object printed on its last line."""
        path = self.script(code, name)
        r = self.run([str(path), *args], env=env)
        lines = r.stdout.strip().splitlines()
        if not lines:
            pytest.fail(f"no output from {path}\n--- stderr\n{r.stderr[-4000:]}")
        try:
            return json.loads(lines[-1])
        except ValueError:
            pytest.fail(f"no JSON result from {path}\n--- stdout\n{r.stdout[-4000:]}")


def _runner(backend: str, tmp_path: Path) -> Runner:
    why = backend_unavailable(backend)
    if why:
        pytest.skip(f"{backend} backend: {why}")
    return Runner(backend, tmp_path)


@pytest.fixture(params=["got", "preload"])
def backend(request, tmp_path) -> Runner:
    """A runner for each backend (skipped when unavailable)."""
    return _runner(request.param, tmp_path)


@pytest.fixture
def py(tmp_path) -> Runner:
    """A runner with the backend a user gets: "got" if it works, else "preload"."""
    name = "got" if backend_unavailable("got") is None else "preload"
    return _runner(name, tmp_path)


def pytest_report_header(config):
    lines = [f"memprof workloads run under {PYTHON} (Python {PYTHON_VERSION})"]
    for b in ("got", "preload"):
        why = backend_unavailable(b)
        lines.append(f"memprof backend {b}: {'available' if why is None else why}")
    return lines


# A prologue for workloads: imports and helpers to report results.
PROLOGUE = """
import json, os, sys
import memprof

def frames_of(site):
    return [(f.function, f.filename, f.lineno, f.is_python) for f in site.stack]

def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\\n")
"""
