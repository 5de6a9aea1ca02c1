#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks the dynamic symbols the built libraries export (suite `abi`).

libmemprof.so.1 must export exactly what src/libmemprof.map lists:
  * every public node (MEMPROF_1.0, later MEMPROF_1.1, ...) names its functions one by one
    (no wildcards), each starting with `memprof_` but not `memprof__`, and the library
    exports exactly those names in that node;
  * MEMPROF_PRIVATE holds only `memprof__*` internals for the preload plugin;
  * nothing else is exported, and every name carries the `memprof_` prefix;
  * the public names equal the functions the installed headers declare with MEMPROF_API;
  * a node already in the ABI baseline (abi/libmemprof.abi.xml) is frozen: the set of its
    symbols equals the baseline's. New functions go into a new node (abi/README.md).
libmemprof-preload.so, which carries the library (src/preload.map.in), must export:
  * at the base version (no version: so they interpose glibc's), allocator entry points,
    mlockall (which must not fault in the profiler's tables:
    src/interpose/preload_resources.c), prctl and syscall (seccomp filters:
    src/interpose/preload_sandbox.c), unshare and setns, the dynamic loader's lookup
    functions dlopen, dlmopen, dlsym and dlvsym (src/interpose/preload_dl.c, x86_64), and
    malloc, free, calloc, realloc among them;
  * every public symbol of libmemprof.so.1 at the same version, and no other versioned
    symbol but the MEMPROF_PRIVATE entry points its version script lists.

Reads the dynamic symbol table with readelf (binutils). Exit status: 0 pass, 1 fail,
77 skip (no readelf).
"""
import argparse
import fnmatch
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

PRIVATE_NODE = "MEMPROF_PRIVATE"
# The plugin also exports the calls that need a single-threaded process, around which it
# stops its profile-writing thread (src/interpose/preload_namespaces.c).
THREAD_CALLS = {"unshare", "setns"}
# What an LD_PRELOAD allocator shim may export (doc/architecture.md, Decisions: Interposition backends).
ALLOCATOR_ENTRY_POINTS = {
    "malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size", "free_sized",
    "free_aligned_sized",
}
# ... mlockall (the profiler's tables are not faulted in), and the two ways a program
# installs a seccomp filter, prctl(PR_SET_SECCOMP) and syscall(SYS_seccomp), so the profiler
# finishes its one-time work first (src/interpose/preload_sandbox.c).
MEMORY_CALLS = {"mlockall", "prctl", "syscall"}
# ... and the lookups that can end in libc's own symbol table, before the first of which libc's
# entries for free and its kin are made to name the plugin's (src/interpose/preload_dl.c).
LOOKUP_CALLS = {"dlopen", "dlmopen", "dlsym", "dlvsym"}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"(#|//)[^\n]*", " ", text)


def parse_version_script(path):
    """Returns [(node name or None, [global patterns], [local patterns])] in file order."""
    text = strip_comments(open(path, encoding="utf-8").read())
    nodes = []
    for m in re.finditer(r"([A-Za-z0-9_.]*)\s*\{(.*?)\}\s*([A-Za-z0-9_.]*)\s*;", text, re.S):
        name = m.group(1) or None
        scope = "global"
        globs, locs = [], []
        for item in m.group(2).split(";"):
            item = item.strip()
            mm = re.match(r"(global|local)\s*:\s*(.*)", item, re.S)
            if mm:
                scope, item = mm.group(1), mm.group(2).strip()
            if item:
                (globs if scope == "global" else locs).append(item)
        nodes.append((name, globs, locs))
    return nodes


def dynamic_symbols(path):
    """Defined dynamic symbols as {name: version or None}, without version-definition
    symbols (the ABS OBJECT entries named after each node)."""
    out = subprocess.run(["readelf", "--dyn-syms", "--wide", path], check=True,
                         capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(f) < 8 or not f[0].rstrip(":").isdigit():
            continue
        size, typ, bind, ndx, name = f[2], f[3], f[4], f[6], f[7]
        if ndx == "UND" or bind == "LOCAL" or not name:
            continue
        version = None
        if "@" in name:
            name, _, version = name.partition("@")
            version = version.lstrip("@")
        if ndx == "ABS" and typ == "OBJECT" and size == "0" and version in (None, name) \
                and re.fullmatch(r"MEMPROF_[A-Z0-9_.]+", name):
            continue  # the definition of a version node, not a symbol
        syms[name] = version
    return syms


def header_functions(headers):
    names = set()
    for h in headers:
        text = strip_comments(open(h, encoding="utf-8").read())
        text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)
        for m in re.finditer(r"\bMEMPROF_API\b[^;{]*?\b(memprof_\w+)\s*\(", text, re.S):
            names.add(m.group(1))
    return names


def baseline_nodes(path):
    """{version node: {symbol names}} of the functions and variables in the abidw baseline."""
    nodes = {}
    for sym in ET.parse(path).getroot().iter("elf-symbol"):
        nodes.setdefault(sym.get("version") or "", set()).add(sym.get("name"))
    return nodes


def check_library(args):
    nodes = parse_version_script(args.map)
    exported = dynamic_symbols(args.lib)
    print(f"{args.lib}: {len(exported)} exported symbols")

    public_nodes = {}
    for name, globs, _ in nodes:
        if name is None:
            fail(f"{args.map}: a version node without a name")
            continue
        if name == PRIVATE_NODE:
            for g in globs:
                if not g.startswith("memprof__"):
                    fail(f"{args.map}: {PRIVATE_NODE} lists {g!r}: only memprof__* belongs there")
            continue
        if not re.fullmatch(r"MEMPROF_\d+\.\d+", name):
            fail(f"{args.map}: node {name!r} is not named MEMPROF_<major>.<minor>")
        for g in globs:
            if any(c in g for c in "*?["):
                fail(f"{args.map}: public node {name} uses the pattern {g!r}: list names one by one")
            elif not g.startswith("memprof_") or g.startswith("memprof__"):
                fail(f"{args.map}: public node {name} lists {g!r}: public names are memprof_x")
        public_nodes[name] = set(globs)

    # Every exported symbol: prefixed, versioned, in the node the map puts it in.
    for sym, version in sorted(exported.items()):
        if not sym.startswith("memprof_"):
            fail(f"{sym} is exported but lacks the memprof_ prefix")
        if version is None:
            fail(f"{sym} is exported without a symbol version")
        elif version == PRIVATE_NODE:
            if not sym.startswith("memprof__"):
                fail(f"{sym} is in {PRIVATE_NODE} but is not a memprof__ internal")
        elif version not in public_nodes:
            fail(f"{sym}@{version}: node {version} is not in {args.map}")
        elif sym not in public_nodes[version]:
            fail(f"{sym} is exported in {version}, which does not list it")
        elif sym.startswith("memprof__"):
            fail(f"{sym} is an internal (memprof__) exported in public node {version}")
    for node, names in sorted(public_nodes.items()):
        for sym in sorted(names):
            if exported.get(sym) != node:
                got = exported.get(sym)
                fail(f"{sym} is listed in {node} but " +
                     ("not exported" if got is None else f"exported in {got}"))

    # The map and the headers describe the same API.
    declared = header_functions(args.headers)
    listed = set().union(*public_nodes.values()) if public_nodes else set()
    for sym in sorted(declared - listed):
        fail(f"{sym} is declared MEMPROF_API in a public header but is in no public map node")
    for sym in sorted(listed - declared):
        fail(f"{sym} is in the version script but no public header declares it with MEMPROF_API")

    # Released nodes are frozen.
    if args.baseline:
        base = baseline_nodes(args.baseline)
        for node, names in sorted(base.items()):
            if node in ("", PRIVATE_NODE):
                continue
            now = {s for s, v in exported.items() if v == node}
            for sym in sorted(names - now):
                fail(f"{sym}@{node} is in the ABI baseline but no longer exported: ABI break")
            for sym in sorted(now - names):
                fail(f"{sym}@{node} was added to {node}, which the baseline freezes: put it in a "
                     f"new node (MEMPROF_x.y+1), or, before the first release, regenerate the "
                     f"baseline with abi/update-baseline.sh (abi/README.md)")
    private = sum(1 for v in exported.values() if v == PRIVATE_NODE)
    print(f"  public: {sum(len(n) for n in public_nodes.values())} in "
          f"{', '.join(sorted(public_nodes)) or 'no node'}; {PRIVATE_NODE}: {private}")


def check_preload(args):
    exported = dynamic_symbols(args.preload)
    library = dynamic_symbols(args.lib)
    print(f"{args.preload}: {len(exported)} exported symbols")
    private = set()
    for name, globs, _ in parse_version_script(args.preload_map):
        if name == PRIVATE_NODE:
            private.update(globs)
    for sym, version in sorted(exported.items(), key=lambda kv: kv[0]):
        if version is None:
            # The interposed calls keep the base version: a versioned malloc would not
            # interpose the program's malloc@GLIBC_2.2.5.
            if sym not in ALLOCATOR_ENTRY_POINTS | MEMORY_CALLS | THREAD_CALLS | LOOKUP_CALLS:
                fail(f"the preload plugin exports {sym}, which is not an allocator entry point, "
                     "a call it hooks nor part of the library's API")
        elif version == PRIVATE_NODE:
            if sym not in private:
                fail(f"the preload plugin exports {sym}@{version}, which its version script "
                     "does not list")
        elif library.get(sym) != version:
            fail(f"the preload plugin exports {sym}@{version}, which libmemprof.so.1 does not "
                 "(the plugin carries the library's API at the same versions, no more)")
    for sym, version in sorted(library.items()):
        if version != PRIVATE_NODE and exported.get(sym) != version:
            fail(f"the preload plugin does not export {sym}@{version}: a program or binding "
                 "that links libmemprof.so.1 would call another copy of the engine under it")
    for sym in sorted(private):
        if exported.get(sym) != PRIVATE_NODE:
            fail(f"the preload plugin's version script lists {sym} but it is not exported")
    for sym in ("malloc", "free", "calloc", "realloc"):
        if sym not in exported or exported[sym] is not None:
            fail(f"the preload plugin does not export {sym} at the base version")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libmemprof.so.1")
    ap.add_argument("--map", required=True, help="src/libmemprof.map")
    ap.add_argument("--headers", nargs="+", required=True, help="public headers")
    ap.add_argument("--baseline", help="abi/libmemprof.abi.xml")
    ap.add_argument("--preload", help="libmemprof-preload.so")
    ap.add_argument("--preload-map", help="the plugin's generated version script")
    args = ap.parse_args()
    if shutil.which("readelf") is None:
        print("SKIP: readelf not found (binutils)")
        return 77
    check_library(args)
    if args.preload:
        check_preload(args)
    if failures:
        print(f"{len(failures)} problem(s) with exported symbols")
        return 1
    print("OK: exported symbols match the version scripts, the headers and the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
