# SPDX-License-Identifier: MIT
"""``memprof run -- python3 script.py`` with no change to the script (issue 20, item 2).

memprof run sees that the program is a Python interpreter and puts its bootstrap first on
PYTHONPATH; the bootstrap's sitecustomize loads the binding built for the interpreter under
test (from the build tree: PYTHONPATH and LD_LIBRARY_PATH are removed here, so nothing but
the bootstrap can find it), which joins the plugin's engine with Python frames and the PyMem
hooks. Checked for each interpreter the binding is built for:

- accuracy: a script holding ~100 MB in small objects (dicts of short strings, which
  pymalloc keeps in mmap'ed arenas the plugin alone never sees) and 100 MB in bytearrays
  to its end: the live estimate of the exit-time profile (written by the bootstrap's last
  atexit handler, before the interpreter's finalization frees the objects) and the peak
  estimate are within 12 % of what tracemalloc counts for the same script in a separate run
  (every Python allocation, exact sizes); the top sites are the script's functions, with
  their files and lines;
- the interpreter is recognised by name, through env, and from a script's #! line;
- --no-runtime leaves the interpreter alone (no Python frames in the sites);
- a script that calls memprof.start() and uses MemoryProfiler joins instead of failing;
- a sitecustomize of the user's still runs (the bootstrap imports the one it hides);
- the exit-time profile follows the program's own atexit handlers.

The summary is read from memprof run's standard error: the "Estimated live heap:" and "Peak:"
lines and the first block of sites.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import PYTHON, base_env

MEMPROF = os.environ.get("MEMPROF_TEST_COMMAND", "")

pytestmark = pytest.mark.skipif(
    not (MEMPROF and os.path.exists(MEMPROF)), reason="the memprof command was not built"
)

HOLD = '''
import os, sys
def small_objects():
    out = []
    for i in range(300000):
        out.append({"k": "v%d" % i, "w": "x%d" % i})  # LINE_SMALL
    return out

def buffers():
    out = []
    for _ in range(1000):
        out.append(bytearray(100_000))                 # LINE_BUFFERS
    return out

a = small_objects()
b = buffers()
if os.environ.get("HOLD_TRUTH"):
    import tracemalloc
    print(tracemalloc.get_traced_memory()[0])
'''

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def line_of(marker: str, text: str = HOLD) -> int:
    return next(i for i, l in enumerate(text.splitlines(), 1) if marker in l)


def run_env() -> dict:
    env = base_env()
    # Only the bootstrap may find the binding.
    env.pop("PYTHONPATH", None)
    env.pop("LD_LIBRARY_PATH", None)
    return env


def memprof_run(tmp_path: Path, argv, options=(), env=None, check=True):
    r = subprocess.run([MEMPROF, "run", "-r", "64K", "-o", str(tmp_path / "out.pb.gz"),
                        *options, "--", *argv], env=env or run_env(), capture_output=True,
                       text=True, timeout=300, cwd=str(tmp_path))
    if check and r.returncode != 0:
        pytest.fail(f"memprof run exited with {r.returncode}\n{r.stderr[-4000:]}")
    return r


def peak_bytes(summary: str) -> float:
    # The peak has its own line ("Peak: X ...") unless nothing sampled was live at the
    # snapshot, which an interpreter's teardown may leave; then the heading line names it
    # ("... 0 B live at the snapshot; peak X ...").
    m = re.search(r"(?:^Peak: |^Estimated live heap: 0 B live at the snapshot; peak )"
                  r"([\d.]+) (B|KiB|MiB|GiB)", summary, re.M)
    assert m, summary
    return float(m.group(1)) * UNITS[m.group(2)]


def live_bytes(summary: str) -> float:
    m = re.search(r"^Estimated live heap: ([\d.]+) (B|KiB|MiB|GiB)", summary, re.M)
    assert m, summary
    return float(m.group(1)) * UNITS[m.group(2)]


def site_bytes(site: str) -> float:
    """The estimate a site of a summary list starts with ("  2. 90.6 MiB (95% ...")."""
    m = re.match(r" *\d+\. ([\d.]+) (B|KiB|MiB|GiB)", site)
    assert m, site
    return float(m.group(1)) * UNITS[m.group(2)]


def first_sites(summary: str) -> list:
    """The text of each site of the summary's first list (live, or at the peak when nothing
    is live), in order."""
    parts = re.split(r"^Top sites by [^\n]*\n", summary, flags=re.M)
    assert len(parts) > 1, summary
    return re.findall(r"^ *\d+\. .*?(?=^ *\d+\. |\Z)", parts[1], re.M | re.S)


@pytest.fixture
def hold(tmp_path) -> Path:
    path = tmp_path / "hold.py"
    path.write_text(HOLD)
    return path


def test_accuracy_and_python_sites_with_no_code_change(tmp_path, hold):
    env = run_env()
    env.update(HOLD_TRUTH="1", PYTHONTRACEMALLOC="1")
    truth = int(subprocess.run([PYTHON, str(hold)], env=env, capture_output=True, text=True,
                               check=True, timeout=300).stdout.split()[-1])
    r = memprof_run(tmp_path, [PYTHON, str(hold)])
    assert "no Python binding" not in r.stderr, r.stderr
    for estimate in (live_bytes(r.stderr), peak_bytes(r.stderr)):
        assert abs(estimate - truth) <= 0.12 * truth, (estimate, truth, r.stderr[:3000])
    # The two sites are the script's two functions, with their lines (either may be larger,
    # by interpreter version).
    top = first_sites(r.stderr)[:2]
    small = [t for t in top if "small_objects" in t]
    big = [t for t in top if "buffers" in t]
    assert small and big, top
    assert f"hold.py:{line_of('LINE_SMALL')}" in small[0], small[0]
    assert f"hold.py:{line_of('LINE_BUFFERS')}" in big[0], big[0]


def test_the_exit_profile_comes_after_the_programs_own_atexit_handlers(tmp_path):
    script = tmp_path / "handler.py"
    script.write_text(HOLD + """
import atexit
atexit.register(b.clear)  # the program lets its buffers go at its end
""")
    memprof_run(tmp_path, [PYTHON, str(script)])
    report = subprocess.run([MEMPROF, "report", "--view", "live", "-f", "text",
                             str(tmp_path / "out.pb.gz")], capture_output=True, text=True,
                            timeout=120, check=True).stdout
    live = first_sites(report)
    assert any("small_objects" in t for t in live[:1]), report[:3000]
    # What buffers() left: at most its emptied list object, if that happened to be sampled.
    left = sum(site_bytes(t) for t in live if "buffers" in t)
    assert left < 1 << 20, report[:3000]


@pytest.mark.parametrize("how", ["env", "shebang"])
def test_the_interpreter_is_recognised_through_env_and_shebang(tmp_path, hold, how):
    if how == "env":
        argv = ["env", "A=1", PYTHON, str(hold)]
    else:
        script = tmp_path / "hold_script"
        script.write_text(f"#!{PYTHON}\n" + HOLD)
        script.chmod(0o755)
        argv = [str(script)]
    r = memprof_run(tmp_path, argv)
    assert any("small_objects" in t for t in first_sites(r.stderr)[:2]), r.stderr[:3000]


def test_no_runtime_leaves_the_interpreter_alone(tmp_path, hold):
    r = memprof_run(tmp_path, [PYTHON, str(hold)], options=["--no-runtime"])
    # No Python frame names a site: the plugin alone sees the interpreter's C functions.
    assert "small_objects" not in r.stderr and "hold.py:" not in r.stderr, r.stderr[:3000]


JOINS = '''
import warnings, memprof
memprof.start(sampling_rate_kb=16)
with memprof.MemoryProfiler() as mp:
    kept = [bytearray(100_000) for _ in range(300)]
print(mp.allocated_bytes, mp.live_bytes, memprof.get_stats().state)
'''


def test_a_script_that_starts_memprof_joins_the_run(tmp_path):
    script = tmp_path / "joins.py"
    script.write_text(JOINS)
    r = memprof_run(tmp_path, [PYTHON, str(script)])
    assert r.stderr.count("joined the running profile") == 1, r.stderr
    assert "ignored" not in r.stderr and "already active" not in r.stderr, r.stderr
    allocated, live, state = r.stdout.split()
    assert state == "active"
    assert 20e6 <= int(live) <= 45e6 and 20e6 <= int(allocated) <= 45e6, r.stdout


def test_the_users_sitecustomize_still_runs(tmp_path, hold):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nprint('USER-SITECUSTOMIZE', flush=True)\n")
    env = run_env()
    env["PYTHONPATH"] = str(site)
    r = memprof_run(tmp_path, [PYTHON, str(hold)], env=env)
    assert "USER-SITECUSTOMIZE" in r.stdout, r.stdout + r.stderr
    assert any("small_objects" in t for t in first_sites(r.stderr)[:2]), r.stderr[:3000]


def test_an_interpreter_without_a_binding_is_said_in_one_line(tmp_path, hold):
    # The build tree's bootstrap, told to look in an empty directory: as for a Python whose
    # version has no binding installed.
    bootstrap = Path(MEMPROF).parent.parent / "bindings" / "python" / "bootstrap"
    text = (bootstrap / "sitecustomize.py").read_text()
    text = re.sub(r"^_BINDING_DIRS = .*$", f"_BINDING_DIRS = [{str(tmp_path / 'none')!r}]",
                  text, flags=re.M)
    fake = tmp_path / "bootstrap"
    fake.mkdir()
    (fake / "sitecustomize.py").write_text(text)
    env = run_env()
    env.update(PYTHONPATH=str(fake), LD_PRELOAD=os.environ["MEMPROF_TEST_PRELOAD"],
               MEMPROF_START="1", MEMPROF_OUTPUT=str(tmp_path / "p.pb.gz"))
    r = subprocess.run([PYTHON, str(hold)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if "memprof" in l and "binding" in l]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("memprof: no Python binding for python3.")
    assert "Python frames and pymalloc arenas are not profiled" in lines[0]


def test_a_memprof_without_python_bootstrap_says_so_in_one_line(tmp_path, hold):
    # The command copied out of the build tree finds no bootstrap (none relative to it, no
    # build tree); the plugin is given by MEMPROF_PRELOAD.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    command = bindir / "memprof"
    command.write_bytes(Path(MEMPROF).read_bytes())
    command.chmod(0o755)
    env = run_env()
    env["MEMPROF_PRELOAD"] = os.environ["MEMPROF_TEST_PRELOAD"]
    r = subprocess.run([str(command), "run", "-o", str(tmp_path / "p.pb.gz"), "--", PYTHON,
                        str(hold)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    if "no Python binding" not in r.stderr and "small_objects" in r.stderr:
        pytest.skip("memprof's Python bootstrap is installed on this machine")
    lines = [l for l in r.stderr.splitlines() if "no Python binding" in l]
    assert len(lines) == 1, r.stderr
    assert "install python3-memprof" in lines[0], lines[0]
    assert "written to" in r.stderr  # the program was profiled all the same


NO_FOLLOW = '''
import os, subprocess, sys
def hold():
    out = []
    for _ in range(300):
        out.append(bytearray(100_000))
    return out
kept = hold()
child = subprocess.run([sys.executable, "-c", "import sys; print('memprof' in sys.modules)"],
                       capture_output=True, text=True).stdout.strip()
print(os.environ.get("PYTHONPATH"), child)
'''


def test_no_follow_profiles_the_program_with_its_frames_and_leaves_children_alone(tmp_path):
    script = tmp_path / "nofollow.py"
    script.write_text(NO_FOLLOW)
    r = memprof_run(tmp_path, [PYTHON, str(script)], options=["--no-follow"])
    assert r.stdout.split() == ["None", "False"], r.stdout
    assert any("hold" in t for t in first_sites(r.stderr)[:1]), r.stderr[:3000]
