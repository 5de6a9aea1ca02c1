#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Cost of the eBPF mode per probed allocator call (bench/README.md, "eBPF mode").

Runs bench_ebpf_workload (malloc+free pairs of 64 bytes) in three ways, alternating, for
--rounds rounds, and prints the medians:
  plain      the workload alone;
  traced     under `memprof run --ebpf` (a pair is two probed calls: malloc with its entry
             and return probes, free with its entry probe);
  bystander  a second copy, not traced, running while a traced copy runs: uprobes are set
             in the traced process only, so it should cost nothing; compared with the
             same copy beside an untraced one (beside), so the two cores' sharing is not
             counted as the probes' cost.
Needs root (BPF); prints a line and exits 0 when BPF is not allowed.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

NO_BPF = 3


def ns_per_pair(out):
    m = re.search(r"ns_per_pair ([0-9.]+)", out)
    if not m:
        sys.exit("workload output without ns_per_pair: " + out)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=2000000)
    ap.add_argument("--rate", default="512K")
    a = ap.parse_args()
    work = os.path.join(a.build_dir, "bench", "bench_ebpf_workload")
    memprof = os.path.join(a.build_dir, "tools", "memprof")
    wl = [work, str(a.pairs), "64"]
    traced_cmd = [memprof, "run", "--ebpf", "-q", "-r", a.rate, "-o", "/dev/null", "--"] + wl
    probe = subprocess.run(traced_cmd, capture_output=True, text=True)
    if probe.returncode == NO_BPF:
        print("eBPF mode not available: " + probe.stderr.strip())
        return
    plain, traced, beside, bystander = [], [], [], []
    for _ in range(a.rounds):
        plain.append(ns_per_pair(subprocess.run(wl, capture_output=True, text=True).stdout))
        r = subprocess.run(traced_cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("memprof run --ebpf failed: " + r.stderr)
        traced.append(ns_per_pair(r.stdout))
        # Beside a copy that runs longer than it: untraced, then traced (a quarter of the
        # pairs traced take longer than all of them plain).
        for other, into in (([work, str(8 * a.pairs), "64"], beside),
                            (traced_cmd[:-3] + [work, str(a.pairs), "64"], bystander)):
            o = subprocess.Popen(other, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            into.append(ns_per_pair(subprocess.run(wl, capture_output=True, text=True).stdout))
            o.wait()
    p, t, s_, b = (statistics.median(x) for x in (plain, traced, beside, bystander))
    print(f"malloc+free pair, 64 bytes, rate {a.rate}, median of {a.rounds} rounds:")
    print(f"  plain      {p:8.1f} ns/pair")
    print(f"  traced     {t:8.1f} ns/pair  ({t / p:.1f}x; {(t - p) / 2:.0f} ns per probed call)")
    print(f"  beside     {s_:8.1f} ns/pair  (an untraced process beside another untraced one)")
    print(f"  bystander  {b:8.1f} ns/pair  ({b / s_:.2f}x of beside: an untraced process beside "
          f"a traced one)")


if __name__ == "__main__":
    main()
