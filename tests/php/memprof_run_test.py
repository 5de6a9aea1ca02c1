#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`memprof run -- php app.php` with no change to the script (issue 25, item 4).

memprof run sees PHP and adds its bootstrap directory (an ini loading the extension built in
this tree) to PHP_INI_SCAN_DIR with MEMPROF_PHP=1, so the extension joins the plugin's
profile with PHP frames and the Zend heap hooks. Checks, each in its own run:

- a script holding ~100 MB of strings in one function to its end: the exit summary's live
  heap (the profile is written at the script's end, before PHP releases its heap) and its
  first site, that function with its file and line, are each within 12 % of what the Zend
  heap grew by (memory_get_usage(), printed by the script);
- --no-runtime leaves PHP alone (no PHP function in the summary);
- a script calling memprof_enable() joins (true, one message saying so).

Usage: memprof_run_test.py MEMPROF PHP. Exits 0, 1 with the reason, or 77 (skipped) when the
command or PHP is missing.
"""

import os
import re
import subprocess
import sys
import tempfile

# Strings of 128 KiB - 32 characters: with zend_string's header, just under 128 KiB, which the
# Zend heap serves as 32 whole pages, so memory_get_usage() counts (within 0.01 %) what was
# asked for (small strings would be counted with their size class's rounding); 800 of them,
# 100 MiB.
APP = """<?php
function hold_strings() {
    $a = [];
    for ($i = 0; $i < 800; $i++) {
        $a[] = str_repeat(chr(65 + $i % 26), 131072 - 32); // LINE_HOLD
    }
    return $a;
}
$before = memory_get_usage();
$keep = hold_strings();
echo memory_get_usage() - $before, "\\n";
"""

ENABLE = """<?php
var_dump(memprof_enable());
$x = str_repeat("a", 1 << 22);
var_dump(memprof_enabled());
"""

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(memprof, php, dir, code, *options):
    path = os.path.join(dir, "app.php")
    with open(path, "w") as f:
        f.write(code)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMPROF_") and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH",
                                                         "PHP_INI_SCAN_DIR")}
    r = subprocess.run([memprof, "run", "-r", "64K", "-o", os.path.join(dir, "out.pb.gz"),
                        *options, "--", php, path], env=env, capture_output=True, text=True,
                       timeout=300, cwd=dir)
    if r.returncode != 0:
        fail(f"memprof run exited with {r.returncode}\n{r.stderr}")
    return r


def sites(summary):
    parts = re.split(r"^Top sites by [^\n]*\n", summary, flags=re.M)
    if len(parts) < 2:
        fail("no sites in the summary:\n" + summary)
    return re.findall(r"^ *\d+\. .*?(?=^ *\d+\. |\Z)", parts[1], re.M | re.S)


def main():
    memprof, php = sys.argv[1], sys.argv[2]
    if not os.access(memprof, os.X_OK) or not os.access(php, os.X_OK):
        print("skipped: the memprof command or php is missing")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as dir:
        r = run(memprof, php, dir, APP)
        if "no PHP extension" in r.stderr:
            fail(r.stderr)
        truth = int(r.stdout.split()[-1])
        top = sites(r.stderr)[0]
        line = next(i for i, l in enumerate(APP.splitlines(), 1) if "LINE_HOLD" in l)
        if "hold_strings" not in top or f"app.php:{line}" not in top:
            fail(f"the first site is not hold_strings (app.php:{line}):\n{top}")
        m = re.match(r" *1\. ([\d.]+) (B|KiB|MiB|GiB)", top)
        estimate = float(m.group(1)) * UNITS[m.group(2)]
        if abs(estimate - truth) > 0.12 * truth:
            fail(f"estimate {estimate:.0f} is not within 12 % of {truth}:\n{top}")
        m = re.search(r"^Estimated live heap: ([\d.]+) (B|KiB|MiB|GiB)", r.stderr, re.M)
        live = float(m.group(1)) * UNITS[m.group(2)] if m else 0
        if abs(live - truth) > 0.12 * truth:
            fail(f"live heap at exit {live:.0f} is not within 12 % of {truth}:\n{r.stderr}")
        print(f"ok: hold_strings {estimate / 2**20:.1f} MiB, truth {truth / 2**20:.1f} MiB")

        r = run(memprof, php, dir, APP, "--no-runtime")
        if "hold_strings" in r.stderr:
            fail("--no-runtime: PHP functions in the summary:\n" + r.stderr)
        print("ok: --no-runtime")

        r = run(memprof, php, dir, ENABLE)
        if r.stdout.split() != ["bool(true)", "bool(true)"]:
            fail("memprof_enable() under memprof run:\n" + r.stdout + r.stderr)
        if r.stderr.count("joined the running profile") != 1:
            fail("memprof_enable() did not say once that it joined:\n" + r.stderr)
        print("ok: memprof_enable() joins")


main()
