# SPDX-License-Identifier: MIT
"""The preload plugin refuses a libmemprof.so.1 of another build (src/core/backend.h, Pairing).

The plugin refers to memprof__backend_pair_<token>, which only a library whose private
interface hashes to the same token defines. This test copies the built library, changes the
token in the copy's symbol name (same length, so the ELF stays valid), and runs a program
with the plugin preloaded and the copy found first (LD_LIBRARY_PATH is searched before the
plugin's RUNPATH): the loader must refuse to start it, naming the symbol. The unchanged copy
in the same place must run, so the refusal is the token's doing, not the copy's.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


def run(plugin, libdir, program):
    env = dict(os.environ, LD_PRELOAD=plugin, LD_LIBRARY_PATH=libdir, MEMPROF_QUIET="1")
    return subprocess.run([program], env=env, capture_output=True, text=True, timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--lib", required=True, help="libmemprof.so.1 of the same build")
    ap.add_argument("--program", default="/bin/true")
    a = ap.parse_args()

    data = open(a.lib, "rb").read()
    names = set(re.findall(rb"memprof__backend_pair_([0-9a-f]{16})", data))
    if len(names) != 1:
        print("FAIL: expected one pairing symbol in %s, found %r" % (a.lib, names))
        return 1
    token = names.pop()
    other = bytes(b"0123456789abcdef"[(int(chr(c), 16) + 1) % 16] for c in token)

    with tempfile.TemporaryDirectory(prefix="memprof-pairing-") as tmp:
        same = os.path.join(tmp, "same")
        foreign = os.path.join(tmp, "foreign")
        os.mkdir(same)
        os.mkdir(foreign)
        shutil.copy(a.lib, os.path.join(same, "libmemprof.so.1"))
        with open(os.path.join(foreign, "libmemprof.so.1"), "wb") as f:
            f.write(data.replace(b"memprof__backend_pair_" + token,
                                 b"memprof__backend_pair_" + other))

        p = run(a.plugin, same, a.program)
        if p.returncode != 0:
            print("FAIL: the plugin with a copy of its own library: exit %d: %s"
                  % (p.returncode, p.stderr.strip()))
            return 1
        p = run(a.plugin, foreign, a.program)
        if p.returncode == 0:
            print("FAIL: the plugin ran with a library of another build")
            return 1
        if "memprof__backend_pair_" + token.decode() not in p.stderr:
            print("FAIL: the loader's refusal does not name the pairing symbol: %r" % p.stderr)
            return 1
        print("refused as expected: %s" % p.stderr.strip().splitlines()[-1])
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
