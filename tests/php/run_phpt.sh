#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs one .phpt test with PHP's run-tests.php and turns its verdict into a meson test
# status: PASS 0, SKIP 77 (with the reason), anything else 1 with the diff and the output.
# The test runs from a copy in its own directory under WORKDIR, because run-tests.php
# writes its .php, .out, .diff and .log files beside the test.
# usage: run_phpt.sh PHP RUN_TESTS_PHP EXTENSION TEST.phpt WORKDIR
set -u
php=$1 run_tests=$2 ext=$3 test=$4 workdir=$5
name=$(basename "$test" .phpt)
dir=$workdir/$name
rm -rf "$dir" && mkdir -p "$dir" || exit 1
cp "$test" "$dir/" || exit 1
[ -f "$run_tests" ] || { echo "skipped: $run_tests not found (apt-get install php8.2-dev)"; exit 77; }
# -n: no php.ini, so an installed php-memprof (or anything else in conf.d) cannot load a
# second copy of the extension or change what the tests see.
out=$("$php" "$run_tests" -q --no-color -n -p "$php" -d "extension=$ext" --show-diff \
      "$dir/$name.phpt" 2>&1)
if echo "$out" | grep -Eq '^Tests passed +: +1 '; then
  echo "$out" | grep '^PASS'
  exit 0
fi
if echo "$out" | grep -Eq '^Tests skipped +: +1 '; then
  echo "$out" | grep '^SKIP'
  exit 77
fi
echo "$out"
for f in out log; do
  [ -f "$dir/$name.$f" ] && { echo "---- $name.$f"; cat "$dir/$name.$f"; }
done
exit 1
