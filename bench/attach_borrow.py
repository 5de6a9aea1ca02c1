#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How long `memprof attach` keeps a thread of the target away from its work.

Attaches to two targets N times each (`memprof attach --no-wait`, then `--stop`) and prints
the median and the range of the time the borrowed thread was away, as the command reports
it ("thread T borrowed for X ms": from the stop at a safe point to the release), for the
first start (loading libmemprof.so.1), the later starts, and the stops (which write the
profile). Targets: python3 asleep in time.sleep(), and build/tests/attach/attach-target
allocating on three threads.

    bench/attach_borrow.py [--memprof build/tools/memprof] [--target ...] [-n 20]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

BORROWED = re.compile(r"borrowed for ([0-9.]+) ms")


def run(memprof, *args):
    r = subprocess.run([memprof, "attach", *args], stderr=subprocess.PIPE, timeout=300)
    err = r.stderr.decode()
    if r.returncode != 0:
        sys.exit("memprof attach %s failed:\n%s" % (" ".join(args), err))
    return float(BORROWED.search(err).group(1))


def measure(memprof, argv, n, tmp):
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    time.sleep(1)
    first, starts, stops = None, [], []
    try:
        for i in range(n):
            out = os.path.join(tmp, "b%d.pb.gz" % i)
            t = run(memprof, "--no-wait", "-o", out, str(p.pid))
            if first is None:
                first = t
            else:
                starts.append(t)
            time.sleep(0.2)
            stops.append(run(memprof, "--stop", "-o", out, str(p.pid)))
    finally:
        p.kill()
        p.wait()
    return first, starts, stops


def describe(xs):
    return "median %.2f ms (%.2f-%.2f, n=%d)" % (statistics.median(xs), min(xs), max(xs), len(xs))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.path.join(here, "..", "build")
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprof", default=os.path.join(build, "tools", "memprof"))
    ap.add_argument("--target", default=os.path.join(build, "tests", "attach", "attach-target"))
    ap.add_argument("-n", type=int, default=20)
    a = ap.parse_args()
    targets = [("python3 in time.sleep()", ["python3", "-c", "import time; time.sleep(1e6)"]),
               ("3 threads allocating", [a.target, "loop"])]
    with tempfile.TemporaryDirectory() as tmp:
        for name, argv in targets:
            first, starts, stops = measure(a.memprof, argv, a.n, tmp)
            print("%s: first start %.2f ms; later starts %s; stops %s"
                  % (name, first, describe(starts), describe(stops)))


if __name__ == "__main__":
    main()
