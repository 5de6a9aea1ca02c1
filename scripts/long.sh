#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/long.sh: the long suite, the one command for everything too slow for CI
# (doc/testing.md). Not run by CI.
#
#   1. installs the test dependencies plus valgrind and CPython's regression tests if
#      missing (scripts/common.sh; Debian: apt-get, root or sudo);
#   2. main:  build/ (-Dwerror=true, shared with scripts/test.sh): `meson test --suite long`
#             - CPython's regression subset and valgrind memcheck under the preload plugin,
#             the long accuracy runs and the long hardening variants, whatever is in the suite;
#   3. tsan:  build-tsan/ with ThreadSanitizer: the `unit` and `stress` suites (the heap map,
#             stack table, Bloom filter and engine under many threads), timeouts x10;
#   4. fuzz:  build-fuzz/ with clang, ASan+UBSan and -Dfuzzing=enabled: the long suite's
#             fuzz/ tests (libFuzzer on the pprof reader, 5 minutes from tests/pprof/corpus);
#   5. prints one line per stage and `N passed, N failed` summed over all of them as the last
#      line (OK and EXPECTEDFAIL pass; FAIL, TIMEOUT, UNEXPECTEDPASS and ERROR fail, and so
#      does a build or configuration that fails), and exits non-zero if anything failed.
#
#   scripts/long.sh [main] [tsan] [fuzz]     (default: all three; about 1-2 hours on 2 cores)
#
# Extra `meson test` arguments can be given in MEMPROF_LONG_TEST_ARGS (e.g. "--repeat 2");
# MEMPROF_LONG_BUILD=DIR builds in DIR, DIR-tsan and DIR-fuzz instead of build, build-tsan
# and build-fuzz.
set -euo pipefail

MEMPROF_SCRIPT=long.sh
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=scripts/common.sh
. scripts/common.sh

stages=("$@")
[[ ${#stages[@]} -gt 0 ]] || stages=(main tsan fuzz)
for s in "${stages[@]}"; do
    case "$s" in
        main | tsan | fuzz) ;;
        *) memprof_die "unknown stage '$s' (main, tsan, fuzz)" ;;
    esac
done

# On top of the test dependencies: memcheck and CPython's own test package (the regression
# subset).
memprof_install_deps "${MEMPROF_TEST_DEPS[@]}" valgrind libpython3.11-testsuite

read -r -a extra_args <<<"${MEMPROF_LONG_TEST_ARGS:-}"
bdir="${MEMPROF_LONG_BUILD:-build}"
passed=0
failed=0
skipped=0
summary=()

# count_results DIR LABEL MESON_TEST_STATUS: adds DIR's testlog.json to the totals.
count_results() {
    local dir="$1" label="$2" status="$3" counts p f s
    counts="$(python3 - "$dir/meson-logs/testlog.json" <<'EOF'
import json, sys
p = f = s = 0
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
        memprof_log "$label: meson test exited with status $status"
        f=1
    fi
    summary+=("$label: $p passed, $f failed, $s skipped")
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
}

# stage_failed LABEL WHAT: a stage that could not run its tests counts as one failure.
stage_failed() {
    memprof_log "$1: $2"
    summary+=("$1: $2")
    failed=$((failed + 1))
}

# run_stage DIR LABEL "SETUP OPTIONS" "BUILD TARGETS (empty: all)" -- MESON TEST ARGS...
# (CC and other variables for the setup come from the caller's environment.)
run_stage() {
    local dir="$1" label="$2" setup="$3" targets="$4" t0=$SECONDS
    shift 5
    local -a setup_args target_args
    read -r -a setup_args <<<"$setup"
    read -r -a target_args <<<"$targets"
    memprof_log "$label: configuring $dir/ ($setup)"
    if ! memprof_setup_build "$dir" "${setup_args[@]}"; then
        stage_failed "$label" "configuring $dir/ failed"
        return
    fi
    memprof_log "$label: building"
    if ! meson compile -C "$dir" "${target_args[@]}"; then
        stage_failed "$label" "the build failed"
        return
    fi
    rm -f "$dir/meson-logs/testlog.json"
    memprof_log "$label: meson test -C $dir $*"
    local status=0
    meson test -C "$dir" --print-errorlogs "$@" </dev/null || status=$?
    count_results "$dir" "$label" "$status"
    summary[-1]+=" ($((SECONDS - t0)) s)"
}

start=$SECONDS
for s in "${stages[@]}"; do
    case "$s" in
    main)
        run_stage "$bdir" "long suite" "-Dwerror=true" "" \
            -- --suite long "${extra_args[@]}"
        ;;
    tsan)
        # The preload plugin and the hardening programs skip themselves in sanitizer builds;
        # the unit and stress programs link the core statically. TSan models no standalone
        # atomic_thread_fence (gcc says so with -Wtsan), hence no -Dwerror here; the Bloom
        # filter's fence orders only atomic loads, which TSan never reports. Frame-pointer
        # stacks only (-Dlibunwind=disabled): libunwind's per-thread cache destructor re-arms
        # itself to run in the last round of thread-exit destructors, after TSan has torn
        # down the thread's state, and its pthread_mutex_lock then crashes in TSan's
        # interceptor (SIGSEGV in __tsan::MutexPreLock under __nptl_deallocate_tsd).
        run_stage "$bdir-tsan" "ThreadSanitizer: unit and stress" \
            "-Db_sanitize=thread -Db_lundef=false -Dlibunwind=disabled -Dbenchmarks=false -Dpython=disabled -Druby=disabled" "" \
            -- --suite unit --suite stress --timeout-multiplier 10 "${extra_args[@]}"
        ;;
    fuzz)
        if ! command -v clang >/dev/null; then
            stage_failed "fuzzing" "clang is not installed"
            continue
        fi
        # Only the fuzz tests run here: the rest of the long suite runs in `main`.
        fuzz_tests=()
        if CC=clang memprof_setup_build "$bdir-fuzz" -Db_sanitize=address,undefined \
            -Db_lundef=false -Dfuzzing=enabled -Dbenchmarks=false -Dpython=disabled \
            -Druby=disabled; then
            mapfile -t fuzz_tests < <(meson test -C "$bdir-fuzz" --list --suite long 2>/dev/null |
                sed -n 's|^libmemprof:long / \(fuzz/.*\)$|\1|p')
        fi
        if [[ ${#fuzz_tests[@]} -eq 0 ]]; then
            stage_failed "fuzzing" "configuring $bdir-fuzz/ failed or it has no fuzz test"
            continue
        fi
        CC=clang run_stage "$bdir-fuzz" "fuzzing (libFuzzer, ASan+UBSan)" \
            "-Db_sanitize=address,undefined -Db_lundef=false -Dfuzzing=enabled -Dbenchmarks=false -Dpython=disabled -Druby=disabled" \
            "" -- "${fuzz_tests[@]}" "${extra_args[@]}"
        ;;
    esac
done

for line in "${summary[@]}"; do
    echo "$line"
done
memprof_log "finished in $((SECONDS - start)) s"
echo "skipped: $skipped"
echo "$passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
