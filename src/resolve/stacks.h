/* SPDX-License-Identifier: MIT */
/*
 * Resolved stacks: an interned stack id -> the frames a person reads, leaf first, with
 * inlined functions expanded into frames of their own and interpreter frames from a
 * runtime frame source merged in place of the interpreter's eval-loop frames ("trim and
 * sandwich", runtime.h). Cached per stack id for the life of the process (stacks and their
 * symbols never change); thread-safe.
 */
#ifndef MEMPROF_RESOLVE_STACKS_H
#define MEMPROF_RESOLVE_STACKS_H

#include <stdint.h>

#include "core/stacktab.h"

struct memprof_rframe {
    const char *function; /* NULL when unknown */
    const char *file;
    const char *module;
    const char *build_id;
    uint32_t line;
    uint32_t flags;   /* MEMPROF_FRAME_* (memprof.h) */
    uint64_t address; /* 0 for runtime frames */
    uint64_t load_bias;
    uint64_t sym_offset; /* address - function start, when known */
    /* The module's segment holding the address (symbols.h), 0 when not known. */
    uint64_t map_start, map_limit, map_offset;
    const char *system_name; /* the function as the binary spells it, NULL when the same */
};

struct memprof_rstack {
    unsigned n;
    struct memprof_rframe frames[];
};

/* The resolved frames of stack `id`, or NULL for an unknown id or when out of memory. */
const struct memprof_rstack *memprof__resolve_stack(struct memprof_stacktab *st, uint32_t id);

#endif
