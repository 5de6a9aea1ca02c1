# SPDX-License-Identifier: MIT
"""``python3 -m memprof``: the command-line entry point (see memprof._cli)."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
