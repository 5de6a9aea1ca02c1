# SPDX-License-Identifier: MIT
"""Checks the speedscope and HTML files the writers produce for the known profiles.

Usage: check_views.py {speedscope|speedscope-schema|html} EXPORT_GEN SCHEMA

Runs EXPORT_GEN (export_gen.c) into a temporary directory, then parses what it wrote:

- speedscope: valid JSON; frame names, files and lines as the profiles define them; every
  frame index in range; two sampled byte profiles (live, allocated) whose samples are the
  expected root-first stacks with the expected weights, zero weights left out, weights
  summing to endValue.
- speedscope-schema: every file validates against speedscope's published schema (vendored
  in data/); exit 77 (skip) when python3-jsonschema is not installed.
- html: one document with no network resource of any kind; the embedded JSON parses,
  describes the same stacks and values, and no string in it can end the script element.

Runs on Debian's python3 with its standard library only (plus jsonschema for the schema).
"""
import json
import os
import re
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
NAMES = ["basic", "special", "empty", "big"]

# The basic profile (profiles.h), root first: (path, live bytes, allocated bytes).
BASIC_STACKS = [
    (["main", "compute", "leaf_alloc"], 3000, 5000),
    (["main", "compute", "leaf_alloc", "inlined_helper"], 2000, 2000),
    (["main", "build_index", "libfoo.so.1+0x1234"], 0, 7000),
    ([TRUNCATED, "deep", "leaf_alloc"], 500, 600),
    ([NO_STACK], 100, 100),
    (["main", "compute"], 0, 0),
]
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


def expected(name, tmp):
    """The stacks a profile must show: [(root-first labels, live, allocated)]."""
    if name == "basic":
        return BASIC_STACKS
    if name == "special":
        return SPECIAL_STACKS
    if name == "empty":
        return []
    with open(os.path.join(tmp, "big.expect.json"), encoding="utf-8") as f:
        return [(s[0], s[1], s[2]) for s in json.load(f)["stacks"]]


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

    profiles = doc["profiles"]
    if not check(len(profiles) == 2, f"{name}: {len(profiles)} profiles"):
        return
    for prof, title, col in ((profiles[0], "Live bytes (estimated)", 1),
                             (profiles[1], "Allocated bytes (estimated)", 2)):
        check(prof["type"] == "sampled" and prof["unit"] == "bytes", f"{name}: {title} type/unit")
        check(prof["name"] == title, f"{name}: profile name {prof['name']!r}")
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
        want = [(tuple(s[0]), s[col]) for s in stacks if s[col] > 0]
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
    for name in NAMES:
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
    check(len(F) % 4 == 0 and len(N) % 2 == 0 and len(T) % 8 == 0, f"{name}: array strides")
    check(len(S) == len(set(S)), f"{name}: strings are shared, each once")
    nf, nn = len(F) // 4, len(N) // 2
    for i in range(nf):
        check(0 <= F[4 * i] < len(S) and -1 <= F[4 * i + 1] < len(S), f"{name}: frame {i} strings")
        check(0 <= F[4 * i + 3] <= 7, f"{name}: frame {i} kind")
    for i in range(nn):
        check(-1 <= N[2 * i] < i and 0 <= N[2 * i + 1] < nf, f"{name}: node {i} links")
    check(len(set(zip(N[0::2], N[1::2]))) == nn, f"{name}: call-tree nodes are unique")
    got = []
    for s in range(len(T) // 8):
        path, n = [], T[8 * s]
        while n >= 0:
            path.append(S[F[4 * N[2 * n + 1]]])
            n = N[2 * n]
        got.append((tuple(reversed(path)), T[8 * s + 1], T[8 * s + 4]))
    want = [(tuple(p), live, alloc) for p, live, alloc in stacks if live or alloc]
    if not check(as_multiset(got) == as_multiset(want), f"{name}: stacks differ"):
        for g in got[:8]:
            print("  got ", g)
        for w in want[:8]:
            print("  want", w)
    check(isinstance(d["heap"]["bytes"], int) and d["heap"]["lo"] <= d["heap"]["bytes"] <= d["heap"]["hi"],
          f"{name}: heap interval {d['heap']}")
    for key in ("dropped", "overflows", "truncated", "unresolved", "addresses"):
        check(isinstance(d["health"].get(key), int), f"{name}: health.{key}")
    if name == "basic":
        check(d["heap"] == {"bytes": 5600, "lo": 4540, "hi": 6660, "objects": 38, "samples": 18},
              f"basic: heap {d['heap']}")
        check(d["health"] == {"dropped": 2, "overflows": 1, "truncated": 1, "unresolved": 1,
                              "addresses": 8}, f"basic: health {d['health']}")
        check(d["rate"] == 524288 and d["time"] == 1700000000, f"basic: rate/time")
        # Frame kinds: runtime 1, unresolved 2, synthetic 3, +4 inlined.
        kinds = {S[F[4 * i]]: F[4 * i + 3] for i in range(nf)}
        check(kinds.get("build_index") == 1 and kinds.get("libfoo.so.1+0x1234") == 2 and
              kinds.get(TRUNCATED) == 3 and kinds.get("inlined_helper") == 4 and
              kinds.get("main") == 0, f"basic: kinds {kinds}")
        sd = {T[8 * s + 1]: T[8 * s + 2] for s in range(len(T) // 8)}
        check(sd.get(3000) == 500 and sd.get(2000) == 200, f"basic: standard deviations {sd}")
    if name == "special":
        check(SPECIAL_FILES <= set(S), f"special: files {set(S) & SPECIAL_FILES}")
    if name == "big":
        size = len(text.encode("utf-8"))
        print(f"big.html: {size} bytes for {len(T) // 8} stacks, {nn} call-tree nodes")
        check(size < 3_000_000, f"big: HTML of {size} bytes is too large")


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
        for name in NAMES:
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
