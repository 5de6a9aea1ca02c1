#!/bin/sh
# SPDX-License-Identifier: MIT
# Opens the profiles pprof-gen writes with the real `go tool pprof` (Debian's golang-go):
# they must parse, list the allocating functions under -top -sample_index=inuse_space, show
# the inlined frame in -traces and file:line with -lines, and carry all eight sample types;
# the views profile's peak_space, temp_space and thread tags select what they should.
# Exits 77 (skip) when `go` is not installed. Offline: no symbolization, HOME, GOCACHE and
# GOPATH in a temporary directory, no proxy or toolchain download.
#
#   go_pprof.sh PATH/TO/pprof-gen
set -eu

gen="$1"
if ! command -v go >/dev/null 2>&1; then
    echo "go not installed: skipping (apt-get install golang-go)"
    exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export HOME="$tmp" GOCACHE="$tmp/cache" GOPATH="$tmp/gopath" GOPROXY=off GOTOOLCHAIN=local \
    PPROF_TMPDIR="$tmp" PPROF_BINARY_PATH="$tmp/none"
"$gen" "$tmp"

failures=0
# pprof FILE ARGS...: runs go tool pprof offline, output in $out.
pprof() {
    file="$1"
    shift
    if ! out="$(go tool pprof -symbolize=none "$@" "$file" 2>&1)"; then
        echo "FAIL: go tool pprof $* $file:"
        echo "$out"
        failures=$((failures + 1))
        out=""
    fi
}
# expect WHAT PATTERN: the last output must match the extended regular expression.
expect() {
    if ! printf '%s\n' "$out" | grep -Eq -- "$2"; then
        echo "FAIL: $1: no match for /$2/ in:"
        printf '%s\n' "$out" | head -60
        failures=$((failures + 1))
    fi
}

# The hand-built profile: every case of the encoding.
rich="$tmp/rich.pb.gz"
pprof "$rich" -raw
expect "rich -raw: sample types" 'alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes'
expect "rich -raw: comments" 'memprof.format=1'
expect "rich -raw: labels" 'live_samples'
expect "rich -raw: mapping with build id" 'app abcdef01'
pprof "$rich" -top -sample_index=inuse_space -nodecount=100 -nodefraction=0
expect "rich -top: leaf" 'inlined_helper'
expect "rich -top: C++ name" 'operator new'
expect "rich -top: frame outside any module" 'jit_code'
pprof "$rich" -traces -sample_index=alloc_space
expect "rich -traces: inlined frame" 'inlined_helper.*\(inline\)'
expect "rich -traces: runtime frame" 'build_index'
expect "rich -traces: unknown runtime frame" 'unknown runtime frame'
expect "rich -traces: unresolved frame" 'libfoo'
pprof "$rich" -top -lines -sample_index=inuse_space
expect "rich -lines: file:line" 'leaf_alloc .*alloc.c:42'
expect "rich -lines: inlined file:line" 'inlined_helper .*inl.h:9'
pprof "$rich" -top -sample_index=alloc_objects
expect "rich alloc_objects" 'Type: alloc_objects'

# The engine profile: real functions, file:line and an inlined frame.
eng="$tmp/engine.pb.gz"
pprof "$eng" -top -sample_index=inuse_space
expect "engine -top: inuse_space" 'Type: inuse_space'
expect "engine -top: allocating function" 'fixture_alloc_leaf'
pprof "$eng" -top -sample_index=inuse_space -cum
expect "engine -top -cum: callers" 'fixture_build_big'
expect "engine -top -cum: callers" 'fixture_build_small'
pprof "$eng" -traces
expect "engine -traces: inlined frame" 'fixture_inlined_fill.*\(inline\)'
pprof "$eng" -top -lines -sample_index=inuse_space
expect "engine -lines: file:line" 'fixture_alloc_leaf .*fixture\.c:[0-9]+'
for t in alloc_objects alloc_space inuse_objects inuse_space peak_objects peak_space \
    temp_objects temp_space; do
    pprof "$eng" -top -sample_index=$t
    expect "engine sample type $t" "Type: $t"
done

# The views: the peak's and the temporary allocations' leaders by sample type, threads as tags.
views="$tmp/views.pb.gz"
pprof "$views" -top -sample_index=peak_space
expect "views -top peak_space: the peak's leader" '20480kB .*build_report'
pprof "$views" -top -sample_index=temp_space
expect "views -top temp_space: the churn" '390MB.*parse_request'
pprof "$views" -top -sample_index=inuse_space -tagfocus=thread=worker-1
expect "views -tagfocus thread=worker-1" 'Active filters'
pprof "$views" -tags
expect "views -tags: thread names" 'worker-1'
expect "views -tags: an unnamed thread by its id" 'thread 1003'

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "go tool pprof read the three profiles"
