# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2034
# Shared by scripts/demo.sh, scripts/test.sh and bench/run.sh (sourced, not run): the one
# list of Debian packages the project needs, an installer for the missing ones, and the
# helper that configures a Meson build directory (or reconfigures an existing one).

# What building the library needs (the optional libunwind and libdw included, so every
# build directory finds the same features; libiberty-dev for C++ and Rust demangling).
MEMPROF_BUILD_DEPS=(meson ninja-build gcc libc6-dev pkg-config libunwind-dev libdw-dev
                    zlib1g-dev libiberty-dev)
# What the whole test suite needs on top: a second compiler and its libFuzzer runtime (the
# pprof reader's fuzzing), the Python, Ruby and PHP development files and test tools for the
# bindings' tests (php8.2-dev brings PHP's run-tests.php, php8.2-cli the interpreter), other
# programs and allocators the integration and hardening tests run under the plugin
# (sqlite3, jemalloc, tcmalloc), the Go toolchain whose `go tool pprof`
# reads our pprof files, jsonschema for the speedscope schema check, the ABI,
# documentation and man-page gates (abidiff, doxygen, groff), and libbpf with bpftool for
# the command's eBPF mode (clang compiles its BPF program).
MEMPROF_TEST_DEPS=("${MEMPROF_BUILD_DEPS[@]}" clang libclang-rt-dev python3-dev python3-pytest
                   python3-numpy ruby-dev ruby-minitest php8.2-dev php8.2-cli sqlite3
                   libjemalloc2 libtcmalloc-minimal4 golang-go python3-jsonschema
                   abigail-tools doxygen groff-base man-db libbpf-dev bpftool)

memprof_log() {
    printf '%s: %s\n' "${MEMPROF_SCRIPT:-memprof}" "$*" >&2
}

memprof_die() {
    memprof_log "error: $*"
    exit 1
}

# memprof_install_deps PACKAGE...: installs with apt-get those not installed (one quiet
# apt-get run; nothing at all when everything is there). Needs root or sudo for that.
memprof_install_deps() {
    if ! command -v dpkg-query >/dev/null 2>&1; then
        memprof_log "not a Debian system: not installing packages; make sure these are present: $*"
        return 0
    fi
    local missing=() pkg
    for pkg in "$@"; do
        if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]]; then
            missing+=("$pkg")
        fi
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0

    local sudo=()
    if [[ "$(id -u)" -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 ||
            memprof_die "missing packages: ${missing[*]}; run as root or install them first"
        sudo=(sudo)
    fi
    memprof_log "installing missing packages: ${missing[*]}"
    local log
    log="$(mktemp)"
    if ! { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
           "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
               --no-install-recommends "${missing[@]}"; } >"$log" 2>&1 </dev/null; then
        tail -n 20 "$log" >&2
        rm -f "$log"
        memprof_die "apt-get could not install: ${missing[*]}"
    fi
    rm -f "$log"
}

# memprof_setup_build DIR [MESON_OPTION...]: configures DIR with these options, or
# reconfigures it if it already holds a Meson build (falling back to a wipe if that fails,
# e.g. after a Meson upgrade). Meson's output is shown only on failure. Leaves compiling
# to the caller.
memprof_setup_build() {
    local dir="$1" log rc=0
    shift
    if [[ -f "$dir/meson-private/coredata.dat" && $# -eq 0 ]]; then
        return 0 # nothing to change: meson compile reconfigures by itself when needed
    fi
    log="$(mktemp)"
    if [[ -f "$dir/meson-private/coredata.dat" ]]; then
        meson setup --reconfigure "$dir" "$@" >"$log" 2>&1 ||
            meson setup --wipe "$dir" "$@" >"$log" 2>&1 || rc=$?
    else
        meson setup "$dir" "$@" >"$log" 2>&1 || rc=$?
    fi
    [[ $rc -eq 0 ]] || cat "$log" >&2
    rm -f "$log"
    return "$rc"
}
