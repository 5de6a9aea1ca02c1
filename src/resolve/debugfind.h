/* SPDX-License-Identifier: MIT */
/*
 * Finding a module's separate debug file on this machine, for libdw's find_debuginfo
 * callback: by build id (DIR/.build-id/xx/yyyy.debug) and by .gnu_debuglink name (next to
 * the module, in its .debug/ directory, under /usr/lib/debug and in the directories given),
 * each candidate accepted only when its build id is the module's. Never over the network:
 * the in-process symbolizer must not ask debuginfod (symbols.h), and the command asks it
 * itself when told to (offline.h).
 */
#ifndef MEMPROF_RESOLVE_DEBUGFIND_H
#define MEMPROF_RESOLVE_DEBUGFIND_H

#include "config.h"

#include <stddef.h>

#if HAVE_LIBDW
#include <elfutils/libdwfl.h>

/* libdw's find_debuginfo contract: `file_name` is the module's file (may be NULL),
 * `debuglink` its .gnu_debuglink name or, for a dwz alternate file, that file's path. `dirs`
 * are searched before /usr/lib/debug. Returns an open descriptor and sets *path to a
 * malloc'ed name, or returns -1 when nothing matches. */
int memprof__debug_find(Dwfl_Module *mod, const char *file_name, const char *debuglink,
                        const char *const *dirs, size_t ndirs, char **path);

/* Whether the ELF file open on fd has the GNU build id `bits` (len bytes). */
int memprof__debug_build_id_matches(int fd, const unsigned char *bits, size_t len);
#endif

#endif
