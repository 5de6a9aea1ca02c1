/* SPDX-License-Identifier: MIT */
/*
 * The symbolizer's heavy half, behind one table of functions: libdw's address-to-frames
 * lookups (symbolizer_dw.c, with debugfind.c) and the C++/Rust demangler (demangle.c). The
 * shared library does not link them: every process it is preloaded into would map libdw,
 * libelf and their compression libraries at start, whether it ever symbolizes or not. It
 * loads them with dlopen() from libmemprof-symbolize.so, a private module installed in the
 * plugin's directory, at the first lookup (symbolizer_load.c). Lookups run under the
 * resolver's lock on a user thread or the plugin's writer at snapshot/export time, never in
 * a hook or a signal handler, so dlopen() is safe there. The command and the unit tests link
 * the same code in instead (symbolizer_linked.c).
 */
#ifndef MEMPROF_RESOLVE_SYMBOLIZER_H
#define MEMPROF_RESOLVE_SYMBOLIZER_H

#include "config.h"

#include <stdint.h>

#include "resolve/symbols.h"

/* The module's file name, and the one symbol it exports. */
#define MEMPROF_SYMBOLIZER_MODULE "libmemprof-symbolize.so"
#define MEMPROF_SYMBOLIZER_ENTRY  "memprof__symbolizer_open"
/* Changes whenever the table or the host change: a module of another build is refused. */
#define MEMPROF_SYMBOLIZER_ABI (3u << 16 | (unsigned)sizeof(struct memprof_sym_frame))

struct Dwfl_Module;

/* What the library gives the module. */
struct memprof__symbolizer_host {
    unsigned abi;
    /* The resolver's string pool (strpool.h): names and files live as long as the process. */
    const char *(*intern)(const char *s);
};

/* Every function is called under the resolver's lock (symbols.c); none is thread-safe. */
struct memprof__symbolizer {
    unsigned abi;
    /* The frames of `addr` (a return address less one, in this process) when libdw knows
     * its module: innermost first, at most `max`; returns how many (0: unknown to libdw, or
     * NULL when the module was built without libdw). `path` is the module's interned path
     * (the key of its symbol index). *sym_offset is addr - the function's start + 1 when
     * known, else 0. */
    unsigned (*process_frames)(uintptr_t addr, const char *path, struct memprof_sym_frame *frames,
                               unsigned max, uintptr_t *sym_offset);
    /* Whether the symbol index process_frames() built for module `path` holds any function:
     * its symbol table, or the dynamic one when the file has none, was read, so the same
     * dynamic symbols through dladdr() can name nothing more (NULL without libdw). */
    bool (*module_has_symbols)(const char *path);
    /* The same for file address `addr` of a module of a Dwfl another file reported
     * (memprof__sym_module_frames(), offline.h); NULL without libdw. */
    unsigned (*module_frames)(struct Dwfl_Module *mod, const char *key, uintptr_t addr,
                              struct memprof_sym_frame *frames, unsigned max,
                              uintptr_t *sym_offset);
    /* Module `mod` (one module_frames() was given) is about to end (dwfl_end()): everything
     * kept of it goes (memprof__sym_module_gone()); NULL without libdw. */
    void (*module_gone)(struct Dwfl_Module *mod);
    /* memprof__demangle() (demangle.h). */
    char *(*demangle)(const char *name);
    /* A fork() child whose parent was inside a lookup: forget everything (symbols.h). */
    void (*forget)(void);
};

/* The module's entry point (MEMPROF_SYMBOLIZER_ENTRY): the table, or NULL when `host` is of
 * another build. The one symbol the module exports. */
const struct memprof__symbolizer *
memprof__symbolizer_open(const struct memprof__symbolizer_host *host);

/* The table, loaded on the first call (symbolizer_load.c) or linked in (symbolizer_linked.c);
 * NULL when the module cannot be loaded, in which case names come from dladdr() and the
 * modules' own ELF symbol tables, undemangled (symbols.c). Call under the resolver's lock:
 * the first call may dlopen(). */
const struct memprof__symbolizer *memprof__symbolizer_get(void);

#endif
