# SPDX-License-Identifier: MIT
"""``python3 -m memprof run``: profiles a script in-process with its own sys.argv, writes
the profile (pprof by default, memprof.<script>.<pid>.pb.gz, or -o/--format), prints a
summary naming the script's functions, keeps the script's exit status, and reports usage
errors with status 2."""

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


@pytest.mark.parametrize("args,words", [
    ([], "usage"),
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
