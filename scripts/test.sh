#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/test.sh: builds libmemprof and runs its whole test suite; used by .ci/run.
#
#   1. installs the build and test dependencies if missing (Debian: apt-get; root or sudo);
#   2. build/ with -Dwerror=true: every suite except `long` (meson test --no-suite long);
#   3. build-sanitize/ with AddressSanitizer + UndefinedBehaviorSanitizer: the `unit` and
#      `stress` suites (the stress programs that do not preload: the preload plugin is never
#      loaded under ASan, and the preloading hardening programs skip themselves there);
#   4. build-fuzz/ with clang, ASan+UBSan and -Dfuzzing=enabled, only the libFuzzer harness
#      of the pprof reader: the `fuzz` suite, one minute of fuzzing from the seed corpus;
#   5. prints the skipped count, then `N passed, N failed` summed over both runs as the last
#      line (OK and EXPECTEDFAIL count as passed; FAIL, TIMEOUT, UNEXPECTEDPASS and ERROR
#      as failed, and so does a build that fails), and exits non-zero if anything failed.
# Results are read from each build directory's meson-logs/testlog.json.
# Extra arguments are passed to both `meson test` runs (e.g. a test name, --repeat 3).
# The `long` suite (TSan, long accuracy runs, ...) is run separately:
#   meson test -C build --suite long
set -euo pipefail

MEMPROF_SCRIPT=test.sh
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=scripts/common.sh
. scripts/common.sh

memprof_install_deps "${MEMPROF_TEST_DEPS[@]}"

passed=0
failed=0
skipped=0

# count_results DIR LABEL MESON_TEST_STATUS: adds DIR's testlog.json to the totals.
count_results() {
    local dir="$1" label="$2" status="$3" counts p f s
    counts="$(python3 - "$dir/meson-logs/testlog.json" <<'EOF'
import json, sys
p = f = s = 0
failed = []
try:
    with open(sys.argv[1]) as log:
        for line in log:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line).get("result", "ERROR")
            if r in ("OK", "EXPECTEDFAIL"):
                p += 1
            elif r == "SKIP":
                s += 1
            else:
                f += 1
except FileNotFoundError:
    pass
print(p, f, s)
EOF
)"
    read -r p f s <<<"$counts"
    if [[ "$status" -ne 0 && "$f" -eq 0 ]]; then
        # meson test failed without a failed test in the log (a runner or build error).
        memprof_log "$label: meson test exited with status $status"
        f=1
    fi
    memprof_log "$label: $p passed, $f failed, $s skipped"
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
}

# run_tests DIR LABEL "SETUP OPTIONS" "BUILD TARGETS (empty: all)" -- MESON TEST ARGS...
# (CC and other variables for the setup come from the caller's environment.)
run_tests() {
    local dir="$1" label="$2" setup="$3" targets="$4"
    shift 5
    local -a setup_args target_args
    read -r -a setup_args <<<"$setup"
    read -r -a target_args <<<"$targets"
    memprof_log "$label: configuring $dir/ (${setup:-defaults})"
    if ! memprof_setup_build "$dir" "${setup_args[@]}"; then
        memprof_log "$label: configuring $dir/ failed"
        failed=$((failed + 1))
        return
    fi
    memprof_log "$label: building ${targets:-everything}"
    if ! meson compile -C "$dir" "${target_args[@]}"; then
        memprof_log "$label: the build failed"
        failed=$((failed + 1))
        return
    fi
    rm -f "$dir/meson-logs/testlog.json"
    memprof_log "$label: meson test -C $dir $*"
    local status=0
    meson test -C "$dir" --print-errorlogs "$@" </dev/null || status=$?
    count_results "$dir" "$label" "$status"
}

start=$SECONDS
run_tests build "tests" "-Dwerror=true" "" -- --no-suite long "$@"
run_tests build-sanitize "unit and stress tests under ASan+UBSan" \
    "-Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false -Dbenchmarks=false" "" \
    -- --suite unit --suite stress --timeout-multiplier 3 "$@"
# Only the harness is built (--no-rebuild: meson test would otherwise build everything).
CC=clang run_tests build-fuzz "fuzzing the pprof reader (libFuzzer, ASan+UBSan)" \
    "-Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false -Dfuzzing=enabled -Dbenchmarks=false -Dpython=disabled -Druby=disabled" \
    "tests/pprof/fuzz-pprof-read" -- --suite fuzz --no-rebuild "$@"

memprof_log "finished in $((SECONDS - start)) s"
if [[ $((passed + failed)) -eq 0 ]]; then
    memprof_log "warning: no test ran"
fi
echo "skipped: $skipped"
echo "$passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
