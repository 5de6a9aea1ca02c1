# SPDX-License-Identifier: MIT
#
# An allocation-heavy Python workload with a deterministic result, run by Debian's
# /usr/bin/python3 with and without the preload plugin (the runner compares stdout and exit
# status). It builds nested dicts and lists, round-trips them through json, joins, splits
# and sorts strings, and grows and shrinks containers, then prints counts and a SHA-256 of
# the canonical JSON, which depend only on this script (no set or hash ordering is printed).
# The optional argument is the number of rounds (default 6).
import hashlib
import json
import sys


def build_records(n):
    records = []
    for i in range(n):
        name = "item-%06d" % ((i * 7919) % n)
        records.append({
            "id": i,
            "name": name,
            "tags": [name[-3:], str(i % 17), "x" * (i % 23)],
            "score": (i * 2654435761) % 1000003 / 7.0,
            "nested": {"a": list(range(i % 11)), "b": {"c": name.upper()}},
        })
    return records


def churn(records):
    index = {}
    for r in records:
        index.setdefault(r["tags"][1], []).append(r["id"])
    text = json.dumps(records, sort_keys=True)
    back = json.loads(text)
    words = " ".join(r["name"] for r in back).split(" ")
    words.sort(key=lambda w: (w[::-1], w))
    buf = []
    for w in words:
        buf.append(w * 3)
        if len(buf) > 500:
            del buf[:250]
    return index, text, words, buf


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    digest = hashlib.sha256()
    total_words = 0
    for rnd in range(rounds):
        records = build_records(12000 + rnd * 1000)
        index, text, words, buf = churn(records)
        digest.update(text.encode())
        digest.update("".join(words[:100]).encode())
        total_words += len(words)
        print("round %d: records=%d keys=%d json_bytes=%d last=%s buf=%d"
              % (rnd, len(records), len(index), len(text), words[-1], len(buf)))
    print("words=%d sha256=%s" % (total_words, digest.hexdigest()))


if __name__ == "__main__":
    main()
