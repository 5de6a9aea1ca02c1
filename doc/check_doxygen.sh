#!/bin/sh
# SPDX-License-Identifier: MIT
# Test `doxygen-warnings` (suite 'docs', doc/meson.build): runs Doxygen over the public
# headers and the guides and fails if it printed any warning (an undocumented function,
# parameter or return value, a broken reference, a markup error).
# Usage: check_doxygen.sh DOXYGEN DOXYFILE OUTPUT_DIR
set -eu
doxygen="$1" doxyfile="$2" out="$3"
mkdir -p "$out"
rm -f "$out/warnings.log"
"$doxygen" "$doxyfile"
if [ -s "$out/warnings.log" ]; then
    cat "$out/warnings.log"
    echo "FAIL: Doxygen printed $(wc -l < "$out/warnings.log") warning line(s)"
    exit 1
fi
echo "OK: Doxygen printed no warnings"
