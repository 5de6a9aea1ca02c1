#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What a profiled process pays at exit to symbolize its own profile.

Builds a program with a large amount of DWARF (C++ templates: --functions instantiations,
each a distinct allocation site, compiled with -g -O1), runs it and measures two things per
configuration: the time from the end of main() to the process being reaped (the exit path,
where the plugin writes the profile), and the child's peak resident memory (ru_maxrss).
Configurations: no profiler; the plugin writing a symbolized profile (names resolved in the
process, the default for LD_PRELOAD users); the plugin writing a raw profile
(MEMPROF_SYMBOLIZE=0: addresses, mappings and build ids). When the command can symbolize a
raw profile afterwards (`memprof report --symbolize`), its time and peak memory are given
too: that work moves out of the program. Medians over --runs runs, alternated.

Usage: bench_exit.py --build-dir DIR [--quick] [--functions N] [--runs N]
Prints Markdown on stdout, progress on stderr. A benchmark: it asserts nothing.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def log(msg):
    print(f"bench_exit: {msg}", file=sys.stderr, flush=True)


def generate(path, functions):
    """A C++ program whose every template instantiation allocates at a site of its own and
    keeps the block, so the exit profile has `functions` distinct stacks to symbolize."""
    with open(path, "w") as f:
        f.write("""#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <string>
#include <vector>

template <int N> struct Site {
    std::map<std::string, std::vector<long>> index;
    __attribute__((noinline)) static void *grow(std::vector<void *> &keep)
    {
        Site<N> s;
        s.index[std::to_string(N)].push_back(N);
        void *p = std::malloc(4096 + N % 7);
        keep.push_back(p);
        return p;
    }
};

using grow_fn = void *(*)(std::vector<void *> &);
""")
        f.write("static const grow_fn sites[] = {\n")
        for i in range(functions):
            f.write(f"    &Site<{i}>::grow,\n")
        f.write("};\n")
        f.write("""
int main()
{
    std::vector<void *> keep;
    for (int round = 0; round < 4; round++)
        for (grow_fn g : sites)
            g(keep);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    std::printf("%lld.%09ld\\n", (long long)ts.tv_sec, ts.tv_nsec);
    std::fflush(stdout);
    return 0; /* the blocks stay live: the exit profile holds every site */
}
""")


def run_once(binary, env):
    """(seconds from the end of main to the reap, the child's peak RSS in MiB)."""
    p = subprocess.Popen([binary], env=env, stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    reaped = time.clock_gettime(time.CLOCK_MONOTONIC)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"bench_exit: {binary} exited with {p.returncode}")
    return reaped - float(out.split()[0]), ru.ru_maxrss / 1024


def timed_command(cmd):
    """(wall seconds, peak RSS in MiB) of a command run to completion."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return None
    return time.monotonic() - t0, ru.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--functions", type=int)
    ap.add_argument("--runs", type=int)
    args = ap.parse_args()
    functions = args.functions or (600 if args.quick else 2000)
    runs = args.runs or (3 if args.quick else 7)
    build = os.path.abspath(args.build_dir)
    plugin = os.path.join(build, "src", "libmemprof-preload.so")
    command = os.path.join(build, "tools", "memprof")
    for p in (plugin, command):
        if not os.path.exists(p):
            sys.exit(f"bench_exit: {p} is not built")
    help_text = subprocess.run([command, "report", "--help"], capture_output=True,
                               text=True).stdout
    can_symbolize_later = "--symbolize" in help_text

    with tempfile.TemporaryDirectory(prefix="memprof-bench-exit-") as tmp:
        src = os.path.join(tmp, "big.cc")
        binary = os.path.join(tmp, "big")
        generate(src, functions)
        log(f"compiling {functions} instantiations with -g ...")
        t0 = time.monotonic()
        subprocess.run([os.environ.get("CXX", "g++"), "-g", "-O1", "-o", binary, src],
                       check=True)
        compile_s = time.monotonic() - t0

        base = {k: v for k, v in os.environ.items()
                if not k.startswith("MEMPROF_") and k != "LD_PRELOAD"}
        symbolized = os.path.join(tmp, "symbolized.pb.gz")
        raw = os.path.join(tmp, "raw.pb.gz")
        configs = [
            ("no profiler", base),
            ("plugin, symbolized in the process",
             dict(base, LD_PRELOAD=plugin, MEMPROF_OUTPUT=symbolized, MEMPROF_RATE="4096")),
            ("plugin, raw (MEMPROF_SYMBOLIZE=0)",
             dict(base, LD_PRELOAD=plugin, MEMPROF_OUTPUT=raw, MEMPROF_RATE="4096",
                  MEMPROF_SYMBOLIZE="0")),
        ]
        results = {name: [] for name, _ in configs}
        for r in range(runs):
            log(f"run {r + 1}/{runs}")
            for name, env in configs:
                results[name].append(run_once(binary, env))

        print(f"A C++ program with {functions} template instantiations, each an allocation "
              f"site kept live to the end ({os.path.getsize(binary) >> 10} KiB with -g, "
              f"built in {compile_s:.0f} s); rate 4096 B. Medians of {runs} runs: the time "
              "from the end of main() to the reap (the exit path) and the process's peak "
              "resident memory.")
        print()
        print("| configuration | exit (ms) | peak RSS (MiB) |")
        print("|---|---:|---:|")
        for name, _ in configs:
            ex = statistics.median(t for t, _ in results[name])
            rss = statistics.median(m for _, m in results[name])
            print(f"| {name} | {ex * 1000:.1f} | {rss:.1f} |")
        if can_symbolize_later:
            later = [timed_command([command, "report", "--symbolize", "-o",
                                    os.path.join(tmp, f"later{i}.pb.gz"), raw])
                     for i in range(runs)]
            later = [x for x in later if x]
            if later:
                print(f"| `memprof report --symbolize` of the raw profile, in the command "
                      f"| {statistics.median(t for t, _ in later) * 1000:.1f} "
                      f"| {statistics.median(m for _, m in later):.1f} |")
        else:
            print()
            print("This build's `memprof report` cannot symbolize a raw profile afterwards.")


if __name__ == "__main__":
    main()
