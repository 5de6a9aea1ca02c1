/* SPDX-License-Identifier: MIT */
/*
 * Symbolization outside the profiled process, for the `memprof` command (the layer offline/,
 * between resolve/ and the command, which sees the resolver only through it): a module recorded
 * in a profile (path and GNU build id) and a return address in it become the frames the
 * in-process symbolizer would have given (symbols.h: function, file, line, inlined frames),
 * read from files found by build id, never from a file of another build:
 *
 *   the ELF: the recorded path when its build id matches, else DIR/.build-id/xx/yyyy in
 *   each debug directory, else the debug file itself (which has the symbols and DWARF);
 *   its debug information: the ELF's own, else debugfind.h's search (build-id directories,
 *   .gnu_debuglink, the directories given, /usr/lib/debug), else debuginfod.
 *
 * debuginfod (elfutils' libdebuginfod, when the command was built with it) is asked only
 * when enabled and DEBUGINFOD_URLS is set; it downloads the executable or debug file of a
 * build id into its cache. Not thread-safe.
 */
#ifndef MEMPROF_OFFLINE_OFFLINE_H
#define MEMPROF_OFFLINE_OFFLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resolve/symbols.h"

struct memprof_offline;

struct memprof_offline_config {
    const char *const *debug_dirs; /* searched first, each laid out like /usr/lib/debug */
    size_t ndebug_dirs;
    bool debuginfod; /* ask the servers of DEBUGINFOD_URLS */
};

/* Whether this build can symbolize offline (libdw) and ask debuginfod (libdebuginfod). */
bool memprof__offline_supported(void);
bool memprof__offline_has_debuginfod(void);

/* A symbolizer; NULL when out of memory. The configuration's strings must outlive it. */
struct memprof_offline *memprof__offline_new(const struct memprof_offline_config *c);
void memprof__offline_free(struct memprof_offline *o);

/* The frames of return address `pc` of the module (path, hex build id; either may be NULL)
 * loaded with `load_bias`: innermost first, at most `max`, the outermost with *sym_offset.
 * Returns how many frames, 0 when the module's files or the address's symbol are not found.
 * Strings are interned for the life of the process. */
unsigned memprof__offline_frames(struct memprof_offline *o, const char *path, const char *build_id,
                                 uint64_t load_bias, uint64_t pc, struct memprof_sym_frame *out,
                                 unsigned max, uint64_t *sym_offset);

/* Modules whose files were not found, in the order first asked for: index i < count, NULL
 * past the end; *build_id may be NULL. For the command's message. */
const char *memprof__offline_missing(const struct memprof_offline *o, size_t i,
                                     const char **build_id);

/* The readable form of a mangled C++ or Rust name the command reads from outside a profiled
 * process (a profile written by an older version, an ELF symbol table): the resolver's own
 * demangler (resolve/demangle.h), so names read back match those the profiler gives in the
 * process. A new malloc()ed string the caller frees, or NULL when `name` is not a mangled
 * name (keep it) or memory runs out. */
char *memprof__offline_demangle(const char *name);

#endif
