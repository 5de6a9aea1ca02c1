#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# valgrind memcheck of the profiler's own code with its interposition in place (suite
# 'long'): real programs - python3, sqlite3 and the integration tests' multi-threaded
# workload - run under memcheck with the preload plugin, and any memcheck error fails.
#
# Two valgrind details decide whether this checks anything:
#  - memcheck replaces malloc & co. in libc and, by default, in every object without a
#    soname (valgrind calls it "NONE", meant for the main executable). The preload plugin has
#    no soname, so memcheck would replace *our* malloc and the profiler would see no call at
#    all (a silent pass: 0 samples). --soname-synonyms=somalloc=nouserintercepts limits the
#    replacement to libc: our wrappers run, and call into memcheck's allocator through
#    dlsym(RTLD_NEXT). The python3 run checks that samples were taken.
#  - libunwind probes addresses with write(2) (valgrind.supp explains the one suppression).
# Both unwinders run: DWARF (libunwind) everywhere, frame pointers in the workload.
#
#   valgrind_preload.sh PRELOAD_SO WORKLOAD_PROGRAM SUPPRESSIONS
set -uo pipefail

preload="$1" workload="$2" supp="$3"
command -v valgrind >/dev/null || { echo "valgrind is not installed: skipped"; exit 77; }
out="$(mktemp -d /tmp/memprof-valgrind.XXXXXX)"
failed=0 passed=0

# check NAME RATE UNWIND COMMAND...: runs COMMAND under memcheck with the plugin.
check() {
    local name="$1" rate="$2" unwind="$3" log rc
    shift 3
    log="$out/$name.log"
    env LD_PRELOAD="$preload" MEMPROF_RATE="$rate" MEMPROF_UNWIND="$unwind" \
        MEMPROF_OUTPUT="$out/$name.txt" MEMPROF_FORMAT=text \
        valgrind -q --error-exitcode=99 --leak-check=no --suppressions="$supp" \
        --soname-synonyms=somalloc=nouserintercepts "$@" >"$log" 2>&1 </dev/null
    rc=$?
    if [[ $rc -ne 0 ]]; then
        echo "FAIL $name: exit status $rc; memcheck's log:"
        grep -E '^==[0-9]+==' "$log" | head -60
        failed=$((failed + 1))
        return 1
    fi
    echo "ok   $name: $(grep -m1 'from [0-9]* live samples' "$out/$name.txt" || echo 'no profile')"
    passed=$((passed + 1))
}

# samples_taken NAME: the profile of a run that keeps memory live at exit has live samples.
samples_taken() {
    if ! grep -Eq 'from [1-9][0-9]* live samples' "$out/$1.txt" 2>/dev/null; then
        echo "FAIL $1: no live sample in the profile: the plugin saw no allocation"
        failed=$((failed + 1)) passed=$((passed - 1))
    fi
}

py='import json, threading
keep = [{"a": i, "b": str(i) * 10} for i in range(20000)]
def work():
    for _ in range(20):
        json.loads(json.dumps(keep[:2000]))
ts = [threading.Thread(target=work) for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print(len(keep))'
sql='CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO t SELECT i, printf("%0100d", i) FROM n;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(length(b)) FROM t WHERE a % 7 = 0;'

check python3 4096 dwarf /usr/bin/python3 -c "$py" && samples_taken python3
if command -v sqlite3 >/dev/null; then
    check sqlite3 4096 dwarf sqlite3 :memory: "$sql"
fi
# memcheck aborts the program at any pvalloc (it has none): the workload calls valloc there.
# Frame-pointer stacks only in the workload, which keeps its frame pointers: in python3 or
# sqlite3 (built without them) the walk follows whatever rbp holds, through stack words that
# were never written - memory-safe (it stays inside the thread's stack, going up), but every
# such stack is garbage and memcheck rightly reports the uninitialised values it carries.
for unwind in dwarf fp; do
    check "workload-rate1-$unwind" 1 "$unwind" "$workload" no-pvalloc
done
echo "$passed passed, $failed failed (logs and profiles in $out)"
[[ $failed -eq 0 ]] && rm -rf "$out"
[[ $failed -eq 0 ]]
