#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Lints the manual pages (test `man-pages`, suite 'docs').

For each page source (doc/*.1.in, doc/*.3.in, with @VERSION@ filled in as doc/meson.build
does): groff renders it with all warnings enabled (`groff -man -ww -z`) and man-db renders
it (`man --warnings -l`) without a single diagnostic, and lexgrog (the whatis parser that
mandb and lintian use) can read its NAME line. Then, for drift:
  * libmemprof(3) names exactly the public functions of src/libmemprof.map in its NAME
    section and shows each one's prototype in its SYNOPSIS;
  * memprof(1) mentions every subcommand and every long option that the built `memprof`
    command prints in its help pages (when the command is given).
Exit status: 0 pass, 1 fail, 77 skip (groff not installed).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg)


def render_checks(page, text):
    env = dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH="80")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, os.path.basename(page)[:-3])  # drop .in
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        r = subprocess.run(["groff", "-man", "-ww", "-z", path], capture_output=True,
                           text=True, env=env)
        if r.returncode != 0 or r.stderr.strip():
            fail(f"{page}: groff -man -ww: {r.stderr.strip() or 'status %d' % r.returncode}")
        if shutil.which("man"):
            r = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", path],
                               capture_output=True, text=True, env=env)
            if r.returncode != 0 or r.stderr.strip():
                fail(f"{page}: man --warnings: {r.stderr.strip() or 'status %d' % r.returncode}")
        if shutil.which("lexgrog"):
            r = subprocess.run(["lexgrog", path], capture_output=True, text=True, env=env)
            if r.returncode != 0 or "parse failed" in r.stdout:
                fail(f"{page}: lexgrog cannot parse the NAME section: {r.stdout.strip()}")


def name_section(text):
    m = re.search(r"^\.SH NAME\n(.*?)^\.SH", text, re.S | re.M)
    if not m:
        return []
    names = m.group(1).split("\\-")[0]
    return [n.strip() for n in names.replace("\n", " ").split(",") if n.strip()]


def public_functions(map_path):
    text = re.sub(r"/\*.*?\*/", " ", open(map_path, encoding="utf-8").read(), flags=re.S)
    names = set()
    for m in re.finditer(r"(MEMPROF_[0-9.]+)\s*\{(.*?)\}", text, re.S):
        for item in re.split(r"[;\s]+", m.group(2)):
            if re.fullmatch(r"memprof_[a-z0-9_]+", item) and not item.startswith("memprof__"):
                names.add(item)
    return names


def check_library_page(page, text, map_path):
    listed = name_section(text)
    funcs = set(listed) - {"libmemprof"}
    public = public_functions(map_path)
    for n in sorted(public - funcs):
        fail(f"{page}: {n} (in {os.path.basename(map_path)}) is missing from the NAME section")
    for n in sorted(funcs - public):
        fail(f"{page}: {n} is in the NAME section but is not a public function")
    synopsis = re.search(r"^\.SH SYNOPSIS\n(.*?)^\.SH", text, re.S | re.M)
    synopsis = synopsis.group(1) if synopsis else ""
    for n in sorted(public):
        if not re.search(r"\b" + re.escape(n) + r"\(", synopsis):
            fail(f"{page}: no prototype of {n} in the SYNOPSIS")


def check_command_page(page, text, memprof):
    plain = text.replace("\\-", "-")
    def run(args):
        r = subprocess.run([memprof] + args, capture_output=True, text=True)
        # The EXAMPLES run other programs, whose options are not memprof's.
        return (r.stdout + r.stderr).split("\nEXAMPLES")[0]
    overview = run(["--help"])
    commands = sorted(set(re.findall(r"^\s+memprof ([a-z]+) ", overview, re.M)))
    if not commands:
        fail(f"`{memprof} --help` lists no subcommand")
    for cmd in commands:
        if not re.search(r"^\.B memprof " + cmd + r"\b", text, re.M):
            fail(f"{page}: the subcommand `memprof {cmd}` is not documented")
        helptext = overview if cmd == "help" else run([cmd, "--help"])
        for opt in sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", helptext))):
            if opt not in plain:
                fail(f"{page}: option {opt} of `memprof {cmd}` is not documented")
    for opt in sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", overview))):
        if opt not in plain:
            fail(f"{page}: option {opt} of `memprof` is not documented")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--version", required=True)
    ap.add_argument("--docdir", required=True, help="where the documentation is installed")
    ap.add_argument("--map", required=True, help="src/libmemprof.map")
    ap.add_argument("--memprof", help="the built memprof command")
    ap.add_argument("pages", nargs="+")
    args = ap.parse_args()
    if shutil.which("groff") is None:
        print("SKIP: groff not installed")
        return 77
    for page in args.pages:
        text = open(page, encoding="utf-8").read().replace("@VERSION@", args.version)
        text = text.replace("@DOCDIR@", args.docdir)
        if re.search(r"@[A-Z_]+@", text):
            fail(f"{page}: an unsubstituted @VARIABLE@")
        render_checks(page, text)
        base = os.path.basename(page)
        if base.endswith(".3.in"):
            check_library_page(page, text, args.map)
        elif base == "memprof.1.in" and args.memprof:
            check_command_page(page, text, args.memprof)
    if failures:
        print(f"{len(failures)} problem(s) in the manual pages")
        return 1
    print(f"OK: {len(args.pages)} manual page(s) render cleanly and match the code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
