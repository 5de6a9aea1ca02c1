# SPDX-License-Identifier: MIT
#
# The limits checks that need files, several processes or another user: profiles dumped
# by signal while threads allocate, exit() from a thread, failed writes, outputs that are
# devices, set-uid programs, bad environment values, and other allocators preloaded after
# the plugin. Each subcommand checks one behaviour in a fresh temporary directory; meson.build
# names the tests. Exit status: 0 pass, 1 fail, 77 skip. Runs under Debian's /usr/bin/python3
# (standard library only); only the child processes get LD_PRELOAD.
import argparse
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

SKIP = 77
FOLDED_LINE = re.compile(r"^\S.* \d+$")


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def clean_env(extra):
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith(("MEMPROF_", "PYTHON"))}
    env["MALLOC_PERTURB_"] = "0"
    env.update(extra)
    return env


def run(cmd, env, cwd=None, timeout=120):
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    p.out = p.stdout.decode(errors="replace")
    p.err = p.stderr.decode(errors="replace")
    print("--- %s: exit %d" % (" ".join(os.path.basename(c) for c in cmd[:2]), p.returncode))
    if p.out.strip():
        print("    stdout: " + p.out.strip()[:1500])
    if p.err.strip():
        print("    stderr: " + p.err.strip()[:1500])
    return p


def env_pairs(pairs):
    return dict(kv.partition("=")[::2] for kv in pairs or [])


def check_profile(a, path):
    """A complete profile: pprof that `memprof report` reads back, or collapsed stacks."""
    check(os.path.exists(path), "no profile at %s" % path)
    mode = stat.S_IMODE(os.lstat(path).st_mode)
    check(mode == 0o600, "%s has mode %o, not 600" % (path, mode))
    if re.search(r"\.pb\.gz(\.\d+)?$", path):
        p = subprocess.run([a.memprof, "report", "--format", "collapsed", path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(p.returncode == 0, "memprof report cannot read %s: %s"
              % (path, p.stderr.decode(errors="replace").strip()))
        text = p.stdout.decode(errors="replace")
    else:
        text = open(path, errors="replace").read()
        check(text == "" or text.endswith("\n"), "%s does not end in a newline" % path)
    lines = text.splitlines()
    bad = [ln for ln in lines if not FOLDED_LINE.match(ln)]
    check(not bad, "%s: malformed lines %r" % (path, bad[:3]))
    return lines


# ---- profiles dumped by signal ----------------------------------------------------------------

def cmd_signal_dumps(a):
    with tempfile.TemporaryDirectory(prefix="memprof-sig-") as tmp:
        path = os.path.join(tmp, "prof." + a.ext)
        env = clean_env(dict(LD_PRELOAD=a.preload, MEMPROF_OUTPUT=path, MEMPROF_SIGNAL="USR2",
                             **env_pairs(a.env)))
        old = os.umask(0)  # the files must be 0600 whatever the umask
        try:
            p = run([a.program, "signal-dumps", str(a.count), path], env, cwd=tmp)
        finally:
            os.umask(old)
        check(p.returncode == 0, "the program failed")
        check(p.err == "", "unexpected messages on stderr")
        files = sorted(os.listdir(tmp))
        want = sorted(["prof." + a.ext] + ["prof.%s.%d" % (a.ext, i) for i in range(a.count)])
        check(files == want, "files: %s (temporary files left behind?)" % files[:8])
        stacks = 0
        for name in files:
            stacks += len(check_profile(a, os.path.join(tmp, name)))
        print("%d valid profiles, %d stacks in all" % (len(files), stacks))
        check(stacks > 0, "every profile is empty")


# ---- exit() from a thread while others allocate --------------------------------------------

def cmd_exit_from_thread(a):
    for attempt in range(a.repeat):
        with tempfile.TemporaryDirectory(prefix="memprof-exit-") as tmp:
            path = os.path.join(tmp, "prof." + a.ext)
            env = clean_env(dict(LD_PRELOAD=a.preload, MEMPROF_OUTPUT=path, **env_pairs(a.env)))
            p = run([a.program, "exit-from-thread", "3"], env, cwd=tmp)
            check(p.returncode == 3, "run %d: exit status %d, the thread exits with 3"
                  % (attempt, p.returncode))
            check(p.err == "", "run %d: unexpected messages on stderr" % attempt)
            check(os.listdir(tmp) == [os.path.basename(path)],
                  "run %d: files %s" % (attempt, os.listdir(tmp)))
            lines = check_profile(a, path)
            print("run %d: %d stacks" % (attempt, len(lines)))


# ---- failed writes ------------------------------------------------------------------------------

def nobody_prefix():
    """A command prefix that runs a program as user nobody, or None if that is not possible
    (not root, no setpriv)."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or not setpriv:
        return None
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def cmd_failed_write(a):
    """MEMPROF_OUTPUT that cannot be written: signalled dumps and the exit-time one fail;
    one line on stderr naming the path (or saying it is too long), every failure counted,
    exit status unchanged."""
    with tempfile.TemporaryDirectory(prefix="memprof-fail-") as tmp:
        prefix = []
        if a.target == "too-long-with-pid":
            # Accepted when read (shorter than PATH_MAX), too long once %p is the pid: each
            # dump fails before it could write anything.
            target = os.path.join(tmp, "x" * (4096 - len(tmp) - 4)) + "%p"
        elif a.target == "no-such-dir":
            target = os.path.join(tmp, "no-such-dir", "prof.txt")
        elif a.target == "dev-full":
            # root gets a private full device: should a regression replace the device by a
            # file again, it must not be the system's /dev/full.
            target = "/dev/full"
            if os.geteuid() == 0:
                target = os.path.join(tmp, "full")
                os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        elif a.target == "file-size-limit":
            # Every profile is larger than the program's RLIMIT_FSIZE: the write must fail
            # (EFBIG), not end the program with SIGXFSZ.
            target = os.path.join(tmp, "prof.txt")
            prefix = ["prlimit", "--fsize=64"]
        elif a.target == "read-only-dir":
            ro = os.path.join(tmp, "ro")
            os.mkdir(ro, 0o555)
            target = os.path.join(ro, "prof.txt")
            if os.geteuid() == 0:
                # root writes anywhere: run the program as nobody.
                prefix = nobody_prefix()
                if prefix is None:
                    raise Skip("root without setpriv: cannot make a directory read-only")
                os.chmod(tmp, 0o755)
                probe = run(prefix + [a.program, "report"], clean_env({}))
                if probe.returncode != 0:
                    raise Skip("user nobody cannot run the test program from this build tree")
        env = clean_env(dict(MEMPROF_OUTPUT=target, MEMPROF_SIGNAL="USR2", **env_pairs(a.env)))
        # LD_PRELOAD through env, after setpriv: the plugin's dump thread would make setpriv
        # abort (setpriv changes per-thread capabilities, and glibc then sees the set*id
        # calls of its two threads disagree).
        cmd = prefix + ["env", "LD_PRELOAD=" + a.preload, a.program, "failed-writes", "3", "5"]
        p = run(cmd, env, cwd=tmp)
        check(p.returncode == 5, "exit status %d, the program exits with 5" % p.returncode)
        check(p.out.strip() == "write_failures=3",
              "expected 3 failed dumps counted in memprof_stats, got %r" % p.out.strip())
        err = p.err.splitlines()
        check(len(err) == 1, "expected one line on stderr for 4 failed writes, got %r" % err)
        named = "MEMPROF_OUTPUT is too long" if a.target == "too-long-with-pid" else target
        check(named in err[0], "the message does not say %s: %r" % (named, err[0]))
        if a.target == "dev-full":
            check(stat.S_ISCHR(os.lstat(target).st_mode),
                  "%s is no longer a character device" % target)
            check(len(os.listdir(tmp)) == (1 if os.geteuid() == 0 else 0),
                  "files left behind: %s" % os.listdir(tmp))
        else:
            left = [os.path.join(d, f) for d, _, fs in os.walk(tmp) for f in fs]
            check(not left, "files left behind: %s" % left)


def cmd_closed_stderr(a):
    """The plugin's one line about a failed write goes to a stderr whose reader has gone (a
    pipe into `head`, closed): the write fails, and SIGPIPE does not end the program."""
    with tempfile.TemporaryDirectory(prefix="memprof-pipe-") as tmp:
        env = clean_env(dict(LD_PRELOAD=a.preload,
                             MEMPROF_OUTPUT=os.path.join(tmp, "no-such-dir", "prof.txt"),
                             MEMPROF_SIGNAL="USR2"))
        r, w = os.pipe()
        os.close(r)
        try:
            p = subprocess.run([a.program, "failed-writes", "0", "5"], env=env, cwd=tmp,
                               stdout=subprocess.PIPE, stderr=w, timeout=120)
        finally:
            os.close(w)
        print("--- exit %d, stdout %r" % (p.returncode, p.stdout))
        check(p.returncode == 5,
              "exit status %d, the program exits with 5 (-13 is SIGPIPE)" % p.returncode)
        check(p.stdout.strip() == b"write_failures=0", "unexpected output %r" % p.stdout)


def cmd_char_device(a):
    """A MEMPROF_OUTPUT that is a character device (here a private null device) is written
    to, never replaced by a regular file."""
    if os.geteuid() != 0:
        raise Skip("mknod needs root")
    with tempfile.TemporaryDirectory(prefix="memprof-dev-") as tmp:
        dev = os.path.join(tmp, "null")
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        env = clean_env(dict(LD_PRELOAD=a.preload, MEMPROF_OUTPUT=dev, **env_pairs(a.env)))
        p = run([a.program, "report"], env, cwd=tmp)
        check(p.returncode == 0, "the program failed")
        check(stat.S_ISCHR(os.lstat(dev).st_mode), "the device was replaced by a file")
        check(p.err == "", "unexpected messages on stderr")
        check(os.listdir(tmp) == ["null"], "files left behind: %s" % os.listdir(tmp))


def cmd_dangling_symlink(a):
    """A MEMPROF_OUTPUT that is a symlink to a file that does not exist yet: the dumps
    replace the link and never create its target (tests/integration checks an existing
    target)."""
    with tempfile.TemporaryDirectory(prefix="memprof-dangling-") as tmp:
        victim = os.path.join(tmp, "victim")
        link = os.path.join(tmp, "prof.folded")
        os.symlink(victim, link)
        env = clean_env(dict(LD_PRELOAD=a.preload, MEMPROF_OUTPUT=link, MEMPROF_SIGNAL="USR2",
                             **env_pairs(a.env)))
        p = run([a.program, "signal-dumps", "3", link], env, cwd=tmp)
        check(p.returncode == 0, "the program failed")
        check(p.err == "", "unexpected messages on stderr")
        check(not os.path.lexists(victim), "the symlink's target was created")
        check(not os.path.islink(link), "the symlink is still there")
        check(sorted(os.listdir(tmp)) == ["prof.folded"] + ["prof.folded.%d" % i for i in range(3)],
              "files: %s" % sorted(os.listdir(tmp)))
        check_profile(a, link)


# ---- set-uid ------------------------------------------------------------------------------------

def cmd_setuid(a):
    """A set-uid copy of a program that loads the plugin writes no profile; a plain copy
    run by the same user with the same environment does."""
    prefix = nobody_prefix()
    if prefix is None:
        raise Skip("needs root and setpriv to make a set-uid program of another user")
    with tempfile.TemporaryDirectory(prefix="memprof-suid-") as tmp:
        os.chmod(tmp, 0o755)
        plain, suid = os.path.join(tmp, "plain"), os.path.join(tmp, "suid")
        shutil.copy(a.program, plain)
        shutil.copy(a.program, suid)
        os.chown(suid, 1, 1)  # daemon: not the user who runs it
        os.chmod(suid, 0o4755)
        outs = {}
        for name in ("plain", "suid"):
            out = os.path.join(tmp, "out-" + name)
            os.mkdir(out)
            os.chmod(out, 0o777)
            outs[name] = out
        # Without LD_LIBRARY_PATH, which the set-uid run ignores: both find the plugin through
        # the program's run path.
        env = lambda name: {k: v for k, v in clean_env(dict(
            MEMPROF_OUTPUT=os.path.join(outs[name], "prof.txt"), **env_pairs(a.env))).items()
            if k != "LD_LIBRARY_PATH"}
        p = run(prefix + [plain], env("plain"), cwd=tmp)
        if p.returncode != 0:
            raise Skip("user nobody cannot run the test program from this build tree")
        check(p.out.strip() == "secure=0 state=2", "plain copy: %r" % p.out)
        check(os.listdir(outs["plain"]) == ["prof.txt"], "the plain copy wrote no profile, so "
              "the set-uid check below would prove nothing")
        p = run(prefix + [suid], env("suid"), cwd=tmp)
        if p.returncode != 0 and "secure=" not in p.out:
            raise Skip("the set-uid copy did not run (nosuid file system?)")
        check(p.returncode == 0, "the set-uid copy failed")
        check(p.out.strip() == "secure=1 state=2",
              "expected a set-uid (AT_SECURE) run with the plugin sampling: %r" % p.out)
        check(os.listdir(outs["suid"]) == [], "the set-uid program wrote %s"
              % os.listdir(outs["suid"]))
        check(p.err == "", "unexpected messages on stderr")


# ---- environment --------------------------------------------------------------------------------

def cmd_bad_env(a):
    """Each bad MEMPROF_* value prints exactly one line naming its variable, and the
    defaults are used: the engine is set up exactly as without the bad values, the program
    runs and its profile is still written."""
    bad = env_pairs(a.bad)
    with tempfile.TemporaryDirectory(prefix="memprof-env-") as tmp:
        ref = run([a.program, "report"], clean_env(dict(LD_PRELOAD=a.preload)), cwd=tmp)
        check(ref.returncode == 0 and ref.err == "", "the reference run failed")
        path = os.path.join(tmp, "prof.folded")
        env = clean_env(dict(LD_PRELOAD=a.preload, **bad))
        if "MEMPROF_OUTPUT" not in bad:
            env["MEMPROF_OUTPUT"] = path
        p = run([a.program, "report"], env, cwd=tmp)
        check(p.returncode == 0, "the program failed")
        check(p.out == ref.out, "engine set up differently: %r, without the bad values %r"
              % (p.out.strip(), ref.out.strip()))
        err = p.err.splitlines()
        check(len(err) == len(bad), "expected %d lines on stderr, got %r" % (len(bad), err))
        for var in bad:
            check(sum(var + "=" in ln or var + ":" in ln for ln in err) == 1,
                  "%s is not named in exactly one line" % var)
        if "MEMPROF_OUTPUT" not in bad:
            check_profile(a, path)
        else:
            check(os.listdir(tmp) == [], "files written: %s" % os.listdir(tmp))


# ---- other allocators ---------------------------------------------------------------------------

def find_lib(name):
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
              "/usr/lib"):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    return None


ALLOCATORS = {"jemalloc": ("libjemalloc.so.2", "libjemalloc2"),
              "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4")}


def cmd_allocator(a):
    """The program runs under the plugin with another allocator preloaded after it (or, for
    the GOT backend, preloaded alone), with the same output as without the profiler."""
    lib = None
    if a.allocator != "glibc":
        soname, package = ALLOCATORS[a.allocator]
        lib = find_lib(soname)
        if not lib:
            raise Skip("%s is not installed (Debian package %s)" % (soname, package))
    base = dict(LD_PRELOAD=lib) if lib else {}
    ref = run([a.program], clean_env(base))
    check(ref.returncode == 0, "the program fails without the profiler")
    if a.backend == "preload":
        pre = a.preload + (" " + lib if lib else "")
        env = clean_env(dict(LD_PRELOAD=pre, **env_pairs(a.env)))
        cmd = [a.program]
    else:
        env = clean_env(dict(base, **env_pairs(a.env)))
        cmd = [a.program, "--got"]
    p = run(cmd, env)
    check(p.returncode == 0, "the program failed under the profiler")
    check(p.err == "", "unexpected messages on stderr")
    check(p.stdout == ref.stdout, "the output differs from the run without the profiler")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command")
    ap.add_argument("--preload")
    ap.add_argument("--program")
    ap.add_argument("--memprof")
    ap.add_argument("--env", action="append")
    ap.add_argument("--bad", action="append")
    ap.add_argument("--expect")
    ap.add_argument("--ext", default="folded")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--target")
    ap.add_argument("--allocator")
    ap.add_argument("--backend", default="preload")
    a = ap.parse_args()
    try:
        globals()["cmd_" + a.command.replace("-", "_")](a)
    except Skip as e:
        print("SKIP: %s" % e)
        return SKIP
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
