# SPDX-License-Identifier: MIT
"""Which further CPython interpreters the Python binding is built and tested for (run by
bindings/python/meson.build at configure time, with the python_interpreter).

Arguments: the python_interpreter's major.minor version, then the entries of the
python_interpreters option: absolute paths of interpreters, or "auto" for the newest of each
supported version found in pyenv's versions directory ($PYENV_ROOT, else ~/.pyenv) or as
/usr/local/bin/python3.X or /usr/bin/python3.X. Prints one line per interpreter to build
for, "VERSION<tab>PATH<tab>INCLUDE_DIR<tab>EXT_SUFFIX", one per version, none of
python_interpreter's version: the extensions of one version share an ABI tag, hence a file
name in the staged package. (Meson's python module is not used for these: Meson 1.0 cannot
introspect interpreters without distutils, i.e. 3.12 and later.) An interpreter that
cannot build extensions (no Python.h, a free-threaded build) is left out of "auto"; given by
path, it fails the configuration with the reason, as does a path of a duplicate version, of a
version the binding does not support, or that is not an interpreter.
"""

import glob
import os
import subprocess
import sys

SUPPORTED = ["3.10", "3.11", "3.12", "3.13"]

# Asked of each candidate: its version, and whether it can build the extension.
PROBE = """
import os, sys, sysconfig
headers = os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
print("%d.%d" % sys.version_info[:2], int(headers), int(free_threaded),
      sys.implementation.name)
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
"""


def probe(path):
    """(version, why not usable or None, [include dir, extension suffix]) of the interpreter
    at path."""
    try:
        r = subprocess.run([path, "-I", "-c", PROBE], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    except OSError as e:
        return None, f"cannot run it ({e.strerror})", []
    except subprocess.TimeoutExpired:
        return None, "it did not answer within a minute", []
    out = r.stdout.splitlines()
    if r.returncode != 0 or len(out) != 3 or len(out[0].split()) != 4:
        return None, "it is not a Python interpreter", []
    version, headers, free_threaded, impl = out[0].split()
    if impl != "cpython":
        return version, f"it is {impl}, not CPython", []
    if version not in SUPPORTED:
        return version, f"it is Python {version}; the binding supports {', '.join(SUPPORTED)}", []
    if free_threaded == "1":
        return version, "it is a free-threaded build (the frame source needs the GIL)", []
    if headers != "1":
        return version, "its headers (Python.h) are not installed", []
    return version, None, out[1:]


def candidates(version):
    """Where "auto" looks for an interpreter of this version, best first."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = glob.glob(os.path.join(root, "versions", version + ".*", "bin", "python3"))
    # Newest patch release first; pre-releases (3.13.0rc1) and "t" builds sort by their text.
    found.sort(key=lambda p: [int(x) if x.isdigit() else -1
                              for x in p.split(os.sep)[-3].split(".")], reverse=True)
    return found + [f"/usr/local/bin/python{version}", f"/usr/bin/python{version}"]


def main():
    main_version, entries = sys.argv[1], sys.argv[2:]
    chosen = {main_version: "python_interpreter"}
    lines = []
    for entry in entries:
        if entry == "auto":
            continue
        if not os.path.isabs(entry):
            sys.exit(f"python_interpreters: {entry} is not an absolute path")
        version, why, build = probe(entry)
        if why:
            sys.exit(f"python_interpreters: {entry}: {why}")
        if version in chosen:
            sys.exit(f"python_interpreters: {entry} is Python {version}, like {chosen[version]}"
                     " (one interpreter per version: their extensions share a file name)")
        chosen[version] = entry
        lines.append("\t".join([version, entry, *build]))
    if "auto" in entries:
        for version in SUPPORTED:
            if version in chosen:
                continue
            for path in candidates(version):
                if not os.access(path, os.X_OK):
                    continue
                found, why, build = probe(path)
                if found == version and not why:
                    chosen[version] = path
                    lines.append("\t".join([version, path, *build]))
                    break
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
