#!/bin/sh
# SPDX-License-Identifier: MIT
# `memprof run -o p.pb.gz -- PROGRAM` on a program built without frame pointers, read with
# the real `go tool pprof` (Debian's golang-go): -top -sample_index=inuse_space lists the
# allocating functions, -traces shows the inlined frame, -lines shows file:LINE, and all
# four sample types are present. Exits 77 (skip) when `go` is not installed. Offline.
#
#   memprof_run_pprof.sh MEMPROF PROGRAM
set -eu
memprof="$1"
prog="$2"
if ! command -v go >/dev/null 2>&1; then
    echo "go not installed: skipping (apt-get install golang-go)"
    exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export HOME="$tmp" GOCACHE="$tmp/cache" GOPATH="$tmp/gopath" GOPROXY=off GOTOOLCHAIN=local \
    PPROF_TMPDIR="$tmp" PPROF_BINARY_PATH="$tmp/none"
"$memprof" run -q -r 16K -o "$tmp/p.pb.gz" -- "$prog"
failures=0
check() { # check WHAT PATTERN PPROF-ARGS...
    what="$1" pattern="$2"
    shift 2
    out="$(go tool pprof -symbolize=none "$@" "$tmp/p.pb.gz" 2>&1)" || true
    if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
        echo "FAIL: $what: no /$pattern/ in go tool pprof $*:"
        printf '%s\n' "$out" | head -40
        failures=$((failures + 1))
    fi
}
check "allocating function" 'grab_bytes' -top -sample_index=inuse_space
check "callers" 'load_table' -top -cum -sample_index=inuse_space
check "callers" 'load_cache' -top -cum -sample_index=inuse_space
check "inlined frame" 'fill_table \(inline\)' -traces
check "file:line" 'grab_bytes .*pprof_prog\.c:[0-9]+' -top -lines -sample_index=inuse_space
check "sample types" 'alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes' -raw
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
