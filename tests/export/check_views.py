# SPDX-License-Identifier: MIT
"""Checks the speedscope and HTML files the writers produce for the known profiles.

Usage: check_views.py {speedscope|speedscope-schema|html|html-chromium} EXPORT_GEN SCHEMA

Runs EXPORT_GEN (export_gen.c) into a temporary directory, then parses what it wrote:

- speedscope: valid JSON; frame names, files and lines as the profiles define them; every
  frame index in range; one sampled byte profile per view the profile has, named by the
  view, the selected view first, whose samples are the expected root-first stacks with the
  expected weights, zero weights left out, weights summing to endValue.
- speedscope-schema: every file validates against speedscope's published schema (vendored
  in data/); exit 77 (skip) when python3-jsonschema is not installed.
- html: one document with no network resource of any kind; the embedded JSON parses,
  describes the same stacks and every view's values, the peak, the heap over time, threads
  and lifetimes, and no string in it can end the script element.
- html-chromium: the pages run in headless Chromium with a probe around them: no console
  message or uncaught error, the chart drawn with its peak label, and each view of the
  switcher rendering its own leader first; exit 77 (skip) when no Chromium is installed.

Runs on Debian's python3 with its standard library only (plus jsonschema for the schema).
"""
import html as htmllib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


NO_STACK = "[no stack: stack table full]"
TRUNCATED = "[truncated stack]"
NAMES = ["basic", "special", "empty", "views", "big"]
VIEWS = ["live", "alloc", "peak", "temporary", "leaks"]
# The order of a speedscope file's profiles after the selected one.
SPEEDSCOPE_ORDER = ["live", "peak", "alloc", "temporary", "leaks"]
# Every file export-gen writes: the profiles with the live view selected, and the views
# profile with each view selected.
ALL_NAMES = NAMES + ["views-" + v for v in VIEWS]

# The basic profile (profiles.h), root first: (path, live bytes, allocated bytes).
BASIC_STACKS = [
    (["main", "compute", "leaf_alloc"], 3000, 5000),
    (["main", "compute", "leaf_alloc", "inlined_helper"], 2000, 2000),
    (["main", "build_index", "libfoo.so.1+0x1234"], 0, 7000),
    ([TRUNCATED, "deep", "leaf_alloc"], 500, 600),
    ([NO_STACK], 100, 100),
    (["main", "compute"], 0, 0),
    (["main", "compute", "leaf_alloc"], 0, 100),
]
KiB, MiB = 1024, 1024 * 1024
# The views profile, root first: (path, {view: bytes}).
VIEWS_STACKS = [
    (["main", "handle", "grow_cache"],
     {"live": 6 * MiB, "alloc": 8 * MiB, "peak": 2 * MiB, "temporary": 0, "leaks": 0}),
    (["main", "worker_loop", "leaky_register"],
     {"live": 3 * MiB, "alloc": 3 * MiB, "peak": 1536 * KiB, "temporary": 0, "leaks": 3 * MiB}),
    (["main", "handle", "build_report"],
     {"live": MiB, "alloc": 30 * MiB, "peak": 20 * MiB, "temporary": 0, "leaks": 0}),
    (["main", "handle", "cache_insert"],
     {"live": MiB, "alloc": MiB, "peak": 0, "temporary": 0, "leaks": MiB}),
    # a leak statistic, but no suspect: nothing in the leaks view
    (["main", "worker_loop", "grow_cache"],
     {"live": 512 * KiB, "alloc": 512 * KiB, "peak": 0, "temporary": 0, "leaks": 0}),
    (["main", "worker_loop", "parse_request"],
     {"live": 64 * KiB, "alloc": 400 * MiB, "peak": 512 * KiB, "temporary": 390 * MiB,
      "leaks": 0}),
    (["main", "tiny_site"],
     {"live": 4 * KiB, "alloc": 4 * KiB, "peak": 0, "temporary": 0, "leaks": 0}),
]
# Each view's leader in the page's table (grouped by allocating function).
VIEWS_LEADERS = {"live": "grow_cache", "peak": "build_report", "alloc": "parse_request",
                 "temporary": "parse_request", "leaks": "leaky_register"}
# Frames as speedscope shows them (name, file, line), merged by all three.
BASIC_FRAMES = {
    ("leaf_alloc", "/src/app/alloc.c", 42),
    ("compute", "/src/app/compute.c", 17),
    ("compute", "/src/app/compute.c", 21),
    ("main", "/src/app/main.c", 5),
    ("libfoo.so.1+0x1234", None, None),
    ("build_index", "script.py", 42),
    ("inlined_helper", "/src/app/inl.h", 9),
    ("deep", "/src/app/deep.c", 3),
    (TRUNCATED, None, None),
    (NO_STACK, None, None),
}
# The special profile's names as a JSON reader must see them: malformed UTF-8 replaced by
# U+FFFD, one per maximal ill-formed subsequence.
R = "\ufffd"
SPECIAL_STACKS = [
    (["na\u00efve \u51fd\u6570 \U0001F600",
      "tab\there\nnewline\x01\x1f\x7f ctrl", 'say "hi" \\ back\\slash',
      "</script><script>alert(1)</script>"], 64, 64),
    (["na\u00efve \u51fd\u6570 \U0001F600", "operator<<(std::ostream&, Foo const&)",
      "line\u2028sep\u2029para <!-- & -->",
      "bad " + R + R + " x " + R + "( y " + R * 3 + " z " + R * 2 + " " + R], 32, 32),
]
SPECIAL_FILES = {"</SCRIPT>.c", 'C:\\src\\quote".c', "ctl.c", "u.c", "a&b<c>.c", "x.cc"}
SPECIAL_THREAD = '</script><b onmouseover=alert(1)>thr"ead</b>\u2028 ' + R


def expected(name, tmp):
    """The stacks a profile must show: [(root-first labels, {view: bytes})]. Profiles
    without the views beyond live and allocated have zeros there."""
    def two(stacks):
        return [(p, {"live": live, "alloc": alloc, "peak": 0, "temporary": 0, "leaks": 0})
                for p, live, alloc in stacks]
    if name == "basic":
        return two(BASIC_STACKS)
    if name == "special":
        return two(SPECIAL_STACKS)
    if name == "empty":
        return []
    if name.startswith("views"):
        return VIEWS_STACKS
    with open(os.path.join(tmp, "big.expect.json"), encoding="utf-8") as f:
        return two([(s[0], s[1], s[2]) for s in json.load(f)["stacks"]])


def selected_view(name):
    """The view a file was written with: views-<view>, else live."""
    return name.split("-", 1)[1] if name.startswith("views-") else "live"


def as_multiset(items):
    out = {}
    for key in items:
        out[key] = out.get(key, 0) + 1
    return out


def check_speedscope(name, doc, stacks):
    check(doc.get("$schema") == "https://www.speedscope.app/file-format-schema.json",
          f"{name}: $schema")
    check(re.fullmatch(r"libmemprof \d+\.\d+\.\d+.*", doc.get("exporter", "")),
          f"{name}: exporter {doc.get('exporter')!r}")
    check(isinstance(doc.get("name"), str) and doc["name"], f"{name}: name")
    check(doc.get("activeProfileIndex") == 0, f"{name}: activeProfileIndex")
    frames = doc["shared"]["frames"]
    for i, fr in enumerate(frames):
        check(isinstance(fr.get("name"), str), f"{name}: frame {i} has a name")
        check("line" not in fr or (isinstance(fr["line"], int) and fr["line"] > 0),
              f"{name}: frame {i} line")
    seen = {(f["name"], f.get("file"), f.get("line")) for f in frames}
    check(len(seen) == len(frames), f"{name}: frames are not merged: {len(frames)} vs {len(seen)}")
    if name == "basic":
        check(seen == BASIC_FRAMES, f"basic: frames {sorted(seen, key=str)}")
    if name == "special":
        files = {f["file"] for f in frames if "file" in f}
        check(files == SPECIAL_FILES, f"special: files {files}")
    if name == "big":
        for f in frames:
            m = re.fullmatch(r"big_function_(\d+)", f["name"])
            if check(m, f"big: frame name {f['name']!r}"):
                i = int(m.group(1))
                check(f.get("file") == f"/src/big/file{i % 50:02d}.c" and f.get("line") == 10 + i,
                      f"big: frame {f}")

    # One profile per view present: always live, allocated and the selected one, the others
    # when some stack has bytes in them; the selected view first, the rest in their order.
    sel = selected_view(name)
    present = [v for v in SPEEDSCOPE_ORDER
               if v in ("live", "alloc", sel) or any(s[1][v] for s in stacks)]
    want_names = [sel] + [v for v in present if v != sel]
    profiles = doc["profiles"]
    got_names = [p.get("name") for p in profiles]
    if not check(got_names == want_names, f"{name}: profiles {got_names}, wanted {want_names}"):
        return
    if name.startswith("views"):
        check(len(profiles) == 5, f"{name}: {len(profiles)} profiles, not one per view")
    for prof in profiles:
        title = prof["name"]
        check(prof["type"] == "sampled" and prof["unit"] == "bytes", f"{name}: {title} type/unit")
        samples, weights = prof["samples"], prof["weights"]
        if not check(len(samples) == len(weights), f"{name}: {title}: samples vs weights"):
            continue
        for s in samples:
            for i in s:
                check(isinstance(i, int) and 0 <= i < len(frames),
                      f"{name}: {title}: frame index {i} out of range")
        check(all(isinstance(w, int) and w > 0 for w in weights), f"{name}: {title}: zero weight")
        check(prof["startValue"] == 0 and prof["endValue"] == sum(weights),
              f"{name}: {title}: endValue {prof['endValue']} != {sum(weights)}")
        want = [(tuple(s[0]), s[1][title]) for s in stacks if s[1][title] > 0]
        check(prof["endValue"] == sum(w for _, w in want), f"{name}: {title}: total")
        got = [(tuple(frames[i]["name"] for i in s), w) for s, w in zip(samples, weights)]
        if not check(as_multiset(got) == as_multiset(want), f"{name}: {title}: stacks differ"):
            for g in got[:8]:
                print("  got ", g)
            for w in want[:8]:
                print("  want", w)


def run_schema(tmp, schema_path):
    try:
        import jsonschema
    except ImportError:
        print("skipped: python3-jsonschema is not installed")
        return SKIP
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)
    for name in ALL_NAMES:
        with open(os.path.join(tmp, name + ".speedscope.json"), encoding="utf-8") as f:
            doc = json.load(f)
        errors = list(validator.iter_errors(doc))
        for e in errors[:5]:
            print(f"{name}: {e.message} at {list(e.absolute_path)}")
        check(not errors, f"{name}: {len(errors)} schema errors")
        # The file must also be a sampled profile as speedscope reads it, not just any
        # member of the anyOf: the same document with an unknown type must fail. (Not for
        # big: validating it takes seconds, and it proves nothing more.)
        if name == "big":
            continue
        doc["profiles"] = [dict(p, type="bogus") for p in doc["profiles"]] or [{"type": "x"}]
        check(list(validator.iter_errors(doc)), f"{name}: the schema accepts anything")
    return 0


# Anything a browser could fetch: URLs, protocol-relative or not, and the tags and CSS
# constructs that load resources.
RESOURCE_PATTERNS = [r"https?:", r"\bsrc\s*=", r"<link\b", r"@import", r"url\(", r"<iframe",
                     r"<img\b", r"<object\b", r"<embed\b", r"\bhref\s*=\s*[\"']?[a-z/]",
                     r"['\"]//", r"fetch\(", r"XMLHttpRequest", r"\.load\("]


# The page's stack columns (html.c, the script's C = {...}).
NS = 25
COL = {"live": 1, "alloc": 7, "peak": 10, "temporary": 16, "leaks": 19}
C_LIVE_LO, C_LIVE_HI, C_LEAK_RATE, C_THREAD, C_LOW, C_SITE = 2, 3, 20, 22, 23, 24
# The profiles' interpreter frames (MEMPROF_FRAME_RUNTIME in profiles.h).
RUNTIME_FRAMES = {"build_index"}


def as_shown(path):
    """A root-first path as the page shows it (export/sites.c): ending at the innermost
    interpreter frame, without native frames between two interpreter frames."""
    rt = [i for i, f in enumerate(path) if f in RUNTIME_FRAMES]
    if not rt:
        return path
    return [f for i, f in enumerate(path[:rt[-1] + 1]) if i < rt[0] or f in RUNTIME_FRAMES]


def check_views_data(name, d):
    """The views profile's peak, series, threads, lifetimes and per-stack extras."""
    S, T = d["strings"], d["stacks"]
    pk = d["peak"]
    check(pk["bytes"] == 24 * MiB and pk["t_ns"] == 3250000000 and pk["samples"] == 48 and
          pk["lo"] < pk["bytes"] < pk["hi"] and pk["low"] == 0, f"{name}: peak {pk}")
    check(d["duration_ns"] == 10 ** 10 and d["temp_threshold_ns"] == 10 ** 6,
          f"{name}: duration or threshold")
    series = d["series"]
    check(len(series) == 30 and series[15:18] == [3250000000, 24 * MiB, 280 * MiB],
          f"{name}: series {series[:9]}...")
    threads = [(d["threads"][i], d["threads"][i + 1]) for i in range(0, len(d["threads"]), 2)]
    check([(t, S[n] if n >= 0 else None) for t, n in threads] ==
          [(1001, "main"), (1002, "worker-1"), (1003, None)], f"{name}: threads {threads}")
    rows = {}
    for s in range(len(T) // NS):
        rows.setdefault(T[NS * s + 1], T[NS * s:NS * s + NS])
    d_row, f_row = rows[3 * MiB], rows[4 * KiB]
    check(d_row[C_LEAK_RATE] == 102400 and d_row[C_THREAD] == 3, f"{name}: leaky_register {d_row}")
    # tiny_site: two samples, low information in the live and allocated views.
    check(f_row[C_LOW] & 3 == 3 and f_row[C_LIVE_LO] <= 4 * KiB <= f_row[C_LIVE_HI],
          f"{name}: tiny_site {f_row}")
    # Lifetimes: grow_cache (row 0) in the last bucket, parse_request's histogram.
    life = {d["life"][i]: d["life"][i + 1:i + 17] for i in range(0, len(d["life"]), 17)}
    check(life.get(0) == [0] * 15 + [2], f"{name}: grow_cache lifetimes {life.get(0)}")
    check(sorted(sum(h) for h in life.values()) == [2, 12, 95], f"{name}: lifetimes {life}")


def check_html(name, text, stacks):
    check(text.startswith("<!DOCTYPE html>"), f"{name}: doctype")
    check(text.rstrip().endswith("</html>"), f"{name}: ends with </html>")
    for pat in RESOURCE_PATTERNS:
        m = re.search(pat, text, re.IGNORECASE)
        check(not m, f"{name}: network resource? {pat!r} at {m and text[m.start()-40:m.end()+40]!r}")
    # Exactly two script elements: the data and the code.
    check(len(re.findall(r"<script\b", text, re.I)) == 2, f"{name}: <script count")
    check(len(re.findall(r"</script", text, re.I)) == 2, f"{name}: </script count")
    m = re.search(r'<script type="application/json" id="memprof-data">(.*?)</script>', text, re.S)
    if not check(m, f"{name}: data element"):
        return
    raw = m.group(1)
    # The escaper leaves no '<' in the data, so nothing inside can close the element or open
    # an HTML comment; U+2028/U+2029 are escaped for JavaScript.
    check("<" not in raw and ">" not in raw and "&" not in raw, f"{name}: raw < > & in data")
    check("\u2028" not in raw and "\u2029" not in raw, f"{name}: raw U+2028/9 in data")
    d = json.loads(raw)
    S, F, N, T = d["strings"], d["frames"], d["nodes"], d["stacks"]
    check(len(F) % 4 == 0 and len(N) % 2 == 0 and len(T) % NS == 0, f"{name}: array strides")
    check(len(d["life"]) % 17 == 0 and len(d["threads"]) % 2 == 0 and len(d["series"]) % 3 == 0,
          f"{name}: life, threads or series strides")
    check(d["view"] == selected_view(name), f"{name}: opens on {d['view']!r}")
    check(len(S) == len(set(S)), f"{name}: strings are shared, each once")
    nf, nn = len(F) // 4, len(N) // 2
    for i in range(nf):
        check(0 <= F[4 * i] < len(S) and -1 <= F[4 * i + 1] < len(S), f"{name}: frame {i} strings")
        check(0 <= F[4 * i + 3] <= 7, f"{name}: frame {i} kind")
    for i in range(nn):
        check(-1 <= N[2 * i] < i and 0 <= N[2 * i + 1] < nf, f"{name}: node {i} links")
    check(len(set(zip(N[0::2], N[1::2]))) == nn, f"{name}: call-tree nodes are unique")
    got = []
    for s in range(len(T) // NS):
        path, n = [], T[NS * s]
        while n >= 0:
            path.append(S[F[4 * N[2 * n + 1]]])
            n = N[2 * n]
        got.append((tuple(reversed(path)),) + tuple(T[NS * s + COL[v]] for v in VIEWS))
        # The site's frame (the table's function) is the path's leaf as the page shows it.
        check(0 <= T[NS * s + C_SITE] < nf and path and S[F[4 * T[NS * s + C_SITE]]] == path[0],
              f"{name}: stack {s} site {T[NS * s + C_SITE]} is not its leaf {path[:1]}")
    # Stacks with nothing in any view stay out of the page.
    want = [(tuple(as_shown(p)),) + tuple(b[v] for v in VIEWS) for p, b in stacks
            if any(b.values())]
    if not check(as_multiset(got) == as_multiset(want), f"{name}: stacks differ"):
        for g in got[:8]:
            print("  got ", g)
        for w in want[:8]:
            print("  want", w)
    check(isinstance(d["heap"]["bytes"], int) and d["heap"]["lo"] <= d["heap"]["bytes"] <= d["heap"]["hi"],
          f"{name}: heap interval {d['heap']}")
    for key in ("dropped", "overflows", "truncated", "unresolved", "addresses", "unnamed_more"):
        check(isinstance(d["health"].get(key), int), f"{name}: health.{key}")
    check(isinstance(d["health"].get("unnamed"), list), f"{name}: health.unnamed")
    if name == "basic":
        # The interval itself is interval.h's (test_views.c checks the numbers).
        h = d["heap"]
        check((h["bytes"], h["low"], h["objects"], h["samples"]) == (5600, 0, 38, 18) and
              h["lo"] <= 5600 <= h["hi"], f"basic: heap {h}")
        check(d["peak"]["bytes"] == 0 and not d["series"] and not d["threads"] and not d["life"],
              f"basic: peak, series, threads or lifetimes out of nothing")
        # 1 of 8 addresses without a name: under a quarter, no note on them.
        check(d["health"] == {"dropped": 2, "overflows": 1, "truncated": 1, "unresolved": 1,
                              "addresses": 8, "raw": 0, "unnamed": [], "unnamed_more": 0},
              f"basic: health {d['health']}")
        check(d["opened_on_peak"] == 0, "basic: opened on the peak")
        check(d["rate"] == 524288 and d["time"] == 1700000000, f"basic: rate/time")
        # Frame kinds: runtime 1, unresolved 2, synthetic 3, +4 inlined.
        kinds = {S[F[4 * i]]: F[4 * i + 3] for i in range(nf)}
        check(kinds.get("build_index") == 1 and kinds.get("libfoo.so.1+0x1234") == 2 and
              kinds.get(TRUNCATED) == 3 and kinds.get("inlined_helper") == 4 and
              kinds.get("main") == 0, f"basic: kinds {kinds}")
        sd = {T[NS * s + 1]: T[NS * s + 4] for s in range(len(T) // NS)}
        check(sd.get(3000) == 500 and sd.get(2000) == 200, f"basic: standard deviations {sd}")
    if name.startswith("views"):
        check_views_data(name, d)
    if name == "special":
        check(SPECIAL_FILES <= set(S), f"special: files {set(S) & SPECIAL_FILES}")
        check(d["threads"] == [7, S.index(SPECIAL_THREAD)] if SPECIAL_THREAD in S else False,
              f"special: thread {d['threads']}")
    if name == "big":
        size = len(text.encode("utf-8"))
        print(f"big.html: {size} bytes for {len(T) // NS} stacks, {nn} call-tree nodes")
        check(size < 3_000_000, f"big: HTML of {size} bytes is too large")


# ---- the pages in a browser -------------------------------------------------------------

# Before the page's own scripts: collect every uncaught error, rejected promise and console
# message the page produces (none is expected).
PROBE_HEAD = """<script>
window.__probe = { errors: [] };
window.addEventListener('error', function (e) {
  __probe.errors.push('uncaught: ' + e.message + ' at line ' + e.lineno);
});
window.addEventListener('unhandledrejection', function (e) {
  __probe.errors.push('unhandled rejection: ' + e.reason);
});
['log', 'info', 'warn', 'error', 'debug'].forEach(function (k) {
  var o = console[k];
  console[k] = function () {
    __probe.errors.push('console.' + k + ': ' + Array.prototype.join.call(arguments, ' '));
    return o.apply(console, arguments);
  };
});
</script>"""

# After them: record the view the page opened on, then switch to every view as a person
# would (the radio's change event) and record what the table and flame graph show; group
# the table by thread; record the chart. The result goes into an attribute of <html>,
# which --dump-dom prints.
PROBE_TAIL = """<script>
(function () {
  var out = { errors: __probe.errors, views: {} };
  function all(sel) { return Array.prototype.slice.call(document.querySelectorAll(sel)); }
  function state() {
    var rows = all('#sites tbody tr');
    return {
      rows: rows.length,
      first: rows.length ? rows[0].querySelector('td.fn span').textContent : null,
      firstCells: rows.length ? Array.prototype.map.call(rows[0].children,
        function (c) { return c.textContent; }) : [],
      head: all('#sites thead th').map(function (t) { return t.textContent; }),
      low: all('#sites tbody tr.low').length,
      flameEmpty: !document.getElementById('flame-empty').hidden,
      note: document.getElementById('view-note').textContent,
      on: all('.views label.on input').map(function (i) { return i.value; })
    };
  }
  try {
    var checked = document.querySelector('input[name=view]:checked');
    out.initial = checked ? checked.value : null;
    out.initialState = state();
    ['live', 'peak', 'alloc', 'temporary', 'leaks'].forEach(function (v) {
      var r = document.querySelector('input[name=view][value=' + v + ']');
      r.checked = true;
      r.dispatchEvent(new Event('change', { bubbles: true }));
      out.views[v] = state();
    });
    var live = document.querySelector('input[name=view][value=live]');
    live.checked = true;
    live.dispatchEvent(new Event('change', { bubbles: true }));
    var g = document.getElementById('group');
    g.value = 'thread';
    g.dispatchEvent(new Event('change', { bubbles: true }));
    out.byThread = all('#sites tbody tr td.fn span').map(function (e) { return e.textContent; });
    var alloc = document.querySelector('input[name=view][value=alloc]');
    alloc.checked = true;
    alloc.dispatchEvent(new Event('change', { bubbles: true }));
    g.value = 'stack';
    g.dispatchEvent(new Event('change', { bubbles: true }));
    out.allocByStack = all('#sites tbody tr').length;
    var peak = document.getElementById('chart-peak');
    out.chart = {
      live: !!document.getElementById('chart-live'),
      alloc: !!document.getElementById('chart-alloc'),
      peak: peak ? peak.textContent : null,
      empty: !document.getElementById('chart-empty').hidden
    };
    out.summary = document.getElementById('summary').textContent;
    out.scripts = all('script').length;
  } catch (e) {
    out.errors.push('probe: ' + e);
  }
  document.documentElement.setAttribute('data-probe', JSON.stringify(out));
})();
</script>"""


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_page(chromium, tmp, name):
    """Runs one page with the probe; returns (probe result or None, console lines)."""
    with open(os.path.join(tmp, name + ".html"), encoding="utf-8") as f:
        text = f.read()
    # The probe goes around the page's own markup, which stays as written.
    text = text.replace("<head>\n", "<head>\n" + PROBE_HEAD + "\n", 1)
    text = text.replace("</body>", PROBE_TAIL + "\n</body>", 1)
    probed = os.path.join(tmp, name + ".probe.html")
    with open(probed, "w", encoding="utf-8") as f:
        f.write(text)
    profile_dir = os.path.join(tmp, "chromium-" + name)
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-extensions", "--disable-background-networking", "--user-data-dir=" +
           profile_dir, "--enable-logging=stderr", "--v=0", "--window-size=1280,900",
           "--virtual-time-budget=20000", "--dump-dom", "file://" + probed]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120)
    except subprocess.TimeoutExpired:
        check(False, f"{name}: chromium timed out")
        return None, []
    # Chromium logs what the page writes to its console as "...:CONSOLE(line)] ...".
    console = [l for l in r.stderr.splitlines() if ":CONSOLE" in l]
    m = re.search(r'data-probe="([^"]*)"', r.stdout)
    if not check(m, f"{name}: no probe result (chromium exit {r.returncode})"):
        print(r.stderr[-2000:])
        return None, console
    return json.loads(htmllib.unescape(m.group(1))), console


def run_chromium(tmp):
    chromium = find_chromium()
    if not chromium:
        print("skipped: no chromium (apt-get install chromium)")
        return SKIP
    for name in NAMES + ["views-peak"]:
        res, console = run_page(chromium, tmp, name)
        for line in console:
            print(f"{name}: console: {line}")
        check(not console, f"{name}: {len(console)} console messages")
        if res is None:
            continue
        for e in res["errors"]:
            print(f"{name}: {e}")
        check(not res["errors"], f"{name}: {len(res['errors'])} errors in the page")
        # Only the page's two scripts and the probe's: no name became markup.
        check(res.get("scripts") == 4, f"{name}: {res.get('scripts')} script elements")
        check(res["initial"] == selected_view(name) and
              res["initialState"]["on"] == [selected_view(name)],
              f"{name}: opened on {res['initial']} ({res['initialState']['on']})")
        for v in VIEWS:
            st = res["views"][v]
            check(st["on"] == [v], f"{name}: view {v}: switcher shows {st['on']}")
            check(st["note"], f"{name}: view {v}: no note")
            has = any(b[v] for _, b in expected(name, tmp)) if name != "big" else v in (
                "live", "alloc")
            check(st["flameEmpty"] == (not has), f"{name}: view {v}: flame empty "
                  f"{st['flameEmpty']}")
            check((st["rows"] > 0) == has, f"{name}: view {v}: {st['rows']} table rows")
            interval = "95 % interval" in st["head"]
            check(interval == (v in ("live", "peak")), f"{name}: view {v}: columns {st['head']}")
        if name.startswith("views"):
            check_views_page(name, res)
        elif name in ("basic", "empty"):
            check(res["chart"]["empty"] and not res["chart"]["live"],
                  f"{name}: chart without a series {res['chart']}")
        if name == "special":
            check(res["views"]["live"]["first"] == "</script><script>alert(1)</script>",
                  f"special: first row {res['views']['live']['first']!r}")
            check(res["byThread"] == [SPECIAL_THREAD + " (tid 7)"],
                  f"special: thread rows {res['byThread']!r}")
        if name == "basic":
            check("Peak: not recorded" in res["summary"], f"basic: summary {res['summary']!r}")
            # Two stacks with the same frames (two threads' stacks) are one row by stack.
            check(res["allocByStack"] == 5, f"basic: {res['allocByStack']} rows by stack")
    print(f"{len(failures)} failures" if failures else "all checks passed")
    return 1 if failures else 0


def check_views_page(name, res):
    for v, leader in VIEWS_LEADERS.items():
        st = res["views"][v]
        check(st["first"] == leader, f"{name}: view {v} leads with {st['first']}, not {leader}")
    check(res["views"]["temporary"]["rows"] == 1 and res["views"]["leaks"]["rows"] == 2,
          f"{name}: temporary or leaks rows")
    leaks = res["views"]["leaks"]
    check("Leak rate" in leaks["head"] and "~100 KiB/s" in leaks["firstCells"],
          f"{name}: leaks columns {leaks['head']} {leaks['firstCells']}")
    alloc = res["views"]["alloc"]
    # parse_request: freed after p50 < 64 us, p90 < 1.02 ms; its thread.
    check("< 64 us" in alloc["firstCells"] and "< 1.02 ms" in alloc["firstCells"] and
          "worker-1 (tid 1002)" in alloc["firstCells"],
          f"{name}: alloc first row {alloc['firstCells']}")
    check(res["views"]["live"]["low"] >= 1, f"{name}: no low-information row in live")
    check("1 ms" in res["views"]["temporary"]["note"], f"{name}: temporary note")
    check(res["byThread"][:1] == ["main (tid 1001)"] and len(res["byThread"]) == 4,
          f"{name}: rows by thread {res['byThread']}")
    ch = res["chart"]
    check(ch["live"] and ch["alloc"] and not ch["empty"] and
          ch["peak"] == "peak 24 MiB at 3.25 s", f"{name}: chart {ch}")
    check("Peak: 24 MiB" in res["summary"] and "at 3.25 s" in res["summary"],
          f"{name}: summary {res['summary']!r}")


def main():
    what, gen, schema = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix="memprof-views-") as tmp:
        r = subprocess.run([gen, tmp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        print(r.stdout, end="")
        if r.returncode != 0:
            print(f"FAIL: export-gen exited with {r.returncode}")
            return 1
        if what == "speedscope-schema":
            rc = run_schema(tmp, schema)
            if rc:
                return rc
        if what == "html-chromium":
            return run_chromium(tmp)
        for name in ALL_NAMES:
            stacks = expected(name, tmp)
            if what == "speedscope":
                with open(os.path.join(tmp, name + ".speedscope.json"), "rb") as f:
                    raw = f.read()
                # Strict: UTF-8 as RFC 8259 requires, and no NaN/Infinity extensions.
                doc = json.loads(raw.decode("utf-8"),
                                 parse_constant=lambda c: failures.append(f"{name}: {c}"))
                check_speedscope(name, doc, stacks)
            elif what == "html":
                with open(os.path.join(tmp, name + ".html"), "rb") as f:
                    check_html(name, f.read().decode("utf-8"), stacks)
    print(f"{len(failures)} failures" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
