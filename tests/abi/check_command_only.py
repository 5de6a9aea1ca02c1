# SPDX-License-Identifier: MIT
"""What only the `memprof` command uses is not in libmemprof.so.1.

Reading pprof files back (export/pprof_read.c), merging profiles (export/merge.c) and
naming raw profiles outside the process (offline/symbolize.c, offline/offline.c) are the
command's (`report`, `diff`, `run`'s deferred symbolization): every process that loads the
library would map them for nothing. This test lists the library's defined symbols (its
symbol table, local ones included) and fails if one of theirs is there, and checks the
command does have them, so the test cannot pass by looking at the wrong file.

The other way round, the command links only the layers it uses (doc/architecture.md, "The
command's libraries"): the engine's entry points are in the library and not in the command.
And the command does not need libdebuginfod (with libcurl, GnuTLS, Kerberos and LDAP behind
it, ~10 ms of loading in every run): it opens it when it first asks a server.
"""
import argparse
import subprocess
import sys

COMMAND_ONLY = ["memprof__pprof_read", "memprof__profile_merge", "memprof__profile_symbolize"]
# The engine: its lifecycle, the sampling path, the stack table.
ENGINE = ["memprof_start", "memprof__sample_begin", "memprof__sample_end", "memprof__free_slow",
          "memprof__st_get"]


def defined(path):
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True,
                         check=True).stdout
    return [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--command", required=True)
    a = ap.parse_args()
    lib, cmd = defined(a.lib), defined(a.command)
    problems = ["%s is in %s" % (s, a.lib) for s in COMMAND_ONLY if s in lib]
    problems += ["%s is not in the command (%s): wrong file?" % (s, a.command)
                 for s in COMMAND_ONLY if s not in cmd]
    problems += ["%s (the engine's) is in the command (%s)" % (s, a.command)
                 for s in ENGINE if s in cmd]
    problems += ["%s is not in %s: wrong file?" % (s, a.lib) for s in ENGINE if s not in lib]
    problems += ["the command needs %s at start" % n for n in needed(a.command)
                 if n.startswith(("libdebuginfod", "libcurl"))]
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    print("PASS: %s holds none of %s; the command none of %s" %
          (a.lib, ", ".join(COMMAND_ONLY), ", ".join(ENGINE)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
