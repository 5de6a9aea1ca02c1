# SPDX-License-Identifier: MIT
"""``python3 -m memprof run``: profiles a script in-process with its own sys.argv, writes
the profile (pprof by default, memprof.<script>.<pid>.pb.gz, or -o/--format), prints a
summary naming the script's functions (memprof run's: the peak and its sites too), keeps the script's exit status, profiles the heap the
script leaves (its globals still alive, however it ends), rewrites the profile while the
script runs (--interval, --signal), and reports usage errors with status 2."""

import glob
import os
import re

import pytest

from conftest import listcomp_frames

SCRIPT = """
import sys

def build(n):
    return [bytearray(1 << 20) for _ in range(n)]      # LINE_BUILD

data = build(int(sys.argv[1]))
print("argv", sys.argv[1:], "name", __name__)
if len(sys.argv) > 2:
    if sys.argv[2] == "raise":
        raise ValueError("boom")
    sys.exit(int(sys.argv[2]))
"""


@pytest.fixture
def script(py):
    return py.script(SCRIPT, name="app.py")


def _m(py, *args, check=False):
    return py.run(["-m", "memprof", *args], check=check)


def test_run_default_output_and_summary(py, script, tmp_path):
    r = _m(py, "run", "-r", "64K", str(script), "24", check=True)
    assert "argv ['24'] name __main__" in r.stdout
    files = glob.glob(str(tmp_path / "memprof.app.*.pb.gz"))
    assert len(files) == 1 and os.path.getsize(files[0]) > 0
    pid = re.search(r"memprof\.app\.(\d+)\.pb\.gz", files[0]).group(1)
    assert f"(pid {pid}) written to memprof.app.{pid}.pb.gz" in r.stderr
    assert "Estimated live heap" in r.stderr
    line = next(i for i, l in enumerate(SCRIPT.splitlines(), 1) if "LINE_BUILD" in l)
    # The summary names the script's function with its file and line.
    name = re.escape(listcomp_frames("build")[0])
    assert re.search(rf"{name} \(.*app\.py:{line}\)", r.stderr), r.stderr
    m = re.search(r"Estimated live heap: ([\d.]+) MiB", r.stderr)
    assert m and 20 <= float(m.group(1)) <= 30, r.stderr


@pytest.mark.parametrize("fmt,ext", [("collapsed", ".folded"), ("text", ".txt"),
                                     ("speedscope", ".json")])
def test_run_output_and_format(py, script, tmp_path, fmt, ext):
    out = tmp_path / f"prof-%p{ext}"
    r = _m(py, "run", "-o", str(out), "--format", fmt, "-q", str(script), "4", check=True)
    assert r.stderr == ""
    files = glob.glob(str(tmp_path / f"prof-*{ext}"))
    assert len(files) == 1 and os.path.getsize(files[0]) > 0
    if fmt == "collapsed":
        assert "build" in open(files[0]).read()


def test_run_format_from_extension(py, script, tmp_path):
    _m(py, "run", "-o", str(tmp_path / "x.txt"), "-q", str(script), "2", check=True)
    assert "Estimated" in (tmp_path / "x.txt").read_text() or (tmp_path / "x.txt").stat().st_size


def test_run_keeps_exit_status_and_writes_the_profile(py, script, tmp_path):
    r = _m(py, "run", "-o", str(tmp_path / "exit.pb.gz"), str(script), "2", "3")
    assert r.returncode == 3
    assert (tmp_path / "exit.pb.gz").stat().st_size > 0
    r = _m(py, "run", "-o", str(tmp_path / "raise.pb.gz"), str(script), "2", "raise")
    assert r.returncode == 1
    assert "ValueError: boom" in r.stderr
    assert (tmp_path / "raise.pb.gz").stat().st_size > 0


def test_run_module(py, tmp_path):
    (tmp_path / "appmod.py").write_text("x = [bytearray(1 << 20) for _ in range(8)]\n")
    r = _m(py, "run", "-r", "64K", "-m", "appmod", check=True)
    assert "profile of -m appmod" in r.stderr
    assert glob.glob(str(tmp_path / "memprof.appmod.*.pb.gz"))


PEAKED = """
def churn():
    big = [bytearray(1 << 20) for _ in range(40)]      # LINE_CHURN
    return len(big)

def hold():
    return [bytearray(1 << 20) for _ in range(8)]      # LINE_HOLD

churn()
kept = hold()
"""


def test_run_summary_is_memprof_runs(py, tmp_path):
    # The heading of memprof run's summary (peak, allocated in all, health), then the sites
    # at the peak (40 MiB built and dropped) and those live at the end (8 MiB kept).
    script = py.script(PEAKED, name="peaked.py")
    r = _m(py, "run", "-r", "64K", "-o", str(tmp_path / "p.pb.gz"), str(script), check=True)
    err = r.stderr
    assert re.search(r"^Peak: [\d.]+ MiB .* allocated in total: [\d.]+ MiB$", err, re.M), err
    assert re.search(r"^Health: ", err, re.M), err
    peak, _, live = err.partition("Top sites by estimated live bytes:")
    assert "Top sites by estimated bytes live at the peak" in peak, err

    def site(text, enclosing, marker):
        line = next(i for i, l in enumerate(PEAKED.splitlines(), 1) if marker in l)
        name = re.escape(listcomp_frames(enclosing)[0])
        return re.search(rf"MiB  {name} \(.*peaked\.py:{line}\)", text)

    assert site(peak, "churn", "LINE_CHURN"), err
    assert site(live, "hold", "LINE_HOLD") and not site(live, "churn", "LINE_CHURN"), err


# No function refers to the globals, so nothing but the profiler's runner keeps them alive
# once the script has ended (a function would, through a reference cycle, until the next
# collection).
HOLDER = """
import sys
data = {i: str(i) for i in range(200_000)}        # ~27 MiB held to the end
if sys.argv[1] == "exit":
    sys.exit(0)
if sys.argv[1] == "raise":
    raise ValueError("boom")
"""


@pytest.mark.parametrize("ending", ["return", "exit", "raise"])
def test_run_profiles_the_globals_the_script_leaves(py, tmp_path, ending):
    holder = py.script(HOLDER, name="holder.py")
    r = _m(py, "run", "-r", "64K", "-o", str(tmp_path / "h.pb.gz"), str(holder), ending)
    m = re.search(r"Estimated live heap: ([\d.]+) MiB", r.stderr)
    assert m and float(m.group(1)) >= 15, r.stderr


def test_run_module_profiles_its_globals(py, tmp_path):
    (tmp_path / "holdmod.py").write_text(HOLDER.replace("sys.argv[1]", "'return'"))
    r = _m(py, "run", "-r", "64K", "-o", str(tmp_path / "m.pb.gz"), "-m", "holdmod", check=True)
    m = re.search(r"Estimated live heap: ([\d.]+) MiB", r.stderr)
    assert m and float(m.group(1)) >= 15, r.stderr


# Waits (a bounded poll, not a timing assertion) until the profile exists while the script
# still runs, after sending itself the signal when asked to.
REWRITTEN = """
import os, signal, sys, time
kept = [bytearray(1 << 20) for _ in range(4)]
if sys.argv[2] == "signal":
    os.kill(os.getpid(), signal.SIGUSR2)
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
print("written while running:", os.path.exists(sys.argv[1]))
"""


@pytest.mark.parametrize("how,option", [("interval", ["--interval", "1"]),
                                        ("signal", ["--signal", "USR2"])])
def test_run_rewrites_the_profile_while_the_script_runs(py, tmp_path, how, option):
    script = py.script(REWRITTEN, name="rewritten.py")
    out = tmp_path / "live.pb.gz"
    r = _m(py, "run", "-q", "-o", str(out), *option, str(script), str(out), how, check=True)
    assert "written while running: True" in r.stdout, r.stderr


@pytest.mark.parametrize("args,words", [
    ([], "usage"),
    (["run", "-i", "0", "x.py"], "invalid interval"),
    (["run", "--signal", "NOSUCH", "x.py"], "invalid signal"),
    (["run"], "missing the script"),
    (["run", "-r", "0", "x.py"], "invalid rate"),
    (["run", "--format", "png", "x.py"], "unknown format"),
    (["run", "--bogus", "x.py"], "unknown option"),
    (["run", "--max-frames", "0", "x.py"], "max_frames"),
    (["run", "-u", "lbr", "x.py"], "invalid choice"),
    (["run", "no-such-script.py"], "no such file"),
    (["frobnicate"], "unknown command"),
])
def test_usage_errors(py, args, words):
    r = _m(py, *args)
    assert r.returncode == 2
    assert words in (r.stderr + r.stdout)


def test_help(py):
    r = _m(py, "run", "--help", check=True)
    assert "python3 -m memprof run" in r.stdout
