# SPDX-License-Identifier: MIT
#
# Tests of the `memprof` command (tools/): each subcommand of this script checks one
# behaviour of `memprof run`, `report`, `diff` or the help texts, driving the built command
# in a fresh temporary directory with an environment cleared of LD_PRELOAD and MEMPROF_*
# variables, and checking exit statuses, stderr, the profile files written and the reports
# made from them. tests/cli/meson.build names the tests. Exit status: 0 pass, 1 fail,
# 77 skip.
#
# Run by Debian's /usr/bin/python3 with the standard library only; this script is never
# profiled (only the programs started by `memprof run` get the plugin).
import argparse
import gzip
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

SKIP = 77
ARGS = None


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith(("MEMPROF_", "PYTHON"))}
    # meson test sets a random MALLOC_PERTURB_; it only slows the programs down here.
    env["MALLOC_PERTURB_"] = "0"
    env.update(extra or {})
    return env


def memprof(*args, env=None, cwd=None, timeout=60, stdin=None):
    cmd = [ARGS.memprof] + [str(a) for a in args]
    p = subprocess.run(cmd, env=env or clean_env(), cwd=cwd, input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    p.out = p.stdout.decode(errors="replace")
    p.err = p.stderr.decode(errors="replace")
    print("$ memprof %s\n  -> exit %d" % (" ".join(str(a) for a in args), p.returncode))
    if p.err:
        print("  stderr: " + p.err.rstrip().replace("\n", "\n          ")[:3000])
    return p


def lines(text):
    return [l for l in text.splitlines() if l.strip()]


def one_line_error(p, status, pattern=None):
    """p exited with `status` after exactly one line on stderr starting 'memprof'."""
    check(p.returncode == status, "expected exit %d, got %d" % (status, p.returncode))
    ls = lines(p.err)
    check(len(ls) == 1, "expected one line on stderr, got %d: %r" % (len(ls), p.err))
    check(ls[0].startswith("memprof"), "the message does not start with 'memprof': %r" % ls[0])
    if pattern:
        check(re.search(pattern, ls[0]), "message %r does not match %r" % (ls[0], pattern))


def pid_of(out, word="pid"):
    m = re.findall(r"^%s (\d+)$" % word, out, re.M)
    check(m, "the program did not print '%s N': %r" % (word, out))
    return int(m[-1])


def profile_ok(path):
    """The file exists and is a gzip-compressed profile (pprof on disk is gzip)."""
    check(os.path.isfile(path), "no profile at %s (directory: %s)" % (
        path, sorted(os.listdir(os.path.dirname(path) or "."))))
    with open(path, "rb") as f:
        head = f.read(2)
    check(head == b"\x1f\x8b", "%s is not gzip-compressed" % path)


def run_prog(tmp, *prog_args, opts=(), env=None, timeout=60):
    return memprof("run", *opts, "--", ARGS.prog, *prog_args, cwd=tmp, env=env,
                   timeout=timeout)


def default_profile(tmp, pid):
    return os.path.join(tmp, "memprof.%s.%d.pb.gz" % (os.path.basename(ARGS.prog), pid))


def need_plugin():
    if not ARGS.plugin or not os.path.exists(ARGS.plugin):
        raise Skip("the preload plugin is not built")


# ---- help and version ---------------------------------------------------------------------

def t_help(tmp):
    for args, sections in [
            (["--help"], ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS"]),
            (["help"], ["NAME", "SYNOPSIS", "OPTIONS", "EXIT STATUS"]),
            (["help", "run"], ["NAME", "SYNOPSIS", "OPTIONS", "ENVIRONMENT", "EXIT STATUS"]),
            (["run", "--help"], ["NAME", "SYNOPSIS", "OPTIONS", "ENVIRONMENT", "EXIT STATUS"]),
            (["run", "-h"], ["MEMPROF_PRELOAD", "--interval", "--signal", "127"]),
            (["report", "--help"], ["NAME", "SYNOPSIS", "OPTIONS", "EXIT STATUS", "speedscope"]),
            (["help", "diff"], ["NAME", "SYNOPSIS", "OPTIONS", "EXIT STATUS", "noise"]),
            (["diff", "--help"], ["NAME", "SYNOPSIS"])]:
        p = memprof(*args)
        check(p.returncode == 0, "memprof %s: exit %d" % (" ".join(args), p.returncode))
        check(p.err == "", "memprof %s wrote to stderr" % " ".join(args))
        for s in sections:
            heading = re.fullmatch(r"[A-Z ]+", s)
            check(re.search(r"^%s$" % s if heading else re.escape(s), p.out, re.M),
                  "memprof %s: no %r in the text" % (" ".join(args), s))
        width = max(len(l) for l in p.out.splitlines())
        check(width <= 92, "memprof %s: a line of %d characters" % (" ".join(args), width))
    p = memprof("--version")
    check(p.returncode == 0 and re.match(r"memprof \(libmemprof\) \d+\.\d+\.\d+\n$", p.out),
          "--version printed %r" % p.out)


# ---- usage errors -------------------------------------------------------------------------

def t_bad_options(tmp):
    p = memprof()
    check(p.returncode == 2 and "usage" in p.err, "memprof without a command: %d" % p.returncode)
    cases = [
        ["bogus"],
        ["--bogus"],
        ["help", "bogus"],
        ["run"],
        ["run", "--"],
        ["run", "--bogus", "--", "true"],
        ["run", "-x", "--", "true"],
        ["run", "-r"],
        ["run", "-r", "0", "--", "true"],
        ["run", "-r", "12Q", "--", "true"],
        ["run", "--rate", "2T", "--", "true"],
        ["run", "--format", "svg", "--", "true"],
        ["run", "--temp-threshold", "5x", "--", "true"],
        ["run", "--temp-threshold", "0", "--", "true"],
        ["run", "--interval", "0", "--", "true"],
        ["run", "--interval", "1.5", "--", "true"],
        ["run", "--signal", "KILL", "--", "true"],
        ["run", "--signal", "NOPE", "--", "true"],
        ["run", "--unwind", "magic", "--", "true"],
        ["run", "-o", "", "--", "true"],
        ["report"],
        ["report", "--format", "svg", "x.pb.gz"],
        ["report", "--top", "-3", "x.pb.gz"],
        ["report", "--value", "wrong", "x.pb.gz"],
        ["report", "--view", "nope", "x.pb.gz"],
        ["report", "--view", "peak", "--format", "pprof", "x.pb.gz"],
        ["report", "--view", "peak", "--value", "alloc_space", "x.pb.gz"],
        ["report", "--value", "objects", "--format", "text", "x.pb.gz"],
        ["report", "--view", "leaks", "--value", "objects", "--format", "collapsed", "x.pb.gz"],
        ["diff"],
        ["diff", "a.pb.gz"],
        ["diff", "a", "b", "c"],
        ["diff", "--top", "x", "a", "b"],
    ]
    marker = os.path.join(tmp, "ran")
    for args in cases:
        p = memprof(*args, cwd=tmp)
        one_line_error(p, 2)
    p = memprof("report", "--view", "nope", "x.pb.gz", cwd=tmp)
    one_line_error(p, 2, r"--view 'nope': expected live, alloc, peak, temporary or leaks")
    # A bad option never starts the program.
    p = memprof("run", "-r", "0", "--", "sh", "-c", "touch " + marker, cwd=tmp)
    one_line_error(p, 2, r"--rate '0'")
    check(not os.path.exists(marker), "the program ran despite the bad option")


# ---- memprof run: exit statuses and errors --------------------------------------------------

def t_exit_status(tmp):
    need_plugin()
    p = memprof("run", "--", "sh", "-c", "exit 7", cwd=tmp)
    check(p.returncode == 7, "sh -c 'exit 7' under memprof run: exit %d" % p.returncode)
    p = memprof("run", "-q", "--", ARGS.prog, "exit", "42", cwd=tmp)
    check(p.returncode == 42, "exit 42: got %d" % p.returncode)
    check(p.err == "", "-q printed %r" % p.err)
    p = memprof("run", "--", ARGS.prog, "exit", "0", cwd=tmp)
    check(p.returncode == 0, "exit 0: got %d" % p.returncode)
    check("other process" not in p.err, "an earlier run's profile taken for a child's")
    # Inherited "SIGCHLD ignored" must neither break the wait nor be lost for the program.
    def ignore_sigchld():
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    cmd = [ARGS.memprof, "run", "-q", "--", "/usr/bin/python3", "-c",
           "import signal, sys; print(int(signal.getsignal(signal.SIGCHLD))); sys.exit(5)"]
    q = subprocess.run(cmd, env=clean_env(), cwd=tmp, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, preexec_fn=ignore_sigchld, timeout=60)
    print("SIGCHLD ignored: exit %d, %r %r" % (q.returncode, q.stdout, q.stderr))
    check(q.returncode == 5, "with SIGCHLD ignored: exit %d" % q.returncode)
    check(q.stdout.strip() == b"1", "the program did not inherit SIGCHLD ignored (SIG_IGN)")
    # Options after the program's name are the program's own.
    p = memprof("run", "sh", "-c", "exit 3", "-q", cwd=tmp)
    check(p.returncode == 3, "run without --: exit %d" % p.returncode)


def t_killed(tmp):
    need_plugin()
    p = memprof("run", "--", "sh", "-c", "kill -TERM $$", cwd=tmp)
    check(p.returncode == 128 + signal.SIGTERM, "killed by SIGTERM: exit %d" % p.returncode)
    check(re.search(r"^memprof: sh was killed by signal 15 \(SIGTERM\)", p.err, re.M),
          "no 'killed by signal' message")
    # An older file at -o's path is neither reported as this run's profile nor touched.
    old = os.path.join(tmp, "old.pb.gz")
    with open(old, "wb") as f:
        f.write(b"old")
    p = memprof("run", "-o", old, "--", "sh", "-c", "kill -TERM $$", cwd=tmp)
    check(p.returncode == 128 + signal.SIGTERM, "killed by SIGTERM: exit %d" % p.returncode)
    check(re.search(r"\(SIGTERM\); no profile was written", p.err), "an old file was taken for "
          "the last profile: %r" % p.err)
    with open(old, "rb") as f:
        check(f.read() == b"old", "the old file was replaced")
    p = memprof("run", "-q", "--", "sh", "-c", "kill -KILL $$", cwd=tmp)
    check(p.returncode == 128 + signal.SIGKILL, "killed by SIGKILL: exit %d" % p.returncode)
    check("signal 9 (SIGKILL)" in p.err, "no message for SIGKILL with -q")


def t_sigint(tmp):
    """SIGINT sent to memprof run with kill is forwarded to the program; Ctrl-C on a terminal
    reaches the program from the terminal, and memprof run survives it and passes the
    program's status on. (A second, forwarded copy of a terminal's SIGINT would usually merge
    with the pending first one, so its absence cannot be checked reliably.)"""
    need_plugin()
    import pty
    # kill -INT to memprof run: forwarded
    cmd = [ARGS.memprof, "run", "-q", "--", ARGS.prog, "sigint"]
    proc = subprocess.Popen(cmd, cwd=tmp, env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    check(line.startswith("ready "), "the program did not start: %r" % line)
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    print("kill -INT: exit %d, %r %r" % (proc.returncode, out, err))
    check(proc.returncode == 0 and out.strip() == b"sigints 1 from-parent 1 from-kernel 0",
          "kill -INT to memprof run: %r, exit %d" % (out, proc.returncode))
    # Ctrl-C on a terminal: the program gets it from the terminal, and only from there.
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(tmp)
            os.execve(ARGS.memprof, cmd, clean_env())
        finally:
            os._exit(127)
    data = b""
    deadline = time.monotonic() + 30
    while b"ready" not in data and time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    check(b"ready" in data, "the program did not start on the terminal: %r" % data)
    os.write(fd, b"\x03")
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    _, status = os.waitpid(pid, 0)
    print("Ctrl-C: status %#x, %r" % (status, data))
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0,
          "memprof run after Ctrl-C: status %#x" % status)
    check(re.search(rb"sigints 1 from-parent 0 from-kernel 1\r?\n", data),
          "Ctrl-C: the program did not get one SIGINT from the terminal: %r" % data)


def t_forwards_signals(tmp):
    """TERM, HUP, USR1 and USR2 sent to memprof run (USR2 without --signal too) reach the
    program, which handles them; memprof run survives them and passes the status on."""
    need_plugin()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        cmd = [ARGS.memprof, "run", "-q", "--", ARGS.prog, "signals"]
        # The signals' default disposition for memprof run: an ignored one (the suite
        # started under nohup, say) stays ignored by design and is not forwarded.
        proc = subprocess.Popen(cmd, cwd=tmp, env=clean_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE,
                                preexec_fn=lambda s=sig: signal.signal(s, signal.SIG_DFL))
        try:
            line = proc.stdout.readline().decode()
            check(line.startswith("ready "), "the program did not start: %r" % line)
            os.kill(proc.pid, sig)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        print("%s: exit %d, %r %r" % (sig.name, proc.returncode, out, err))
        check(proc.returncode == 0 and out.strip() == b"caught %d from-parent 1" % sig,
              "%s to memprof run did not reach the program: %r, exit %d"
              % (sig.name, out, proc.returncode))


def alive(pid):
    """Whether process pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def t_no_orphan(tmp):
    """When memprof run is killed with SIGKILL (nothing to forward), the program does not
    outlive it."""
    need_plugin()
    proc, pid = start_waiting(tmp, ["-q"], os.path.join(tmp, "never"))
    try:
        check(alive(pid), "the program is not running")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        wait_for(lambda: not alive(pid), 10, "the program to end after memprof run was killed")
    finally:
        if proc.poll() is None:
            proc.kill()
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def t_missing_program(tmp):
    need_plugin()
    p = memprof("run", "--", "memprof-test-no-such-program", "arg", cwd=tmp)
    one_line_error(p, 127, r"memprof-test-no-such-program: command not found")
    p = memprof("run", "--", "./no-such-file", cwd=tmp)
    one_line_error(p, 127, r"cannot run \./no-such-file: No such file or directory")
    plain = os.path.join(tmp, "not-executable")
    with open(plain, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(plain, 0o644)
    p = memprof("run", "--", plain, cwd=tmp)
    if os.geteuid() != 0:
        one_line_error(p, 126, r"Permission denied")
    else:
        check(p.returncode in (0, 126), "a mode 0644 script as root: exit %d" % p.returncode)
    check(not any(n.startswith("memprof.") for n in os.listdir(tmp)),
          "a profile was written for a program that never ran")


def t_unwritable_output(tmp):
    need_plugin()
    marker = os.path.join(tmp, "ran")
    prog = ["sh", "-c", "touch " + marker]
    p = memprof("run", "-o", os.path.join(tmp, "no", "such", "dir", "p.pb.gz"), "--", *prog)
    one_line_error(p, 125, r"cannot write the profile .*No such file or directory")
    check(not os.path.exists(marker), "the program ran although its profile cannot be written")
    p = memprof("run", "-o", tmp, "--", *prog)
    one_line_error(p, 125, r"is a directory")
    p = memprof("run", "-o", "/proc/memprof-test.pb.gz", "--", *prog)
    one_line_error(p, 125, r"cannot write the profile")
    ro = os.path.join(tmp, "read-only")
    os.mkdir(ro, 0o555)
    p = memprof("run", "--", *prog, cwd=ro)  # the default profile goes to the current directory
    if os.geteuid() != 0:
        one_line_error(p, 125, r"Permission denied")
        check(not os.path.exists(marker), "the program ran in an unwritable directory")
    os.chmod(ro, 0o755)
    p = memprof("report", "-o", os.path.join(tmp, "no", "dir", "r.txt"), "/nonexistent.pb.gz")
    check(p.returncode == 1, "report of a missing file: exit %d" % p.returncode)


def t_plugin_override(tmp):
    need_plugin()
    env = clean_env({"MEMPROF_PRELOAD": os.path.join(tmp, "nonexistent.so")})
    p = memprof("run", "--", "true", env=env, cwd=tmp)
    one_line_error(p, 125, r"MEMPROF_PRELOAD=.*nonexistent\.so")
    # An explicit plugin is used as given; the existing LD_PRELOAD follows it; this command
    # itself is not profiled.
    link = os.path.join(tmp, "plugin.so")
    os.symlink(ARGS.plugin, link)
    libm = "/lib/x86_64-linux-gnu/libm.so.6"
    if not os.path.exists(libm):
        libm = ""
    env = clean_env({"MEMPROF_PRELOAD": link, "LD_PRELOAD": libm})
    p = memprof("run", "-o", "env.pb.gz", "--", "sh", "-c",
                'echo "$LD_PRELOAD"; echo "$MEMPROF_OUTPUT"; echo "$MEMPROF_FORMAT";'
                ' cat /proc/$PPID/maps', env=env, cwd=tmp)
    check(p.returncode == 0, "exit %d" % p.returncode)
    out = p.out.splitlines()
    plugin = os.path.realpath(ARGS.plugin)
    expect = plugin + (":" + libm if libm else "")
    check(out[0] == expect, "LD_PRELOAD in the program: %r, expected %r" % (out[0], expect))
    check(out[1] == os.path.join(os.path.realpath(tmp), "env.%e.%p.pb.gz") or
          out[1] == os.path.join(tmp, "env.%e.%p.pb.gz"),
          "MEMPROF_OUTPUT in the program: %r" % out[1])
    check(out[2] == "pprof", "MEMPROF_FORMAT in the program: %r" % out[2])
    maps = "\n".join(out[3:])
    check("libmemprof" not in maps, "memprof run has the profiler loaded into itself")


def t_relocated(tmp):
    """A staged or relocated tree: the command finds the plugin relative to itself."""
    need_plugin()
    if not ARGS.plugin_from_bindir or ARGS.plugin_from_bindir.startswith("/"):
        raise Skip("no relative plugin path configured")
    root = os.path.join(tmp, "moved", "prefix")
    bindir = os.path.join(root, ARGS.bindir)
    os.makedirs(bindir)
    cmd = os.path.join(bindir, "memprof")
    shutil.copy2(ARGS.memprof, cmd)
    plugin = os.path.normpath(os.path.join(bindir, ARGS.plugin_from_bindir))
    os.makedirs(os.path.dirname(plugin))
    shutil.copy2(ARGS.plugin, plugin)
    # The copied plugin carries the library: it needs nothing beside it, nor a library path.
    env = {k: v for k, v in clean_env().items() if k != "LD_LIBRARY_PATH"}
    work = os.path.join(tmp, "work")
    os.mkdir(work)
    p = subprocess.run([cmd, "run", "-q", "--", "sh", "-c",
                        'echo "$LD_PRELOAD"'], env=env, cwd=work,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    print("relocated: exit %d, stdout %r, stderr %r" % (p.returncode, p.stdout, p.stderr))
    check(p.returncode == 0, "the relocated command failed: %r" % p.stderr)
    check(p.stdout.decode().strip() == os.path.realpath(plugin),
          "the relocated command used %r, expected its own copy %r" % (p.stdout, plugin))


# ---- memprof run: profiles ------------------------------------------------------------------

def t_run_profile(tmp):
    need_plugin()
    p = run_prog(tmp, "alloc", "4000", "1000", opts=["-r", "16K"])
    check(p.returncode == 0, "exit %d" % p.returncode)
    pid = pid_of(p.out)
    path = default_profile(tmp, pid)
    profile_ok(path)
    check(os.stat(path).st_mode & 0o777 == 0o600, "profile mode %o" % (os.stat(path).st_mode & 0o777))
    check(re.search(r"written to memprof\.%s\.%d\.pb\.gz" % (re.escape(os.path.basename(
        ARGS.prog)), pid), p.err), "the summary does not name the profile")
    check("Estimated live heap" in p.err and "grow_cache" in p.err,
          "the summary lacks the estimate or the top site")
    check(re.search(r"95% interval", p.err) and "Health" in p.err,
          "the summary lacks the interval or the health line")

    # report, every format
    r = memprof("report", path, cwd=tmp)
    check(r.returncode == 0 and "grow_cache" in r.out and "parse_input" in r.out,
          "report text lacks the sites")
    r = memprof("report", "--top", "1", path, cwd=tmp)
    ranked = re.findall(r"^\s*\d+\. .*", r.out, re.M)
    check(r.returncode == 0 and len(ranked) == 1 and ranked[0].endswith("grow_cache"),
          "report --top 1 does not show exactly grow_cache: %r" % ranked)
    r = memprof("report", "--format", "collapsed", path, cwd=tmp)
    check(r.returncode == 0, "collapsed: exit %d" % r.returncode)
    folded = lines(r.out)
    check(folded and all(re.match(r"^\S.* \d+$", l) for l in folded), "bad collapsed lines")
    check(any(re.search(r"(^|;)grow_cache \d+$", l) or re.search(r";grow_cache;", l)
              for l in folded), "no grow_cache stack in the collapsed output")
    r = memprof("report", "--format", "collapsed", "--value", "alloc_objects", path, cwd=tmp)
    check(r.returncode == 0 and lines(r.out), "collapsed alloc_objects: exit %d" % r.returncode)
    # --view: nothing is freed, so the peak holds what is live and grow_cache leads it.
    r = memprof("report", "--view", "peak", "--top", "1", path, cwd=tmp)
    ranked = re.findall(r"^\s*\d+\. .*", r.out, re.M)
    check(r.returncode == 0 and "live at the peak" in r.out and len(ranked) == 1 and
          ranked[0].endswith("grow_cache"), "report --view peak: %r" % ranked)
    check(re.search(r"^Peak: .* at .*; allocated in total: ", r.out, re.M),
          "report text lacks the peak line: %r" % r.out[:600])
    for view, title in [("alloc", "allocated since sampling began"),
                        ("temporary", "temporary allocations"), ("leaks", "Leak suspects")]:
        r = memprof("report", "--view", view, path, cwd=tmp)
        check(r.returncode == 0 and title in r.out, "report --view %s: exit %d, %r" % (
            view, r.returncode, r.out[-300:]))
    r = memprof("report", "--format", "collapsed", "--view", "peak", "--value", "objects", path,
                cwd=tmp)
    check(r.returncode == 0 and any(re.search(r";grow_cache \d+$", l) for l in lines(r.out)),
          "collapsed --view peak --value objects: exit %d" % r.returncode)
    r = memprof("report", "--format", "speedscope", "--view", "peak", path, cwd=tmp)
    names = [p["name"] for p in json.loads(r.out)["profiles"]] if r.returncode == 0 else []
    check(names[:1] == ["peak"] and "live" in names and "alloc" in names,
          "speedscope --view peak: profiles %r" % names)
    r = memprof("report", "--format", "html", "--view", "alloc", path, cwd=tmp)
    check(r.returncode == 0 and '"view":"alloc"' in r.out, "html --view alloc")
    r = memprof("report", "--format", "speedscope", path, cwd=tmp)
    check(r.returncode == 0, "speedscope: exit %d" % r.returncode)
    doc = json.loads(r.out)
    check("speedscope" in doc.get("$schema", ""), "speedscope output without its $schema")
    names = [f.get("name") for f in doc["shared"]["frames"]]
    check("grow_cache" in names, "speedscope frames lack grow_cache")
    for prof in doc["profiles"]:
        for s in prof.get("samples", []):
            check(all(0 <= i < len(names) for i in s), "frame index out of range")
    r = memprof("report", "--format", "html", path, cwd=tmp)
    check(r.returncode == 0 and "<html" in r.out.lower() and "grow_cache" in r.out,
          "html: exit %d" % r.returncode)
    check(not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", r.out, re.I),
          "the HTML loads something from the network")
    # -o picks the format from the extension; atomic, mode 0600
    for name, probe in [("r.json", lambda s: json.loads(s)["$schema"]),
                        ("r.folded", lambda s: s.index("grow_cache")),
                        ("r.collapsed", lambda s: s.index("grow_cache")),
                        ("r.txt", lambda s: s.index("Estimated live heap")),
                        ("r.html", lambda s: s.lower().index("<html"))]:
        r = memprof("report", "-o", name, path, cwd=tmp)
        check(r.returncode == 0 and r.out == "", "report -o %s: exit %d" % (name, r.returncode))
        out = os.path.join(tmp, name)
        check(os.stat(out).st_mode & 0o777 == 0o600, "%s has mode %o" % (
            name, os.stat(out).st_mode & 0o777))
        with open(out) as f:
            probe(f.read())
    r = memprof("report", "-o", "again.pb.gz", path, cwd=tmp)
    check(r.returncode == 0, "report -o x.pb.gz: exit %d" % r.returncode)
    r = memprof("report", os.path.join(tmp, "again.pb.gz"))
    check(r.returncode == 0 and "grow_cache" in r.out, "a re-written pprof does not read back")
    leftovers = [n for n in os.listdir(tmp) if n.startswith(".")]
    check(not leftovers, "temporary files left behind: %r" % leftovers)
    # standard input
    with open(path, "rb") as f:
        r = memprof("report", "-", stdin=f.read())
    check(r.returncode == 0 and "grow_cache" in r.out, "report - (stdin) failed")


def t_api_program_joins(tmp):
    """The README's C API example runs under memprof run: its init and start join the
    command's profile (MEMPROF_JOINED), its own snapshot and write work, and its shutdown
    leaves the command's profile to be written at exit."""
    need_plugin()
    check(ARGS.api_example, "no --api-example given")
    out = os.path.join(tmp, "run.pb.gz")
    p = memprof("run", "-o", out, "--", ARGS.api_example, cwd=tmp)
    check(p.returncode == 0, "exit %d: %s" % (p.returncode, p.err.strip()))
    check(re.search(r"^\d+ live samples, ~\d+ bytes live$", p.out, re.M),
          "the program's own snapshot line is missing: %r" % p.out)
    check(os.path.exists(os.path.join(tmp, "heap.txt")), "the program's own profile is missing")
    profile_ok(out)
    check("allocated in total" in p.err and re.search(r"\bmain\b", p.err),
          "the command's summary lacks the program's allocations: %r" % p.err)


def t_temp_threshold(tmp):
    need_plugin()
    # --temp-threshold reaches the plugin, and the profile records it for the temporary view.
    p = run_prog(tmp, "alloc", "100", "1000", opts=["--temp-threshold", "250us"])
    check(p.returncode == 0, "exit %d" % p.returncode)
    path = default_profile(tmp, pid_of(p.out))
    r = memprof("report", "--view", "temporary", path, cwd=tmp)
    check(r.returncode == 0 and "freed within 250 us" in r.out,
          "report --view temporary does not show the 250 us threshold: %r" % r.out[:400])
    # MEMPROF_TEMP_THRESHOLD does the same for the plugin alone; the option wins over it.
    p = run_prog(tmp, "alloc", "100", "1000", env={"MEMPROF_TEMP_THRESHOLD": "2s"})
    r = memprof("report", "--view", "temporary", default_profile(tmp, pid_of(p.out)), cwd=tmp)
    check("freed within 2.00 s" in r.out, "MEMPROF_TEMP_THRESHOLD=2s not recorded")
    p = run_prog(tmp, "alloc", "100", "1000", opts=["--temp-threshold", "3ms"],
                 env={"MEMPROF_TEMP_THRESHOLD": "2s"})
    r = memprof("report", "--view", "temporary", default_profile(tmp, pid_of(p.out)), cwd=tmp)
    check("freed within 3 ms" in r.out, "--temp-threshold does not take precedence")
    # A bad value in the environment: one line, the default, the program unchanged.
    p = run_prog(tmp, "alloc", "100", "1000", env={"MEMPROF_TEMP_THRESHOLD": "soon"})
    check(p.returncode == 0 and "ignoring MEMPROF_TEMP_THRESHOLD='soon'" in p.err,
          "a bad MEMPROF_TEMP_THRESHOLD is not reported: %r" % p.err[:300])
    r = memprof("report", "--view", "temporary", default_profile(tmp, pid_of(p.out)), cwd=tmp)
    check("freed within 1 ms" in r.out, "a bad MEMPROF_TEMP_THRESHOLD does not fall back to 1 ms")


def collapsed_total(*paths, cwd):
    r = memprof("report", "--format", "collapsed", *paths, cwd=cwd)
    check(r.returncode == 0, "collapsed report of %s: exit %d" % (paths, r.returncode))
    return sum(int(l.rsplit(" ", 1)[1]) for l in lines(r.out))


def t_report_merges(tmp):
    need_plugin()
    paths = []
    for n in ("4000", "2000"):
        p = run_prog(tmp, "alloc", n, "1000", opts=["-r", "16K"])
        paths.append(default_profile(tmp, pid_of(p.out)))
    a, b = (collapsed_total(x, cwd=tmp) for x in paths)
    both = collapsed_total(*paths, cwd=tmp)
    check(a > 0 and b > 0 and both == a + b, "merged %d != %d + %d" % (both, a, b))
    # Written as pprof and read back, the merge keeps every value; the heading says whose peak.
    r = memprof("report", "-o", "merged.pb.gz", *paths, cwd=tmp)
    check(r.returncode == 0, "report -o merged.pb.gz: exit %d" % r.returncode)
    check(collapsed_total("merged.pb.gz", cwd=tmp) == a + b, "the merged pprof file differs")
    r = memprof("report", *paths, cwd=tmp)
    check("(the sum of 2 profiles' peaks)" in r.out, "the merged heading: %r" % r.out[:300])
    # One unreadable input: one line, nothing merged.
    r = memprof("report", paths[0], "missing.pb.gz", cwd=tmp)
    check(r.returncode == 1 and "missing.pb.gz" in r.err and not r.out,
          "a missing input: exit %d, %r" % (r.returncode, r.err))


def t_run_output_option(tmp):
    need_plugin()
    p = run_prog(tmp, "alloc", "100", "1000", opts=["-o", "exact.pb.gz", "-q"])
    check(p.returncode == 0, "exit %d" % p.returncode)
    profile_ok(os.path.join(tmp, "exact.pb.gz"))
    check(p.err == "", "-q printed %r" % p.err)
    p = run_prog(tmp, "alloc", "100", "1000", opts=["-o", "sub/p.%p.pb.gz"])
    check(p.returncode == 125, "-o into a missing directory: exit %d" % p.returncode)
    os.mkdir(os.path.join(tmp, "sub"))
    p = run_prog(tmp, "alloc", "100", "1000", opts=["-o", "sub/p.%p.pb.gz"])
    pid = pid_of(p.out)
    profile_ok(os.path.join(tmp, "sub", "p.%d.pb.gz" % pid))
    p = run_prog(tmp, "alloc", "100", "1000", opts=["--format", "text", "-q"])
    pid = pid_of(p.out)
    txt = os.path.join(tmp, "memprof.%s.%d.txt" % (os.path.basename(ARGS.prog), pid))
    check(os.path.isfile(txt), "--format text did not write %s" % txt)
    with open(txt) as f:
        check("Estimated live heap" in f.read(), "the text profile lacks the estimate")
    p = run_prog(tmp, "alloc", "400", "1000", opts=["-r", "4K", "-o", "c.folded", "-q"])
    with open(os.path.join(tmp, "c.folded")) as f:
        check(re.search(r"grow_cache \d+$", f.read(), re.M), "-o c.folded is not collapsed")


def site_names(text):
    """The names ending the ranked site lines of a text report or summary, in order."""
    return re.findall(r"^ *\d+\. .*?  (\S+)$", text, re.M)


def t_sites(tmp):
    """Sites are named by the caller of their allocator wrappers (export/sites.c): xmalloc
    by default, the program's own with --wrapper; --native shows every frame."""
    need_plugin()
    p = run_prog(tmp, "wrapped", "2000", "4096", opts=["-r", "16K", "-o", "w.pb.gz"])
    check(p.returncode == 0, "exit %d" % p.returncode)
    names = site_names(p.err)
    check(names[:2] == ["fill_table", "pool_alloc"], "summary sites %s" % names)
    check("xmalloc" not in names, "a site named xmalloc: %s" % names)
    p = memprof("report", "--wrapper", "pool_alloc", "--top", "2", "w.pb.gz", cwd=tmp)
    names = site_names(p.out)
    check(p.returncode == 0 and names == ["fill_table", "fill_pool"],
          "--wrapper pool_alloc: %s" % names)
    check("at fill_pool (" in p.out and "at pool_alloc" not in p.out,
          "the path starts at the site:\n" + p.out)
    env = clean_env({"MEMPROF_WRAPPERS": "pool_*"})
    p = memprof("report", "--top", "2", "w.pb.gz", cwd=tmp, env=env)
    check(site_names(p.out) == ["fill_table", "fill_pool"], "MEMPROF_WRAPPERS: " + p.out)
    p = memprof("report", "-f", "collapsed", "w.pb.gz", cwd=tmp)
    leaves = {line.rsplit(" ", 1)[0].split(";")[-1] for line in lines(p.out)}
    check({"fill_table", "pool_alloc"} <= leaves and "xmalloc" not in leaves,
          "collapsed leaves %s" % leaves)
    p = memprof("report", "-f", "collapsed", "--native", "w.pb.gz", cwd=tmp)
    check(re.search(r";fill_table;xmalloc \d+$", p.out, re.M), "--native collapsed:\n" + p.out)
    p = memprof("report", "--native", "--top", "1", "w.pb.gz", cwd=tmp)
    check(site_names(p.out) == ["fill_table"] and "at xmalloc (" in p.out,
          "--native text keeps the name, shows the wrapper:\n" + p.out)
    p = memprof("report", "-o", "w.html", "w.pb.gz", cwd=tmp)
    with open(os.path.join(tmp, "w.html")) as f:
        page = f.read()
    check('"fill_table"' in page and '"opened_on_peak":0' in page, "the page's sites")
    # The same in memprof diff: a site is matched from its site frame outward.
    run_prog(tmp, "exit", "0", opts=["-q", "-o", "none.pb.gz"])
    p = memprof("diff", "--wrapper", "pool_alloc", "none.pb.gz", "w.pb.gz", cwd=tmp)
    check(p.returncode == 0 and "at fill_pool <- main" in p.out and "xmalloc" not in p.out,
          "diff --wrapper:\n" + p.out)
    for cmd in ("report", "diff", "run"):
        p = memprof(cmd, "--wrapper", "a,b", "w.pb.gz", cwd=tmp)
        one_line_error(p, 2, "without a comma")
    # memprof run --wrapper reaches the summary and the program's own writers.
    p = run_prog(tmp, "wrapped", "2000", "4096",
                 opts=["-r", "16K", "--wrapper", "pool_alloc", "-o", "w.txt"])
    check(site_names(p.err)[:2] == ["fill_table", "fill_pool"], "run --wrapper: " + p.err)
    with open(os.path.join(tmp, "w.txt")) as f:
        check(site_names(f.read())[:2] == ["fill_table", "fill_pool"], "run --wrapper, w.txt")


def t_run_summary_formats(tmp):
    """memprof run prints its summary whatever the format; a profile with nothing live opens
    on the peak; a raw profile says it is unsymbolized."""
    need_plugin()
    for out in ("s.txt", "s.html", "s.folded", "s.json"):
        p = run_prog(tmp, "wrapped", "1000", "4096", opts=["-r", "16K", "-o", out])
        check(p.returncode == 0, "exit %d" % p.returncode)
        check("Estimated live heap" in p.err and "Top sites by estimated live bytes" in p.err,
              "-o %s: no summary:\n%s" % (out, p.err))
        check(site_names(p.err)[:1] == ["fill_table"], "-o %s: sites %s" % (out, p.err))
    p = run_prog(tmp, "freed", "1000", "4096", opts=["-r", "16K", "-o", "f.html"])
    check("Top sites by estimated bytes live at the peak" in p.err, "freed: " + p.err)
    with open(os.path.join(tmp, "f.html")) as f:
        page = f.read()
    check('"view":"peak"' in page and '"opened_on_peak":1' in page,
          "f.html does not open on the peak")
    p = run_prog(tmp, "freed", "1000", "4096", opts=["-r", "16K", "-o", "f.txt"])
    with open(os.path.join(tmp, "f.txt")) as f:
        text = f.read()
    # Nothing, or next to nothing (stdout's buffer, when a sample falls on it), was live.
    check(re.search(r"^(Nothing sampled|Little) was live at the snapshot", text, re.M) and
          "grow_cache" in text, "f.txt:\n" + text)
    # Written raw by the program itself (MEMPROF_SYMBOLIZE=0 is the user's: not named after).
    env = clean_env({"MEMPROF_SYMBOLIZE": "0"})
    p = run_prog(tmp, "alloc", "1000", "4096", opts=["-r", "16K", "-o", "raw.pb.gz"], env=env)
    check("the profile is unsymbolized (written with MEMPROF_SYMBOLIZE=0): memprof report "
          "--symbolize names its frames" in p.err and "without symbols" not in p.err,
          "raw summary:\n" + p.err)
    p = memprof("report", "--symbolize", "raw.pb.gz", cwd=tmp)
    check(re.search(r"\d+ of \d+ code addresses without symbols", p.out) and
          "unsymbolized" not in p.out, "symbolized report:\n" + p.out)


def t_run_children(tmp):
    """A child that forks and execs is profiled into its own file."""
    need_plugin()
    p = run_prog(tmp, "spawn", "400", "1000", opts=["-r", "16K"])
    check(p.returncode == 0, "exit %d" % p.returncode)
    pid, child = pid_of(p.out), pid_of(p.out, "child")
    check(pid != child, "the same pid for parent and child")
    for q in (pid, child):
        path = default_profile(tmp, q)
        profile_ok(path)
        r = memprof("report", path)
        check(r.returncode == 0 and "grow_cache" in r.out, "the profile of %d lacks grow_cache" % q)
    check(re.search(r"1 other process of this run wrote its own profile:\n"
                    r"  cli-prog \(pid %d\): memprof\.cli-prog\.%d\.pb\.gz\n" % (child, child),
                    p.err), "the summary does not list the child's profile")
    # -o without %p: exactly that file for the program, program and pid inserted before the
    # extension for the child
    p = run_prog(tmp, "spawn", "400", "1000", opts=["-r", "16K", "-o", "fam.pb.gz"])
    pid, child = pid_of(p.out), pid_of(p.out, "child")
    profile_ok(os.path.join(tmp, "fam.pb.gz"))
    profile_ok(os.path.join(tmp, "fam.cli-prog.%d.pb.gz" % child))
    check(not os.path.exists(os.path.join(tmp, "fam.cli-prog.%d.pb.gz" % pid)),
          "the main program's profile was not renamed to fam.pb.gz")
    # A child with a much larger heap than the program (a driver and its compiler): the
    # summary goes on with the child's peak and sites; a smaller child is only listed.
    p = run_prog(tmp, "spawn", "10", "1000", "4000", opts=["-r", "16K"])
    child = pid_of(p.out, "child")
    check(re.search(r"the largest heap of this run was in process %d \(" % child, p.err) and
          re.search(r"Top sites by estimated bytes live at the peak.*\n.*grow_cache", p.err),
          "the summary lacks the larger child's peak and sites: %r" % p.err[-600:])
    p = run_prog(tmp, "spawn", "4000", "1000", "10", opts=["-r", "16K"])
    check("the largest heap of this run" not in p.err,
          "a child smaller than the program is summarized")


def t_run_summarizes_the_largest_child_when_the_program_wrote_none(tmp):
    """A program that ends with _exit() (dash does, so every `sh -c` script) writes no profile
    of its own: the summary says why and goes on with the child that had the largest heap."""
    need_plugin()
    parent = ("import os, subprocess, sys; "
              "subprocess.run([sys.argv[1], 'alloc', '4000', '1000'], check=True); os._exit(0)")
    p = memprof("run", "-r", "16K", "--no-runtime", "--", sys.executable, "-c", parent, ARGS.prog,
                cwd=tmp)
    check(p.returncode == 0, "exit %d" % p.returncode)
    check("no profile was written for" in p.err and "_exit()" in p.err,
          "the summary does not say why the program wrote no profile")
    check(re.search(r"the largest heap of this run was in process \d+ \(cli-prog, ", p.err) and
          re.search(r"Top sites by estimated bytes live at the peak.*\n.*grow_cache", p.err),
          "the child's peak and sites are missing: %r" % p.err[-600:])


def t_run_skips_empty_children(tmp):
    """A process the program starts that took no sample (/bin/true) writes no profile; one that
    sampled writes its own; the program itself writes one whatever it sampled. With
    MEMPROF_WRITE_EMPTY=1 set by the user, every process writes one."""
    need_plugin()
    # python3 runs both (a shell would exec the last one, and leaves with _exit()).
    prog = ["/usr/bin/python3", "-c", "import subprocess, sys\n"
            "subprocess.run(['/bin/true'], check=True)\n"
            "subprocess.run(sys.argv[1:], check=True)\n", ARGS.prog, "alloc", "400", "1000"]

    def files():
        return sorted(f for f in os.listdir(tmp) if f.endswith(".pb.gz"))

    p = memprof("run", "-r", "16K", "--", *prog, cwd=tmp, env=clean_env())
    check(p.returncode == 0, "exit %d: %s" % (p.returncode, p.err))
    child = pid_of(p.out)
    found = files()
    print("files: %s" % found)
    check("memprof.cli-prog.%d.pb.gz" % child in found, "the sampling child wrote no profile")
    check(not any(f.startswith("memprof.true.") for f in found),
          "true, which took no sample, wrote a profile")
    check(len(found) == 2 and re.match(r"memprof\.python3\.\d+\.pb\.gz$", found[1]),
          "expected python3's profile and the child's only")
    for f in found:
        profile_ok(os.path.join(tmp, f))
        os.unlink(os.path.join(tmp, f))
    p = memprof("run", "-r", "16K", "--", *prog, cwd=tmp,
                env=clean_env({"MEMPROF_WRITE_EMPTY": "1"}))
    check(p.returncode == 0, "exit %d: %s" % (p.returncode, p.err))
    found = files()
    print("files with MEMPROF_WRITE_EMPTY=1: %s" % found)
    check(len(found) == 3 and any(f.startswith("memprof.true.") for f in found),
          "MEMPROF_WRITE_EMPTY=1: expected true's profile too")


SPAWN_PY = ("import os, subprocess, sys\n"
            "subprocess.run(sys.argv[1:], check=True)\n"
            "print('env', os.environ.get('LD_PRELOAD'), sorted(k for k in os.environ "
            "if k.startswith('MEMPROF_')))\n")


def t_run_program_names(tmp):
    """Each process's file names its program: python3 running cli-prog writes
    memprof.python3.P.pb.gz and memprof.cli-prog.C.pb.gz, and the summary lists the child
    with its program."""
    need_plugin()
    p = memprof("run", "-r", "16K", "--", "/usr/bin/python3", "-c", SPAWN_PY, ARGS.prog,
                "alloc", "400", "1000", cwd=tmp)
    check(p.returncode == 0, "exit %d" % p.returncode)
    child = pid_of(p.out)
    files = sorted(f for f in os.listdir(tmp) if f.endswith(".pb.gz"))
    print("files: %s" % files)
    check(len(files) == 2 and re.match(r"memprof\.python3\.\d+\.pb\.gz$", files[1]) and
          files[0] == "memprof.cli-prog.%d.pb.gz" % child,
          "expected memprof.python3.<pid>.pb.gz and memprof.cli-prog.%d.pb.gz" % child)
    check(re.search(r"^memprof: profile of /usr/bin/python3 \(pid \d+\) written to "
                    r"memprof\.python3\.\d+\.pb\.gz$", p.err, re.M),
          "the summary does not name python3's profile")
    check(re.search(r"^  cli-prog \(pid %d\): memprof\.cli-prog\.%d\.pb\.gz$" % (child, child),
                    p.err, re.M), "the summary does not list the child with its program")
    # A program that execs another (env, nice, a wrapper's exec): the file of the pid is
    # named after the program that wrote it, and it is still found as the program's.
    for f in files:
        os.unlink(os.path.join(tmp, f))
    p = memprof("run", "-r", "16K", "--", "env", ARGS.prog, "alloc", "400", "1000", cwd=tmp)
    pid = pid_of(p.out)
    check(p.returncode == 0 and re.search(
        r"^memprof: profile of env \(pid %d\) written to memprof\.cli-prog\.%d\.pb\.gz$"
        % (pid, pid), p.err, re.M), "env exec'ing cli-prog: the profile was not found")
    p = memprof("run", "-q", "-o", "e.pb.gz", "--", "env", ARGS.prog, "alloc", "400", "1000",
                cwd=tmp)
    check(p.returncode == 0, "exit %d" % p.returncode)
    profile_ok(os.path.join(tmp, "e.pb.gz"))


def t_no_follow(tmp):
    """--no-follow profiles the program only: the programs it runs inherit neither the
    plugin nor MEMPROF_* (another LD_PRELOAD entry stays), and write no profile."""
    need_plugin()
    env = clean_env({"LD_PRELOAD": "libm.so.6"})
    p = memprof("run", "--no-follow", "-r", "16K", "--", "/usr/bin/python3", "-c", SPAWN_PY,
                ARGS.prog, "alloc", "400", "1000", cwd=tmp, env=env)
    check(p.returncode == 0, "exit %d" % p.returncode)
    files = sorted(f for f in os.listdir(tmp) if f.endswith(".pb.gz"))
    print("files: %s" % files)
    check(len(files) == 1 and files[0].startswith("memprof.python3."),
          "expected python3's profile only, found %s" % files)
    check("other process" not in p.err, "the summary lists other processes")
    check(re.search(r"^env libm\.so\.6 \[\]$", p.out, re.M),
          "the program's environment still holds the plugin or MEMPROF_*: %r" % p.out)


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise Failure("timed out after %g s waiting for %s" % (timeout, what))


def start_waiting(tmp, opts, go):
    cmd = [ARGS.memprof, "run"] + opts + ["--", ARGS.prog, "wait", "2000", "1000", go]
    print("$ " + " ".join(cmd))
    proc = subprocess.Popen(cmd, cwd=tmp, env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    check(line.startswith("ready "), "the program did not start: %r" % line)
    return proc, int(line.split()[1])


def finish(proc):
    out, err = proc.communicate(timeout=60)
    err = err.decode(errors="replace")
    print("  -> exit %d\n  stderr: %s" % (proc.returncode, err.rstrip()))
    return proc.returncode, err


def t_interval(tmp):
    need_plugin()
    go = os.path.join(tmp, "go")
    proc, pid = start_waiting(tmp, ["--interval", "1", "-r", "16K", "-o", "periodic.pb.gz"], go)
    try:
        running = os.path.join(tmp, "periodic.%s.%d.pb.gz" % (os.path.basename(ARGS.prog), pid))
        wait_for(lambda: os.path.exists(running), 10, "a periodic profile while it runs")
        check(proc.poll() is None, "the program ended before the periodic profile")
        profile_ok(running)
        # Killed: the last periodic profile is kept under the requested name.
        time.sleep(0.2)
        os.kill(proc.pid, signal.SIGTERM)  # to memprof, which forwards it
        status, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    check(status == 128 + signal.SIGTERM, "killed by SIGTERM: exit %d" % status)
    final = os.path.join(tmp, "periodic.pb.gz")
    check(re.search(r"was killed by signal 15 \(SIGTERM\); the last profile written is "
                    r"periodic\.pb\.gz", err), "no 'last profile written' message")
    profile_ok(final)
    r = memprof("report", final)
    check(r.returncode == 0 and "grow_cache" in r.out, "the periodic profile lacks grow_cache")


def t_signal(tmp):
    need_plugin()
    go = os.path.join(tmp, "go")
    proc, pid = start_waiting(tmp, ["--signal", "USR2", "-r", "16K"], go)
    try:
        path = default_profile(tmp, pid)
        time.sleep(0.3)
        check(not os.path.exists(path), "a profile before the signal")
        os.kill(pid, signal.SIGUSR2)  # to the program itself
        wait_for(lambda: os.path.exists(path), 10, "the profile after SIGUSR2 to the program")
        check(proc.poll() is None, "SIGUSR2 ended the program")
        profile_ok(path)
        first = os.stat(path).st_ino
        os.kill(proc.pid, signal.SIGUSR2)  # to memprof run, which forwards it
        wait_for(lambda: os.stat(path).st_ino != first, 10,
                 "a new profile after SIGUSR2 to memprof run")
        check(proc.poll() is None, "SIGUSR2 to memprof run ended it")
        open(go, "w").close()
        status, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    check(status == 0, "exit %d" % status)
    r = memprof("report", path)
    check(r.returncode == 0 and "grow_cache" in r.out, "the profile lacks grow_cache")


def signed_size(text):
    """'+1.5 MiB' -> 1572864.0 (as printed by memprof diff)."""
    m = re.match(r"([+-]?)([\d.]+) (B|KiB|MiB|GiB|TiB)$", text)
    check(m, "not a size: %r" % text)
    scale = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m.group(3)]
    return float(m.group(2)) * scale * (-1 if m.group(1) == "-" else 1)


def t_diff(tmp):
    need_plugin()
    profiles = []
    for n in ("1000", "8000"):
        out = os.path.join(tmp, "d%s.pb.gz" % n)
        p = run_prog(tmp, "alloc", n, "1000", opts=["-r", "8K", "-q", "-o", out])
        check(p.returncode == 0, "exit %d" % p.returncode)
        profiles.append(out)
    d = memprof("diff", *profiles)
    check(d.returncode == 0, "diff: exit %d" % d.returncode)
    print(d.out)
    check(re.search(r"^Live heap: .* -> .*, change \+.*\(95% interval", d.out, re.M),
          "no totals line")
    sites = re.findall(r"^\s*\d+\. ([+-]\S+ \S+) .*\n\s+at (\S+)", d.out, re.M)
    check(sites, "no changed sites listed")
    check(sites[0][1] == "grow_cache", "the largest change is not grow_cache: %r" % sites[0][1])
    check(sites[0][0].startswith("+"), "grow_cache did not grow")
    first = d.out.split("\n  1. ")[1].split("\n")[0]
    check("within sampling noise" not in first, "a 8x growth is called sampling noise")
    check(re.search(r"^\s+at parse_input", d.out, re.M), "parse_input is not listed")
    # The same profile twice: nothing changed.
    same = memprof("diff", profiles[0], profiles[0])
    check(same.returncode == 0 and re.search(r"^0 of \d+ sites changed", same.out, re.M),
          "a profile diffed with itself shows changes")
    # --top 1
    d = memprof("diff", "--top", "1", *profiles)
    check(d.returncode == 0 and "  2. " not in d.out, "--top 1 shows more than one site")
    # Every change has an interval, and "within sampling noise" marks exactly the changes
    # whose interval contains 0.
    d = memprof("diff", "--top", "0", *profiles)
    for line in re.findall(r"^\s*\d+\. .*$", d.out, re.M):
        m = re.match(r"\s*\d+\. (\S+ \S+) \((\S+ \S+) to (\S+ \S+)\)", line)
        check(m, "no change with an interval in %r" % line)
        change, lo, hi = (signed_size(x) for x in m.groups())
        check(lo <= change <= hi, "the change is outside its interval: %r" % line)
        if lo != 0 and hi != 0:
            check(("within sampling noise" in line) == (lo < 0 < hi),
                  "noise mark inconsistent with the interval: %r" % line)
    r = memprof("diff", profiles[0], os.path.join(tmp, "missing.pb.gz"))
    one_line_error(r, 1, r"missing\.pb\.gz")


# ---- the reader on bad input ---------------------------------------------------------------

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, payload):
    if isinstance(payload, int):
        return varint(num << 3) + varint(payload)
    return varint((num << 3) | 2) + varint(len(payload)) + payload


def foreign_pprof():
    """A small valid pprof profile that memprof did not write (no memprof comments)."""
    st = [b"", b"space", b"bytes", b"main"]
    msg = field(1, field(1, 1) + field(2, 2))               # sample_type space/bytes
    msg += field(2, field(1, 1) + field(2, 100))             # sample: location 1, value 100
    msg += field(4, field(1, 1) + field(4, field(1, 1)))     # location 1 -> function 1
    msg += field(5, field(1, 1) + field(2, 3))               # function 1 "main"
    for s in st:
        msg += field(6, s)
    return msg


def read_varint(b, i):
    n = shift = 0
    while True:
        n |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if b[i - 1] < 0x80:
            return n, i


def rename_strings(raw, renames):
    """A pprof message with some of its string-table entries (field 6) replaced."""
    out, i = bytearray(), 0
    while i < len(raw):
        key, j = read_varint(raw, i)
        kind = key & 7
        if kind == 0:
            _, j = read_varint(raw, j)
        elif kind == 1:
            j += 8
        elif kind == 5:
            j += 4
        else:
            n, j = read_varint(raw, j)
            j += n
            if key >> 3 == 6 and bytes(raw[j - n:j]) in renames:
                out += field(6, renames[bytes(raw[j - n:j])])
                i = j
                continue
        out += raw[i:j]
        i = j
    return bytes(out)


def t_report_demangles(tmp):
    """Names a profile holds still mangled (written by older versions, which demangled C++
    only in programs with a C++ runtime and Rust never) are demangled by report: C++, Rust
    legacy (hash dropped) and Rust v0, in text and collapsed output."""
    need_plugin()
    src = os.path.join(tmp, "plain.pb.gz")
    p = run_prog(tmp, "alloc", "400", "1000", opts=["-r", "16K", "-q", "-o", src])
    check(p.returncode == 0, "exit %d" % p.returncode)
    with open(src, "rb") as f:
        raw = gzip.decompress(f.read())
    path = os.path.join(tmp, "mangled.pb.gz")
    with open(path, "wb") as f:
        f.write(gzip.compress(rename_strings(raw, {
            b"grow_cache": b"_ZN3foo10grow_cacheEmm",
            b"parse_input": b"_ZN7mycrate11parse_input17h0123456789abcdefE",
            b"main": b"_RNvCs1a2b3c_7mycrate4main"})))
    r = memprof("report", "--format", "collapsed", path)
    check(r.returncode == 0, "report: exit %d" % r.returncode)
    print(r.out)
    check(re.search(r"(^|;)mycrate::main;(.*;)?foo::grow_cache\(unsigned long, unsigned long\) "
                    r"\d+$", r.out, re.M), "no demangled stack main -> grow_cache")
    r = memprof("report", "--view", "alloc", path)
    check("mycrate::parse_input" in r.out, "the Rust legacy name is not demangled")
    # Rewritten as pprof, the mangled spelling becomes the function's system_name.
    again = os.path.join(tmp, "again.pb.gz")
    r = memprof("report", "-o", again, path)
    check(r.returncode == 0, "report -o pprof: exit %d" % r.returncode)
    funcs = pprof_functions(again)
    check(funcs.get("foo::grow_cache(unsigned long, unsigned long)") == "_ZN3foo10grow_cacheEmm",
          "system_name of foo::grow_cache: %r" % funcs)
    check(not re.search(r"_ZN|_RNv|::h0123", r.out), "mangled names or hashes left in the "
          "report")


def pprof_functions(path):
    """{name: system_name} of the Functions of a gzip-compressed pprof file."""
    with open(path, "rb") as f:
        raw = gzip.decompress(f.read())

    def fields(b):
        i = 0
        while i < len(b):
            key, i = read_varint(b, i)
            if key & 7 == 0:
                v, i = read_varint(b, i)
            elif key & 7 == 2:
                n, i = read_varint(b, i)
                v, i = b[i:i + n], i + n
            else:
                raise Failure("unexpected wire type %d" % (key & 7))
            yield key >> 3, v

    strings, funcs = [], []
    for num, v in fields(raw):
        if num == 6:
            strings.append(v.decode())
        elif num == 5:
            d = dict(fields(v))
            funcs.append((d.get(2, 0), d.get(3, 0)))
    return {strings[n]: strings[sysn] for n, sysn in funcs}


def t_pprof_system_names(tmp):
    """pprof Functions carry the demangled name and the mangled one as system_name, whether
    the program names its frames or memprof run names them after it exits."""
    need_plugin()
    # Unset: the program writes addresses and memprof run names them after it exits.
    for symbolize in (None, "1"):
        out = os.path.join(tmp, "m%s.pb.gz" % symbolize)
        env = clean_env({"MEMPROF_SYMBOLIZE": symbolize} if symbolize else {})
        p = run_prog(tmp, "mangled", "400", "1000", opts=["-r", "16K", "-q", "-o", out], env=env)
        check(p.returncode == 0, "exit %d" % p.returncode)
        funcs = pprof_functions(out)
        name = "cliprog::hold(unsigned long, unsigned long)"
        check(funcs.get(name) == "_ZN7cliprog4holdEmm",
              "MEMPROF_SYMBOLIZE=%s: function %r has system_name %r" % (symbolize, name,
                                                                         funcs.get(name)))
        check(funcs.get("main") == "main", "main's system_name is %r" % funcs.get("main"))


def t_report_addresses(tmp):
    """--addresses is accepted for the collapsed format and refused for the others."""
    need_plugin()
    src = os.path.join(tmp, "p.pb.gz")
    p = run_prog(tmp, "alloc", "400", "1000", opts=["-r", "16K", "-q", "-o", src])
    check(p.returncode == 0, "exit %d" % p.returncode)
    r = memprof("report", "--format", "collapsed", "--addresses", src)
    check(r.returncode == 0 and re.search(r"grow_cache \d+$", r.out, re.M),
          "collapsed with --addresses: exit %d, %r" % (r.returncode, r.out[:300]))
    r = memprof("report", "--addresses", src)
    one_line_error(r, 2, r"--addresses applies to the collapsed format")


def t_report_bad_input(tmp):
    cases = {
        "empty.pb.gz": b"",
        "random.pb.gz": bytes(random.Random(1).randrange(256) for _ in range(4096)),
        "text.pb.gz": b"this is not a profile\n" * 50,
        "gzip-text.pb.gz": gzip.compress(b"hello, world\n" * 100),
        "gzip-empty.pb.gz": gzip.compress(b""),
        "foreign.pb.gz": gzip.compress(foreign_pprof()),
        "foreign-raw.pb": foreign_pprof(),
        "truncated-gzip.pb.gz": gzip.compress(foreign_pprof() * 20)[:40],
        "huge-varint.pb": b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
    }
    for name, data in cases.items():
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        for cmd in (["report", path], ["report", "--format", "html", path],
                    ["diff", path, path]):
            p = memprof(*cmd)
            one_line_error(p, 1, re.escape(name))
            check(p.out == "", "output despite the error: %r" % p.out[:200])
    p = memprof("report", tmp)
    one_line_error(p, 1, r"[Ii]s a directory")
    p = memprof("report", os.path.join(tmp, "nonexistent.pb.gz"))
    one_line_error(p, 1, r"No such file")
    p = memprof("report", "-o", os.path.join(tmp, "out.txt"), os.path.join(tmp, "random.pb.gz"))
    check(p.returncode == 1 and not os.path.exists(os.path.join(tmp, "out.txt")),
          "an output file was created for an unreadable profile")


def t_report_mutations(tmp):
    """Mutated real profiles: the command reports an error or a result, never crashes."""
    need_plugin()
    src = os.path.join(tmp, "real.pb.gz")
    p = run_prog(tmp, "alloc", "2000", "1000", opts=["-r", "16K", "-q", "-o", src])
    check(p.returncode == 0, "exit %d" % p.returncode)
    profile_ok(src)
    with open(src, "rb") as f:
        raw = gzip.decompress(f.read())
    rng = random.Random(4)
    variants = []
    for i in range(120):
        b = bytearray(raw)
        kind = i % 4
        if kind == 0:                       # flip bytes
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        elif kind == 1:                     # truncate
            b = b[:rng.randrange(len(b))]
        elif kind == 2:                     # splice a chunk elsewhere
            a = rng.randrange(len(b))
            c = b[a:a + rng.randint(1, 64)]
            at = rng.randrange(len(b))
            b[at:at] = c
        else:                               # large varints
            at = rng.randrange(len(b))
            b[at:at] = b"\xff" * rng.randint(1, 12)
        variants.append(bytes(b))
    variants.append(gzip.compress(raw)[:-8])      # gzip without its trailer
    ok = bad = 0
    for i, data in enumerate(variants):
        path = os.path.join(tmp, "m%d.pb.gz" % i)
        with open(path, "wb") as f:
            f.write(gzip.compress(data) if i < len(variants) - 1 else data)
        r = subprocess.run([ARGS.memprof, "report", "--format", "text", path], env=clean_env(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
        check(r.returncode in (0, 1), "variant %d: exit %d (crash?) stderr %r" % (
            i, r.returncode, r.stderr[:500]))
        if r.returncode == 1:
            bad += 1
            check(len(lines(r.stderr.decode(errors="replace"))) == 1,
                  "variant %d: not one line: %r" % (i, r.stderr))
        else:
            ok += 1
        os.unlink(path)
    print("%d mutated profiles read, %d rejected" % (ok, bad))
    check(bad > 0, "no mutated profile was rejected")


# ---------------------------------------------------------------------------------------------

TESTS = {name[2:].replace("_", "-"): fn for name, fn in globals().items()
         if name.startswith("t_")}


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprof", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--plugin", default="")
    ap.add_argument("--plugin-from-bindir", default="")
    ap.add_argument("--bindir", default="bin")
    ap.add_argument("--libdir", default="", help="directory of libmemprof.so.1")
    ap.add_argument("--api-example", default="", help="examples/api_example")
    ap.add_argument("test", choices=sorted(TESTS))
    ARGS = ap.parse_args()
    for name in ("memprof", "prog", "plugin", "libdir", "api_example"):
        if getattr(ARGS, name):
            setattr(ARGS, name, os.path.abspath(getattr(ARGS, name)))
    tmp = tempfile.mkdtemp(prefix="memprof-cli-")
    try:
        TESTS[ARGS.test](tmp)
    except Skip as e:
        print("SKIP: %s" % e)
        return SKIP
    except Failure as e:
        print("FAIL: %s" % e)
        print("(files kept in %s)" % tmp)
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
