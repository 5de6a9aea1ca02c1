#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/run.sh [--quick] [--build-dir DIR] [REPORT.md]: builds the benchmarks if needed,
# runs them all and writes a Markdown report (default bench/report.md) with their tables;
# the report is also printed. --quick takes about 2 minutes on an idle 2-core machine
# (5 A/B pairs, fewer steps, short program runs), the full run about 30 (with valgrind
# instruction counts of the real programs when valgrind is installed). See
# bench/README.md for what is measured and the targets. Uses build/ unless --build-dir is
# given (benchmarks must be enabled there: -Dbenchmarks=true, the default).
set -euo pipefail

MEMPROF_SCRIPT=bench/run.sh
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=scripts/common.sh
. scripts/common.sh

quick=0
build=build
report=bench/report.md
while [[ $# -gt 0 ]]; do
    case "$1" in
    --quick) quick=1 ;;
    --build-dir)
        [[ $# -ge 2 ]] || memprof_die "--build-dir needs a directory"
        build="$2"
        shift
        ;;
    -h | --help)
        sed -n '3,9p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    -*) memprof_die "unknown option $1 (usage: bench/run.sh [--quick] [--build-dir DIR] [REPORT.md])" ;;
    *) report="$1" ;;
    esac
    shift
done

memprof_install_deps "${MEMPROF_BUILD_DEPS[@]}"
# The real programs and the peers are optional: whatever cannot be installed is skipped
# (and the report says so).
(memprof_install_deps sqlite3 perl gcc heaptrack libjemalloc2 libgoogle-perftools4) ||
    memprof_log "some optional programs or peers could not be installed; they will be skipped"
# A new build directory is configured as a release build (the project's default is
# debugoptimized, whose assertions the hooks would carry); an existing one keeps its type,
# which the report names.
if [[ -f "$build/meson-private/coredata.dat" ]]; then
    memprof_setup_build "$build" || memprof_die "configuring $build/ failed"
else
    memprof_setup_build "$build" --buildtype=release || memprof_die "configuring $build/ failed"
fi
if [[ "$(meson introspect "$build" --buildoptions |
    python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "benchmarks"][0])')" != "True" ]]; then
    memprof_log "enabling benchmarks in $build/ (meson configure -Dbenchmarks=true)"
    meson configure "$build" -Dbenchmarks=true >/dev/null
fi
memprof_log "building in $build/ ..."
log="$(mktemp)"
if ! meson compile -C "$build" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    rm -f "$log"
    memprof_die "the build failed (see above)"
fi
rm -f "$log"

fastpath="$build/bench/bench_fastpath"
rss="$build/bench/bench_rss"
coldpath="$build/bench/bench_coldpath"
snapshot="$build/bench/bench_snapshot"
preload="$(realpath -m "$build/src/libmemprof-preload.so")"
[[ -x "$fastpath" && -x "$rss" && -x "$coldpath" && -x "$snapshot" ]] ||
    memprof_die "benchmarks not built in $build/"
[[ -f "$preload" ]] || memprof_die "$preload not built (the preload backend is needed)"

quick_args=()
[[ $quick -eq 1 ]] && quick_args=(--quick)
buildtype="$(meson introspect "$build" --buildoptions |
    python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"][0])')"
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if ! git diff --quiet HEAD -- src include 2>/dev/null; then
    commit="$commit (with local changes in src/ or include/)"
fi

start=$SECONDS
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
{
    echo "# libmemprof benchmark report"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); commit $commit; build type $buildtype"
    echo "- machine: ${cpu:-unknown CPU}, $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- mode: $([[ $quick -eq 1 ]] && echo 'quick (bench/run.sh --quick)' || echo 'full (bench/run.sh)')"
    echo
    echo "## Resident memory of the profiler's tables"
    echo
    echo "Target: at most 2 MiB plus 64 bytes per live sample (bench_rss)."
    echo
} >"$tmp"
memprof_log "bench_rss ..."
"$rss" >>"$tmp"
{
    echo
    echo "## Fast-path cost: small live set (churn)"
    echo
    echo "CPU ns per malloc+free pair per thread in alternating runs without and with"
    echo "LD_PRELOAD of the plugin (bench_fastpath): medians of each arm, and of each pair's"
    echo "difference (added) and ratio. Target: at most +2 ns at the default rate"
    echo "(512 KiB) with 1 thread, and no growth with threads. \"hooks only\" loads the plugin"
    echo "without starting the profiler (MEMPROF_START=0)."
    echo
} >>"$tmp"
memprof_log "bench_fastpath (churn) ..."
"$fastpath" "${quick_args[@]}" --workloads churn --threads 1,2,4,8 --rates 0,512K,64K \
    --preload "$preload" >>"$tmp"
{
    echo
    echo "## Fast-path cost: about 1M live blocks (live1m)"
    echo
    echo "Same measurement with ~1M live blocks over all threads, replaced at random: the"
    echo "allocator's (and the Bloom filter's) cache misses dominate. Run-to-run noise here is"
    echo "several ns, so only larger differences are meaningful."
    echo
} >>"$tmp"
memprof_log "bench_fastpath (live1m) ..."
"$fastpath" "${quick_args[@]}" --workloads live1m --threads 1,2,4,8 --rates 512K,64K \
    --preload "$preload" >>"$tmp"
{
    echo
    echo "Micro-benchmark target (the issue's): ratio at most 1.10 at 512 KiB, flat from 1 to 8"
    echo "threads (compare the rows above)."
    echo
} >>"$tmp"
memprof_log "bench_coldpath ..."
"$coldpath" >>"$tmp"
{
    echo
    echo "## Snapshot, symbolization and export: 10,000 stacks, 1M live samples"
    echo
    echo "CPU seconds of each step, in-process (bench_snapshot)."
    echo
} >>"$tmp"
memprof_log "bench_snapshot ..."
"$snapshot" >>"$tmp"
{
    echo
    echo "## Real programs"
    echo
    echo "CPU time (user + sys of the child, from wait4) with the profiler over without, median"
    echo "over rounds (libmemprof: one run without and one with each configuration, rotated) or"
    echo "alternating pairs A B A B ... (peers), and the geometric mean over the programs"
    echo "(bench_programs.py). Targets: geomean at most 1.02 at 512 KiB and 1.05 at 64 KiB."
    echo
} >>"$tmp"
memprof_log "bench_programs.py (real programs and peers) ..."
if [[ -x /usr/bin/python3 ]]; then
    /usr/bin/python3 bench/bench_programs.py --build-dir "$build" "${quick_args[@]}" >>"$tmp"
    # The full run adds instruction counts: exact where the timings above are noisy.
    if [[ $quick -eq 0 ]] && command -v valgrind >/dev/null 2>&1; then
        {
            echo "### Instructions executed (valgrind), the same programs at --quick sizes"
            echo
            echo "Deterministic: the ratio of instructions executed with and without the"
            echo "profiler, one run each (a cache miss counts as one instruction)."
            echo
        } >>"$tmp"
        memprof_log "bench_programs.py --instructions ..."
        /usr/bin/python3 bench/bench_programs.py --build-dir "$build" --quick --instructions |
            sed '1,/^### libmemprof: instructions/d' >>"$tmp"
    fi
else
    echo "Skipped: Debian's /usr/bin/python3 is not installed." >>"$tmp"
fi
{
    echo
    echo "## Process start-up and exit"
    echo
    echo "What each process pays to load, start and finish under the profiler"
    echo "(bench_startup.py). Target: within 0.2 ms per process of an empty preload library"
    echo "(a ratio of at most 1.3 on the 200-process script), plugin and memprof run alike."
    echo
} >>"$tmp"
memprof_log "bench_startup.py ..."
python3 bench/bench_startup.py --build-dir "$build" "${quick_args[@]}" >>"$tmp"
{
    echo
    echo "### Exit: symbolizing in the process or after it"
    echo
    echo "(bench_exit.py; targets in doc/performance.md.)"
    echo
} >>"$tmp"
memprof_log "bench_exit.py ..."
python3 bench/bench_exit.py --build-dir "$build" "${quick_args[@]}" >>"$tmp"
{
    echo
    echo "### memprof run -- make"
    echo
    echo "(bench_make.py.) Target: within 10 % of the same build without the profiler."
    echo
} >>"$tmp"
memprof_log "bench_make.py ..."
if [ ${#quick_args[@]} -gt 0 ]; then make_rounds=3; else make_rounds=7; fi
python3 bench/bench_make.py --build-dir "$build" --rounds "$make_rounds" >>"$tmp"
{
    echo
    echo "Total benchmark time: $((SECONDS - start)) s; load average at the end:" \
        "$(cut -d' ' -f1-3 /proc/loadavg)."
} >>"$tmp"

mkdir -p "$(dirname "$report")"
cp "$tmp" "$report"
cat "$report"
memprof_log "report written to $report"
