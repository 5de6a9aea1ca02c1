#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Doxygen input filter for the Markdown pages (FILTER_PATTERNS in doc/Doxyfile.in).

Doxygen 1.9 treats `%word` as "do not autolink word" even inside inline code spans, so
`heap.%p.pb.gz` would render as heap.p.pb.gz. This doubles each % that precedes a word
character inside inline code spans, outside fenced code blocks; Doxygen prints %%p as %p. The pages stay plain
Markdown for every other reader. Line count is preserved, so warnings point at the source.
"""
import re
import sys

fenced = False
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            line = re.sub(r"`[^`\n]*`", lambda m: re.sub(r"%(?=\w)", "%%", m.group(0)), line)
        sys.stdout.write(line)
