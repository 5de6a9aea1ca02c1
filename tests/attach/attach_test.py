#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`memprof attach` against real processes (tests/attach/meson.build runs one case per test).

Cases:
  blocked       a target blocked in read() on a pipe: after attach and stop the read returns
                the byte written later, with errno and registers as they were
  threads       a target allocating on three threads: a 2 s profile names its site with a
                plausible live size (12 MiB allocated live)
  text          -o x.txt: the summary is printed as for pprof, and the file is the text profile
  again         a second attach to the same process works and reuses the loaded library
  no-page       the first attach maps no executable page (the trampoline goes into the
                padding of libc's last code page; skipped where that leaves no room)
  stop          attach --no-wait, then attach --stop from another command writes the profile
  no-process    a process id that does not exist is refused in one line
  killed        SIGKILL of the command at moments during the attach leaves the target running
                and untraced, and a later attach still works
  traced        a process another tracer holds is refused, naming the tracer
  static        a statically linked process is refused as such
  other-user    as another user (root only: setpriv), a root process is refused as such
  plugin        a process preloading the plugin with MEMPROF_START=0 is started through it
  eintr         (attach-inject, probe_signal) SIGUSR1 raised in the middle of the call: the
                handler runs after the call, and the read() it interrupts ends with EINTR
                (installed without SA_RESTART), registers and errno intact
  restart       the same with SA_RESTART: the handler runs after the call, the read goes on
  sleep         a target in nanosleep(): the sleep continues and returns 0, errno intact
  exit-during   (probe_exit) the process exits during the call: reported as ended
  exec-during   (probe_exec) another thread exec()s during the call: reported as such, and
                the new program runs untraced
  fork          a target forking on two threads: the attach works, every child exits 0
  exit-profiling the target exits while profiled: one line, exit 1
  container     (root) a target in its own mount namespace (unshare -m) and a minimal root of
                its own (chroot: the program, glibc and /proc, no libmemprof): the library
                and its dependencies are handed over as memory files, the profile comes back
                to a path outside that root, no memory file stays open, a second attach
                reuses the library
  python        a CPython target (python_target.py, the interpreter the binding is built for):
                the attach has the binding join the profile, and the summary names the
                Python function that allocates
  seccomp       a target whose seccomp filter kills it for openat() is refused as such, and
                runs on (its read returns the byte written later)
  accuracy      a target turning 200 MiB over each second, attached for 5 s at 64 KiB: the
                estimated live heap is within 10 % of 200 MiB
Exit 77 (skipped) where this process may not ptrace its children.
"""
import argparse
import ctypes
import os
import shutil
import platform
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

SKIP = 77


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def can_ptrace():
    if platform.machine() != "x86_64":
        return False
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return f.read().strip() == "0"
    except OSError:
        return True


def status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return line.split(":", 1)[1].strip()
    return None


class Target:
    def __init__(self, exe, mode, env=None, argv=None):
        self.p = subprocess.Popen(argv or [exe, mode], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env=env)
        self.expect(b"ready\n")
        self.pid = self.p.pid

    def expect(self, want):
        line = self.p.stdout.readline()
        if line != want:
            fail("target printed %r, expected %r" % (line, want))

    def check_running(self):
        if self.p.poll() is not None:
            fail("target ended with status %s" % self.p.returncode)
        tracer = status(self.pid, "TracerPid")
        state = status(self.pid, "State")
        if tracer != "0":
            fail("target still traced by %s" % tracer)
        if state[0] in "tT":
            fail("target left stopped: %s" % state)

    def end(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def attach(args, *opts, check=True):
    r = subprocess.run([args.memprof, "attach", *opts], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    err = r.stderr.decode()
    if check and r.returncode != 0:
        fail("memprof attach %s: exit %d\n%s" % (" ".join(opts), r.returncode, err))
    return r.returncode, err


def live_mib(summary):
    m = re.search(r"Estimated live heap: ([0-9.]+) (KiB|MiB|GiB)", summary)
    if not m:
        fail("no live heap in the summary:\n" + summary)
    return float(m.group(1)) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[m.group(2)]


def case_blocked(args, tmp):
    t = Target(args.target, "blocked")
    try:
        time.sleep(0.2)  # in the read
        attach(args, "-d", "1", "-o", os.path.join(tmp, "b.pb.gz"), str(t.pid))
        t.check_running()
        out, _ = t.p.communicate(b"x", timeout=30)
        if t.p.returncode != 0 or out != b"ok\n":
            fail("target after the attach: status %d, %r" % (t.p.returncode, out))
    finally:
        t.end()


def check_profile(summary):
    if "attach_alloc_site" not in summary:
        fail("the summary does not name attach_alloc_site:\n" + summary)
    live = live_mib(summary)
    # 12 MiB live; at 64 KiB per sample about 190 samples, so 6-24 MiB is far outside chance.
    if not 6 <= live <= 24:
        fail("live heap %.1f MiB, expected about 12 MiB:\n%s" % (live, summary))
    if "allocations made before the attach are not in the profile" not in summary:
        fail("the summary does not say that earlier allocations are unknown:\n" + summary)


def case_threads(args, tmp):
    t = Target(args.target, "loop")
    try:
        _, err = attach(args, "-d", "2", "-r", "64K", "-o", os.path.join(tmp, "t.pb.gz"),
                        str(t.pid))
        check_profile(err)
        t.check_running()
    finally:
        t.end()


def case_text(args, tmp):
    t = Target(args.target, "loop")
    try:
        out = os.path.join(tmp, "t.txt")
        _, err = attach(args, "-d", "2", "-r", "64K", "-o", out, str(t.pid))
        check_profile(err)
        with open(out, encoding="utf-8") as f:
            text = f.read()
        if not text.startswith("libmemprof") or "attach_alloc_site" not in text:
            fail("%s is not the text profile naming the site:\n%s" % (out, text[:400]))
        t.check_running()
    finally:
        t.end()


def case_again(args, tmp):
    t = Target(args.target, "loop")
    try:
        attach(args, "-d", "1", "-r", "64K", "-o", os.path.join(tmp, "a1.pb.gz"), str(t.pid))
        _, err = attach(args, "-d", "1", "-o", os.path.join(tmp, "a2.pb.gz"), str(t.pid))
        if "already loaded" not in err:
            fail("the second attach did not reuse the library:\n" + err)
        check_profile(err)
        t.check_running()
    finally:
        t.end()


def code_slack(path):
    """Bytes from the end of the ELF file's last executable segment to the end of its page."""
    with open(path, "rb") as f:
        head = f.read(64)
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
    slack = 0
    for i in range(phnum):
        p_type, p_flags, _, p_vaddr, _, _, p_memsz, _ = struct.unpack_from("<IIQQQQQQ", ph,
                                                                            i * phentsize)
        if p_type == 1 and p_flags & 1:  # PT_LOAD, PF_X
            slack = max(slack, -(p_vaddr + p_memsz) % 4096)
    return slack


def maps(pid):
    with open("/proc/%d/maps" % pid) as f:
        return [line.split() for line in f]


def case_no_page(args, tmp):
    t = Target(args.target, "loop")
    try:
        libc = next(m[5] for m in maps(t.pid) if len(m) > 5 and "/libc.so.6" in m[5])
        if code_slack("/proc/%d/root%s" % (t.pid, libc)) < 320:
            print("SKIP: this libc leaves no room after its code (the trampoline gets a page)")
            sys.exit(SKIP)

        def anon_exec():
            return {m[0] for m in maps(t.pid) if len(m) == 5 and "x" in m[1]}
        before = anon_exec()
        _, err = attach(args, "-d", "1", "-r", "64K", "-o", os.path.join(tmp, "n.pb.gz"),
                        str(t.pid))
        added = anon_exec() - before
        if added:
            fail("the attach mapped executable memory: %s" % sorted(added))
        check_profile(err)
        t.check_running()
    finally:
        t.end()


def case_stop(args, tmp):
    t = Target(args.target, "loop")
    try:
        out = os.path.join(tmp, "s.pb.gz")
        attach(args, "--no-wait", "-r", "64K", "-o", out, str(t.pid))
        time.sleep(1)
        _, err = attach(args, "--stop", "-o", out, str(t.pid))
        check_profile(err)
        t.check_running()
    finally:
        t.end()


def case_no_process(args, tmp):
    pid = 4194304 + 1  # above the largest pid_max
    rc, err = attach(args, "-d", "1", str(pid), check=False)
    if rc != 1 or err.strip() != "memprof: no process with id %d" % pid:
        fail("exit %d, %r" % (rc, err))


def case_killed(args, tmp):
    t = Target(args.target, "loop")
    try:
        out = os.path.join(tmp, "k.pb.gz")
        # The first kills fall in the process's first attach, which writes the trampoline.
        for delay in [0, 0.001, 0.003, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2]:
            p = subprocess.Popen([args.memprof, "attach", "-r", "64K", "-o", out, str(t.pid)],
                                 stderr=subprocess.DEVNULL)
            time.sleep(delay)
            p.kill()
            p.wait()
            time.sleep(0.05)
            t.check_running()
            # Sampling may have been started; stop it so the next round starts afresh.
            attach(args, "--stop", "-o", out, str(t.pid), check=False)
            t.check_running()
        _, err = attach(args, "-d", "1", "-o", out, str(t.pid))
        check_profile(err)
        t.check_running()
    finally:
        t.end()


def refused(args, pid, expect):
    rc, err = attach(args, "-d", "1", str(pid), check=False)
    if rc != 1 or len(err.strip().splitlines()) != 1 or expect not in err:
        fail("expected one line with %r and exit 1, got exit %d: %r" % (expect, rc, err))
    return err


def case_traced(args, tmp):
    t = Target(args.target, "loop")
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PTRACE_SEIZE, PTRACE_DETACH, PTRACE_INTERRUPT = 0x4206, 17, 0x4207
        if libc.ptrace(PTRACE_SEIZE, t.pid, None, None) != 0:
            fail("PTRACE_SEIZE: errno %d" % ctypes.get_errno())
        err = refused(args, t.pid, "is already traced by process %d" % os.getpid())
        if "detach it first" not in err:
            fail("no advice: " + err)
        libc.ptrace(PTRACE_INTERRUPT, t.pid, None, None)
        os.waitpid(t.pid, os.WUNTRACED | 0x40000000)  # __WALL
        libc.ptrace(PTRACE_DETACH, t.pid, None, None)
    finally:
        t.end()


def case_static(args, tmp):
    p = subprocess.Popen([args.static_target], stdout=subprocess.PIPE)
    try:
        if p.stdout.readline() != b"ready\n":
            fail("static target did not start")
        refused(args, p.pid, "is statically linked")
    finally:
        p.kill()
        p.wait()


def case_other_user(args, tmp):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        print("SKIP: needs root and setpriv")
        sys.exit(SKIP)
    t = Target(args.target, "loop")
    try:
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            args.memprof, "attach", "-d", "1", str(t.pid)],
                           stderr=subprocess.PIPE, timeout=60)
        err = r.stderr.decode()
        if r.returncode != 1 or "belongs to another user (uid 0)" not in err:
            fail("exit %d: %r" % (r.returncode, err))
    finally:
        t.end()


def case_plugin(args, tmp):
    if not args.plugin:
        print("SKIP: no preload plugin in this build")
        sys.exit(SKIP)
    env = dict(os.environ, LD_PRELOAD=args.plugin, MEMPROF_START="0",
               MEMPROF_OUTPUT=os.path.join(tmp, "exit.pb.gz"))
    t = Target(args.target, "loop", env)
    try:
        _, err = attach(args, "-d", "2", "-r", "64K", "-o", os.path.join(tmp, "p.pb.gz"),
                        str(t.pid))
        if "its libmemprof already loaded" not in err:
            fail("the plugin's library was not used:\n" + err)
        check_profile(err)
        t.check_running()
    finally:
        t.end()


def inject(args, pid, function, arg=""):
    r = subprocess.run([args.inject, str(pid), args.probe, function, arg],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return r.returncode, r.stderr.decode()


def case_signal(args, tmp, mode):
    t = Target(args.target, mode)
    try:
        time.sleep(0.2)  # in the read
        rc, err = inject(args, t.pid, "probe_signal")
        if rc != 0:
            fail("attach-inject: exit %d: %s" % (rc, err))
        # The handler runs once the thread is given back, not on top of the call.
        for want in (b"probe\n", b"probe-end\n", b"handler\n"):
            t.expect(want)
        if mode != "eintr":  # else the read ended: the target checks and exits
            t.check_running()
            t.p.stdin.write(b"x")
        t.p.stdin.close()
        out = t.p.stdout.read()  # what expect() left in the buffer, too
        t.p.wait(timeout=30)
        if t.p.returncode != 0 or out != b"ok\n":
            fail("target after the call: status %d, %r" % (t.p.returncode, out))
    finally:
        t.end()


def case_eintr(args, tmp):
    case_signal(args, tmp, "eintr")


def case_restart(args, tmp):
    case_signal(args, tmp, "restart")


def case_sleep(args, tmp):
    t = Target(args.target, "sleep")
    try:
        time.sleep(0.2)  # in the sleep
        _, err = attach(args, "-d", "1", "-o", os.path.join(tmp, "z.pb.gz"), str(t.pid))
        if "its system call restarted" not in err:
            fail("the sleep was not reported as restarted:\n" + err)
        out, _ = t.p.communicate(timeout=30)
        if t.p.returncode != 0 or out != b"ok\n":
            fail("target after the attach: status %d, %r" % (t.p.returncode, out))
    finally:
        t.end()


def case_exit_during(args, tmp):
    t = Target(args.target, "blocked")
    try:
        rc, err = inject(args, t.pid, "probe_exit")
        if rc != 1 or "the process ended while memprof was attaching" not in err:
            fail("attach-inject: exit %d: %r" % (rc, err))
        if t.p.wait(timeout=30) != 7:
            fail("target status %d, expected 7 (its own exit)" % t.p.returncode)
    finally:
        t.end()


def case_exec_during(args, tmp):
    t = Target(args.target, "blocked")
    try:
        rc, err = inject(args, t.pid, "probe_exec", "blocked")
        if rc != 1 or "called exec()" not in err:
            fail("attach-inject: exit %d: %r" % (rc, err))
        t.expect(b"ready\n")  # the new program
        t.check_running()
        out, _ = t.p.communicate(b"x", timeout=30)
        if t.p.returncode != 0 or out != b"ok\n":
            fail("the new program: status %d, %r" % (t.p.returncode, out))
    finally:
        t.end()


def case_fork(args, tmp):
    t = Target(args.target, "fork")
    try:
        attach(args, "-d", "1", "-r", "64K", "-o", os.path.join(tmp, "f.pb.gz"), str(t.pid))
        t.check_running()
        out, _ = t.p.communicate(b"x", timeout=60)
        if t.p.returncode != 0 or out != b"ok\n":
            fail("target after the attach: status %d, %r" % (t.p.returncode, out))
    finally:
        t.end()


def case_exit_profiling(args, tmp):
    t = Target(args.target, "loop")
    try:
        p = subprocess.Popen([args.memprof, "attach", "-d", "30", "-o",
                              os.path.join(tmp, "e.pb.gz"), str(t.pid)],
                             stderr=subprocess.PIPE)
        line = p.stderr.readline().decode()
        if "attached to" not in line:
            p.kill()
            fail("memprof attach: %r" % line)
        t.p.kill()
        t.p.wait()
        err = p.stderr.read().decode()
        rc = p.wait(timeout=60)
        if rc != 1 or "ended before the profile was written" not in err:
            fail("exit %d: %r" % (rc, err))
    finally:
        t.end()


def minimal_root(exe, root):
    """A root with `exe` as /attach-target, the libraries ldd names for it, glibc's libm
    (libmemprof needs it from the process's own glibc) and an empty /proc."""
    out = subprocess.run(["ldd", exe], stdout=subprocess.PIPE, check=True).stdout.decode()
    libs = re.findall(r"(/\S+) \(0x", out)
    libc = [lib for lib in libs if os.path.basename(lib).startswith("libc.so")]
    if not libc:
        fail("no libc in ldd's output: " + out)
    libs.append(os.path.join(os.path.dirname(libc[0]), "libm.so.6"))
    for lib in libs:
        dest = root + lib
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(lib, dest)
    shutil.copy2(exe, os.path.join(root, "attach-target"))
    os.makedirs(os.path.join(root, "proc"))


def memfds(pid):
    found = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("/memfd:"):
            found.append(link)
    return found


def case_container(args, tmp):
    if os.geteuid() != 0 or not all(shutil.which(c) for c in ("unshare", "chroot", "ldd")):
        print("SKIP: needs root, unshare, chroot and ldd")
        sys.exit(SKIP)
    root = os.path.join(tmp, "root")
    minimal_root(os.path.abspath(args.target), root)
    script = 'mount -t proc proc "$0/proc" && exec chroot "$0" /attach-target loop'
    t = Target(None, None, argv=["unshare", "-m", "--propagation", "private", "sh", "-c",
                                 script, root])
    try:
        if os.stat("/proc/self/ns/mnt").st_ino == os.stat("/proc/%d/ns/mnt" % t.pid).st_ino:
            fail("the target is in this mount namespace")
        out = os.path.join(tmp, "container.pb.gz")  # outside the target's root
        _, err = attach(args, "-d", "2", "-r", "64K", "-o", out, str(t.pid))
        if "libmemprof handed over to its mount namespace" not in err:
            fail("the library was not handed over:\n" + err)
        check_profile(err)
        if not os.path.isfile(out) or os.path.exists(os.path.join(root, out.lstrip("/"))):
            fail("the profile is not at %s, or also inside the target's root" % out)
        if memfds(t.pid):
            fail("memory files left open in the target: %s" % memfds(t.pid))
        t.check_running()
        _, err = attach(args, "-d", "1", "-o", out, str(t.pid))
        if "already loaded" not in err:
            fail("the second attach did not reuse the library:\n" + err)
        check_profile(err)
        if memfds(t.pid):
            fail("memory files left open in the target: %s" % memfds(t.pid))
        t.check_running()
    finally:
        t.end()


def case_python(args, tmp):
    if not args.python:
        print("SKIP: no Python binding in this build")
        sys.exit(SKIP)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_target.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    t = Target(None, None, env=env, argv=[args.python, script])
    try:
        _, err = attach(args, "-d", "2", "-r", "64K", "-o", os.path.join(tmp, "py.pb.gz"),
                        str(t.pid))
        if "Python frames on" not in err or "python_alloc_site" not in err:
            fail("no Python frames in the profile:\n" + err)
        t.check_running()
    finally:
        t.end()


def case_seccomp(args, tmp):
    if os.geteuid() != 0:
        print("SKIP: reading a seccomp filter needs CAP_SYS_ADMIN")
        sys.exit(SKIP)
    t = Target(args.target, "seccomp")
    try:
        err = refused(args, t.pid, "runs under a seccomp filter that would kill it")
        if "--ebpf" not in err:
            fail("no advice: " + err)
        t.check_running()
        t.p.stdin.write(b"x")
        t.p.stdin.close()
        out = t.p.stdout.read()
        if t.p.wait(timeout=30) != 0 or out != b"ok\n":
            fail("target after the refusal: status %d, %r" % (t.p.returncode, out))
    finally:
        t.end()


def case_accuracy(args, tmp):
    t = Target(args.target, "churn200")
    try:
        # 5 s at 64 KiB: ~1,900 samples live (a 32 KiB block is sampled with probability
        # 0.39, a 96 KiB one 0.78), a standard error of ~2.5 %; the whole working set is
        # replaced after the first second, so all of it is in the profile.
        _, err = attach(args, "-d", "5", "-r", "64K", "-o", os.path.join(tmp, "c.pb.gz"),
                        str(t.pid))
        live = live_mib(err)
        if not 180 <= live <= 220:
            fail("live heap %.1f MiB, expected 200 MiB within 10 %%:\n%s" % (live, err))
        print("estimated %.1f MiB of 200 MiB (%+.1f %%)" % (live, (live / 200 - 1) * 100))
        t.check_running()
    finally:
        t.end()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprof", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--static-target")
    ap.add_argument("--plugin")
    ap.add_argument("--inject")
    ap.add_argument("--probe")
    ap.add_argument("--python")
    ap.add_argument("case")
    args = ap.parse_args()
    if args.case not in ("no-process", "static") and not can_ptrace():
        print("SKIP: this process may not ptrace (not x86_64, or Yama's ptrace_scope)")
        return SKIP
    cases = {"blocked": case_blocked, "threads": case_threads, "text": case_text,
             "again": case_again, "no-page": case_no_page,
             "stop": case_stop, "no-process": case_no_process, "killed": case_killed,
             "traced": case_traced, "static": case_static, "other-user": case_other_user,
             "plugin": case_plugin, "eintr": case_eintr, "restart": case_restart,
             "sleep": case_sleep, "exit-during": case_exit_during,
             "exec-during": case_exec_during, "fork": case_fork,
             "exit-profiling": case_exit_profiling, "accuracy": case_accuracy,
             "container": case_container, "python": case_python,
             "seccomp": case_seccomp}
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        cases[args.case](args, tmp)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
