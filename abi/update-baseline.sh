#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Regenerates the ABI baseline abi/libmemprof.abi.xml from a built libmemprof.so.1 with
# abidw (Debian package abigail-tools). Run it only for a reviewed, intentional ABI change
# (abi/README.md says when and how); the `abi` test suite compares every build against the
# committed baseline.
#
# Usage: abi/update-baseline.sh [BUILD_DIR]   (default: build)
# The build must have debug information (the default debugoptimized build type has it).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
top="$(dirname "$here")"
build="${1:-build}"
[[ "$build" = /* ]] || build="$PWD/$build"
lib="$build/src/libmemprof.so.1"

command -v abidw >/dev/null 2>&1 ||
    { echo "update-baseline: abidw not found (apt-get install abigail-tools)" >&2; exit 1; }
[[ -e "$lib" ]] ||
    { echo "update-baseline: $lib not found: build first (meson compile -C $build)" >&2; exit 1; }
if ! readelf -S --wide "$lib" | grep -q '\.debug_info'; then
    echo "update-baseline: $lib has no debug information (use buildtype debugoptimized or debug)" >&2
    exit 1
fi

# The public headers (and the generated version.h) tell abidw which types are public:
# --drop-private-types then leaves the engine's own structs out of the baseline, and the
# suppression file drops the MEMPROF_PRIVATE memprof__* entry points.
mapfile -t opts < "$here/abidw-options"
out="$here/libmemprof.abi.xml"
abidw "${opts[@]}" \
    --suppressions "$here/libmemprof.abignore" \
    --headers-dir "$top/include/memprof" \
    --header-file "$build/include/memprof/version.h" \
    --out-file "$out.tmp" "$lib"
# abidiff recognises the file by its first bytes (<abi-corpus), so the licence and purpose
# comments go right after the root element's start tag.
{
    head -n 1 "$out.tmp"
    echo '  <!-- SPDX-License-Identifier: MIT -->'
    echo '  <!-- ABI baseline of libmemprof.so.1 (public API only), written by abi/update-baseline.sh: do not edit by hand. -->'
    tail -n +2 "$out.tmp"
} > "$out"
rm -f "$out.tmp"
echo "update-baseline: wrote $out ($(grep -c '<elf-symbol ' "$out") symbols)"
