#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Overhead of libmemprof on real programs from Debian packages, and of its peers.

Four allocation-heavy programs run on generated inputs: Debian's /usr/bin/python3 (json,
dicts and strings), sqlite3 (inserts, indexes, joins, updates on an in-memory database),
gcc's compiler proper cc1 (`gcc -print-prog-name=cc1`, -O2 on a generated C file) and
perl (generated text through regexes, split and hashes). Each runs without a profiler (A)
and with one (B), back to back in alternation A B A B ..., and the tables give the median
over the pairs of the B/A ratio of the child's CPU time (user + sys from wait4, so a
profiler's helper processes count when the child waits for them) and of its wall time,
with the geometric mean over the four programs. libmemprof's configurations run in rounds
instead: one run without the profiler and one with each configuration, in an order rotated
every round, each ratio taken to its own round's baseline (15 rounds; 9 pairs for a peer;
5 of each with --quick; --pairs N sets both).

libmemprof runs in six configurations, each at 512 KiB and 64 KiB: the preload plugin
(LD_PRELOAD of libmemprof-preload.so, hooks by symbol), the plugin with
MEMPROF_SAMPLE_HEAP=0 ("Bloom path", for comparison: no backend's default, so no target is
applied to it), and the run-time GOT path (LD_PRELOAD of bench/libmemprof-got-shim.so, which
only calls memprof_init(rate) + memprof_start() from a constructor, so the engine patches the
GOT slots of the loaded objects). One untimed run per configuration reads memprof_get_stats() at exit (the shim's
MEMPROF_SHIM_STATS) to show that the hooks really took samples.

Peers, when installed: heaptrack (against no profiler), jemalloc with
MALLOC_CONF=prof:true,lg_prof_sample:19 (against plain jemalloc; reported as not built
with profiling when jemalloc's config.prof is false), and tcmalloc (gperftools) with
TCMALLOC_SAMPLE_PARAMETER=524288 (against plain tcmalloc, whose sampling is off by default).

With --instructions, each program instead runs once per configuration under valgrind
(cachegrind, no cache simulation) and the table gives the ratio of instructions executed:
deterministic where the timings are not (a shared, busy machine), though it prices a
cache miss like any other instruction. Slow: use it with --quick.

Usage: bench_programs.py --build-dir DIR [--quick] [--pairs N] [--programs a,b]
                         [--no-peers] [--no-memprof] [--instructions]
Prints Markdown on stdout, progress on stderr. A benchmark: it asserts nothing.
"""

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

LIBDIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"]
TARGETS = {524288: 1.02, 65536: 1.05}  # geomean over the real programs


def log(msg):
    print(f"bench_programs: {msg}", file=sys.stderr, flush=True)


def find_lib(name):
    for d in LIBDIRS:
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return None


# ---- workloads -------------------------------------------------------------------------

PY_SCRIPT = r'''
import json, sys
n = int(sys.argv[1])
docs = []
for i in range(n):
    d = {"id": i, "name": "user%d" % i, "tags": ["t%d" % (i % 17), "x" * (i % 50)],
         "score": i * 0.5, "nested": {"k%d" % j: j * i for j in range(i % 8)}}
    docs.append(json.dumps(d))
total = 0
index = {}
for s in docs:
    d = json.loads(s)
    key = d["name"].upper() + ":" + ",".join(d["tags"])
    index.setdefault(d["tags"][0], []).append(key)
    total += len(key) + sum(d["nested"].values())
freq = {}
for w in " ".join(docs[: n // 4]).split(","):
    w = w.strip().lower()
    freq[w] = freq.get(w, 0) + 1
print(total, len(index), len(freq))
'''

PERL_SCRIPT = r'''
use strict; use warnings;
my $n = shift // 10000;
my @words = map { my $j = $_; join "", map { chr(97 + ($j * 131 + $_ * 17 + ($j >> $_)) % 26) }
                  1 .. (3 + $j % 9) } 1 .. 5000;
my (%freq, %bigram, @lines);
my $seed = 12345;
for my $i (1 .. $n) {
    my @w;
    for (1 .. 12) { $seed = ($seed * 1103515245 + 12345) % 2147483648; push @w, $words[$seed % 5000]; }
    push @lines, join(' ', "line$i:", @w, sprintf("id=%06d", $i));
}
for my $line (@lines) {
    next unless $line =~ /^line(\d+):\s+(.*)\s+id=(\d+)$/;
    my @w = split /\s+/, $2;
    for my $k (0 .. $#w) {
        $freq{$w[$k]}++;
        $bigram{"$w[$k] $w[$k+1]"}++ if $k < $#w;
    }
    (my $u = $line) =~ s/([aeiou])/uc $1/ge;
    $freq{length $u}++;
}
my @top = (sort { $freq{$b} <=> $freq{$a} || $a cmp $b } keys %freq)[0 .. 2];
print scalar(keys %freq), " ", scalar(keys %bigram), " @top\n";
'''


def sql_script(n):
    users = max(n // 4, 1)
    return f"""
CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT, email TEXT, score REAL);
CREATE TABLE events(id INTEGER PRIMARY KEY, user_id INTEGER, kind TEXT, payload TEXT);
INSERT INTO users SELECT value, 'user' || value, printf('u%d@example.org', value),
  (value * 7919) % 1000 FROM generate_series(1, {users});
INSERT INTO events SELECT value, (value * 31) % {users} + 1, 'k' || (value % 13),
  hex(randomblob(16 + value % 48)) FROM generate_series(1, {n});
CREATE INDEX events_user ON events(user_id);
CREATE INDEX users_name ON users(name);
SELECT kind, count(*), avg(length(payload)) FROM events GROUP BY kind ORDER BY 2 DESC LIMIT 3;
SELECT u.name, count(e.id) c FROM users u JOIN events e ON e.user_id = u.id
  GROUP BY u.id ORDER BY c DESC, u.name LIMIT 3;
UPDATE events SET payload = upper(payload) || kind WHERE id % 3 = 0;
DELETE FROM events WHERE id % 5 = 0;
SELECT count(*), sum(length(payload)) FROM events;
SELECT length(group_concat(name, ',')) FROM (SELECT name FROM users ORDER BY score LIMIT 1000);
"""


def c_source(n):
    """n small functions calling each other through prototypes (no inlining chains, which
    would make -O2 time grow faster than the function count)."""
    out = ["struct node { struct node *next; long v; };"]
    out += [f"long f_{i}(struct node *p, long k);" for i in range(n)]
    for i in range(n):
        out.append(f"""long f_{i}(struct node *p, long k)
{{
    long acc = {i};
    for (; p; p = p->next)
        acc = p->v > k ? acc * {i % 13 + 3} + p->v : acc ^ (k << {i % 7});
    return acc + (k > {i} ? f_{(i * 7919) % n}(p, k - 1) : 0);
}}""")
    return "\n".join(out) + "\n"


def make_programs(work, quick, wanted):
    """Returns [(name, description, argv, stdin path or None)] for the programs installed."""
    # --quick: runs of ~0.1 s, where process start-up weighs more; indicative only.
    scale = 0.1 if quick else 1.0
    progs = []

    def want(name):
        return not wanted or name in wanted

    if want("python3") and os.access("/usr/bin/python3", os.X_OK):
        n = int(100000 * scale)
        path = os.path.join(work, "alloc.py")
        with open(path, "w") as f:
            f.write(PY_SCRIPT)
        progs.append(("python3", f"/usr/bin/python3: json dumps/loads, dicts, strings ({n} records)",
                      ["/usr/bin/python3", path, str(n)], None))
    sqlite = shutil.which("sqlite3")
    if want("sqlite3") and sqlite:
        n = int(200000 * scale)
        path = os.path.join(work, "load.sql")
        with open(path, "w") as f:
            f.write(sql_script(n))
        progs.append(("sqlite3", f"sqlite3 :memory: inserts, indexes, join, update ({n} rows)",
                      [sqlite, ":memory:"], path))
    gcc = shutil.which("gcc")
    if want("cc1") and gcc:
        cc1 = subprocess.run([gcc, "-print-prog-name=cc1"], capture_output=True,
                             text=True).stdout.strip()
        if cc1 and os.access(cc1, os.X_OK):
            n = int(120 * scale)
            path = os.path.join(work, "big.c")
            with open(path, "w") as f:
                f.write(c_source(n))
            progs.append(("cc1", f"gcc's cc1 -O2 on a generated file ({n} functions)",
                          [cc1, "-quiet", "-O2", path, "-o", os.path.join(work, "big.s")], None))
    perl = shutil.which("perl")
    if want("perl") and perl:
        n = int(40000 * scale)
        path = os.path.join(work, "text.pl")
        with open(path, "w") as f:
            f.write(PERL_SCRIPT)
        progs.append(("perl", f"perl: regexes, split, hashes over {n} generated lines",
                      [perl, path, str(n)], None))
    return progs


# ---- running ---------------------------------------------------------------------------

def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("MEMPROF_") or k.startswith("TCMALLOC_") or k in
                   ("LD_PRELOAD", "MALLOC_CONF", "HEAPTRACK_OUTPUT"))}
    env["LC_ALL"] = "C"
    # Fixed hash seeds: the same work in every run (python3's and perl's hash randomisation
    # would otherwise change dict and hash behaviour, and the instruction counts, per run).
    env["PYTHONHASHSEED"] = "0"
    env["PERL_HASH_SEED"] = "0"
    env["PERL_PERTURB_KEYS"] = "0"
    return env


class RunError(Exception):
    pass


def run_once(argv, env, stdin_path, work):
    """Runs argv; returns (cpu seconds, wall seconds, stderr text)."""
    errpath = os.path.join(work, "stderr.txt")
    with open(stdin_path or os.devnull, "rb") as fin, open(errpath, "wb") as ferr:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, env=env, stdin=fin, stdout=subprocess.DEVNULL, stderr=ferr,
                             cwd=work)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    with open(errpath, errors="replace") as f:
        err = f.read()
    if p.returncode != 0:
        raise RunError(f"{' '.join(argv[:2])} exited with {p.returncode}: {err.strip()[-300:]}")
    return ru.ru_utime + ru.ru_stime, wall, err


def measure_pairs(prog, env_a, env_b, pairs, work, wrap_b=None, label=""):
    """A B A B ...; returns dict with medians and the pair ratios."""
    name, _, argv, stdin_path = prog
    argv_b = wrap_b(argv) if wrap_b else argv
    cpu_r, wall_r, cpu_a, wall_a = [], [], [], []
    log(f"{name}, {label}: {pairs} A/B pairs ...")
    for _ in range(pairs):
        ca, wa, _ = run_once(argv, env_a, stdin_path, work)
        cb, wb, _ = run_once(argv_b, env_b, stdin_path, work)
        cpu_a.append(ca)
        wall_a.append(wa)
        cpu_r.append(cb / ca)
        wall_r.append(wb / wa)
    return {"cpu": statistics.median(cpu_r), "wall": statistics.median(wall_r),
            "cpu_min": min(cpu_r), "cpu_max": max(cpu_r),
            "base_cpu": statistics.median(cpu_a), "base_wall": statistics.median(wall_a)}


def geomean(values):
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def rate_label(rate):
    return f"{rate // 1024} KiB" if rate % 1024 == 0 else f"{rate} B"


def fmt_ratio(r):
    if r is None:
        return "–"
    if isinstance(r, str):
        return r
    return f"{r['cpu']:.3f} ({r['cpu_min']:.3f}–{r['cpu_max']:.3f})"


# ---- libmemprof ------------------------------------------------------------------------

def memprof_configs(build):
    preload = os.path.realpath(os.path.join(build, "src", "libmemprof-preload.so"))
    shim = os.path.realpath(os.path.join(build, "bench", "libmemprof-got-shim.so"))
    configs = []
    for rate in (524288, 65536):
        if os.path.exists(preload):
            configs.append((f"preload {rate_label(rate)}", rate, "preload",
                            {"LD_PRELOAD": preload, "MEMPROF_START": "1",
                             "MEMPROF_RATE": str(rate)}))
    # The plugin without its sample heap (MEMPROF_SAMPLE_HEAP=0): sampled blocks stay
    # glibc's, and frees probe the Bloom filter while samples are live, as on the GOT path
    # below 256 KiB. A comparison, not a default: no target applies.
    for rate in (524288, 65536):
        if os.path.exists(preload):
            configs.append((f"Bloom path {rate_label(rate)}", rate, "preload",
                            {"LD_PRELOAD": preload, "MEMPROF_START": "1",
                             "MEMPROF_RATE": str(rate), "MEMPROF_SAMPLE_HEAP": "0"}))
    for rate in (524288, 65536):
        if os.path.exists(shim):
            configs.append((f"GOT {rate_label(rate)}", rate, "got",
                            {"LD_PRELOAD": shim, "MEMPROF_SHIM_RATE": str(rate)}))
    return configs, preload, shim


def samples_taken(prog, cfg, preload, shim, work):
    """One untimed run that prints memprof_get_stats() at exit; returns the sample count."""
    _, _, kind, extra = cfg
    env = clean_env()
    env.update(extra)
    env["MEMPROF_SHIM_STATS"] = "1"
    if kind == "preload":
        # The shim only reports here: the plugin owns the engine.
        env["LD_PRELOAD"] = f"{preload}:{shim}"
        env["MEMPROF_SHIM_INIT"] = "0"
    _, _, err = run_once(prog[2], env, prog[3], work)
    for line in err.splitlines():
        if line.startswith("memprof-shim: samples="):
            return int(line.split("=")[1].split()[0])
    return None


def instructions(prog, env, work):
    """Instructions executed by one run under cachegrind (no cache simulation)."""
    name, _, argv, stdin_path = prog
    _, _, err = run_once(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                          "--cachegrind-out-file=/dev/null"] + argv, env, stdin_path, work)
    for line in err.splitlines():
        if "I   refs:" in line or "I refs:" in line:
            return int(line.split(":")[1].strip().replace(",", ""))
    raise RunError(f"no instruction count from valgrind for {name}")


def instructions_section(progs, build, work):
    configs, _, _ = memprof_configs(build)
    preload = os.path.realpath(os.path.join(build, "src", "libmemprof-preload.so"))
    if os.path.exists(preload):
        configs.insert(0, ("hooks only", 0, "preload",
                           {"LD_PRELOAD": preload, "MEMPROF_START": "0"}))
    names = [c[0] for c in configs]
    print("| program | no profiler: instructions | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    ratios = {n: [] for n in names}
    for prog in progs:
        log(f"{prog[0]}: instruction counts under valgrind ...")
        base = instructions(prog, clean_env(), work)
        cells = []
        for cfg in configs:
            env = clean_env()
            env.update(cfg[3])
            r = instructions(prog, env, work) / base
            ratios[cfg[0]].append(r)
            cells.append(f"{r:.4f}")
        print(f"| {prog[0]} | {base:,} | " + " | ".join(cells) + " |")
    print("| **geomean** | | " + " | ".join(f"**{geomean(ratios[n]):.4f}**" for n in names) +
          " |")
    print()


def measure_rounds(prog, envs, rounds, work):
    """Rounds of one run without the profiler and one with each configuration of `envs`
    ({label: env}), in an order rotated every round so no configuration always runs next to
    the baseline; each configuration's ratios are to its own round's baseline run. Sharing
    the baseline lets the same time buy more rounds than separate A/B pairs would. Returns
    {label: result dict as measure_pairs's, or "failed (...)"}."""
    name, _, argv, stdin_path = prog
    order = [None] + list(envs)
    runs = {label: [] for label in order}
    failed = {}
    log(f"{name}: {rounds} rounds of {len(order)} runs ...")
    for r in range(rounds):
        k = r % len(order)
        for label in order[k:] + order[:k]:
            if label in failed:
                continue
            try:
                cpu, wall, _ = run_once(argv, envs[label] if label else clean_env(),
                                        stdin_path, work)
            except RunError as e:
                if label is None:
                    raise
                log(f"failed: {e}")
                failed[label] = f"failed ({e})"
                continue
            runs[label].append((cpu, wall))
    base = runs[None]
    out = dict(failed)
    for label in envs:
        if label in failed:
            continue
        cpu_r = [b[0] / a[0] for a, b in zip(base, runs[label])]
        wall_r = [b[1] / a[1] for a, b in zip(base, runs[label])]
        out[label] = {"cpu": statistics.median(cpu_r), "wall": statistics.median(wall_r),
                      "cpu_min": min(cpu_r), "cpu_max": max(cpu_r),
                      "base_cpu": statistics.median(a[0] for a in base),
                      "base_wall": statistics.median(a[1] for a in base)}
    return out


def memprof_section(progs, build, rounds, work):
    configs, preload, shim = memprof_configs(build)
    if not configs:
        print("libmemprof's preload plugin and GOT shim are not built: nothing measured.\n")
        return {}, {}
    results = {}
    samples = {}
    for prog in progs:
        envs = {}
        for cfg in configs:
            envs[cfg[0]] = clean_env()
            envs[cfg[0]].update(cfg[3])
        try:
            measured = measure_rounds(prog, envs, rounds, work)
        except RunError as e:
            log(f"failed: {e}")
            measured = {cfg[0]: f"failed ({e})" for cfg in configs}
        for cfg in configs:
            results[(prog[0], cfg[0])] = measured[cfg[0]]
            if isinstance(measured[cfg[0]], dict) and os.path.exists(shim):
                try:
                    samples[(prog[0], cfg[0])] = samples_taken(prog, cfg, preload, shim, work)
                except RunError as e:
                    log(f"failed: {e}")

    names = [c[0] for c in configs]
    print("| program | no profiler: CPU s | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for prog in progs:
        base = next((r["base_cpu"] for (p, _), r in results.items()
                     if p == prog[0] and isinstance(r, dict)), None)
        cells = [fmt_ratio(results.get((prog[0], n))) for n in names]
        print(f"| {prog[0]} | {base:.3f} | " + " | ".join(cells) + " |" if base is not None else
              f"| {prog[0]} | failed | " + " | ".join(cells) + " |")
    gm = {}
    for cfg in configs:
        rs = [results.get((p[0], cfg[0])) for p in progs]
        gm[cfg[0]] = geomean([r["cpu"] for r in rs if isinstance(r, dict)])
    print("| **geomean (CPU)** | | " + " | ".join(
        f"**{gm[n]:.3f}**" if gm[n] else "–" for n in names) + " |")
    wall = {}
    for cfg in configs:
        rs = [results.get((p[0], cfg[0])) for p in progs]
        wall[cfg[0]] = geomean([r["wall"] for r in rs if isinstance(r, dict)])
    print("| geomean (wall time) | | " + " | ".join(
        f"{wall[n]:.3f}" if wall[n] else "–" for n in names) + " |")
    cells = []
    for cfg in configs:
        t = TARGETS.get(cfg[1])
        g = gm[cfg[0]]
        if "MEMPROF_SAMPLE_HEAP" in cfg[3]:
            cells.append("comparison only")
        else:
            cells.append("–" if not t or not g else
                         f"≤ {t:.2f}: {'met' if g <= t else '**missed**'}")
    print("| target (geomean) | | " + " | ".join(cells) + " |")
    print()
    print("Cells: median over the rounds of the CPU-time ratio with/without the profiler "
          "(min–max in parentheses).")
    print()
    print("Samples taken per run (memprof_get_stats() at exit, one extra untimed run; "
          "a GOT path whose hooks did not engage would show 0):")
    print()
    print("| program | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for prog in progs:
        cells = []
        for n in names:
            s = samples.get((prog[0], n))
            cells.append("–" if s is None else str(s))
        print(f"| {prog[0]} | " + " | ".join(cells) + " |")
    print()
    return results, gm


# ---- peers -----------------------------------------------------------------------------

def jemalloc_has_prof(lib):
    env = clean_env()
    env.update({"LD_PRELOAD": lib, "MALLOC_CONF": "stats_print:true"})
    out = subprocess.run(["/bin/true"], env=env, capture_output=True, text=True)
    return "config.prof: true" in (out.stdout + out.stderr)


def peers_section(progs, pairs, work, memprof_results, memprof_gm):
    columns = []  # (title, what, runner or reason)
    heaptrack = shutil.which("heaptrack")
    if heaptrack:
        out = os.path.join(work, "heaptrack.out")

        def wrap(argv, heaptrack=heaptrack, out=out):
            return [heaptrack, "-o", out] + argv
        columns.append(("heaptrack", "vs no profiler", (clean_env(), clean_env(), wrap)))
    else:
        columns.append(("heaptrack", "", "not installed (Debian package heaptrack)"))

    jemalloc = find_lib("libjemalloc.so.2")
    if not jemalloc:
        columns.append(("jemalloc prof, lg_prof_sample:19", "",
                        "not installed (Debian package libjemalloc2)"))
    elif not jemalloc_has_prof(jemalloc):
        columns.append(("jemalloc prof, lg_prof_sample:19", "", "not built with profiling"))
    else:
        a = clean_env()
        a["LD_PRELOAD"] = jemalloc
        b = dict(a)
        b["MALLOC_CONF"] = "prof:true,lg_prof_sample:19"
        columns.append(("jemalloc prof, lg_prof_sample:19", "vs plain jemalloc", (a, b, None)))

    tcmalloc = find_lib("libtcmalloc.so.4")
    if tcmalloc:
        a = clean_env()
        a["LD_PRELOAD"] = tcmalloc
        b = dict(a)
        b["TCMALLOC_SAMPLE_PARAMETER"] = "524288"
        columns.append(("tcmalloc, sample 512 KiB", "vs plain tcmalloc", (a, b, None)))
    else:
        columns.append(("tcmalloc, sample 512 KiB", "",
                        "not installed (Debian package libgoogle-perftools4)"))

    results = {}
    for title, _, how in columns:
        if isinstance(how, str):
            continue
        env_a, env_b, wrap = how
        for prog in progs:
            try:
                results[(prog[0], title)] = measure_pairs(prog, env_a, env_b, pairs, work,
                                                          wrap_b=wrap, label=title)
            except RunError as e:
                log(f"failed: {e}")
                results[(prog[0], title)] = "failed"
    print("| program | " + " | ".join(f"{t} ({w})" if w else t for t, w, _ in columns) +
          " | libmemprof preload 512 KiB (from above) |")
    print("|---|" + "---:|" * (len(columns) + 1))
    for prog in progs:
        cells = []
        for title, _, how in columns:
            cells.append(how if isinstance(how, str) else fmt_ratio(results.get((prog[0], title))))
        cells.append(fmt_ratio(memprof_results.get((prog[0], "preload 512 KiB"))))
        print(f"| {prog[0]} | " + " | ".join(cells) + " |")
    cells = []
    for title, _, how in columns:
        if isinstance(how, str):
            cells.append("–")
            continue
        g = geomean([r["cpu"] for (p, t), r in results.items() if t == title and
                     isinstance(r, dict)])
        cells.append(f"**{g:.3f}**" if g else "–")
    mg = memprof_gm.get("preload 512 KiB") if memprof_gm else None
    print("| **geomean (CPU)** | " + " | ".join(cells) +
          f" | {'**%.3f**' % mg if mg else '–'} |")
    print()
    print("heaptrack's ratio includes its heaptrack_interpret process (the child waits for it). "
          "jemalloc and tcmalloc are compared against themselves without sampling, so the "
          "ratio is the cost of their profiler alone, not of the allocator change.")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pairs", type=int, default=0)
    ap.add_argument("--programs", default="")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--no-memprof", action="store_true")
    ap.add_argument("--instructions", action="store_true")
    args = ap.parse_args()
    pairs = args.pairs or (5 if args.quick else 9)
    # libmemprof's configurations share their baseline runs (measure_rounds), so the same
    # time buys more rounds than the peers' separate pairs.
    rounds = args.pairs or (5 if args.quick else 15)
    wanted = [p for p in args.programs.split(",") if p]

    work = tempfile.mkdtemp(prefix="memprof-bench-programs-")
    try:
        progs = make_programs(work, args.quick, wanted)
        if not progs:
            print("None of python3, sqlite3, gcc, perl is installed: nothing measured.\n")
            return 0
        print("Workloads:\n")
        for name, desc, _, _ in progs:
            print(f"- **{name}**: {desc}")
        print()
        results, gm = {}, {}
        if args.instructions:
            if not shutil.which("valgrind"):
                print("--instructions needs valgrind (Debian package valgrind).\n")
                return 1
            print("### libmemprof: instructions executed (valgrind)\n")
            instructions_section(progs, args.build_dir, work)
            return 0
        if not args.no_memprof:
            print("### libmemprof\n")
            results, gm = memprof_section(progs, args.build_dir, rounds, work)
        if not args.no_peers:
            print("### Peers\n")
            peers_section(progs, pairs, work, results, gm)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
