#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/demo.sh [PROGRAM [ARGS...]]: profiles a program's heap with libmemprof and prints
# what it found.
#
# Installs the build dependencies if missing (Debian: apt-get; needs root or sudo),
# configures and builds into build/ (reused if present), then runs PROGRAM (default: the demo
# workload, examples/demo_workload) with `memprof run`, and prints its exit summary: the
# estimated live heap with its 95 % interval, the peak and when it happened, the bytes
# allocated in all, the profiler's health, the top sites at the peak and at exit with their
# call paths, and the leak suspects if there are any. Exits with the program's status.
#
# MEMPROF_RATE (bytes, K/M/G suffixes) is passed through; by default it is 64K for the
# demo workload (so its profile has ~500 live samples) and the library's 512K otherwise.
# The profile stays in build/demo/: profile.pb.gz (pprof), profile.html (flame graph) and
# profile.txt.
set -euo pipefail

MEMPROF_SCRIPT=demo.sh
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=scripts/common.sh
. scripts/common.sh

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi

memprof_install_deps "${MEMPROF_BUILD_DEPS[@]}"

build=build
memprof_setup_build "$build" || memprof_die "configuring $build/ failed"
memprof_log "building in $build/ ..."
log="$(mktemp)"
if ! meson compile -C "$build" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    rm -f "$log"
    memprof_die "the build failed (see above)"
fi
rm -f "$log"

memprof="$root/$build/tools/memprof"
[[ -x "$memprof" ]] || memprof_die "$memprof was not built"

if [[ $# -eq 0 ]]; then
    set -- "$root/$build/examples/demo_workload"
    rate="${MEMPROF_RATE:-64K}"
else
    rate="${MEMPROF_RATE:-512K}"
fi

out="$root/$build/demo"
mkdir -p "$out"
profile="$out/profile.pb.gz"
rm -f "$profile" "$profile".* "$out/profile.html" "$out/profile.txt"
memprof_log "running $*  (memprof run, sampling rate $rate)"
memprof_log "---------------------------------------------------------------------"
rc=0
"$memprof" run -r "$rate" -o "$profile" -- "$@" || rc=$?
memprof_log "---------------------------------------------------------------------"
if [[ -s "$profile" ]]; then
    "$memprof" report --top 10 -o "$out/profile.txt" "$profile"
    "$memprof" report -o "$out/profile.html" "$profile"
    memprof_log "profile: ${profile#"$root"/} (go tool pprof reads it)," \
        "${out#"$root"/}/profile.html (heap over time, flame graphs and tables of every" \
        "view: open it in a browser), ${out#"$root"/}/profile.txt; more views:" \
        "$build/tools/memprof report --view peak|temporary|leaks|alloc ${profile#"$root"/}"
fi
memprof_log "program exit status: $rc"
exit "$rc"
