#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`memprof run --ebpf` and `memprof attach --ebpf` on real programs (tests/ebpf/meson.build
runs one case per test). Each case skips (77) when this process may not load BPF programs
or the command was built without the eBPF mode (both: exit status 3).

Cases:
  rust-run         a Rust program whose global allocator never calls malloc (rust_bump),
                   run under --ebpf: the top live site is rust_bump::hold_big, demangled,
                   with 100 MiB within 12 %
  rust-attach      the same program attached while it waits, allocating and then exiting
                   while attached: the same top site and estimate, the attach's own lines
  static-run       a static C program built with frame pointers: the top live site is
                   hold_c_site with 100 MiB within 12 %, and its caller main is in the stack;
                   its one function without them, 1 % of its bytes, draws no frame-pointer
                   line
  mount-namespace  the static program chrooted in its own mount namespace, attached: its
                   files are read through /proc/PID/root and the top site is hold_c_site
  no-privilege     without capabilities (setpriv), --ebpf says so in one line, exit 3
  formats          every writer takes the profile of this mode (text, collapsed,
                   speedscope, html, pprof read back by memprof report)
  no-frame-pointers the static program built without frame pointers: the summary's
                   frame-pointer line names its allocating function, which is still the
                   top site (the first frame needs no frame pointer)
  drops            a live map of 16 entries (MEMPROF_EBPF_LIVE_MAP) for a program holding
                   hundreds of samples: the samples lost are counted on the eBPF line and in
                   the profile's health
  sampling-law     100,000 allocations of 4 KiB at 512 KiB: the kernel samples about
                   N (1 - exp(-s/R)) of them (within 6 standard deviations), the library's law
  own-alloc-run    a Rust program whose global allocator is in its own crate (own_alloc),
                   which rustc inlines into every caller at -O3: found through the debug
                   information, the top live site is own_alloc::hold_big, demangled, with
                   100 MiB within 12 %
  own-alloc-attach the same program attached while it waits, exiting while attached
  own-alloc-sizeopt the same at opt-level s, where the allocator's methods stay out of line
                   with their arguments moved: every free is seen, so the whole live heap
                   (not only the top site) is 100 MiB within 12 %
  own-alloc-bump   its bump variant, whose dealloc ignores the block's address: the top site
                   as above, and the summary says that frees are unseen
  own-alloc-no-debug-info the -O3 program without debug information: the summary says
                   its allocations are unseen and to build with -g
  dlopen-attach    dlopen_host attached before it loads libown_alloc.so (own_alloc.rs as
                   a library): once the command says it probed the library, the host runs
                   its work; the top site is own_alloc::hold_big with 100 MiB within 12 %
  dlopen-run       the same with the host started by run --ebpf
  children         fork_hold under run --ebpf with -o p.%p.txt: the child it forks gets a
                   profile of its own, child_site's 100 MiB on top within 12 %; the parent's
                   profile has parent_site and not the child's site
  leaks            steady_leak under run --ebpf: a start-up cache, a site that leaks 64 KiB
                   every 10 ms, and churn; memprof report --view leaks ranks the leaker
                   first, a suspect, and neither the cache nor the churn is one; the run's
                   summary names the leaker among its leak suspects too
"""
import argparse
import ctypes
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
NO_BPF = 3
HELD = 100 << 20
TOLERANCE = 0.12
RATE = "128K"  # 256 KiB blocks are sampled with p = 0.86: the estimate's sd is 2 %


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(SKIP)


def check_bpf(memprof):
    if os.geteuid() != 0:
        skip("not root: no BPF")
    # In a directory of its own: the profile of `true` is written where the command runs.
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([os.path.abspath(memprof), "run", "--ebpf", "--", "true"],
                           capture_output=True, text=True, timeout=60, cwd=tmp)
    if r.returncode == NO_BPF:
        skip(r.stderr.strip())
    if r.returncode != 0:
        fail(f"memprof run --ebpf -- true: exit {r.returncode}: {r.stderr}")


SITE = re.compile(r"^\s+1\. ([0-9.]+) (B|KiB|MiB|GiB) .*?  (\S.*)$", re.M)
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def top_site(text):
    """(bytes, label) of the first site of a text profile's live view."""
    m = SITE.search(text)
    if not m:
        fail("no site in the text profile:\n" + text)
    return float(m.group(1)) * UNITS[m.group(2)], m.group(3).strip()


def expect_top(text, function):
    size, label = top_site(text)
    if label != function:
        fail(f"top site is {label!r}, expected {function!r}:\n{text}")
    if abs(size - HELD) > TOLERANCE * HELD:
        fail(f"{function}: {size / 2**20:.1f} MiB, expected 100 MiB within 12 %:\n{text}")
    print(f"{function}: {size / 2**20:.1f} MiB ({(size - HELD) / HELD:+.1%})")


def run_ebpf(memprof, prog, out, *extra):
    r = subprocess.run([memprof, "run", "--ebpf", "-r", RATE, "-o", out, *extra, "--", prog],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"memprof run --ebpf {prog}: exit {r.returncode}: {r.stderr}")
    return r.stderr


def read(path):
    with open(path) as f:
        return f.read()


class Waiting:
    """A program started with the argument "wait": it says "ready", allocates when told,
    says "done", and exits when told."""

    def __init__(self, argv, preexec_fn=None):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, preexec_fn=preexec_fn)
        self.expect("ready")

    def expect(self, word):
        while True:
            line = self.p.stdout.readline()
            if not line:
                self.p.kill()
                fail(f"the target ended before saying {word!r}")
            if line.strip() == word:
                return

    def go(self):
        self.p.stdin.write("\n")
        self.p.stdin.flush()


def attach(memprof, pid, out):
    """memprof attach --ebpf, returned once its probes are in place."""
    a = subprocess.Popen([memprof, "attach", "--ebpf", "-r", RATE, "-o", out, str(pid)],
                         stderr=subprocess.PIPE, text=True)
    line = a.stderr.readline()
    if "attached to process" not in line:
        a.kill()
        fail("attach --ebpf: " + line + a.stderr.read())
    return a


def case_rust_run(args, tmp):
    out = os.path.join(tmp, "rust.txt")
    err = run_ebpf(args.memprof, args.rust, out)
    if "Rust allocator entry points" not in err:
        fail("the summary does not name the Rust allocator's probes:\n" + err)
    expect_top(read(out), "rust_bump::hold_big")


def attach_until_exit(memprof, program, out):
    """Attaches to `program` started with "wait", lets it allocate and exit while attached;
    returns what attach --ebpf printed."""
    t = Waiting([program, "wait"])
    a = attach(memprof, t.p.pid, out)
    t.go()
    t.expect("done")
    t.go()  # the target exits while attached
    if t.p.wait(timeout=60) != 0:
        fail("the target failed")
    try:
        _, err = a.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        a.kill()
        fail("attach --ebpf did not end when the target exited")
    if a.returncode != 0:
        fail(f"attach --ebpf: exit {a.returncode}: {err}")
    return err


def case_rust_attach(args, tmp):
    out = os.path.join(tmp, "attach.txt")
    err = attach_until_exit(args.memprof, args.rust, out)
    for words in ("exited", "before the probes were attached are unknown"):
        if words not in err:
            fail(f"attach --ebpf does not say {words!r}:\n{err}")
    expect_top(read(out), "rust_bump::hold_big")


def case_static_run(args, tmp):
    out = os.path.join(tmp, "static.txt")
    err = run_ebpf(args.memprof, args.static, out)
    if f"malloc-family entry points ({os.path.basename(args.static)})" not in err:
        fail("the static program's own malloc is not what was probed:\n" + err)
    if "Frame pointers:" in err:
        fail("a program with frame pointers (but for 1 % of its bytes) is said to lack them:\n"
             + err)
    text = read(out)
    expect_top(text, "hold_c_site")
    if "cache_without_frame_pointer" not in text:
        fail("the site without frame pointers is not in the profile:\n" + text)
    first = text[text.index("1. "):]
    if not re.search(r"<- main\b", first.split("\n  2. ")[0]):
        fail("the top site's stack lacks main (frame pointers):\n" + text)


CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE = 0x4000, 0x40000


def case_mount_namespace(args, tmp):
    root = os.path.join(tmp, "root")
    os.mkdir(root)
    shutil.copy(args.static, os.path.join(root, "static_hold"))
    libc = ctypes.CDLL(None, use_errno=True)

    def enter():
        if libc.unshare(CLONE_NEWNS) != 0:
            os._exit(99)
        libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
        os.chroot(root)
        os.chdir("/")

    t = Waiting(["/static_hold", "wait"], preexec_fn=enter)
    if os.readlink(f"/proc/{t.p.pid}/root") == "/":
        fail("the target is not in its own root")
    out = os.path.join(tmp, "ns.txt")
    a = attach(args.memprof, t.p.pid, out)
    t.go()
    t.expect("done")
    a.send_signal(signal.SIGINT)  # while the target's files are still reachable
    _, err = a.communicate(timeout=60)
    t.go()
    t.p.wait(timeout=60)
    if a.returncode != 0:
        fail(f"attach --ebpf: exit {a.returncode}: {err}")
    expect_top(read(out), "hold_c_site")


def case_no_privilege(args, tmp):
    setpriv = shutil.which("setpriv")
    if not setpriv:
        skip("no setpriv")
    r = subprocess.run([setpriv, "--inh-caps=-all", "--bounding-set=-all", "--",
                        os.path.abspath(args.memprof),
                        "run", "--ebpf", "--", "true"], capture_output=True, text=True,
                       timeout=60, cwd=tmp)
    lines = r.stderr.strip().splitlines()
    if r.returncode != NO_BPF or len(lines) != 1 or "may not load BPF" not in lines[0]:
        fail(f"expected one line and exit {NO_BPF}, got exit {r.returncode}: {r.stderr!r}")
    print(lines[0])


def case_formats(args, tmp):
    pb = os.path.join(tmp, "p.pb.gz")
    run_ebpf(args.memprof, args.static, pb)
    r = subprocess.run([args.memprof, "report", "-f", "text", pb], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        fail("memprof report: " + r.stderr)
    expect_top(r.stdout, "hold_c_site")
    for fmt, ext, probe in (("collapsed", ".folded", "hold_c_site "),
                            ("speedscope", ".json", '"hold_c_site"'),
                            ("html", ".html", "hold_c_site")):
        out = os.path.join(tmp, "p" + ext)
        run_ebpf(args.memprof, args.static, out, "-f", fmt)
        if probe not in read(out):
            fail(f"{fmt}: {probe!r} not in {out}")


def case_no_frame_pointers(args, tmp):
    out = os.path.join(tmp, "nofp.txt")
    err = run_ebpf(args.memprof, args.static_nofp, out)
    if not re.search(r"Frame pointers: \d+ of the \d+ functions that called the allocator", err):
        fail("no frame-pointer line in the summary:\n" + err)
    expect_top(read(out), "hold_c_site")


def case_drops(args, tmp):
    out = os.path.join(tmp, "drops.txt")
    env = dict(os.environ, MEMPROF_EBPF_LIVE_MAP="16")
    r = subprocess.run([args.memprof, "run", "--ebpf", "-r", RATE, "-o", out, "--",
                        args.static], capture_output=True, text=True, timeout=120, env=env)
    if r.returncode != 0:
        fail(f"memprof run --ebpf: exit {r.returncode}: {r.stderr}")
    m = re.search(r"eBPF drops: (\d+) samples lost \(live map full (\d+)", r.stderr)
    if not m or int(m.group(2)) == 0:
        fail("no samples lost to the full live map on the eBPF drops line:\n" + r.stderr)
    h = re.search(r"Health: (\d+) samples dropped", read(out))
    if not h or int(h.group(1)) != int(m.group(1)):
        fail(f"the profile's health does not count the {m.group(1)} samples lost:\n" + read(out))
    print(f"{m.group(1)} samples lost, in the health line too")


def case_sampling_law(args, tmp):
    n, size, rate = 100000, 4096, 512 << 10
    out = os.path.join(tmp, "law.txt")
    r = subprocess.run([args.memprof, "run", "--ebpf", "-r", str(rate), "-o", out, "--",
                        args.fixed, str(n), str(size)], capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        fail(f"memprof run --ebpf: exit {r.returncode}: {r.stderr}")
    m = re.search(r"(\d+) allocator calls seen, (\d+) sampled", r.stderr)
    if not m:
        fail("no eBPF probes line:\n" + r.stderr)
    calls, sampled = int(m.group(1)), int(m.group(2))
    if calls < n:
        fail(f"{calls} allocator calls seen, expected at least {n}")
    p = -math.expm1(-size / rate)
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    # Allocations of the C library's start-up add a handful of samples at most.
    if abs(sampled - mean) > 6 * sd + 5:
        fail(f"{sampled} samples of {n} allocations of {size} B, expected {mean:.0f} +- "
             f"{6 * sd:.0f}")
    print(f"{sampled} samples, expected {mean:.0f} (sd {sd:.0f})")


DEBUG_SITES = re.compile(r"(\d+) Rust allocator sites from debug information \(([^)]*)\)")


def case_own_alloc_run(args, tmp):
    out = os.path.join(tmp, "own.txt")
    err = run_ebpf(args.memprof, args.own_alloc, out)
    m = DEBUG_SITES.search(err)
    if not m or os.path.basename(args.own_alloc) not in m.group(2):
        fail("the summary does not name sites from the debug information:\n" + err)
    expect_top(read(out), "own_alloc::hold_big")


def case_own_alloc_attach(args, tmp):
    out = os.path.join(tmp, "own-attach.txt")
    err = attach_until_exit(args.memprof, args.own_alloc, out)
    if not DEBUG_SITES.search(err):
        fail("the summary does not name sites from the debug information:\n" + err)
    expect_top(read(out), "own_alloc::hold_big")


LIVE = re.compile(r"^Estimated live heap: ([0-9.]+) (B|KiB|MiB|GiB) ", re.M)


def case_own_alloc_sizeopt(args, tmp):
    out = os.path.join(tmp, "own-s.txt")
    run_ebpf(args.memprof, args.own_alloc_s, out)
    text = read(out)
    expect_top(text, "own_alloc::hold_big")
    m = LIVE.search(text)
    if not m:
        fail("no live heap estimate in the text profile:\n" + text)
    live = float(m.group(1)) * UNITS[m.group(2)]
    # The churn's blocks were all freed: counting them live would add about 80 MB.
    if abs(live - HELD) > TOLERANCE * HELD:
        fail(f"live heap {live / 2**20:.1f} MiB, expected 100 MiB within 12 % (frees unseen?):\n"
             + text)
    print(f"live heap {live / 2**20:.1f} MiB ({(live - HELD) / HELD:+.1%})")


def case_own_alloc_bump(args, tmp):
    out = os.path.join(tmp, "own-bump.txt")
    err = run_ebpf(args.memprof, args.own_alloc_bump, out)
    if "Rust frees unseen" not in err:
        fail("the summary does not say that the bump allocator's frees are unseen:\n" + err)
    expect_top(read(out), "own_alloc::hold_big")


def case_own_alloc_no_debug_info(args, tmp):
    out = os.path.join(tmp, "own-nodebug.txt")
    err = run_ebpf(args.memprof, args.own_alloc_nodebug, out)
    if not re.search(r"Rust allocations unseen: in own-alloc-nodebug, .*build with -g", err):
        fail("without debug information the summary must say its allocations are unseen and "
             "why:\n" + err)


ADDED = "eBPF probes added in libown_alloc.so"


def wait_for_line(stream, words, what):
    """Reads `stream` until a line holds `words`; fails after 60 s or at its end."""
    end = time.monotonic() + 60
    seen = []
    while time.monotonic() < end:
        ready, _, _ = select.select([stream], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            break
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if words in line:
            return
    fail(f"{what} never said {words!r}:\n" + "".join(seen))


def dlopen_case(args, tmp, out, start):
    """Runs the host through its three steps; `start` returns the command's Popen (stderr
    piped) once the host's "ready" was read (from `host_out`)."""
    cmd, host = start()
    host.go()  # dlopen
    host.expect("loaded")
    wait_for_line(cmd.stderr, ADDED, "memprof")
    host.go()  # allocate
    host.expect("done")
    host.go()  # exit
    try:
        _, err = cmd.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        cmd.kill()
        fail("memprof did not end when the host exited")
    if cmd.returncode != 0:
        fail(f"memprof: exit {cmd.returncode}: {err}")
    expect_top(read(out), "own_alloc::hold_big")


def case_dlopen_attach(args, tmp):
    out = os.path.join(tmp, "dlopen-attach.txt")

    def start():
        host = Waiting([args.dlopen_host, args.own_alloc_lib])
        return attach(args.memprof, host.p.pid, out), host

    dlopen_case(args, tmp, out, start)


class Piped(Waiting):
    """A Waiting program whose pipes are those of another process (memprof run)."""

    def __init__(self, p):
        self.p = p
        self.expect("ready")


def case_dlopen_run(args, tmp):
    out = os.path.join(tmp, "dlopen-run.txt")

    def start():
        p = subprocess.Popen([args.memprof, "run", "--ebpf", "-r", RATE, "-o", out, "--",
                              args.dlopen_host, args.own_alloc_lib], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return p, Piped(p)

    dlopen_case(args, tmp, out, start)


def case_children(args, tmp):
    r = subprocess.run([args.memprof, "run", "--ebpf", "-r", RATE, "-o",
                        os.path.join(tmp, "p.%p.txt"), "--", args.fork],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"memprof run --ebpf fork_hold: exit {r.returncode}: {r.stderr}")
    m = re.search(r"^child (\d+)$", r.stdout, re.M)
    if not m:
        fail("fork_hold did not say its child's pid:\n" + r.stdout)
    child = os.path.join(tmp, f"p.{m.group(1)}.txt")
    profiles = sorted(f for f in os.listdir(tmp) if f.startswith("p."))
    if not os.path.exists(child) or len(profiles) != 2:
        fail(f"expected the parent's and the child's profile, found {profiles}:\n" + r.stderr)
    text = read(child)
    expect_top(text, "hold")
    if "child_site" not in text.split("\n  2. ")[0]:
        fail("the child's top site is not child_site's:\n" + text)
    parent = read(os.path.join(tmp, next(f for f in profiles if f != os.path.basename(child))))
    if "parent_site" not in parent or "child_site" in parent:
        fail("the parent's profile should have parent_site and not child_site:\n" + parent)


LEAKING = re.compile(r"^\s*\d+\. leaking ~.*  (\S.*)$", re.M)


def case_leaks(args, tmp):
    pb = os.path.join(tmp, "leak.pb.gz")
    summary = run_ebpf(args.memprof, args.leak, pb)
    r = subprocess.run([args.memprof, "report", "--view", "leaks", "-f", "text", pb],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail("memprof report --view leaks: " + r.stderr)
    suspects = [site.strip() for site in LEAKING.findall(r.stdout)]
    if not suspects or suspects[0] != "leak_site":
        fail(f"the leaks view should rank leak_site first, it has {suspects}:\n" + r.stdout)
    for other in ("cache_site", "churn_site"):
        if other in suspects:
            fail(f"{other} is not a leak but is a suspect:\n" + r.stdout)
    if "leak_site" not in [site.strip() for site in LEAKING.findall(summary)]:
        fail("the run's summary does not name leak_site as a leak suspect:\n" + summary)
    print("leak suspects: " + ", ".join(suspects))


CASES = {
    "rust-run": (case_rust_run, "rust"),
    "rust-attach": (case_rust_attach, "rust"),
    "static-run": (case_static_run, "static"),
    "mount-namespace": (case_mount_namespace, "static"),
    "no-privilege": (case_no_privilege, None),
    "formats": (case_formats, "static"),
    "no-frame-pointers": (case_no_frame_pointers, "static_nofp"),
    "drops": (case_drops, "static"),
    "sampling-law": (case_sampling_law, "fixed"),
    "own-alloc-run": (case_own_alloc_run, "own_alloc"),
    "own-alloc-attach": (case_own_alloc_attach, "own_alloc"),
    "own-alloc-sizeopt": (case_own_alloc_sizeopt, "own_alloc_s"),
    "own-alloc-bump": (case_own_alloc_bump, "own_alloc_bump"),
    "own-alloc-no-debug-info": (case_own_alloc_no_debug_info, "own_alloc_nodebug"),
    "dlopen-attach": (case_dlopen_attach, "own_alloc_lib"),
    "dlopen-run": (case_dlopen_run, "own_alloc_lib"),
    "children": (case_children, "fork"),
    "leaks": (case_leaks, "leak"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprof", required=True)
    ap.add_argument("--rust")
    ap.add_argument("--static")
    ap.add_argument("--static-nofp")
    ap.add_argument("--fixed")
    ap.add_argument("--fork")
    ap.add_argument("--leak")
    ap.add_argument("--own-alloc")
    ap.add_argument("--own-alloc-s")
    ap.add_argument("--own-alloc-bump")
    ap.add_argument("--own-alloc-nodebug")
    ap.add_argument("--own-alloc-lib")
    ap.add_argument("--dlopen-host")
    ap.add_argument("case", choices=sorted(CASES))
    args = ap.parse_args()
    fn, needs = CASES[args.case]
    if needs and not getattr(args, needs):
        skip(f"no {needs} program in this build")
    if args.case != "no-privilege":
        check_bpf(args.memprof)
    elif os.geteuid() != 0:
        skip("not root")
    with tempfile.TemporaryDirectory(prefix="memprof-ebpf-") as tmp:
        fn(args, tmp)
    print("ok")


if __name__ == "__main__":
    main()
