# SPDX-License-Identifier: MIT
#
# The runner of the integration tests that need more than one process or look at files:
# it starts real programs with and without the preload plugin, with chosen MEMPROF_*
# variables, in a fresh temporary directory, and checks their output, exit status, stderr
# and the profile files they write. It also installs the build into a scratch DESTDIR and
# builds a consumer from the installed tree with pkg-config. Each subcommand checks one
# behaviour; meson.build names the tests. Exit status: 0 pass, 1 fail, 77 skip.
#
# Run by Debian's /usr/bin/python3 (standard library only). The runner itself is never
# preloaded: the plugin path is an argument and only the child processes get LD_PRELOAD.
import argparse
import fcntl
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

SKIP = 77


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def clean_env(extra=None):
    """The environment without any profiler or Python variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith(("MEMPROF_", "PYTHON"))}
    env.update(extra or {})
    return env


def run(cmd, env, stdin=None, cwd=None, timeout=60):
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, cwd=cwd, timeout=timeout)
    p.elapsed = time.monotonic() - t0
    return p


def show(label, p):
    print("--- %s: exit %d, %.2f s, %d bytes stdout" % (label, p.returncode, p.elapsed,
                                                      len(p.stdout)))
    if p.stderr:
        print("    stderr: %s" % p.stderr.decode(errors="replace").rstrip()[:2000])


def env_pairs(pairs):
    out = {}
    for kv in pairs or []:
        k, _, v = kv.partition("=")
        out[k] = v
    return out


def first_diff(a, b):
    al, bl = a.decode(errors="replace").splitlines(), b.decode(errors="replace").splitlines()
    for i, (x, y) in enumerate(zip(al, bl)):
        if x != y:
            return "line %d: %r != %r" % (i + 1, x, y)
    return "lengths %d and %d lines" % (len(al), len(bl))


def profile_header_ok(path):
    with open(path, "rb") as f:
        return f.read(10) == b"libmemprof"


# ---- same behaviour with and without the plugin -----------------------------------------

def same_output(preload, cmd, extra_env, stdin=None, cwd=None):
    """Runs cmd plain and preloaded; same stdout, stderr and exit status. The preloaded run
    also writes a profile, which proves that the plugin was really loaded."""
    with tempfile.TemporaryDirectory(prefix="memprof-integ-") as tmp:
        base = clean_env(extra_env.get("common"))
        plain = run(cmd, base, stdin=stdin, cwd=cwd)
        show("without the profiler", plain)
        prof_path = os.path.join(tmp, "profile.txt")
        # The plugin goes first; another allocator preloaded by both runs comes after it.
        chain = " ".join(x for x in (preload, base.get("LD_PRELOAD")) if x)
        penv = dict(base, LD_PRELOAD=chain, MEMPROF_OUTPUT=prof_path)
        penv.update(extra_env.get("preload", {}))
        pre = run(cmd, penv, stdin=stdin, cwd=cwd)
        show("under the preload plugin (%s)" % " ".join(
            "%s=%s" % kv for kv in sorted(extra_env.get("preload", {}).items())), pre)
        check(plain.returncode == 0, "the program fails even without the profiler")
        check(pre.returncode == plain.returncode,
              "exit status %d under the profiler, %d without" % (pre.returncode,
                                                                  plain.returncode))
        check(pre.stdout == plain.stdout,
              "stdout differs under the profiler: " + first_diff(plain.stdout, pre.stdout))
        check(pre.stderr == plain.stderr,
              "stderr differs under the profiler: " + first_diff(plain.stderr, pre.stderr))
        check(os.path.exists(prof_path) and profile_header_ok(prof_path),
              "the preloaded run wrote no profile: was the plugin loaded?")
        with open(prof_path, errors="replace") as f:
            print("profile of the preloaded run:\n    " + "\n    ".join(f.read().splitlines()[:6]))
        tail = plain.stdout.decode(errors="replace").splitlines()[-3:]
        print("identical output, last lines:\n    " + "\n    ".join(tail))


def cmd_same_output(a):
    same_output(a.preload, a.cmd, {"preload": env_pairs(a.env),
                                   "common": env_pairs(a.common_env)})


def cmd_sort(a):
    sort = shutil.which("sort", path="/usr/bin:/bin")
    if not sort:
        print("sort is not installed")
        return SKIP
    # 150,000 deterministic lines: a key field that repeats, a numeric field, a payload.
    lines = []
    x = 12345
    for i in range(150000):
        x = (x * 1103515245 + 12345) % 2147483648
        lines.append("k%05d,%d,%s\n" % (x % 40000, (x >> 8) % 100000, "p" * (x % 50)))
    data = "".join(lines).encode()
    common = {"LC_ALL": "C"}
    # Sorting by two keys, with a small buffer so sort also merges temporary files.
    with tempfile.TemporaryDirectory(prefix="memprof-sort-") as tmp:
        same_output(a.preload, [sort, "-t,", "-k2,2n", "-k1,1", "-S", "2M", "-T", tmp],
                    {"common": common, "preload": env_pairs(a.env)}, stdin=data)


def cmd_jemalloc(a):
    libs = [os.path.join(d, "libjemalloc.so.2") for d in
            ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")]
    libs = [x for x in libs if os.path.exists(x)]
    if not libs:
        print("libjemalloc.so.2 is not installed (Debian package libjemalloc2)")
        return SKIP
    # jemalloc has no pvalloc: glibc's would allocate from glibc's heap and jemalloc's free
    # would crash the program, profiled or not. The workload calls valloc instead.
    same_output(a.preload, a.cmd + ["no-pvalloc"],
                {"common": {"LD_PRELOAD": libs[0]}, "preload": env_pairs(a.env)})


SQL = """
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v INTEGER, payload TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)
INSERT INTO t(k, v, payload)
  SELECT 'key' || (i * 7919 % 5003), (i * 2654435761) % 1000003, printf('%.*c', i % 200, 'x')
  FROM n;
CREATE INDEX t_k ON t(k);
SELECT count(*), sum(v), sum(length(payload)) FROM t;
SELECT k, count(*), max(v), min(v) FROM t GROUP BY k ORDER BY count(*) DESC, k LIMIT 5;
UPDATE t SET payload = payload || payload WHERE v % 3 = 0;
DELETE FROM t WHERE v % 5 = 0;
SELECT count(*), sum(length(payload)), group_concat(k, '') IS NOT NULL FROM t;
SELECT k, v FROM t ORDER BY payload DESC, v LIMIT 3;
"""


def cmd_sqlite3(a):
    sqlite3 = shutil.which("sqlite3", path="/usr/bin:/bin")
    if not sqlite3:
        print("sqlite3 is not installed")
        return SKIP
    same_output(a.preload, [sqlite3, "-batch", ":memory:"], {"preload": env_pairs(a.env)},
                stdin=SQL.encode())


# ---- the exit-time profile ----------------------------------------------------------------

def profiled_run(a, tmp, output, extra=None):
    env = clean_env(dict(LD_PRELOAD=a.preload, MEMPROF_OUTPUT=output, **(extra or {})))
    old = os.umask(0)  # the file must be 0600 whatever the umask
    try:
        p = run([a.program] + (a.args or []), env, cwd=tmp)
    finally:
        os.umask(old)
    show(os.path.basename(a.program), p)
    check(p.returncode == 0, "the program failed under the profiler")
    check(p.stderr == b"", "unexpected messages on stderr")
    return p


def cmd_text_profile(a):
    with tempfile.TemporaryDirectory(prefix="memprof-text-") as tmp:
        p = profiled_run(a, tmp, os.path.join(tmp, "prof.%p.txt"))
        m = re.match(rb"pid (\d+)$", p.stdout.strip())
        check(m, "the program did not print its pid")
        pid = int(m.group(1))
        files = sorted(os.listdir(tmp))
        print("files written: %s" % files)
        check(files == ["prof.%d.txt" % pid],
              "expected exactly prof.%d.txt (%%p replaced by the pid), found %s" % (pid, files))
        path = os.path.join(tmp, files[0])
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        check(mode == 0o600, "profile mode is %o, expected 600 (umask was 0)" % mode)
        text = open(path, errors="replace").read()
        print(text)
        check(text.startswith("libmemprof"), "not a text profile")
        top = [ln for ln in text.splitlines() if re.match(r"\s*1\.\s", ln)]
        check(top, "no top site (a line starting with '1.') in the profile")
        check(re.search(r"\b%s\b" % re.escape(a.function), top[0]),
              "the top site is %r, expected it to name %s" % (top[0].strip(), a.function))


def cmd_collapsed_profile(a):
    with tempfile.TemporaryDirectory(prefix="memprof-folded-") as tmp:
        name = a.file_name or "prof.folded"
        extra = {"MEMPROF_FORMAT": a.format} if a.format else {}
        profiled_run(a, tmp, os.path.join(tmp, name), extra)
        path = os.path.join(tmp, name)
        check(os.path.exists(path), "no profile at %s (found %s)" % (name, os.listdir(tmp)))
        lines = open(path, errors="replace").read().splitlines()
        print("\n".join(lines[:20]))
        check(lines, "empty collapsed profile")
        bad = [ln for ln in lines if not re.match(r"^\S.* \d+$", ln)]
        check(not bad, "lines that are not 'frames value': %r" % bad[:3])
        want = re.compile(r"(^|;)main;(.*;)?%s \d+$" % re.escape(a.function))
        hits = [ln for ln in lines if want.search(ln)]
        check(hits, "no stack 'main;...;%s <bytes>' in the profile" % a.function)
        total = sum(int(ln.rsplit(" ", 1)[1]) for ln in hits)
        print("stacks through main to %s: %d, %d bytes" % (a.function, len(hits), total))
        check(total >= a.min_bytes, "those stacks hold %d bytes, expected at least %d"
              % (total, a.min_bytes))


def cmd_rust_profile(a):
    """A real Rust program: every frame of its collapsed profile is demangled."""
    rustc = a.rustc or shutil.which("rustc")
    if not rustc:
        print("SKIP: no rustc")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="memprof-rust-") as tmp:
        prog = os.path.join(tmp, "rust_site")
        p = run([rustc, "-g", "-C", "force-frame-pointers=yes", "--crate-name",
                 "memprof_rust_site", "-o", prog, a.source], clean_env(), timeout=300)
        show("rustc", p)
        check(p.returncode == 0, "rustc could not build the test program")
        a.program, a.args = prog, []
        path = os.path.join(tmp, "prof.folded")
        profiled_run(a, tmp, path)
        lines = open(path, errors="replace").read().splitlines()
        print("\n".join(lines[:20]))
        frames = {f for ln in lines for f in ln.rsplit(" ", 1)[0].split(";")}
        mangled = sorted(f for f in frames if f.startswith(("_ZN", "_R")))
        check(not mangled, "frames left mangled: %s" % mangled[:5])
        check(any("memprof_rust_site::hold_blocks" in ln for ln in lines),
              "no stack through memprof_rust_site::hold_blocks")


UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def estimated_live(text):
    m = re.search(r"Estimated live heap: ([0-9.]+) (B|KiB|MiB|GiB|TiB)", text)
    check(m, "no 'Estimated live heap' line in the profile")
    return float(m.group(1)) * UNITS[m.group(2)]


def cmd_dlopen_profile(a):
    """A profile whose call site is in a dlopen'ed module (loaded or already unloaded)."""
    with tempfile.TemporaryDirectory(prefix="memprof-dlopen-") as tmp:
        path = os.path.join(tmp, "prof.txt")
        profiled_run(a, tmp, path)
        check(os.path.exists(path), "no profile written")
        text = open(path, errors="replace").read()
        print(text)
        live = estimated_live(text)
        check(live >= 16 << 20, "estimated live heap %.0f B, the module holds 32 MiB" % live)
        if a.function:
            top = [ln for ln in text.splitlines() if re.match(r"\s*1\.\s", ln)]
            check(top and a.function in top[0], "the top site does not name %s" % a.function)


def cmd_exit_busy(a):
    """Exit while threads allocate: exit status 0 and a complete profile, several times."""
    for attempt in range(a.repeat):
        with tempfile.TemporaryDirectory(prefix="memprof-busy-") as tmp:
            path = os.path.join(tmp, "prof.folded")
            profiled_run(a, tmp, path, {"MEMPROF_RATE": "4096"})
            check(os.path.exists(path), "run %d wrote no profile" % attempt)
            lines = open(path, errors="replace").read().splitlines()
            check(lines and all(re.match(r"^\S.* \d+$", ln) for ln in lines),
                  "run %d: a truncated or malformed profile" % attempt)
            print("run %d: %d stacks" % (attempt, len(lines)))


def cmd_no_output(a):
    """Without MEMPROF_OUTPUT the plugin samples but writes and prints nothing."""
    with tempfile.TemporaryDirectory(prefix="memprof-none-") as tmp:
        env = clean_env(dict(LD_PRELOAD=a.preload, MEMPROF_RATE="4096"))
        p = run([a.program], env, cwd=tmp)
        show(os.path.basename(a.program), p)
        check(p.returncode == 0, "the program failed under the profiler")
        check(re.match(rb"pid \d+$", p.stdout.strip()), "unexpected stdout %r" % p.stdout)
        check(p.stderr == b"", "the plugin printed %r" % p.stderr)
        check(os.listdir(tmp) == [], "files appeared: %s" % os.listdir(tmp))


def cmd_symlink_output(a):
    """A MEMPROF_OUTPUT that is a symlink is never written through: the profile replaces
    the link (temporary file + rename), or the write is refused with one line on stderr."""
    with tempfile.TemporaryDirectory(prefix="memprof-link-") as tmp:
        victim = os.path.join(tmp, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        link = os.path.join(tmp, "prof.txt")
        os.symlink(victim, link)
        env = clean_env(dict(LD_PRELOAD=a.preload, MEMPROF_OUTPUT=link))
        p = run([a.program], env, cwd=tmp)
        show(os.path.basename(a.program), p)
        check(p.returncode == 0, "the program failed under the profiler")
        with open(victim) as f:
            check(f.read() == "precious\n", "the profile was written through the symlink")
        if os.path.islink(link):
            err = p.stderr.decode(errors="replace").splitlines()
            check(len(err) == 1, "the link was kept but stderr has %r, not one line" % err)
            print("the write was refused: %s" % err[0])
        else:
            check(p.stderr == b"", "unexpected messages on stderr: %r" % p.stderr)
            check(profile_header_ok(link), "prof.txt is not a text profile")
            print("the link was replaced by the profile; its target is untouched")
        check(sorted(os.listdir(tmp)) == ["prof.txt", "victim"],
              "files left behind: %s" % sorted(os.listdir(tmp)))


def cmd_relative_output(a):
    """A relative MEMPROF_OUTPUT is taken from the directory the program started in, also
    when the program changes directory before it exits."""
    with tempfile.TemporaryDirectory(prefix="memprof-relative-") as tmp:
        elsewhere = os.path.join(tmp, "elsewhere")
        os.mkdir(elsewhere)
        profiled_run(a, tmp, "prof.txt", {"ITEST_CHDIR": elsewhere})
        found = sorted(os.listdir(tmp)), sorted(os.listdir(elsewhere))
        print("in the starting directory: %s; in the one it moved to: %s" % found)
        check(found == (["elsewhere", "prof.txt"], []),
              "expected prof.txt in the starting directory only")
        check(profile_header_ok(os.path.join(tmp, "prof.txt")), "prof.txt is not a text profile")


def cmd_unwritable_output(a):
    """A profile that cannot be written: one line on stderr, the exit status is kept."""
    with tempfile.TemporaryDirectory(prefix="memprof-unwritable-") as tmp:
        target = os.path.join(tmp, "no-such-dir", "prof.txt")
        env = clean_env(dict(LD_PRELOAD=a.preload, MEMPROF_OUTPUT=target))
        p = run([a.program, "3"], env, cwd=tmp)
        show(os.path.basename(a.program), p)
        err = p.stderr.decode(errors="replace").splitlines()
        check(p.returncode == 3, "exit status %d, the program exits with 3" % p.returncode)
        check(len(err) == 1, "expected one line on stderr, got %r" % err)
        check(target in err[0], "the message does not name the path: %r" % err[0])


# ---- environment parsing --------------------------------------------------------------------

def cmd_env_value(a):
    """One MEMPROF_* variable set to a value: the engine's rate and state as expected, and
    stderr either empty or exactly one line naming the variable."""
    env = clean_env({a.var: a.value, "LD_PRELOAD": a.preload})
    if a.quiet:
        env["MEMPROF_QUIET"] = "1"
    p = run([a.program, "report-rate"], env)
    show("%s=%r%s" % (a.var, a.value, " MEMPROF_QUIET=1" if a.quiet else ""), p)
    print("stdout: " + p.stdout.decode(errors="replace").strip())
    check(p.returncode == 0, "the program failed")
    check(p.stdout.strip() == ("sampling_rate=%d state=%d" % (a.expect_rate, a.expect_state)
                               ).encode(),
          "expected rate %d and state %d" % (a.expect_rate, a.expect_state))
    err = p.stderr.decode(errors="replace").splitlines()
    if a.quiet or not a.expect_warning:
        check(not err, "expected nothing on stderr, got %r" % err)
    else:
        check(len(err) == 1, "expected exactly one line on stderr, got %d: %r" % (len(err), err))
        check(a.var in err[0], "the message does not name %s: %r" % (a.var, err[0]))


# ---- fork -------------------------------------------------------------------------------------

def cmd_fork_profiles(a):
    with tempfile.TemporaryDirectory(prefix="memprof-fork-") as tmp:
        p = profiled_run(a, tmp, os.path.join(tmp, "prof.txt"))
        m = re.match(rb"parent (\d+) child (\d+)$", p.stdout.strip())
        check(m, "unexpected output %r" % p.stdout)
        parent, child = int(m.group(1)), int(m.group(2))
        files = sorted(os.listdir(tmp))
        print("files written: %s" % files)
        check(files == sorted(["prof.txt", "prof.txt.%d" % child]),
              "expected prof.txt (parent) and prof.txt.%d (child), found %s" % (child, files))
        ptext = open(os.path.join(tmp, "prof.txt"), errors="replace").read()
        ctext = open(os.path.join(tmp, "prof.txt.%d" % child), errors="replace").read()
        print("parent %d:\n%s\nchild %d:\n%s" % (parent, ptext, child, ctext))
        for who, text in (("parent", ptext), ("child", ctext)):
            check(text.startswith("libmemprof"), "the %s's file is not a text profile" % who)
        check("itest_child_hold" in ctext, "the child's profile does not show its own blocks")
        check("itest_child_hold" not in ptext,
              "the parent's profile shows blocks the child allocated after fork")
        check("itest_parent_hold" in ptext, "the parent's profile misses its own blocks")


# ---- the installed tree -------------------------------------------------------------------------

def cmd_installed(a):
    cc = shutil.which(os.environ.get("CC", "cc"))
    pkg_config = shutil.which("pkg-config")
    if not cc or not pkg_config:
        print("needs cc and pkg-config (found %s, %s)" % (cc, pkg_config))
        return SKIP
    with tempfile.TemporaryDirectory(prefix="memprof-install-") as tmp:
        dest = os.path.join(tmp, "dest")
        # meson test builds only what the tests depend on, not every installed target (the
        # memprof command, ...), so let meson install run ninja first: a no-op when the
        # build is complete, as after `ninja && meson test`. Two of these tests may run at
        # once and ninja and the install log must not be shared: take turns.
        with open(a.lock, "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            p = run([a.meson, "install", "-C", a.builddir, "--quiet", "--destdir", dest],
                    clean_env(), timeout=280)
        show("meson install --destdir", p)
        check(p.returncode == 0, "meson install failed:\n" + p.stdout.decode(errors="replace"))
        pcs = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs if f == "memprof.pc"]
        check(len(pcs) == 1, "expected one installed memprof.pc, found %s" % pcs)
        env = clean_env({
            "PKG_CONFIG_LIBDIR": os.path.dirname(pcs[0]),  # only the installed tree
            "PKG_CONFIG_PATH": os.path.dirname(pcs[0]),
            "PKG_CONFIG_SYSROOT_DIR": dest,
            "PKG_CONFIG_ALLOW_SYSTEM_CFLAGS": "1",  # keep -I/-L even for a /usr prefix
            "PKG_CONFIG_ALLOW_SYSTEM_LIBS": "1",
        })
        flags = run([pkg_config, "--cflags", "--libs", "memprof"], env)
        check(flags.returncode == 0, "pkg-config --cflags --libs memprof failed: %s"
              % flags.stderr.decode(errors="replace"))
        flags = flags.stdout.decode().split()
        print("pkg-config --cflags --libs memprof: %s" % " ".join(flags))
        libdirs = [f[2:] for f in flags if f.startswith("-L")]
        check(libdirs and all(d.startswith(dest) for d in libdirs),
              "the -L flags do not point into the installed tree: %s" % flags)
        # The library loads its symbolizer from <libdir>/memprof (src/resolve/symbolizer.h).
        module = os.path.join(libdirs[0], "memprof", "libmemprof-symbolize.so")
        check(os.path.exists(module), "no symbolizer module at %s" % module[len(dest):])
        exe = os.path.join(tmp, "consumer")
        p = run([cc, "-Wall", "-Wextra", "-Werror", "-o", exe, a.consumer] + flags, env)
        show("cc consumer.c $(pkg-config --cflags --libs memprof)", p)
        check(p.returncode == 0, "the consumer does not compile against the installed tree")
        renv = clean_env({"LD_LIBRARY_PATH": ":".join(libdirs)})
        plugin = None
        if a.with_preload:
            plugins = [os.path.join(d, f) for d, _, fs in os.walk(dest)
                       for f in fs if f == "libmemprof-preload.so"]
            check(len(plugins) == 1, "expected one installed preload plugin, found %s"
                  % plugins)
            plugin = plugins[0]
            print("installed plugin: %s" % plugin[len(dest):])
            renv.update(LD_PRELOAD=plugin, MEMPROF_RATE="4096")
        p = run([exe], renv)
        show("consumer", p)
        out = p.stdout.decode(errors="replace")
        print(out)
        check(p.returncode == 0 and not p.stderr, "the consumer failed")
        vals = dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln
                    and not ln.startswith("mapped="))
        mapped = {ln[7:] for ln in out.splitlines() if ln.startswith("mapped=")}
        check(vals.get("version") == a.version, "version %r, expected %r"
              % (vals.get("version"), a.version))
        check(mapped and all(m.startswith(dest) for m in mapped),
              "libmemprof objects mapped from outside the installed tree: %s" % mapped)
        if a.with_preload:
            check(plugin in mapped, "the installed plugin is not mapped")
            check(vals.get("state_before_init") == "2", "the installed plugin did not start")
            check(vals.get("init") == "1", "memprof_init() under the started plugin "
                  "should join its profile (MEMPROF_JOINED, 1)")
            check(vals.get("stats") == "0 rate=4096 state=2",
                  "expected the plugin's rate 4096 and an active engine")
        else:
            check(vals.get("state_before_init") == "0", "engine initialised before init")
            check(vals.get("init") == "0", "memprof_init(65536) failed")
            check(vals.get("stats") == "0 rate=65536 state=1",
                  "expected rate 65536 in state INITIALIZED")


# Loaded only when first needed (src/resolve/symbolizer.h, export/zlib_load.h,
# core/capture.c): libmemprof-symbolize.so with libdw, libelf and their compression
# libraries; zlib; libunwind, which only a glibc without _dl_find_object() needs.
LAZY_OBJECT = re.compile(r"^(libmemprof-symbolize|libdw|libelf|libz|liblzma|libbz2|libzstd"
                         r"|libunwind)[.-]")


def glibc_has_dl_find_object():
    import ctypes
    try:
        ctypes.CDLL(None)._dl_find_object
        return True
    except AttributeError:
        return False


def cmd_startup(a):
    """The program under the plugin (--via plugin) or under `memprof run` (--via run), at
    the default settings: with --check maps, which objects were mapped before main; with
    --check names, whether the exit-time profile names the program's site with its file
    and line, which only the symbolizer module (libdw) knows."""
    with tempfile.TemporaryDirectory(prefix="memprof-startup-") as tmp:
        prof = os.path.join(tmp, "prof.txt" if a.via == "plugin" else "prof.pb.gz")
        if a.via == "plugin":
            extra = {"LD_PRELOAD": a.preload}
            if a.check == "names":
                extra["MEMPROF_OUTPUT"] = prof
            p = run([a.program], clean_env(extra), cwd=tmp)
        else:
            p = run([a.memprof, "run", "-q", "-o", prof, "--", a.program], clean_env(), cwd=tmp)
        show(os.path.basename(a.program), p)
        check(p.returncode == 0, "the program failed under the profiler")
        mapped = [ln[7:] for ln in p.stdout.decode().splitlines() if ln.startswith("mapped=")]
        check(mapped, "the program printed no mapped objects")
        check(any(os.path.basename(m) == "libmemprof-preload.so" for m in mapped),
              "the plugin is not mapped: %s" % mapped)
        if a.check == "maps":
            print("mapped at main: %s" % " ".join(os.path.basename(m) for m in mapped))
            lazy = [m for m in mapped if LAZY_OBJECT.match(os.path.basename(m))]
            if not glibc_has_dl_find_object():
                lazy = [m for m in lazy if not os.path.basename(m).startswith(
                    ("libunwind", "liblzma"))]
            check(not lazy, "mapped before main although only symbolizing or writing needs "
                  "them: %s" % lazy)
            return 0
        check(os.path.exists(prof), "no profile written (found %s)" % os.listdir(tmp))
        if a.via == "run":
            r = run([a.memprof, "report", prof], clean_env())
            show("memprof report", r)
            check(r.returncode == 0, "memprof report failed")
            text = r.stdout.decode(errors="replace")
        else:
            text = open(prof, errors="replace").read()
        print(text[:3000])
        check(re.search(r"at itest_startup_site \(\S*startup_maps\.c:\d+\)", text),
              "the profile does not name itest_startup_site with startup_maps.c:<line>")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)

    s = sub.add_parser("same-output", help="same stdout/stderr/status with the plugin")
    s.add_argument("--preload", required=True)
    s.add_argument("--env", action="append", help="K=V for the preloaded run")
    s.add_argument("--common-env", action="append", help="K=V for both runs")
    s.add_argument("cmd", nargs="+")
    s.set_defaults(func=cmd_same_output)

    for name, func in (("sort", cmd_sort), ("sqlite3", cmd_sqlite3),
                       ("jemalloc", cmd_jemalloc)):
        s = sub.add_parser(name, help="same output with the plugin: %s" % name)
        s.add_argument("--preload", required=True)
        s.add_argument("--env", action="append")
        s.add_argument("cmd", nargs="*")
        s.set_defaults(func=func)

    for name, func in (("text-profile", cmd_text_profile),
                       ("collapsed-profile", cmd_collapsed_profile),
                       ("fork-profiles", cmd_fork_profiles),
                       ("no-output", cmd_no_output),
                       ("dlopen-profile", cmd_dlopen_profile),
                       ("exit-busy", cmd_exit_busy),
                       ("symlink-output", cmd_symlink_output),
                       ("relative-output", cmd_relative_output),
                       ("unwritable-output", cmd_unwritable_output)):
        s = sub.add_parser(name)
        s.add_argument("--preload", required=True)
        s.add_argument("--program", required=True)
        s.add_argument("--function")
        s.add_argument("--file-name")
        s.add_argument("--format")
        s.add_argument("--min-bytes", type=int, default=0)
        s.add_argument("--repeat", type=int, default=1)
        s.add_argument("args", nargs="*")
        s.set_defaults(func=func)

    s = sub.add_parser("rust-profile")
    s.add_argument("--preload", required=True)
    s.add_argument("--rustc", help="the Rust compiler (else rustc on PATH; none: skip)")
    s.add_argument("--source", required=True)
    s.set_defaults(func=cmd_rust_profile)

    s = sub.add_parser("env-value")
    s.add_argument("--preload", required=True)
    s.add_argument("--program", required=True)
    s.add_argument("--var", required=True)
    s.add_argument("--value", required=True)
    s.add_argument("--expect-rate", type=int, required=True)
    s.add_argument("--expect-state", type=int, default=2)
    s.add_argument("--expect-warning", action="store_true")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_env_value)

    s = sub.add_parser("installed")
    s.add_argument("--meson", required=True)
    s.add_argument("--builddir", required=True)
    s.add_argument("--lock", required=True, help="a lock file: one meson install at a time")
    s.add_argument("--consumer", required=True)
    s.add_argument("--version", required=True)
    s.add_argument("--with-preload", action="store_true")
    s.set_defaults(func=cmd_installed)

    s = sub.add_parser("startup")
    s.add_argument("--preload", required=True)
    s.add_argument("--memprof", required=True)
    s.add_argument("--program", required=True)
    s.add_argument("--via", choices=("plugin", "run"), required=True)
    s.add_argument("--check", choices=("maps", "names"), required=True)
    s.set_defaults(func=cmd_startup)

    a = ap.parse_args()
    try:
        rc = a.func(a)
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    except subprocess.TimeoutExpired as e:
        print("FAIL: timed out: %s" % " ".join(map(str, e.cmd)))
        return 1
    if rc == SKIP:
        return SKIP
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
