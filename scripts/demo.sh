#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/demo.sh [PROGRAM [ARGS...]]: profiles a program's heap with libmemprof and prints
# what it found.
#
# Installs the build dependencies if missing (Debian: apt-get; needs root or sudo),
# configures and builds into build/ (reused if present), then runs PROGRAM (default: the demo
# workload, examples/demo_workload) with the LD_PRELOAD plugin and MEMPROF_OUTPUT set, and
# prints the text profile written at exit: the estimated live heap with its 95 % interval,
# the profiler's health, and the top allocation sites. Exits with the program's status.
#
# MEMPROF_RATE (bytes, K/M/G suffixes) is passed through; by default it is 64K for the
# demo workload (so its profile has ~500 live samples) and the library's 512K otherwise.
# The profile stays in build/demo-profile.txt (a forked child's in build/demo-profile.txt.PID).
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

preload="$root/$build/src/libmemprof-preload.so"
[[ -f "$preload" ]] ||
    memprof_die "$preload was not built (is the 'preload' backend disabled? meson configure $build -Dbackends=preload)"

if [[ $# -eq 0 ]]; then
    set -- "$root/$build/examples/demo_workload"
    rate="${MEMPROF_RATE:-64K}"
else
    rate="${MEMPROF_RATE:-512K}"
fi
prog="$1"
shift
if [[ "$prog" != */* ]]; then
    resolved="$(command -v -- "$prog" 2>/dev/null)" || {
        memprof_log "error: $prog: command not found"
        exit 127
    }
    prog="$resolved"
fi
[[ -x "$prog" && ! -d "$prog" ]] || {
    memprof_log "error: $prog: not an executable file"
    exit 126
}

profile="$root/$build/demo-profile.txt"
rm -f "$profile" "$profile".*
memprof_log "running $prog${*:+ $*} (sampling rate $rate)"
memprof_log "---------------------------------------------------------------------"
rc=0
env LD_PRELOAD="$preload${LD_PRELOAD:+:$LD_PRELOAD}" MEMPROF_START=1 MEMPROF_RATE="$rate" \
    MEMPROF_OUTPUT="$profile" MEMPROF_FORMAT=text "$prog" "$@" || rc=$?
memprof_log "---------------------------------------------------------------------"

if [[ -s "$profile" ]]; then
    printf '\n'
    cat "$profile"
    printf '\n'
    memprof_log "profile saved as ${profile#"$root"/}"
else
    memprof_log "no profile was written: the program may be statically linked, set-uid, or" \
        "have ended without running exit handlers (_exit, a fatal signal)"
fi
shopt -s nullglob
children=("$profile".*)
if [[ ${#children[@]} -gt 0 ]]; then
    memprof_log "${#children[@]} forked child process(es) wrote their own profile:" \
        "${build}/demo-profile.txt.PID"
fi
memprof_log "program exit status: $rc"
exit "$rc"
