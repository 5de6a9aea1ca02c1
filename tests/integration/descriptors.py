# SPDX-License-Identifier: MIT
"""Prints the process's open file descriptors after allocating with every allocation
sampled (a test of `same output with and without the plugin`): the profiler must open none
of its own, or a program that lists or closes its descriptors sees, and can be hurt by, a
difference (CPython's test_subprocess checks exactly this set in its children). Threads
take samples too, since each thread's first unwind is where lazy initialisations happen."""
import json
import os
import threading


def work(n):
    data = [json.dumps({"k": [i] * 8, "s": "x" * (i % 300)}) for i in range(n)]
    return sum(len(json.loads(d)["s"]) for d in data)


threads = [threading.Thread(target=work, args=(3000,)) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
work(3000)
print(" ".join(sorted(os.listdir("/proc/self/fd"), key=int)))
