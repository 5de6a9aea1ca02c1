#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Symbolization after the fact, end to end: one case per run (the first argument).

Every case profiles sym_prog.c's program (64 MiB from big_block at the line marked BIG) and
checks that the profile's largest site is named big_block at that line, however it was named:

  pprof-local  MEMPROF_SYMBOLIZE=0 writes addresses with pprof mappings; `go tool pprof
               -symbolize=local` with the binary names the site, and addr2line, given the
               address mapped through the mapping and the ELF program headers as pprof maps
               it, names the same function and line.
  offline      `memprof report --symbolize` on the raw profile gives the site the frames,
               files and lines the in-process symbolizer gives it (inlined frames included);
               with --debug-dir for a stripped program whose debug file is only there;
               `memprof diff --symbolize` names the raw side too.
  debuginfod   the same for a stripped program whose debug file only a debuginfod server
               (a local python3 -m http.server) has; skipped without libdebuginfod.
  no-network   under the plugin with DEBUGINFOD_URLS pointing at a listening socket, the
               profiled program symbolizes at exit without connecting to it; with
               MEMPROF_DEBUGINFOD=1 it does connect (so the check can see a connection).
  run          `memprof run` has the program write raw addresses and writes the named profile
               itself after the program exits, as pprof and in another format (text).
  cache        a stripped program whose debug file has its DWARF compressed: `report
               --symbolize` names it and leaves a decompressed copy in MEMPROF_CACHE_DIR
               (else $XDG_CACHE_HOME/memprof), which it and the profiled process itself then
               read instead of the file (shown by a file that lost its line table: the names
               keep their lines only through the copy); MEMPROF_CACHE_DIR= writes nothing.

usage: symbolize_test.py CASE MEMPROF PLUGIN PROGRAM [more programs]
Exit status 77 means skipped (go, addr2line or libdebuginfod missing).
"""
import gzip
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sym_prog.c")
SKIP = 77


def marked_line(mark):
    with open(SRC) as f:
        for i, line in enumerate(f, 1):
            if "/* %s */" % mark in line:
                return i
    raise SystemExit("no %s mark in %s" % (mark, SRC))


def fail(msg, out=""):
    print("FAIL: " + msg)
    if out:
        print(out[:4000])
    sys.exit(1)


def profile(plugin, prog, out, env_extra):
    env = dict(os.environ, LD_PRELOAD=plugin, MEMPROF_OUTPUT=out, MEMPROF_RATE="16K",
               MEMPROF_QUIET="1")
    env.update(env_extra)
    r = subprocess.run([prog], env=env, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(out):
        fail("%s under the plugin: status %d" % (prog, r.returncode), r.stderr)


def go_env(tmp):
    return dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "cache"),
                GOPATH=os.path.join(tmp, "gopath"), GOPROXY="off", GOTOOLCHAIN="local",
                PPROF_TMPDIR=tmp, PPROF_BINARY_PATH=os.path.join(tmp, "none"))


def pprof(tmp, args, path):
    r = subprocess.run(["go", "tool", "pprof", *args, path], env=go_env(tmp),
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("go tool pprof %s: status %d" % (" ".join(args), r.returncode), r.stderr)
    return r.stdout


def top_locations(tmp, path):
    """The locations of the sample with the most inuse_space, leaf first, as (address,
    mapping), from pprof's -raw listing; and the listing."""
    samples, raw = all_samples(tmp, path)
    best = max(samples, key=lambda x: x[0])
    return best[1], raw


def all_samples(tmp, path):
    """Every sample as (inuse_space, [(address, mapping), ...] leaf first), and the listing."""
    raw = pprof(tmp, ["-symbolize=none", "-raw"], path)
    maps, locs, samples = {}, {}, []
    section = None
    types = []
    for line in raw.splitlines():
        if line in ("Samples:", "Locations", "Mappings"):
            section = line
            continue
        if section == "Samples:" and not types:
            types = [t.replace("[dflt]", "") for t in line.split()]
            continue
        if section == "Samples:":
            m = re.match(r"\s+([\d\s]+): ([\d ]+)\s*$", line)
            if m:
                values = [int(v) for v in m.group(1).split()]
                ids = [int(v) for v in m.group(2).split()]
                samples.append((values[types.index("inuse_space/bytes")], ids))
        elif section == "Locations":
            m = re.match(r"\s+(\d+): (0x[0-9a-f]+) M=(\d+)", line)
            if m:
                locs[int(m.group(1))] = (int(m.group(2), 16), int(m.group(3)))
        elif section == "Mappings":
            m = re.match(r"(\d+): (0x[0-9a-f]+)/(0x[0-9a-f]+)/(0x[0-9a-f]+) (\S+)", line)
            if m:
                maps[int(m.group(1))] = tuple(int(m.group(i), 16) for i in (2, 3, 4)) + (
                    m.group(5),)
    if not samples:
        fail("no sample in go tool pprof -raw", raw)
    return [(v, [(locs[i][0], maps.get(locs[i][1])) for i in ids]) for v, ids in samples], raw


def leaf_address(tmp, path):
    """The mapping and location address of the leaf of the sample with the most inuse_space."""
    top, raw = top_locations(tmp, path)
    return top[0][0], top[0][1], raw


def addr2line_stacks(elf, tmp, path):
    """For every sample, the frames binutils' addr2line gives, inlined ones included, for
    the program's own locations, each mapped as pprof maps it: standalone pprof's way of
    naming a profile."""
    return [addr2line_frames(elf, locations) for _, locations in all_samples(tmp, path)[0]]


def addr2line_frames(elf, locations):
    frames = []
    for addr, mapping in locations:
        if not mapping or os.path.realpath(mapping[3]) != os.path.realpath(elf):
            continue
        r = subprocess.run(["addr2line", "-f", "-i", "-e", elf,
                            hex(file_address(elf, addr, mapping))],
                           capture_output=True, text=True)
        lines = r.stdout.split()
        for fn, where in zip(lines[0::2], lines[1::2]):
            m = re.match(r"(.*):(\d+)", where)
            frames.append((fn, os.path.basename(m.group(1)) if m else "",
                           int(m.group(2)) if m else 0))
    return frames


def file_address(elf, addr, mapping):
    """pprof's map from a runtime address to the ELF file: the file offset through the
    mapping, then the loadable segment holding that offset."""
    start, limit, offset, _ = mapping
    if not start <= addr < limit:
        fail("address %#x outside its mapping %#x-%#x" % (addr, start, limit))
    fo = addr - start + offset
    r = subprocess.run(["readelf", "-lW", elf], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD" and "E" in f[6:-1]:
            off, vaddr, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if off <= fo < off + filesz:
                return fo - off + vaddr
    fail("no executable segment of %s holds file offset %#x" % (elf, fo), r.stdout)


def case_pprof_local(memprof, plugin, progs):
    if not shutil.which("go") or not shutil.which("addr2line"):
        print("go or addr2line not installed: skipping")
        return SKIP
    big = marked_line("BIG")
    with tempfile.TemporaryDirectory() as tmp:
        for prog in progs:
            raw = os.path.join(tmp, os.path.basename(prog) + ".pb.gz")
            profile(plugin, prog, raw, {"MEMPROF_SYMBOLIZE": "0"})
            # Unsymbolized: no names in the file at all.
            with gzip.open(raw) as f:
                if b"big_block" in f.read():
                    fail("%s: the raw profile holds function names" % prog)
            out = pprof(tmp, ["-symbolize=local", "-top", "-lines", "-sample_index=inuse_space",
                              "-nodecount=1"], raw)
            want = r"big_block \S*sym_prog\.c:%d\b" % big
            if not re.search(want, out):
                fail("%s: go tool pprof -symbolize=local: no /%s/" % (prog, want), out)
            addr, mapping, listing = leaf_address(tmp, raw)
            if mapping[0] % 4096 or mapping[1] % 4096 or mapping[2] % 4096:
                # Only lld's layout (code in the file's first page) may be unaligned.
                if mapping[2] == 0 or mapping[2] >= 4096:
                    fail("%s: mapping not page-aligned" % prog, listing)
            vaddr = file_address(prog, addr, mapping)
            r = subprocess.run(["addr2line", "-f", "-e", prog, hex(vaddr)],
                               capture_output=True, text=True)
            lines = r.stdout.split()
            if len(lines) < 2 or lines[0] != "big_block" or \
                    not lines[1].endswith("sym_prog.c:%d" % big):
                fail("%s: addr2line of %#x (from %#x) says %s" % (prog, vaddr, addr, lines),
                     listing)
            # Every frame of the program in that stack, through the mappings, is the one the
            # process itself names.
            named = os.path.join(tmp, "named-" + os.path.basename(prog) + ".pb.gz")
            profile(plugin, prog, named, {})
            stacks = addr2line_stacks(prog, tmp, raw)
            in_process = sites(memprof, named)[0]
            for leaf in ("big_block", "small_helper"):
                want = own_frames(site_with_leaf(in_process, leaf) or [])
                got = own_frames(site_with_leaf(stacks, leaf) or [])
                if not want or want != got:
                    fail("%s: %s: addr2line through the mappings %s, in process %s" %
                         (prog, leaf, got, want))
            print("%s: pprof names big_block at line %d; addr2line both stacks as the process" %
                  (prog, big))
    return 0


def sites(memprof, path, args=()):
    """The text report's sites as lists of (function, file base name, line), leaf first."""
    r = subprocess.run([memprof, "report", "--format", "text", "--top", "0", *args, path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("memprof report %s %s: status %d" % (" ".join(args), path, r.returncode),
             r.stderr)
    out, cur = [], None
    for line in r.stdout.splitlines():
        m = re.match(r"\s+(at|<-) (\S+)(?: \((\S+?):(\d+)\))?(?: \[inlined\])?\s*$", line)
        if not m:
            cur = None
            continue
        if m.group(1) == "at":
            cur = []
            out.append(cur)
        if cur is not None:
            cur.append((m.group(2), os.path.basename(m.group(3) or ""), int(m.group(4) or 0)))
    return out, r.stdout + r.stderr


def site_with_leaf(all_sites, leaf):
    for site in all_sites:
        if site and site[0][0] == leaf:
            return site
    return None


def own_frames(site):
    """The frames of the test program itself (libc's start-up frames depend on its debug
    files, which both sides may or may not find)."""
    return [f for f in site if f[1] == "sym_prog.c"]


def compare(memprof, named, raw, args, what):
    """The in-process names of `named` against `report --symbolize ARGS` of `raw`."""
    want, _ = sites(memprof, named)
    got, text = sites(memprof, raw, ["--symbolize", *args])
    big, small = marked_line("BIG"), marked_line("SMALL")
    for leaf, line in (("big_block", big), ("small_helper", small)):
        w, g = site_with_leaf(want, leaf), site_with_leaf(got, leaf)
        if not w:
            fail("%s: no %s site in the in-process profile" % (what, leaf))
        if not g:
            fail("%s: no %s site after report --symbolize %s" % (what, leaf, " ".join(args)),
                 text)
        if own_frames(w) != own_frames(g):
            fail("%s: %s site: in process %s, offline %s" % (what, leaf, w, g), text)
        if w[0][2] != line:
            fail("%s: %s at line %d, not %d" % (what, leaf, w[0][2], line))
    print("%s: report --symbolize %s names both sites as the process did" %
          (what, " ".join(args)))


def case_offline(memprof, plugin, progs):
    """progs: the programs with debug information, then a stripped one and its debug file."""
    *full, stripped, debug_file = progs
    with tempfile.TemporaryDirectory() as tmp:
        for prog in full:
            named, raw = os.path.join(tmp, "named.pb.gz"), os.path.join(tmp, "raw.pb.gz")
            profile(plugin, prog, named, {})
            profile(plugin, prog, raw, {"MEMPROF_SYMBOLIZE": "0"})
            compare(memprof, named, raw, [], prog)
            # Without --symbolize, report says how to name a raw profile, and only a raw one.
            for path, raw_one in ((raw, True), (named, False)):
                r = subprocess.run([memprof, "report", path], capture_output=True, text=True)
                if ("--symbolize names them" in r.stderr) != raw_one:
                    fail("%s: report of the %s profile: %r" %
                         (prog, "raw" if raw_one else "named", r.stderr))
            # memprof diff names them too, so a raw profile's two sites match the named
            # one's (unnamed, the four would all differ).
            r = subprocess.run([memprof, "diff", "--symbolize", "--top", "0", raw, named],
                               capture_output=True, text=True)
            if r.returncode != 0 or not re.search(r"\bof 2 sites changed", r.stdout):
                fail("%s: memprof diff --symbolize: status %d" % (prog, r.returncode),
                     r.stdout + r.stderr)
            if shutil.which("go"):
                # elfutils' and binutils' addr2line on the address the mapping leads to
                # (eu-addr2line 0.188 finds no line in clang's output without
                # .debug_aranges: only its function counts then).
                addr, mapping, _ = leaf_address(tmp, raw)
                for tool in ("eu-addr2line", "addr2line"):
                    if not shutil.which(tool):
                        continue
                    r = subprocess.run([tool, "-f", "-e", prog,
                                        hex(file_address(prog, addr, mapping))],
                                       capture_output=True, text=True)
                    words = r.stdout.split()
                    line_ok = len(words) > 1 and (
                        re.search(r"sym_prog\.c:%d(:\d+)?$" % marked_line("BIG"), words[1]) or
                        (tool == "eu-addr2line" and words[1] == "??:0"))
                    if words[:1] != ["big_block"] or not line_ok:
                        fail("%s: %s says %s" % (prog, tool, r.stdout))
        # The stripped program: names only from a debug directory laid out by build id.
        named, raw = os.path.join(tmp, "named.pb.gz"), os.path.join(tmp, "raw.pb.gz")
        profile(plugin, full[-1], named, {})
        profile(plugin, stripped, raw, {"MEMPROF_SYMBOLIZE": "0"})
        bare, text = sites(memprof, raw, ["--symbolize"])
        if site_with_leaf(bare, "big_block"):
            fail("%s: named without its debug file" % stripped, text)
        bid = build_id(stripped)
        dbg = os.path.join(tmp, "debug", ".build-id", bid[:2])
        os.makedirs(dbg)
        shutil.copy(debug_file, os.path.join(dbg, bid[2:] + ".debug"))
        compare(memprof, named, raw, ["--debug-dir", os.path.join(tmp, "debug")], stripped)
        # The program gone (a profile taken elsewhere): its debug file alone names it, found
        # in a debug directory given relative to the current one.
        gone = os.path.join(tmp, "gone-program")
        shutil.copy(stripped, gone)
        raw_gone = os.path.join(tmp, "gone.pb.gz")
        profile(plugin, gone, raw_gone, {"MEMPROF_SYMBOLIZE": "0"})
        os.remove(gone)
        compare(memprof, named, raw_gone,
                ["--debug-dir", os.path.relpath(os.path.join(tmp, "debug"))],
                stripped + " (program removed)")
    return 0


def build_id(elf):
    r = subprocess.run(["readelf", "-n", elf], capture_output=True, text=True)
    m = re.search(r"Build ID: ([0-9a-f]+)", r.stdout)
    if not m:
        fail("no build id in %s" % elf)
    return m.group(1)


def case_debuginfod(memprof, plugin, progs):
    if os.environ.get("MEMPROF_TEST_DEBUGINFOD") != "1":
        print("memprof built without libdebuginfod: skipping")
        return SKIP
    full, stripped, debug_file = progs
    with tempfile.TemporaryDirectory() as tmp:
        named, raw = os.path.join(tmp, "named.pb.gz"), os.path.join(tmp, "raw.pb.gz")
        profile(plugin, full, named, {})
        profile(plugin, stripped, raw, {"MEMPROF_SYMBOLIZE": "0"})
        root = os.path.join(tmp, "server")
        os.makedirs(os.path.join(root, "buildid", build_id(stripped)))
        shutil.copy(debug_file, os.path.join(root, "buildid", build_id(stripped), "debuginfo"))
        srv = subprocess.Popen([sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1",
                                "--directory", root], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
        try:
            m = re.search(r"port (\d+)", srv.stdout.readline())
            if not m:
                fail("the HTTP server did not start")
            os.environ.update(DEBUGINFOD_URLS="http://127.0.0.1:%s" % m.group(1),
                              DEBUGINFOD_CACHE_PATH=os.path.join(tmp, "cache"),
                              DEBUGINFOD_TIMEOUT="10")
            compare(memprof, named, raw, [], stripped + " from debuginfod")
        finally:
            srv.kill()
            srv.wait()
    return 0


def case_run(memprof, plugin, progs):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.pb.gz")
        r = subprocess.run([memprof, "run", "-q", "-r", "16K", "-o", out, "--", progs[0]],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("memprof run: status %d" % r.returncode, r.stderr)
        with gzip.open(out) as f:
            if b"big_block" not in f.read():
                fail("memprof run's profile has no names")
        named = os.path.join(tmp, "named.pb.gz")
        profile(plugin, progs[0], named, {})
        want, got = sites(memprof, named)[0], sites(memprof, out)[0]
        w, g = site_with_leaf(want, "big_block"), site_with_leaf(got, "big_block")
        if not g or own_frames(w) != own_frames(g):
            fail("memprof run: big_block site %s, in process %s" % (g, w))
        # The program itself was told to leave the names to the command.
        r = subprocess.run([memprof, "run", "-q", "-o", os.path.join(tmp, "env.pb.gz"), "--",
                            "env"], capture_output=True, text=True)
        if "MEMPROF_SYMBOLIZE=0" not in r.stdout.splitlines():
            fail("memprof run did not set MEMPROF_SYMBOLIZE=0 for the program", r.stdout)
        # Another format: the program writes raw pprof, the command writes the text.
        txt = os.path.join(tmp, "run.txt")
        r = subprocess.run([memprof, "run", "-q", "-r", "16K", "-o", txt, "--", progs[0]],
                           capture_output=True, text=True)
        with open(txt) as f:
            text = f.read()
        if r.returncode != 0 or not text.startswith("libmemprof") or "big_block" not in text:
            fail("memprof run -o run.txt: status %d" % r.returncode, text + r.stderr)
        r = subprocess.run([memprof, "run", "-q", "-o", os.path.join(tmp, "env.txt"), "--",
                            "env"], capture_output=True, text=True)
        if not {"MEMPROF_SYMBOLIZE=0", "MEMPROF_FORMAT=pprof"} <= set(r.stdout.splitlines()):
            fail("memprof run -o env.txt: the program was not told to write raw pprof",
                 r.stdout)
        print("memprof run: the program wrote addresses, the command named them")
    return 0


# The program case_run_while runs under memprof run: the test program twice, then it waits
# (up to a minute) until both of their profiles hold the name big_block and says so in a file.
WAIT_FOR_NAMES = r"""
prog=$1 dir=$2 ext=$3 flag=$4
# One child before the watcher starts watching (it lists the directory then), one after
# (an inotify event): run_watch.c waits half a second first.
"$prog" || exit 1
sleep 0.8
"$prog" || exit 1
i=0
while [ $i -lt 600 ]; do
    n=0
    for f in "$dir"/w.sym-prog-pie.*"$ext"; do
        [ -f "$f" ] || continue
        if [ "$ext" = .pb.gz ]; then gzip -dc "$f"; else cat "$f"; fi | grep -q big_block &&
            n=$((n + 1))
    done
    if [ $n -ge 2 ]; then echo named > "$flag"; exit 0; fi
    sleep 0.1
    i=$((i + 1))
done
"""


def case_run_while(memprof, plugin, progs):
    """progs[0] is sym-prog-pie (its name is in the file names the script looks for)."""
    for ext in (".pb.gz", ".txt"):
        with tempfile.TemporaryDirectory() as tmp:
            out, flag = os.path.join(tmp, "w" + ext), os.path.join(tmp, "seen")
            # bash, not dash: dash ends with _exit(), so it would write no profile.
            r = subprocess.run([memprof, "run", "-r", "16K", "-o", out, "--", "bash", "-c",
                                WAIT_FOR_NAMES, "bash", progs[0], tmp, ext, flag],
                               capture_output=True, text=True, timeout=120)
            if r.returncode != 0 or "cannot" in r.stderr:
                fail("memprof run -o w%s: status %d" % (ext, r.returncode), r.stderr)
            if not os.path.exists(flag):
                fail("memprof run -o w%s: the finished processes' profiles were not named "
                     "while the program ran" % ext, r.stderr)
            children = [f for f in os.listdir(tmp) if f.startswith("w.sym-prog-pie.")]
            if len(children) != 2 or not os.path.exists(out):
                fail("memprof run -o w%s: files %s" % (ext, sorted(os.listdir(tmp))))
            # Named once: each is a whole profile in the format asked for.
            for name in children:
                path = os.path.join(tmp, name)
                with (gzip.open(path) if ext == ".pb.gz" else open(path, "rb")) as f:
                    data = f.read()
                if ext == ".txt" and not data.startswith(b"libmemprof"):
                    fail("%s is not a text report" % name, data[:200].decode(errors="replace"))
                if b"big_block" not in data:
                    fail("%s has no names" % name)
    print("memprof run: each process's profile was named while the program still ran")
    # The program ends right after its last child: the watcher is still naming that child's
    # profile when the program is found to have exited. The file must be named once: in
    # another format than pprof, a second naming would read a text report as pprof.
    for i in range(10):
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([memprof, "run", "-r", "16K", "-o", os.path.join(tmp, "r.txt"),
                                "--", "bash", "-c", '"$0"; "$0"; :', progs[0]],
                               capture_output=True, text=True, timeout=60)
            children = [f for f in os.listdir(tmp) if f.startswith("r.sym-prog-pie.")]
            for name in children:
                with open(os.path.join(tmp, name), "rb") as f:
                    if not f.read().startswith(b"libmemprof"):
                        fail("run %d: %s is not a text report" % (i, name))
            if r.returncode != 0 or "cannot" in r.stderr or len(children) != 2:
                fail("run %d: memprof run -o r.txt: status %d, files %s"
                     % (i, r.returncode, sorted(os.listdir(tmp))), r.stderr)
    print("memprof run: a profile the watcher was naming as the program ended, named once")
    return 0


def compressed_sections(elf):
    """The names of the sections of `elf` that are compressed (readelf's flag C)."""
    r = subprocess.run(["readelf", "-SW", elf], capture_output=True, text=True)
    out = []
    for line in r.stdout.splitlines():
        if "]" not in line:
            continue
        t = line.split("]", 1)[1].split()
        if len(t) == 10 and "C" in t[6]:
            out.append(t[0])
    return out


def with_env(extra, fn):
    """fn() with os.environ changed by `extra` (None removes a variable)."""
    def apply(values):
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    saved = {k: os.environ.get(k) for k in extra}
    apply(extra)
    try:
        return fn()
    finally:
        apply(saved)


def case_cache(memprof, plugin, progs):
    """progs: a program with debug information and the same stripped."""
    full, stripped = progs
    objcopy = shutil.which("objcopy")
    if not objcopy:
        print("SKIP: no objcopy")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        bid = build_id(full)
        # The stripped program with a debug link to a compressed debug file beside it, where
        # the profiled process looks too.
        prog = os.path.join(tmp, "prog")
        zdebug = os.path.join(tmp, "prog.debug")
        subprocess.run([objcopy, "--only-keep-debug", "--compress-debug-sections=zlib", full,
                        zdebug], check=True)
        if ".debug_info" not in compressed_sections(zdebug):
            fail("objcopy did not compress the debug file's DWARF")
        subprocess.run([objcopy, "--add-gnu-debuglink=" + zdebug, stripped, prog], check=True)
        named, raw = os.path.join(tmp, "named.pb.gz"), os.path.join(tmp, "raw.pb.gz")
        profile(plugin, full, named, {})
        profile(plugin, prog, raw, {"MEMPROF_SYMBOLIZE": "0"})
        cache = os.path.join(tmp, "cache")
        entry = os.path.join(cache, "debug", bid + ".debug")
        with_env({"MEMPROF_CACHE_DIR": cache},
                 lambda: compare(memprof, named, raw, [], "compressed debug file"))
        if not os.path.exists(entry):
            fail("no decompressed copy %s after report --symbolize" % entry)
        if compressed_sections(entry) or build_id(entry) != bid:
            fail("the copy %s: compressed %s, build id %s" %
                 (entry, compressed_sections(entry), build_id(entry)))
        # The debug file loses its line table (same build id, still compressed): only the
        # copy can give the sites their lines now.
        subprocess.run([objcopy, "--remove-section=.debug_line", zdebug], check=True)
        if not compressed_sections(zdebug) or build_id(zdebug) != bid:
            fail("the debug file without its line table is not what the check needs")
        with_env({"MEMPROF_CACHE_DIR": cache},
                 lambda: compare(memprof, named, raw, [], "compressed debug file, cached copy"))
        off, text = with_env({"MEMPROF_CACHE_DIR": ""},
                             lambda: sites(memprof, raw, ["--symbolize"]))
        # Named from the symbol table alone ("big_block+0x11"), without a line.
        big = [s for s in off if s and s[0][0].startswith("big_block")]
        if not big or big[0][0][2] == marked_line("BIG"):
            fail("MEMPROF_CACHE_DIR= still read the copy (or the check sees nothing): %s" % big,
                 text)
        # The profiled process reads the copy too, and never writes one.
        inproc = os.path.join(tmp, "inproc.pb.gz")
        profile(plugin, prog, inproc, {"MEMPROF_CACHE_DIR": cache})
        w, g = site_with_leaf(sites(memprof, named)[0], "big_block"), \
            site_with_leaf(sites(memprof, inproc)[0], "big_block")
        if not g or own_frames(w) != own_frames(g):
            fail("the profiled process did not read the copy: %s, named %s" % (g, w))
        other = os.path.join(tmp, "other-cache")
        profile(plugin, prog, os.path.join(tmp, "inproc2.pb.gz"), {"MEMPROF_CACHE_DIR": other})
        if os.path.exists(other):
            fail("the profiled process wrote to the cache %s" % other)
        # The default place, and none when turned off.
        xdg, home = os.path.join(tmp, "xdg"), os.path.join(tmp, "home")
        os.makedirs(home)
        with_env({"MEMPROF_CACHE_DIR": None, "XDG_CACHE_HOME": xdg},
                 lambda: sites(memprof, raw, ["--symbolize"]))
        if not os.path.exists(os.path.join(xdg, "memprof", "debug", bid + ".debug")):
            fail("no copy under $XDG_CACHE_HOME/memprof/debug")
        with_env({"MEMPROF_CACHE_DIR": "", "XDG_CACHE_HOME": None, "HOME": home},
                 lambda: sites(memprof, raw, ["--symbolize"]))
        if os.listdir(home):
            fail("MEMPROF_CACHE_DIR= wrote %s" % os.listdir(home))
        print("compressed debug file: named, copied decompressed to the cache, the copy read "
              "by report --symbolize and by the process")
    return 0


def connections(plugin, prog, tmp, extra):
    """How many connections the profiled program made to a socket DEBUGINFOD_URLS names."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.setblocking(False)
    port = srv.getsockname()[1]
    env = {"DEBUGINFOD_URLS": "http://127.0.0.1:%d" % port,
           "DEBUGINFOD_CACHE_PATH": os.path.join(tmp, "cache"), "DEBUGINFOD_TIMEOUT": "1"}
    env.update(extra)
    profile(plugin, prog, os.path.join(tmp, "named.%d.pb.gz" % port), env)
    n = 0
    while True:
        try:
            conn, _ = srv.accept()
        except BlockingIOError:
            break
        conn.close()
        n += 1
    srv.close()
    return n


def case_no_network(memprof, plugin, progs):
    with tempfile.TemporaryDirectory() as tmp:
        for prog in progs:
            # A stripped program: libdw looks for its debug file, which nothing here has.
            n = connections(plugin, prog, tmp, {})
            if n:
                fail("%s: the profiled process connected %d time(s) to DEBUGINFOD_URLS" % (prog, n))
            asked = connections(plugin, prog, tmp, {"MEMPROF_DEBUGINFOD": "1"})
            print("%s: no connection by default; %d with MEMPROF_DEBUGINFOD=1" % (prog, asked))
            if not asked and debuginfod_available():
                fail("%s: MEMPROF_DEBUGINFOD=1 made no connection: the check sees nothing" % prog)
    return 0


def debuginfod_available():
    r = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True)
    return "libdebuginfod.so.1" in r.stdout


def main():
    case, memprof, plugin, progs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    cases = {"pprof-local": case_pprof_local, "no-network": case_no_network,
             "offline": case_offline, "debuginfod": case_debuginfod, "run": case_run,
             "run-while": case_run_while,
             "cache": case_cache}
    sys.exit(cases[case](memprof, plugin, progs))


if __name__ == "__main__":
    main()
