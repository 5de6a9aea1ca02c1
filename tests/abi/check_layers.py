# SPDX-License-Identifier: MIT
"""The include graph matches doc/architecture.md's layers ("Layers and data flow").

Each directory of the source (with its subdirectories) may include the project headers of
the directories its row in ALLOWED names, its own subdirectories' (tools/ebpf/ from tools/),
and the public <memprof/...> headers, which every layer may use. EXCEPTIONS
lists the includes that break the rule today, each with why; the test fails on any other
include across a boundary, and on an exception that is no longer needed, so the list only
shrinks and the page and the code cannot drift apart.
"""
import os
import re
import sys

ALLOWED = {
    "src/common": {"common"},
    "src/loader": {"common", "loader"},
    "src/core": {"common", "loader", "core"},
    # Backends see the engine through core/backend.h only (never core/engine.h).
    "src/interpose": {"common", "loader", "core", "interpose", "api"},
    "src/resolve": {"common", "core", "resolve"},
    "src/export": {"common", "export"},
    "src/api": {"common", "core", "resolve", "export", "api"},
    "tools": {"common", "api", "export"},
}

# Headers of an allowed directory that a layer still must not include.
FORBIDDEN = {
    "src/interpose": {"core/engine.h"},
}

# (file, included header): what still crosses a boundary, and why.
EXCEPTIONS = {
    # Offline symbolization of a profile reads debug info through resolve/.
    ("src/export/symbolize.h", "resolve/offline.h"),
    # The command demangles the names of profiles read back, and the eBPF mode Rust's.
    ("tools/common.c", "resolve/demangle.h"),
    ("tools/ebpf/elfscan.c", "resolve/demangle.h"),
    # memprof attach judges a target's seccomp filters with the library's interpreter, on the
    # system calls the library will make there, before loading it.
    ("tools/target.c", "core/sandbox.h"),
    ("tools/attach.c", "core/sandbox.h"),
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([A-Za-z0-9_.]+)"', re.M)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems, used = [], set()
    for layer, allowed in ALLOWED.items():
        base = os.path.join(root, layer)
        for d, subdirs, names in os.walk(base):
            subdirs[:] = sorted(x for x in subdirs if not x.startswith("."))
            for name in sorted(names):
                if not name.endswith((".c", ".h")):
                    continue
                rel = os.path.relpath(os.path.join(d, name), root).replace(os.sep, "/")
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    text = f.read()
                for top, header in INCLUDE.findall(text):
                    inc = top + "/" + header
                    if top == "memprof" or os.path.isdir(os.path.join(base, top)):
                        continue
                    if top in allowed and inc not in FORBIDDEN.get(layer, ()):
                        continue
                    if (rel, inc) in EXCEPTIONS:
                        used.add((rel, inc))
                        continue
                    problems.append("%s includes %s, outside its layer's rule" % (rel, inc))
    for stale in sorted(set(EXCEPTIONS) - used):
        problems.append("exception no longer needed (remove it): %s includes %s" % stale)
    for p in problems:
        print("FAIL:", p)
    if problems:
        print("The layers and their rules: doc/architecture.md, \"Layers and data flow\".")
        return 1
    print("PASS: %d layers, %d exceptions" % (len(ALLOWED), len(EXCEPTIONS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
