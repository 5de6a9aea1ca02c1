#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Overhead of the Python binding on a Python workload (a benchmark, not a test).

Runs the same pure-Python workload in fresh interpreters, alternately with the profiler
started at the default rate (memprof.start()) and not started (the package imported,
nothing else), and prints the median of the per-pair time ratios (started / not started),
and the ratio of the fastest runs of each arm (the least disturbed by other load on a shared
machine). The target is <= 1.03. Two workloads, under a second each:
  objects  allocation-bound: JSON round trips, many small dicts, lists, strings and tuples
           made and dropped, sorting and joining, part of the data kept live (a worst case:
           nearly every bytecode allocates, and each allocation passes the PyMem hooks);
  mixed    a more ordinary program: arithmetic on objects, string formatting and parsing,
           dict and set bookkeeping, sorting.

The time is the child's CPU time (time.process_time()) around the workload only (interpreter
start-up, imports and start() excluded), which is less disturbed than wall time by other
load on a shared machine; the profiler runs no threads of its own. Backend: "got" runs without LD_PRELOAD (memprof.start() patches the
allocator GOT slots itself); "preload" runs both arms under the preload plugin with
MEMPROF_START=0, so the baseline pays for the plugin's idle hooks; "auto" (the default)
picks got when it works.

Usage: bench/python_overhead.py [--build BUILDDIR] [--python PATH] [--pairs N] [--scale N]
                                [--workload objects|mixed|both] [--rate-kb KB]
                                [--backend auto|got|preload] [--instructions [--hash-seed N]]
--instructions counts the instructions of both arms under valgrind instead (deterministic,
unaffected by other load; the scale is halved and the count taken as the difference between
runs at the scale and at a tenth of it, which cancels start-up). Every child then runs with
the same PYTHONHASHSEED (--hash-seed, 0 by default): with a random seed per interpreter, the
str hashes change dict and set layouts and the not-started arm alone varies by up to 1.5 %
between runs, more than the effect measured; the started arm still varies a little with the
sampler's own random seed. Compare several --hash-seed values rather than trusting one.
With --build, the package staged in BUILDDIR/bindings/python and BUILDDIR/src's libraries
are used; without it, the installed package. The workloads run under --python (an
interpreter the binding was built for, e.g. one of the python_interpreters option's), by
default the interpreter running this script.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
import memprof

workload_name = sys.argv[1]
scale = int(sys.argv[2])
rate_kb = int(sys.argv[3])
if sys.argv[4] == "on":
    memprof.start(sampling_rate_kb=rate_kb) if rate_kb else memprof.start()

def objects(scale):
    # Allocation-bound: every step makes and drops small objects (dicts, lists, str, int,
    # float, tuples), JSON round trips, part of the data kept live.
    keep = []
    for i in range(scale):
        d = {"id": i, "name": f"item-{i}", "tags": [str(j) for j in range(6)],
             "pos": (i, i * 2, i * 3), "score": i * 0.5}
        keep.append(json.loads(json.dumps(d)))
        if len(keep) > 40_000:
            del keep[:20_000]
    words = ["w%d" % (i * 7919 % 100_003) for i in range(scale * 2)]
    words.sort()
    text = ",".join(words)
    parts = text.split(",")
    index = {}
    for k, w in enumerate(parts):
        index.setdefault(w[:3], []).append(k)
    return len(keep), len(index)

class Body:
    __slots__ = ("x", "y", "vx", "vy", "m")
    def __init__(self, x, y, m):
        self.x, self.y, self.vx, self.vy, self.m = x, y, 0.0, 0.0, m

def mixed(scale):
    # A more ordinary program: arithmetic on objects, string formatting and parsing,
    # dict/set bookkeeping, sorting; it allocates too, but also computes.
    bodies = [Body(i * 0.7 % 13.0, i * 1.3 % 7.0, 1.0 + i % 3) for i in range(60)]
    for step in range(scale // 1000):
        for a in bodies:
            fx = fy = 0.0
            for b in bodies:
                if a is not b:
                    dx, dy = b.x - a.x, b.y - a.y
                    d2 = dx * dx + dy * dy + 0.01
                    f = b.m / (d2 * d2 ** 0.5)
                    fx += f * dx
                    fy += f * dy
            a.vx += fx * 1e-3
            a.vy += fy * 1e-3
        for a in bodies:
            a.x += a.vx
            a.y += a.vy
    counts = {}
    lines = [f"{i},{i % 97},{i * 31 % 1009},name{i % 53}" for i in range(scale)]
    for line in lines:
        a, b, c, name = line.split(",")
        counts[name] = counts.get(name, 0) + int(b) * int(c)
    seen = set()
    for i in range(scale):
        seen.add((i * 7) % 5003)
    return sorted(counts.items(), key=lambda kv: kv[1])[:5], len(seen)

fn = {"objects": objects, "mixed": mixed}[workload_name]
fn(scale // 10)                            # warm-up
t0 = time.process_time()
fn(scale)
elapsed = time.process_time() - t0
samples = memprof.get_stats().total_samples
print(json.dumps({"elapsed": elapsed, "samples": samples}))
"""


DEFAULT_SCALE = {"objects": 60_000, "mixed": 500_000}


def child_env(args, backend):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("MEMPROF_"):
            del env[k]
    env.pop("LD_PRELOAD", None)
    if args.build:
        build = os.path.abspath(args.build)
        env["PYTHONPATH"] = os.path.join(build, "bindings", "python")
        env["LD_LIBRARY_PATH"] = os.path.join(build, "src")
    if backend == "preload":
        if not args.build:
            sys.exit("python_overhead: --backend preload needs --build")
        env["LD_PRELOAD"] = os.path.join(os.path.abspath(args.build), "src",
                                         "libmemprof-preload.so")
        env["MEMPROF_START"] = "0"
    return env


def run_child(args, env, workload, on):
    scale = args.scale or DEFAULT_SCALE[workload]
    r = subprocess.run(
        [args.python, "-c", CHILD, workload, str(scale), str(args.rate_kb),
         "on" if on else "off"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    if r.returncode != 0:
        sys.exit(f"python_overhead: the workload failed ({'on' if on else 'off'}):\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def instructions(args, env, workload, on, scale):
    """Instructions the child executes (valgrind's cachegrind), start-up included."""
    r = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         args.python, "-c", CHILD, workload, str(scale), str(args.rate_kb),
         "on" if on else "off"],
        env=env, capture_output=True, text=True, timeout=3600,
    )
    for line in r.stderr.splitlines():
        if "I   refs:" in line or "I refs:" in line:
            return int(line.split(":")[1].replace(",", "").strip())
    sys.exit(f"python_overhead: no instruction count from valgrind:\n{r.stderr[-2000:]}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", help="a meson build directory with the binding staged")
    p.add_argument("--python", default=sys.executable,
                   help="the interpreter the workloads run under (this one)")
    p.add_argument("--pairs", type=int, default=15, help="alternating pairs of runs (15)")
    p.add_argument("--scale", type=int, default=0, help="workload size (default: ~1 s)")
    p.add_argument("--workload", choices=["objects", "mixed", "both"], default="both")
    p.add_argument("--rate-kb", type=int, default=0, help="sampling rate, 0 = default")
    p.add_argument("--backend", choices=["auto", "got", "preload"], default="auto")
    p.add_argument("--instructions", action="store_true",
                   help="count instructions with valgrind instead of timing (deterministic)")
    p.add_argument("--hash-seed", type=int, default=0,
                   help="PYTHONHASHSEED of every child with --instructions (0)")
    args = p.parse_args()

    backend = args.backend
    if backend == "auto":
        probe = subprocess.run(
            [args.python, "-c", "import memprof; memprof.start()"],
            env=child_env(args, "got"), capture_output=True, text=True,
        )
        backend = "got" if probe.returncode == 0 else "preload"
    env = child_env(args, backend)
    if args.instructions:
        env["PYTHONHASHSEED"] = str(args.hash_seed)

    workloads = ["objects", "mixed"] if args.workload == "both" else [args.workload]
    if args.instructions:
        # The workload's own instructions: the difference between a run at the full scale
        # and one at a tenth of it (start-up, imports and start() cancel out).
        for workload in workloads:
            scale = (args.scale or DEFAULT_SCALE[workload]) // 2
            counts = {}
            for on in (False, True):
                big = instructions(args, env, workload, on, scale)
                small = instructions(args, env, workload, on, scale // 10)
                counts[on] = big - small
            print(f"instruction ratio, {workload} workload (started / not started): "
                  f"{counts[True] / counts[False]:.3f}  ({counts[False]:,} -> {counts[True]:,} "
                  f"instructions for 9/10 of the workload at scale {scale}, "
                  f"PYTHONHASHSEED={args.hash_seed})", flush=True)
        return 0
    results = {}
    for workload in workloads:
        ratios, on_times, off_times, samples = [], [], [], []
        for i in range(args.pairs):
            # Alternate which arm goes first, so drift in machine load hits both alike.
            if i % 2 == 0:
                off = run_child(args, env, workload, False)
                on = run_child(args, env, workload, True)
            else:
                on = run_child(args, env, workload, True)
                off = run_child(args, env, workload, False)
            ratios.append(on["elapsed"] / off["elapsed"])
            on_times.append(on["elapsed"])
            off_times.append(off["elapsed"])
            samples.append(on["samples"])
            print(f"{workload} pair {i + 1}: not started {off['elapsed']:.3f} s, started "
                  f"{on['elapsed']:.3f} s, ratio {ratios[-1]:.3f} ({on['samples']} samples)",
                  flush=True)
        results[workload] = (statistics.median(ratios), min(on_times) / min(off_times))
        print(f"{workload}: backend {backend}, rate {args.rate_kb or 512} KiB, {args.pairs} "
              f"pairs: median CPU time not started {statistics.median(off_times):.3f} s, "
              f"started {statistics.median(on_times):.3f} s, median "
              f"{int(statistics.median(samples))} samples", flush=True)
    for workload, (med, best) in results.items():
        print(f"median ratio, {workload} workload (started / not started): {med:.3f}  "
              f"(target <= 1.03); ratio of the fastest runs: {best:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
