#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What every process pays to start and exit under libmemprof.

A shell script runs N short processes (/bin/true, 200 by default) and the whole script's wall
time is measured in each configuration: no preload at all; an empty preload library (the
floor any LD_PRELOAD tool pays: the loader maps and relocates one more object); the preload
plugin at its defaults (MEMPROF_OUTPUT unset: it samples and writes nothing); the plugin
idle (MEMPROF_START=0); and `memprof run` around the script, which follows children, so
every process that sampled also writes its profile at exit. Configurations run in rounds, in
an order rotated every round (7 rounds, 3 with --quick); the table gives each
configuration's median wall time, its ratios to no preload and to the empty preload library,
and the time added per process beyond the empty preload library, and the same for CPU time
(user + system of the script and every process it waited for), which other work on a shared
machine disturbs much less than wall time. It also lists the shared objects the plugin
brings into every process.

With --compare-build-dir OTHER, OTHER's plugin (defaults) and `memprof run` join the same
rounds (before and after a change, measured under the same load).

Usage: bench_startup.py --build-dir DIR [--compare-build-dir OTHER] [--quick] [--processes N]
                        [--rounds N]
Prints Markdown on stdout, progress on stderr. A benchmark: it asserts nothing.
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def log(msg):
    print(f"bench_startup: {msg}", file=sys.stderr, flush=True)


def build_empty_preload(tmp):
    """An LD_PRELOAD library that defines nothing: the loader's cost of one more object."""
    src = os.path.join(tmp, "empty.c")
    lib = os.path.join(tmp, "libempty-preload.so")
    with open(src, "w") as f:
        f.write("int memprof_bench_empty_preload;\n")
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", lib, src], check=True)
    return lib


def mapped_objects(env):
    """Shared objects mapped in a process started with `env` (from /proc/self/maps)."""
    out = subprocess.run(["/bin/cat", "/proc/self/maps"], env=env, capture_output=True,
                         text=True, check=True).stdout
    objs = set()
    for line in out.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and ".so" in os.path.basename(parts[5]):
            objs.add(parts[5].strip())
    return objs


def cpu_of_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd, env):
    """Wall and CPU seconds of `cmd` and everything it waited for."""
    c0, t0 = cpu_of_children(), time.monotonic()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0, cpu_of_children() - c0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--compare-build-dir")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--processes", type=int, default=200)
    ap.add_argument("--rounds", type=int)
    args = ap.parse_args()
    rounds = args.rounds or (3 if args.quick else 7)
    def built(build_dir):
        build = os.path.abspath(build_dir)
        plugin = os.path.join(build, "src", "libmemprof-preload.so")
        command = os.path.join(build, "tools", "memprof")
        for p in (plugin, command):
            if not os.path.exists(p):
                sys.exit(f"bench_startup: {p} is not built")
        return plugin, command

    plugin, command = built(args.build_dir)
    true = shutil.which("true") or "/bin/true"
    script = ["/bin/sh", "-c",
              f'i=0; while [ $i -lt {args.processes} ]; do {true}; i=$((i+1)); done']

    with tempfile.TemporaryDirectory(prefix="memprof-bench-startup-") as tmp:
        empty = build_empty_preload(tmp)
        base = {k: v for k, v in os.environ.items()
                if not k.startswith("MEMPROF_") and k != "LD_PRELOAD"}
        outdir = os.path.join(tmp, "profiles")
        os.mkdir(outdir)
        configs = [
            ("no preload", base, script),
            ("empty preload library", dict(base, LD_PRELOAD=empty), script),
            ("plugin, defaults (no output)", dict(base, LD_PRELOAD=plugin), script),
            ("plugin, idle (MEMPROF_START=0)",
             dict(base, LD_PRELOAD=plugin, MEMPROF_START="0"), script),
            ("memprof run (children followed, a profile per process)", base,
             [command, "run", "-q", "-o", os.path.join(outdir, "p.pb.gz"), "--"] + script),
        ]
        if args.compare_build_dir:
            other_plugin, other_command = built(args.compare_build_dir)
            configs += [
                (f"{args.compare_build_dir}: plugin, defaults", dict(base, LD_PRELOAD=other_plugin),
                 script),
                (f"{args.compare_build_dir}: memprof run", base,
                 [other_command, "run", "-q", "-o", os.path.join(outdir, "p.pb.gz"), "--"] +
                 script),
            ]
        times = {name: [] for name, _, _ in configs}
        cpus = {name: [] for name, _, _ in configs}
        for r in range(rounds):
            log(f"round {r + 1}/{rounds}")
            k = r % len(configs)
            for name, env, cmd in configs[k:] + configs[:k]:
                wall, cpu = timed(cmd, env)
                times[name].append(wall)
                cpus[name].append(cpu)
                for f in os.listdir(outdir):
                    os.unlink(os.path.join(outdir, f))

        none = statistics.median(times["no preload"])
        floor = statistics.median(times["empty preload library"])
        n = args.processes
        cpu_none = statistics.median(cpus["no preload"])
        cpu_floor = statistics.median(cpus["empty preload library"])
        print(f"Wall and CPU time of a shell script running {n} `{true}`, medians of {rounds} "
              "rounds (order rotated each round); per process: the time added beyond the "
              "empty preload library, divided by the processes the script starts (the shell "
              f"included: {n + 1}). CPU: user + system of the script and all it waited for.")
        print()
        print("| configuration | wall (s) | ratio to no preload | ratio to the empty preload | "
              "ms per process beyond the empty preload | CPU (s) | CPU ratio | CPU ms per "
              "process beyond the empty preload |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, _, _ in configs:
            t = statistics.median(times[name])
            c = statistics.median(cpus[name])
            floor_row = name in ("no preload", "empty preload library")
            extra = "" if floor_row else f"{(t - floor) * 1000 / (n + 1):+.3f}"
            cpu_extra = "" if floor_row else f"{(c - cpu_floor) * 1000 / (n + 1):+.3f}"
            print(f"| {name} | {t:.3f} | {t / none:.2f} | {t / floor:.2f} | {extra} | {c:.3f} | "
                  f"{c / cpu_none:.2f} | {cpu_extra} |")
        print()
        baseline = mapped_objects(base)
        extra_objs = sorted(mapped_objects(dict(base, LD_PRELOAD=plugin)) - baseline)
        print(f"Shared objects the plugin adds to every process ({len(extra_objs)}): " +
              ", ".join(f"`{os.path.basename(o)}`" for o in extra_objs) + ".")


if __name__ == "__main__":
    main()
