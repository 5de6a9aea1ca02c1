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
 */
#ifndef MEMPROF_RESOLVE_SYMBOLS_H
#define MEMPROF_RESOLVE_SYMBOLS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct memprof_sym_frame {
    const char *function; /* demangled; NULL when unknown */
    const char *file;     /* NULL when unknown */
    uint32_t line;        /* 0 when unknown */
    bool inlined;         /* this function was inlined into the next frame */
};

struct memprof_sym {
    uintptr_t pc;                      /* the return address */
    const char *module;                /* path of the loaded object, NULL if none */
    const char *build_id;              /* hex GNU build id, NULL if none */
    uintptr_t load_bias;               /* pc - load_bias = address in the ELF file */
    uintptr_t sym_offset;              /* pc - start of the (outermost) function, when known */
    unsigned nframes;                  /* >= 1 */
    struct memprof_sym_frame frames[]; /* innermost (inlined) first, the real function last */
};

/* Resolves a return address (looking up pc - 1, inside the call instruction). The result is
 * cached and immutable; never NULL. Thread-safe. */
const struct memprof_sym *memprof__sym_get(uintptr_t pc);

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
