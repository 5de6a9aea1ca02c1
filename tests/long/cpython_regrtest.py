#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A subset of CPython's own regression tests under the preload plugin (suite 'long').

Each test module of the subset runs as `python3 -m test MODULE` three times: without the
profiler (the baseline), under LD_PRELOAD at a tiny rate (MEMPROF_RATE=64: nearly every
allocation takes the sampling path, with stack capture, heap-map inserts and Bloom rebuilds)
and at the default rate, each profiled run writing a profile at exit. A module fails here
only if it passes without the profiler and fails with it: the interpreter's own failures on
this machine (a missing resource, a network test) are not ours. Needs Debian's
libpython3.11-testsuite (scripts/long.sh installs it); skipped (exit 77) without it.

    cpython_regrtest.py PRELOAD_SO [MODULE...]
"""
import os
import subprocess
import sys
import tempfile
import time

PYTHON = "/usr/bin/python3"
# Modules that stress what the profiler touches: many small allocations (json, dict, gc,
# weakref), threads and their exit (threading), fork/exec and pipes (subprocess), mmap'ed
# memory next to malloc'ed memory (mmap), resource limits (resource: setrlimit and prlimit,
# which the profiler intercepts), signals and handlers on alternate stacks (signal,
# faulthandler).
DEFAULT_MODULES = ["test_json", "test_dict", "test_gc", "test_weakref", "test_threading",
                   "test_subprocess", "test_mmap", "test_list", "test_set", "test_resource",
                   "test_signal", "test_faulthandler"]
SKIP = 77


def run(module, env):
    start = time.monotonic()
    proc = subprocess.run([PYTHON, "-m", "test", "-q", module], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, timeout=1800)
    return proc.returncode, time.monotonic() - start, proc.stdout.decode(errors="replace")


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    preload = os.path.abspath(sys.argv[1])
    modules = sys.argv[2:] or DEFAULT_MODULES
    probe = subprocess.run([PYTHON, "-c", "import test.support, test.test_json"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if probe.returncode != 0:
        print("CPython's test package is missing (Debian: libpython3.11-testsuite): skipped")
        return SKIP

    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith("MEMPROF_") and k != "LD_PRELOAD"}
    outdir = tempfile.mkdtemp(prefix="memprof-regrtest-")
    configs = [("baseline", {}),
               ("rate 64", {"MEMPROF_RATE": "64"}),
               ("default rate", {})]
    regressions = []
    print(f"{'module':<18}" + "".join(f"{name:>18}" for name, _ in configs))
    for module in modules:
        cells = []
        results = []
        for i, (name, extra) in enumerate(configs):
            env = dict(base_env, **extra)
            if i > 0:
                env["LD_PRELOAD"] = preload
                env["MEMPROF_OUTPUT"] = os.path.join(outdir, f"{module}-{i}-%p.pb.gz")
                env["MEMPROF_QUIET"] = "1"
            rc, secs, out = run(module, env)
            results.append((rc, out))
            cells.append(f"{'ok' if rc == 0 else 'FAIL(%d)' % rc} {secs:6.1f}s")
        print(f"{module:<18}" + "".join(f"{c:>18}" for c in cells), flush=True)
        if results[0][0] != 0:
            continue  # fails without the profiler: not ours
        for (name, _), (rc, out) in zip(configs[1:], results[1:]):
            if rc != 0:
                regressions.append(f"{module} ({name})")
                print(f"--- {module} under the profiler ({name}) failed; its output ends:")
                print("\n".join(out.splitlines()[-40:]))
    profiles = [f for f in os.listdir(outdir) if f.endswith(".pb.gz")]
    print(f"{len(profiles)} profiles written to {outdir}")
    if not profiles:
        regressions.append("no profile was written")
    if regressions:
        print("regressions under the profiler: " + ", ".join(regressions))
        return 1
    print("no regressions under the profiler")
    return 0


if __name__ == "__main__":
    sys.exit(main())
