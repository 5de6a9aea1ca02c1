#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The ABI gate (suite `abi`): compares the freshly built libmemprof.so.1 against the
# committed baseline abi/libmemprof.abi.xml with abidiff (Debian package abigail-tools).
#
# Fails on any reported change to the public ABI: a function or variable removed, a public
# type changed (members appended to size-stamped structs included: that is compatible, but
# is a reviewed change that comes with a new baseline, see abi/README.md). Added functions
# pass here; tests/abi/check_symbols.py makes sure they went into a new version node. The
# MEMPROF_PRIVATE memprof__* internals are suppressed (abi/libmemprof.abignore).
#
# Usage: check_abi.sh BASELINE SUPPRESSIONS LIBRARY
# Exit status: 0 pass, 1 ABI change, 77 skipped (no abidiff, not LP64, no debug info).
set -uo pipefail

baseline="$1" suppressions="$2" lib="$3"

if ! command -v abidiff >/dev/null 2>&1; then
    echo "SKIP: abidiff not found (apt-get install abigail-tools)"
    exit 77
fi
# The baseline was taken on x86_64; type layouts are the same on every LP64 target.
if [[ "$(getconf LONG_BIT 2>/dev/null)" != 64 ]]; then
    echo "SKIP: the ABI baseline describes LP64 targets"
    exit 77
fi
# abidiff compares types through DWARF: a build without -g cannot be checked.
if ! readelf -S --wide "$lib" 2>/dev/null | grep -q '\.debug_info'; then
    echo "SKIP: $lib has no debug information (buildtype plain/release without -g)"
    exit 77
fi

echo "abidiff $(abidiff --version | awk '{print $NF}'): $baseline vs $lib"
report="$(abidiff --suppressions "$suppressions" --no-architecture \
    --no-unreferenced-symbols --no-added-syms "$baseline" "$lib" 2>&1)"
rc=$?
echo "$report"
# abidiff's status is a bit set: 1 error, 2 usage error, 4 ABI change, 8 incompatible change.
if (( rc == 0 )); then
    echo "OK: no change to the public ABI"
    exit 0
fi
if (( rc & 3 )); then
    echo "FAIL: abidiff could not compare (status $rc)"
    exit 1
fi
if (( rc & 8 )); then
    echo "FAIL: incompatible ABI change (something was removed); this needs a new soname"
else
    echo "FAIL: the public ABI changed. If the change is intended and compatible (members"
    echo "appended to a size-stamped struct), regenerate the baseline as abi/README.md says."
fi
exit 1
