#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Overhead of the PHP extension on an allocation-heavy PHP workload (bench/php_overhead.php).

The same script runs in fresh `php -n` processes, alternately without the extension and with
it loaded and profiling the whole script (MEMPROF_PHP=1, at the default rate of 512 KiB
unless --rate), in pairs; each run times only its workload (after a warm-up, excluding
start-up and the profile written at the end) in process CPU time, each pair gives a ratio
profiled / plain, and the median ratio is printed (target: <= 1.05). Alternating pairs
cancel slow drifts; the median discards the pairs a neighbour disturbed. The ratio of the
fastest runs of each kind is printed too: on a busy machine the least disturbed runs are the
best estimate of the true cost. A third kind, --loaded, runs with the extension loaded but
not profiling. A benchmark, not a test: nothing is asserted.

--instructions counts instructions instead, under valgrind's cachegrind (no cache
simulation; deterministic to a few hundredths of a percent, and blind to the load of a
shared machine, where timed ratios swing by +-10 % from pair to pair): each kind runs the
warm-up alone and the warm-up plus the workload, and the ratio of the differences is the
instruction overhead of the workload. It misses cache effects.

    python3 bench/php_overhead.py --ext build/bindings/php/memprof.so \\
        [--lib build/src] [--pairs N] [--iterations N] [--rate 512K] [--loaded]
        [--instructions]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def instructions(php, ext, iterations, env):
    """Instructions the whole process ran (cachegrind's "I refs")."""
    args = ["valgrind", "--tool=cachegrind", "--cache-sim=no",
            "--cachegrind-out-file=/dev/null", php, "-n"]
    if ext:
        args += ["-d", "extension=" + ext]
    args += [os.path.join(HERE, "php_overhead.php"), str(iterations)]
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True)
    refs = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    return int(refs.group(1).replace(",", ""))


def run(php, ext, iterations, env):
    args = [php, "-n"]
    if ext:
        args += ["-d", "extension=" + ext]
    args += [os.path.join(HERE, "php_overhead.php"), str(iterations)]
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--php", default="/usr/bin/php8.2")
    ap.add_argument("--ext", required=True, help="path of memprof.so")
    ap.add_argument("--lib", help="directory of libmemprof.so.1 (LD_LIBRARY_PATH)")
    ap.add_argument("--pairs", type=int, default=11)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--rate", default="512K", help="MEMPROF_RATE of the profiled runs")
    ap.add_argument("--loaded", action="store_true",
                    help="also time the extension loaded but not profiling")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions under cachegrind instead of timing")
    a = ap.parse_args()
    ext = os.path.abspath(a.ext)
    base = dict(os.environ)
    base.pop("MEMPROF_PHP", None)
    if a.lib:
        base["LD_LIBRARY_PATH"] = os.path.abspath(a.lib) + (
            ":" + base["LD_LIBRARY_PATH"] if base.get("LD_LIBRARY_PATH") else "")
    profiled = dict(base, MEMPROF_PHP="1", MEMPROF_RATE=a.rate, MEMPROF_OUTPUT="/dev/null")
    kinds = [("plain", None, base), ("profiled", ext, profiled)]
    if a.loaded:
        kinds.append(("loaded", ext, base))
    if a.instructions:
        work = {}
        for kind, e, env in kinds:
            work[kind] = (instructions(a.php, e, a.iterations, env)
                          - instructions(a.php, e, 0, env))
        print(f"workload: {a.iterations} rounds, instructions (cachegrind), rate {a.rate}")
        for kind, _, _ in kinds:
            print(f"{kind}: {work[kind]:,} instructions"
                  + (f", ratio {work[kind] / work['plain']:.4f}" if kind != "plain" else ""))
        return
    times = {k: [] for k, _, _ in kinds}
    for i in range(a.pairs):
        order = kinds if i % 2 == 0 else list(reversed(kinds))
        for kind, e, env in order:
            times[kind].append(run(a.php, e, a.iterations, env))
        line = "  ".join(f"{k} {times[k][-1]:.3f}s" for k, _, _ in kinds)
        print(f"pair {i + 1:2d}: {line}", file=sys.stderr)
    print(f"workload: {a.iterations} rounds, {a.pairs} alternated pairs, rate {a.rate}")
    for kind, _, _ in kinds[1:]:
        ratios = [p / q for p, q in zip(times[kind], times["plain"])]
        print(f"{kind}/plain: median ratio {statistics.median(ratios):.3f} "
              f"(pairs {min(ratios):.3f} to {max(ratios):.3f}); "
              f"fastest runs {min(times[kind]):.3f}s / {min(times['plain']):.3f}s = "
              f"{min(times[kind]) / min(times['plain']):.3f}")


if __name__ == "__main__":
    main()
