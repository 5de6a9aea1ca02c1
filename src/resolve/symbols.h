/* SPDX-License-Identifier: MIT */
/*
 * Native symbolization: a return address -> the module it lies in (path, build id, load
 * bias) and one or more source-level frames: the function containing the call, preceded by
 * every function inlined into it at that address (innermost first), each with its source
 * file and line where debug information has them.
 *
 * Back ends: elfutils libdw (file:line, inlined frames, .symtab, separate debug files) when
 * built with it; otherwise dladdr() plus the module's own ELF symbol table (function names
 * even for static functions, no lines). Results are cached per address for the life of the
 * process. Runs only on user threads at resolve/snapshot/export time, never in a hook.
 *
 * Separate debug files are looked for on this machine only (debugfind.h): libdw's standard
 * search would ask the debuginfod servers of DEBUGINFOD_URLS, so a profiled program's exit
 * would make network connections. MEMPROF_DEBUGINFOD=1 allows that; the `memprof` command
 * asks debuginfod itself when it symbolizes a profile later (offline.h).
 */
#ifndef MEMPROF_RESOLVE_SYMBOLS_H
#define MEMPROF_RESOLVE_SYMBOLS_H

#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "common/compiler.h"

struct memprof_sym_frame {
    const char *function;    /* demangled; NULL when unknown */
    const char *file;        /* NULL when unknown */
    uint32_t line;           /* 0 when unknown */
    bool inlined;            /* this function was inlined into the next frame */
    const char *system_name; /* as the binary spells it (mangled); NULL when `function` is */
};

struct memprof_sym {
    uintptr_t pc;         /* the return address */
    const char *module;   /* path of the loaded object, NULL if none */
    const char *build_id; /* hex GNU build id, NULL if none */
    uintptr_t load_bias;  /* pc - load_bias = address in the ELF file */
    uintptr_t sym_offset; /* pc - start of the (outermost) function, when known */
    /* The PT_LOAD segment holding pc as the kernel maps it (/proc/self/maps): start and end
     * rounded out to pages, and the file offset of the start; all 0 when pc is in no module.
     * What a pprof Mapping holds (export/pprof.c). */
    uintptr_t map_start, map_limit;
    uint64_t map_offset;
    bool raw;                          /* looked up without names (set_symbolize(false)) */
    unsigned nframes;                  /* >= 1 */
    struct memprof_sym_frame frames[]; /* innermost (inlined) first, the real function last */
};

/* Resolves a return address (looking up pc - 1, inside the call instruction). The result is
 * cached and immutable; never NULL. Thread-safe. With symbolization off
 * (memprof__sym_set_symbolize()), names are looked up only when `need_names` says so; a raw
 * result named later is replaced and freed, so a caller must not keep a result past its
 * next call (stacks.c, the only caller, does not). */
const struct memprof_sym *memprof__sym_get(uintptr_t pc, bool need_names);

/* Whether lookups look for names (the default) or only find each address's module and
 * segment: the profile then carries addresses to be symbolized later, outside the process
 * (MEMPROF_SYMBOLIZE=0, offline.h). Set before the first lookup: results are cached. */
MEMPROF_INTERNAL void memprof__sym_set_symbolize(bool on);

#if HAVE_LIBDW
struct Dwfl_Module;
/* The frames of file address `addr` (inside the call instruction already) in a module of a
 * Dwfl another file reported (offline.h), found as for the process's own modules: DWARF
 * scopes for inlined frames and lines, the module's symbol table for the outermost name.
 * `key` names the module for the symbol-table cache (an interned string, one per module).
 * Fills at most `max` frames, innermost first, and returns how many (0 when nothing is
 * known); *sym_offset is addr - the function's start + 1 when known, else 0. */
unsigned memprof__sym_module_frames(struct Dwfl_Module *mod, const char *key, uintptr_t addr,
                                    struct memprof_sym_frame *frames, unsigned max,
                                    uintptr_t *sym_offset);
/* Forgets what memprof__sym_module_frames() kept of module `mod` (its symbol index holds
 * names in its Elf until looked up): call before the module's Dwfl ends. Thread-safe. */
void memprof__sym_module_gone(struct Dwfl_Module *mod);
#endif

/* Distinct addresses resolved so far, and those without any symbol. */
void memprof__sym_counts(uint64_t *resolved, uint64_t *unresolved);

/* fork() around the symbolizer (stacks.c registers the handlers). prepare: takes its lock,
 * waiting until `until` (CLOCK_REALTIME) at most; returns whether it did. parent: releases
 * it. child: leaves the lock free, and when prepare did not get it, forgets everything the
 * symbolizer had (another thread was inside, and what it was changing may be half done). */
bool memprof__sym_fork_prepare(const struct timespec *until);
void memprof__sym_fork_parent(bool held);
void memprof__sym_fork_child(bool held);

#endif
