/* SPDX-License-Identifier: MIT */
/*
 * Decompressed copies of separate debug files, kept between runs. Debian's -dbg packages
 * and Fedora's debuginfo compress their DWARF sections (SHF_COMPRESSED), and libdw inflates
 * every one of them whenever it opens the file: for glibc's (4 MiB holding 10 MiB) ~60 ms,
 * in every `memprof run` (every stack ends in __libc_start_call_main) and at every exit of a
 * process that names its own profile. The command, once it has found such a file, writes a
 * copy with the sections decompressed to the cache directory (named by the file's build id,
 * written under a temporary name and renamed, so a reader never sees half of one) and uses
 * that; later runs, and profiled processes, find the copy and read it as it is.
 *
 * The directory: MEMPROF_CACHE_DIR, else $XDG_CACHE_HOME/memprof, else ~/.cache/memprof;
 * MEMPROF_CACHE_DIR set to the empty string turns the cache off. Entries live in its debug/
 * subdirectory as BUILD-ID.debug; when they take more than 1 GiB together, the ones used
 * least recently are removed.
 */
#ifndef MEMPROF_RESOLVE_DEBUGCACHE_H
#define MEMPROF_RESOLVE_DEBUGCACHE_H

#include "config.h"

#include <stdbool.h>

#if HAVE_LIBDW
/* Given a separate debug file found for libdw (open on `fd`, its malloc'ed name in *path):
 * if its DWARF is compressed and the cache holds the decompressed copy, that copy (the
 * original closed, *path replaced); else, with `fill`, makes the copy and returns it; else
 * (or on any failure) `fd` itself. Only the command fills the cache: a profiled process
 * writes nothing outside its profile. Not thread-safe (the symbolizers' callers hold their
 * locks). */
int memprof__debug_cache(int fd, char **path, bool fill);
#endif

#endif
