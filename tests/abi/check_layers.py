# SPDX-License-Identifier: MIT
"""The include graph matches doc/architecture.md's layers ("Layers and data flow").

Each directory of the source (with its subdirectories) may include the project headers of
the directories its row in ALLOWED names, its own subdirectories' (tools/ebpf/ from tools/),
and the public <memprof/...> headers, which every layer may use. EXCEPTIONS
lists the includes that break the rule, each with why (none today); the test fails on any
other include across a boundary, on an exception that is no longer needed, and on a
directory of src/ that has no row, so the page and the code cannot drift apart.
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
    # Symbolization outside the profiled process: the command's way to the resolver.
    "src/offline": {"common", "resolve", "export", "offline"},
    "tools": {"common", "api", "export", "offline"},
}

# Headers of an allowed directory that a layer still must not include.
FORBIDDEN = {
    "src/interpose": {"core/engine.h"},
}

# (file, included header): what crosses a boundary all the same, and why. Empty: the command
# reaches the resolver through offline/ and the seccomp interpreter through api/attach_check.h.
EXCEPTIONS = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([A-Za-z0-9_.]+)"', re.M)


def problems_in(root):
    """What breaks the rules in the tree at root: one line each."""
    problems, used = [], set()
    for d in sorted(os.listdir(os.path.join(root, "src"))):
        if os.path.isdir(os.path.join(root, "src", d)) and "src/" + d not in ALLOWED:
            problems.append("src/%s has no row in ALLOWED (nor in the page's table)" % d)
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
    return problems


def self_test():
    """The check catches what it is for: a tree of one allowed include and three crossings
    (export/ into core/, the command into resolve/, an interposer into the engine's header)
    and a directory of src/ without a row gives exactly those four problems."""
    import tempfile

    files = {
        "src/export/ok.c": '#include "export/profile.h"\n#include "common/hash.h"\n',
        "src/export/bad.c": '#include "core/engine.h"\n',
        "tools/bad.c": '#include "resolve/demangle.h"\n',
        "src/interpose/bad.c": '#include "core/engine.h"\n',
        "src/newlayer/x.c": "",
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        got = problems_in(root)
    want = [
        "src/newlayer has no row in ALLOWED (nor in the page's table)",
        "src/interpose/bad.c includes core/engine.h, outside its layer's rule",
        "src/export/bad.c includes core/engine.h, outside its layer's rule",
        "tools/bad.c includes resolve/demangle.h, outside its layer's rule",
    ]
    if sorted(got) != sorted(want):
        print("FAIL: the check itself: expected %r, got %r" % (want, got))
        return 1
    print("PASS: the check finds each of %d planted crossings" % len(want))
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems = problems_in(root)
    for p in problems:
        print("FAIL:", p)
    if problems:
        print("The layers and their rules: doc/architecture.md, \"Layers and data flow\".")
        return 1
    print("PASS: %d layers, %d exceptions" % (len(ALLOWED), len(EXCEPTIONS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
