#!/bin/sh
# SPDX-License-Identifier: MIT
# The build tree's uninstalled pkg-config file (meson-uninstalled/memprof-uninstalled.pc, what
# `meson devenv` puts on PKG_CONFIG_PATH) builds a program against the uninstalled library:
# its flags find <memprof/memprof.h> and the generated <memprof/version.h>, and the program
# links and runs. Usage: check_uninstalled_pc.sh BUILD_ROOT SOURCE.c
set -eu
build="$1"
src="$2"
command -v pkg-config >/dev/null 2>&1 || { echo "pkg-config not installed"; exit 77; }
export PKG_CONFIG_PATH="$build/meson-uninstalled"
flags="$(pkg-config --cflags --libs memprof)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# shellcheck disable=SC2086 # the flags are words
${CC:-cc} -o "$out/prog" "$src" $flags
LD_LIBRARY_PATH="$build/src" "$out/prog"
