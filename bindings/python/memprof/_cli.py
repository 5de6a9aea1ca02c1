# SPDX-License-Identifier: MIT
"""``python3 -m memprof run``: profiles a Python script (or module) in this interpreter.

It works like ``memprof run`` for native programs, but in-process and without LD_PRELOAD:
it starts the profiler, runs the script with runpy as ``__main__`` (sys.argv and sys.path[0]
set as ``python3 script.py args`` would), stops when the script ends (normally, through
sys.exit() or an exception), writes the profile (pprof by default, to
``memprof.<script>.<pid>.pb.gz``) and prints memprof run's summary to standard error (with
the sites named by the script's own Python frames). The exit status is the script's own.

The profile is the heap as the script left it: its module globals are kept alive until the
snapshot is taken (runpy hands back a copy of them when the script returns, and the
exception that ended it holds them through its traceback), as they are when a program
exits. --interval and --signal rewrite the profile while the script runs, as
``memprof run``'s do.
"""

from __future__ import annotations

import argparse
import os
import runpy
import signal
import sys
import tempfile
import threading
import traceback
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _api

USAGE = """\
usage: python3 -m memprof run [-r RATE] [-o FILE] [-f FORMAT] [-i SEC] [-s SIG]
                              [--gc-tracking] [--max-frames N] [-u dwarf|fp] [-q]
                              (SCRIPT | -m MODULE) [ARGS...]

Runs a Python script (or module) with the heap profiler started, then writes its profile
and prints a summary of it to standard error.

options:
  -r, --rate RATE      mean bytes between samples: digits with an optional K, M or G suffix
                       (KiB, MiB, GiB), 1 to 2^40; default MEMPROF_RATE, else 512K
  -o, --output FILE    the profile; %p is replaced by the pid; default
                       memprof.<SCRIPT's name>.<pid>.pb.gz (extension from --format)
  -f, --format F       pprof, speedscope, collapsed, text or html; default from FILE's
                       extension, else pprof
  -i, --interval SEC   also rewrite the profile every SEC seconds (1 to 86400) while the
                       script runs
  -s, --signal SIG     also rewrite the profile whenever the process receives signal SIG
                       (USR2, SIGUSR2 or a number); replaces the script's handler for SIG
  --gc-tracking        also record garbage collections (for allocations_surviving_gc())
  --max-frames N       native frames captured per sample (1..256, default 64)
  -u, --unwind M       dwarf or fp: how native stacks are walked (default dwarf)
  -q, --quiet          no summary
  -m MODULE            run a module as `python3 -m MODULE` would
  -h, --help           show this help
"""

_VALUE_OPTIONS = {"-r", "--rate", "-o", "--output", "-f", "--format", "--max-frames", "-u",
                  "--unwind", "-i", "--interval", "-s", "--signal"}
_FLAG_OPTIONS = {"-q", "--quiet", "--gc-tracking", "-h", "--help"}
_SUMMARY_TOP = 5


class UsageError(Exception):
    pass


def parse_rate(text: str) -> int:
    """'65536', '64K', '64KiB', '1M', '2G' -> bytes (1 .. 2^40): the library's grammar
    (memprof_parse_rate()), the same as `memprof run -r` and MEMPROF_RATE."""
    try:
        return _api._c.parse_rate(text)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _split(argv: Sequence[str]) -> Tuple[List[str], Optional[str], Optional[str], List[str]]:
    """Options before the target; the script or -m module; the target's arguments."""
    opts: List[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a == "-m":
            if i + 1 >= len(argv):
                raise UsageError("-m needs a module name")
            return opts, None, argv[i + 1], list(argv[i + 2 :])
        if a.startswith("-m") and len(a) > 2 and not a.startswith("--"):
            return opts, None, a[2:], list(argv[i + 1 :])
        name = a.split("=", 1)[0]
        if a in _VALUE_OPTIONS:  # -r 64K, --rate 64K
            if i + 1 >= len(argv):
                raise UsageError(f"{a} needs a value")
            opts += [a, argv[i + 1]]
            i += 2
            continue
        if name in _VALUE_OPTIONS and name.startswith("--"):  # --rate=64K
            opts.append(a)
            i += 1
            continue
        if a[:2] in ("-r", "-o", "-f", "-u", "-i", "-s") and len(a) > 2:  # -r64K
            opts += [a[:2], a[2:]]
            i += 1
            continue
        if a in ("-h", "--help"):
            return opts + [a], None, None, []
        if name in _FLAG_OPTIONS:
            opts.append(a)
            i += 1
            continue
        if a.startswith("-") and a != "-":
            raise UsageError(f"unknown option {a}")
        break
    if i >= len(argv):
        raise UsageError("missing the script to run")
    return opts, argv[i], None, list(argv[i + 1 :])


def parse_interval(text: str) -> int:
    """'60' -> 60: whole seconds, 1 to 86400, as `memprof run --interval`."""
    t = text.strip()
    if not t.isdigit() or not 1 <= int(t) <= 86400:
        raise UsageError(f"invalid interval {text!r}: whole seconds from 1 to 86400")
    return int(t)


def parse_signal(text: str) -> signal.Signals:
    """'USR2', 'SIGUSR2' or '12' -> the signal, as `memprof run --signal`."""
    t = text.strip()
    try:
        if t.isdigit():
            return signal.Signals(int(t))
        name = t.upper()
        return signal.Signals[name if name.startswith("SIG") else "SIG" + name]
    except (KeyError, ValueError):
        raise UsageError(f"invalid signal {text!r}: a name such as USR2, or a number")


class _Rewriter:
    """Rewrites the profile while the script runs: every `interval` seconds (a daemon
    thread) and on `signum` (a Python signal handler, run by the main thread between
    bytecodes). Writing is a snapshot of the library's and its writer: the file is replaced
    by rename, so a reader never sees half of one."""

    def __init__(self, output: str, fmt: str, interval: Optional[int],
                 signum: Optional[signal.Signals]):
        self._output, self._format = output, _api.FORMATS[fmt]
        # Reentrant: a second signal may interrupt the handler's own write.
        self._lock = threading.RLock()
        self._done = threading.Event()
        self._thread = None
        self._signum, self._old_handler = signum, None
        if interval:
            self._thread = threading.Thread(target=self._every, args=(interval,),
                                            name="memprof-interval", daemon=True)
            self._thread.start()
        if signum is not None:
            self._old_handler = signal.signal(signum, self._on_signal)

    def write(self) -> None:
        # A signal that arrives while the interval thread writes waits for it.
        with self._lock:
            try:
                _api._c.snapshot().write(self._output, self._format)
            except (OSError, RuntimeError) as e:
                _err(f"cannot write the profile: {e}")

    def _every(self, interval: int) -> None:
        while not self._done.wait(interval):
            self.write()

    def _on_signal(self, signum, frame) -> None:
        self.write()

    def close(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        if self._signum is not None and signal.getsignal(self._signum) == self._on_signal:
            signal.signal(self._signum, self._old_handler)


def _format_bytes(n: float) -> str:
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    u = 0
    while n >= 1024 and u + 1 < len(units):
        n /= 1024
        u += 1
    return f"{int(n)} B" if u == 0 else f"{n:.1f} {units[u]}"


def _format_from_path(path: str) -> Optional[str]:
    """The format a path's extension names (as the library's MEMPROF_FORMAT_AUTO)."""
    code = _api._c.format_from_path(path)
    return next((name for name, c in _api.FORMATS.items() if c == code), None)


def _heading(snap: _api.HeapSnapshot) -> Optional[str]:
    """The heading memprof run's summary starts with (live heap, peak and when, allocated in
    all, health): the first paragraph of the library's text writer, which writes it for both.
    None if the text cannot be written."""
    with tempfile.TemporaryDirectory(prefix="memprof-") as d:
        path = os.path.join(d, "summary.txt")
        try:
            snap.save(path, "text")
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except (OSError, NotImplementedError, ValueError, RuntimeError):
            return None
    return text.split("\n\n", 1)[0].rstrip("\n") + "\n"


def _site_lines(title: str, sites: Sequence[Any], top: int) -> List[str]:
    """A section of sites merged by the line they are attributed to (function, file, line),
    largest first: their estimates add up, and so do their variances."""
    groups: Dict[tuple, List[float]] = {}
    for s in sites:
        g = groups.setdefault((s.function, s.file, s.line), [0, 0.0, 0])
        sd = (s.estimated_bytes_high - s.estimated_bytes) / 1.959964
        g[0] += s.estimated_bytes
        g[1] += sd * sd
        g[2] += s.samples
    lines = [title]
    for (function, file, line), (est, var, samples) in sorted(
            groups.items(), key=lambda kv: kv[1][0], reverse=True)[:top]:
        low, high = _api._interval(est, var)
        where = f" ({file}:{line})" if file else ""
        lines.append(f"  {_format_bytes(est):>10}  {function}{where}  (95% interval "
                     f"{_format_bytes(low)} to {_format_bytes(high)}, {samples} samples)")
    return lines


def summary(snap: _api.HeapSnapshot, top: int = _SUMMARY_TOP) -> str:
    """memprof run's exit summary, with Python attribution: the heading (live heap, peak and
    when, allocated in all, health), the top sites at the peak when it was above the heap at
    the end, the top sites live at the end, and the leak suspects when there are any. Sites
    are named by the frame of the script's own code they are attributed to
    (top_allocators()'s rule), one line each."""
    heading = _heading(snap)
    lines = [heading.rstrip("\n")] if heading else [
        f"Estimated live heap: {_format_bytes(snap.estimated_heap_bytes)} (95% interval "
        f"{_format_bytes(snap.estimated_heap_bytes_low)} to "
        f"{_format_bytes(snap.estimated_heap_bytes_high)}), ~{snap.estimated_count} "
        f"allocations, from {snap.live_samples} live samples "
        f"(sampling rate {snap.sampling_rate_bytes} bytes)"
    ]
    if snap.low_confidence:
        lines.append(
            "Note: fewer than 100 live samples; treat the estimates as rough (a lower "
            "sampling rate, -r, gives more precision)."
        )
    health = snap.unwind_health
    if health.recommendation:
        lines.append(f"Note: {health.recommendation}")
    live = snap.estimated_heap_bytes
    peak = snap.peak
    # As memprof run: the peak's sites only when it was above the heap at the end by more
    # than rounding and the recording margin (else they are the live ones).
    if peak.bytes > live + live // 32:
        sites = snap.sites("peak")
        if sites:
            lines.append("")
            lines += _site_lines(f"Top sites by estimated bytes live at the peak "
                                 f"({_format_bytes(peak.bytes)} at "
                                 f"{peak.time_seconds:.2f} s):", sites, top)
    lines.append("")
    if not snap.sites("alloc", n=1):
        lines.append(f"No allocation was sampled: the script allocated too little for a "
                     f"sample every {_format_bytes(snap.sampling_rate_bytes)} on average "
                     f"(-r sets a lower rate).")
    elif snap.live_samples == 0:
        lines.append("Nothing sampled was live at the end: the script freed what it allocated.")
    else:
        lines += _site_lines("Top sites by estimated live bytes:", snap.top_allocators(top), top)
    leaks = snap.sites("leaks")
    if leaks:
        lines.append("")
        lines += _site_lines("Leak suspects (estimated bytes live):", leaks, top)
    return "\n".join(lines) + "\n"


def _err(msg: str) -> None:
    sys.stderr.write(f"memprof: {msg}\n")
    sys.stderr.flush()


def run(argv: Sequence[str]) -> int:
    opts, script, module, args = _split(argv)
    p = argparse.ArgumentParser(prog="python3 -m memprof run", add_help=False)
    p.add_argument("-r", "--rate")
    p.add_argument("-o", "--output")
    p.add_argument("-f", "--format")
    p.add_argument("-i", "--interval")
    p.add_argument("-s", "--signal")
    p.add_argument("-q", "--quiet", action="store_true")
    p.add_argument("--gc-tracking", action="store_true")
    p.add_argument("--max-frames", type=int)
    p.add_argument("-u", "--unwind", choices=["dwarf", "fp"])
    p.add_argument("-h", "--help", action="store_true")
    ns = p.parse_args(opts)
    if ns.help:
        sys.stdout.write(USAGE)
        return 0
    assert script is not None or module is not None
    try:
        _api._check_engine_options(ns.max_frames, ns.unwind)
    except ValueError as e:
        raise UsageError(str(e))
    rate_text = ns.rate or os.environ.get("MEMPROF_RATE") or "512K"
    rate = parse_rate(rate_text)
    interval = parse_interval(ns.interval) if ns.interval is not None else None
    signum = parse_signal(ns.signal) if ns.signal is not None else None
    fmt = ns.format
    if fmt is not None and fmt not in _api.FORMATS:
        raise UsageError(f"unknown format {fmt!r}: expected one of {', '.join(_api.FORMATS)}")
    if fmt is None:
        fmt = (_format_from_path(ns.output) if ns.output else None) or "pprof"
    pid = os.getpid()
    name = module if module else os.path.basename(script)
    if name.endswith(".py"):
        name = name[:-3]
    output = ns.output or f"memprof.{name}.%p{_api.EXTENSIONS[fmt]}"
    output = output.replace("%p", str(pid))

    if script is not None:
        if not os.path.exists(script):
            raise UsageError(f"cannot run {script}: no such file")
        sys.argv = [script] + args
        sys.path[0] = os.path.dirname(os.path.abspath(script))
    else:
        sys.argv = [module] + args
        sys.path[0] = os.getcwd()

    _api._start_bytes(rate, ns.gc_tracking, ns.max_frames, ns.unwind)
    rewriter = _Rewriter(output, fmt, interval, signum)
    status = 0
    # What keeps the script's globals alive until the snapshot: the copy runpy returns, or
    # the exception that ended the script (its traceback holds the module's frame).
    script_globals = None
    ended_by = None
    try:
        if script is not None:
            script_globals = runpy.run_path(script, run_name="__main__")
        else:
            script_globals = runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        ended_by = e
        code = e.code
        if code is None:
            status = 0
        elif isinstance(code, int):
            status = code
        else:
            sys.stderr.write(f"{code}\n")
            status = 1
    except BaseException as e:  # noqa: B902 - report it like the interpreter, then write the profile
        ended_by = e
        traceback.print_exc()
        status = 1
    finally:
        rewriter.close()
        if _api.get_stats().state == "active":
            _api.stop()
    target = script if script is not None else f"-m {module}"
    snap = _api.get_snapshot()
    del script_globals, ended_by
    try:
        snap.save(output, fmt)
    except (OSError, NotImplementedError, ValueError) as e:
        _err(f"cannot write the profile of {target}: {e}")
        return status or 1
    if not ns.quiet:
        _err(f"profile of {target} (pid {pid}) written to {output}")
        sys.stderr.write(summary(snap))
        sys.stderr.flush()
    return status


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0 if argv else 2
    if argv[0] != "run":
        _err(f"unknown command {argv[0]!r} (expected: run)")
        sys.stderr.write(USAGE)
        return 2
    try:
        return run(argv[1:])
    except UsageError as e:
        _err(str(e))
        sys.stderr.write("Try 'python3 -m memprof run --help'.\n")
        return 2
    except RuntimeError as e:
        _err(str(e))
        return 1
