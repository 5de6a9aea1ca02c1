# SPDX-License-Identifier: MIT
"""Every environment variable libmemprof reads is documented, in one place a user looks.

The variables are found in the code itself: every string literal that is exactly a
MEMPROF_* name in src/, tools/ and bindings/ (getenv, setenv, the preload plugin's table of
options in src/interpose/preload_env.c, os.environ, ENV). Each must appear in doc/guide.md,
and each row of the plugin's table must be a row of the guide's table of the plugin's
variables ("The preload plugin"). A variable added to the code without its documentation,
or a row dropped from the guide, fails here.
"""
import os
import re
import sys

LITERAL = re.compile(r"""["'](MEMPROF_[A-Z][A-Z0-9_]*)["']""")
PLUGIN_ROW = re.compile(r'\{"(MEMPROF_[A-Z0-9_]+)",\s*[A-Z]+,')
EXTENSIONS = (".c", ".h", ".py", ".rb", ".php")


def names_in(root, top):
    found = {}
    for d, subdirs, files in os.walk(os.path.join(root, top)):
        subdirs[:] = [x for x in subdirs if not x.startswith((".", "__"))]
        for f in files:
            if f.endswith(EXTENSIONS):
                path = os.path.join(d, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for name in LITERAL.findall(fh.read()):
                        found.setdefault(name, os.path.relpath(path, root))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    with open(os.path.join(root, "doc", "guide.md"), encoding="utf-8") as f:
        guide = f.read()
    used = {}
    for top in ("src", "tools", "bindings"):
        used.update(names_in(root, top))
    problems = []
    for name, where in sorted(used.items()):
        if not re.search(r"\b%s\b" % name, guide):
            problems.append("%s (read in %s) is not documented in doc/guide.md" % (name, where))

    with open(os.path.join(root, "src", "interpose", "preload_env.c"), encoding="utf-8") as f:
        rows = PLUGIN_ROW.findall(f.read())
    if not rows:
        problems.append("no rows found in preload_env.c's table of options")
    table = guide[guide.find("### The preload plugin"):]
    for name in rows:
        if not re.search(r"^\| `%s` \|" % name, table, re.M):
            problems.append("%s, a row of the plugin's options, is not a row of the guide's "
                            "table of the plugin's variables" % name)
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    print("PASS: %d variables documented, %d plugin rows" % (len(used), len(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
