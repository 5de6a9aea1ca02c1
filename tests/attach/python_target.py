# SPDX-License-Identifier: MIT
"""The CPython process `memprof attach` attaches to in attach_test.py (case 'python'): prints
"ready", then keeps about 10 MB of bytearrays allocated in python_alloc_site(), replacing
them without pause, until killed. Without the binding's frames the profile cannot name
python_alloc_site: it is Python code, not a symbol of any library."""

import sys


def python_alloc_site(n):
    return [bytearray(1000) for _ in range(n)]


def main():
    print("ready", flush=True)
    keep = []
    while True:
        keep.append(python_alloc_site(100))
        if len(keep) > 100:
            keep.pop(0)


if __name__ == "__main__":
    sys.exit(main())
