#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What `memprof run -- make` costs a small build.

Generates a small C project (48 source files of a few hundred lines each: structs, loops,
string handling, enough for cc1 to do real work; one header; a Makefile with a pattern rule
and a link step) in a temporary directory and builds it from clean with `make -j2` (--jobs),
once plainly and once under `memprof run` (which follows every process the build starts:
make, the shells, the gcc drivers, cc1, as, collect2, ld), alternating the two in each
round (the order rotated every round). Each build starts from `make clean`. The table gives
each configuration's median wall and CPU time (user + system of everything it waited for,
which other work on a shared machine disturbs less than wall time) and the ratio of the
medians, plus the median of the per-round ratios; and how many profile files a run left.

With --compare-build-dir OTHER, a third configuration runs OTHER's command the same way in
the same rounds (before and after a change, measured under the same load), and the ratios
are given for it too.

With --breakdown, three more configurations in the same rounds split the cost of `memprof
run` into its parts: the plugin loaded into every process but idle (MEMPROF_START=0: loading
and the hooks), sampling at the default rate without writing anything, and sampling with
each process writing its raw profile as under `memprof run` (MEMPROF_OUTPUT with %p,
MEMPROF_SYMBOLIZE=0); what `memprof run` costs beyond the last is its command (the
profiles named and rewritten after the build).

Usage: bench_make.py --build-dir DIR [--compare-build-dir OTHER] [--breakdown] [--rounds N]
                     [--files N] [--jobs N]
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
    print(f"bench_make: {msg}", file=sys.stderr, flush=True)


HEADER = """\
#ifndef PROJ_H
#define PROJ_H
#include <stddef.h>
struct record { char name[32]; long values[16]; double weight; struct record *next; };
long proj_checksum(const struct record *r);
%s
#endif
"""

# One source file: a few functions that parse, sort and format, different in each file so
# nothing is shared between compilations. {i} is the file's number.
SOURCE = """\
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "proj.h"

static int cmp_{i}(const void *a, const void *b)
{{
    const struct record *x = a, *y = b;
    return (x->weight > y->weight) - (x->weight < y->weight);
}}

static struct record *parse_{i}(const char *text, size_t *n)
{{
    size_t cap = 16, len = 0;
    struct record *v = malloc(cap * sizeof *v);
    const char *p = text;
    while (v && *p) {{
        if (len == cap) {{
            struct record *w = realloc(v, 2 * cap * sizeof *v);
            if (!w)
                break;
            v = w;
            cap *= 2;
        }}
        struct record *r = &v[len++];
        memset(r, 0, sizeof *r);
        size_t k = 0;
        while (*p && *p != ':' && k + 1 < sizeof r->name)
            r->name[k++] = *p++;
        for (int j = 0; *p && j < 16; j++) {{
            char *end;
            r->values[j] = strtol(p + 1, &end, 10) * {i};
            p = end;
            r->weight += (double)r->values[j] / (j + 1);
        }}
        while (*p && *p != ';')
            p++;
        if (*p)
            p++;
    }}
    *n = len;
    return v;
}}

static void format_{i}(const struct record *v, size_t n, char *out, size_t size)
{{
    size_t used = 0;
    for (size_t k = 0; k < n && used < size; k++) {{
        int w = snprintf(out + used, size - used, "%s=%.3f,%ld|", v[k].name, v[k].weight,
                         proj_checksum(&v[k]));
        if (w < 0)
            break;
        used += (size_t)w;
    }}
}}

long run_{i}(const char *text)
{{
    size_t n;
    struct record *v = parse_{i}(text, &n);
    if (!v)
        return -1;
    qsort(v, n, sizeof *v, cmp_{i});
    for (size_t k = 0; k + 1 < n; k++)
        v[k].next = &v[k + 1];
    char buf[4096];
    format_{i}(v, n, buf, sizeof buf);
    long sum = 0;
    for (const struct record *r = n ? v : NULL; r; r = r->next)
        for (int j = 0; j < 16; j++)
            sum += r->values[j] ^ (long)strlen(buf);
    switch (sum % 7) {{
    case 0: sum += {i} * 3; break;
    case 1: sum -= {i}; break;
    case 2: sum *= 2; break;
    case 3: sum /= 3; break;
    case 4: sum ^= 0x55; break;
    case 5: sum += (long)n; break;
    default: break;
    }}
    free(v);
    return sum;
}}
"""

MAIN = """\
#include <stdio.h>
#include "proj.h"

long proj_checksum(const struct record *r)
{
    long s = 0;
    for (int j = 0; j < 16; j++)
        s = s * 31 + r->values[j];
    return s;
}

int main(void)
{
    const char *text = "alpha:1 2 3;beta:4 5 6;gamma:7 8 9;";
    long total = 0;
%s
    printf("%%ld\\n", total);
    return 0;
}
"""

MAKEFILE = """\
CC ?= cc
CFLAGS ?= -O2 -g -Wall
SRCS := $(wildcard src/*.c)
OBJS := $(SRCS:src/%.c=obj/%.o)

prog: $(OBJS)
\t$(CC) -o $@ $(OBJS)

obj/%.o: src/%.c src/proj.h | obj
\t$(CC) $(CFLAGS) -c -o $@ $<

obj:
\tmkdir -p obj

clean:
\trm -rf obj prog
.PHONY: clean
"""


def generate(root, nfiles):
    src = os.path.join(root, "src")
    os.makedirs(src)
    decls = "\n".join(f"long run_{i + 1}(const char *text);" for i in range(nfiles))
    with open(os.path.join(src, "proj.h"), "w") as f:
        f.write(HEADER % decls)
    for i in range(nfiles):
        with open(os.path.join(src, f"unit{i:03d}.c"), "w") as f:
            f.write(SOURCE.format(i=i + 1))
    calls = "\n".join(f"    total += run_{i + 1}(text);" for i in range(nfiles))
    with open(os.path.join(src, "main.c"), "w") as f:
        f.write(MAIN % calls)
    with open(os.path.join(root, "Makefile"), "w") as f:
        f.write(MAKEFILE)


def cpu_of_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd, cwd, env):
    subprocess.run(["make", "-s", "clean"], cwd=cwd, env=env, check=True)
    c0, t0 = cpu_of_children(), time.monotonic()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0, cpu_of_children() - c0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--files", type=int, default=48)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--compare-build-dir")
    ap.add_argument("--breakdown", action="store_true")
    args = ap.parse_args()
    commands = [os.path.join(os.path.abspath(d), "tools", "memprof")
                for d in [args.build_dir] + ([args.compare_build_dir] if args.compare_build_dir
                                             else [])]
    for command in commands:
        if not os.path.exists(command):
            sys.exit(f"bench_make: {command} is not built")
    if not shutil.which("make"):
        sys.exit("bench_make: make is not installed")

    with tempfile.TemporaryDirectory(prefix="memprof-bench-make-") as tmp:
        proj = os.path.join(tmp, "proj")
        generate(proj, args.files)
        # Each run's profiles go to a directory of their own, removed at the end, not
        # deleted between runs: on ext4, a file created where many were deleted in the last
        # minutes scans past every one of them, so deleting each run's hundred files made
        # the next runs' file creation (the processes' profiles) several times slower than a
        # user's build ever sees (doc/performance.md, "Fifth pass").
        outdir = os.path.join(tmp, "profiles")
        os.mkdir(outdir)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("MEMPROF_") and k != "LD_PRELOAD"}
        make = ["make", f"-j{args.jobs}", "-s"]
        # (name, command or None, extra environment, whether every process writes a raw
        # profile into the run's directory): a command runs make under `memprof run`;
        # without one, make runs in the environment given (the breakdown's plugin
        # configurations, LD_PRELOAD inherited by every process of the build).
        configs = [("make", None, {}, False)] + [
            ("memprof run -- make" + (f" ({os.path.dirname(os.path.dirname(c))})" if i else ""),
             c, {}, False) for i, c in enumerate(commands)]
        if args.breakdown:
            plugin = os.path.join(os.path.dirname(os.path.dirname(commands[0])), "src",
                                  "libmemprof-preload.so")
            configs += [
                ("plugin idle (MEMPROF_START=0)", None,
                 {"LD_PRELOAD": plugin, "MEMPROF_START": "0"}, False),
                ("plugin sampling, no output", None, {"LD_PRELOAD": plugin}, False),
                ("plugin sampling, raw profile per process", None,
                 {"LD_PRELOAD": plugin, "MEMPROF_SYMBOLIZE": "0", "MEMPROF_FORMAT": "pprof",
                  "MEMPROF_WRITE_EMPTY": "0", "MEMPROF_QUIET": "1"}, True)]
        walls = {name: [] for name, _, _, _ in configs}
        cpus = {name: [] for name, _, _, _ in configs}
        files = []
        subprocess.run(make, cwd=proj, env=env, check=True)  # warm the page cache
        for r in range(args.rounds):
            log(f"round {r + 1}/{args.rounds}")
            k = r % len(configs)
            for name, command, extra, writes in configs[k:] + configs[:k]:
                cmd, run_dir, run_env = make, None, dict(env, **extra)
                if command or writes:
                    run_dir = os.path.join(outdir, str(len(files)))
                    os.mkdir(run_dir)
                if command:
                    cmd = [command, "run", "-q", "-o", os.path.join(run_dir, "make.pb.gz"),
                           "--"] + make
                if writes:
                    run_env["MEMPROF_OUTPUT"] = os.path.join(run_dir, "memprof.%e.%p.pb.gz")
                wall, cpu = timed(cmd, proj, run_env)
                log(f"  {name}: wall {wall:.3f} s, CPU {cpu:.3f} s")
                walls[name].append(wall)
                cpus[name].append(cpu)
                if run_dir:
                    files.append(len(os.listdir(run_dir)))

        base = configs[0][0]
        print(f"A generated C project ({args.files + 1} source files) built from clean with "
              f"`make -j{args.jobs}`, medians of {args.rounds} rounds, the configurations "
              "alternated (order rotated each round). CPU: user + system of everything the "
              "build waited for.")
        print()
        print("| configuration | wall (s) | CPU (s) |")
        print("|---|---:|---:|")
        for name, _, _, _ in configs:
            print(f"| {name} | {statistics.median(walls[name]):.3f} | "
                  f"{statistics.median(cpus[name]):.3f} |")
        for prof, _, _, _ in configs[1:]:
            print()
            wr = [p / b for p, b in zip(walls[prof], walls[base])]
            cr = [p / b for p, b in zip(cpus[prof], cpus[base])]
            print(f"{prof}: ratio of the medians: wall "
                  f"{statistics.median(walls[prof]) / statistics.median(walls[base]):.3f}, "
                  f"CPU {statistics.median(cpus[prof]) / statistics.median(cpus[base]):.3f}; "
                  f"median of the per-round ratios: wall {statistics.median(wr):.3f}, "
                  f"CPU {statistics.median(cr):.3f}.")
        print()
        print(f"Profile files per run that writes them: {statistics.median(files):.0f}.")


if __name__ == "__main__":
    main()
