/* SPDX-License-Identifier: MIT */
/*
 * Rewriting a loaded ELF object's imports: the Global Offset Table slots through which it
 * calls functions of other objects. The GOT backend points every object's allocator imports
 * at its hooks; stack capture points libunwind's pipe2 import at a function that opens no
 * file descriptor (capture.c).
 *
 * Both JUMP_SLOT (PLT) and GLOB_DAT relocations are rewritten, REL and RELA: code built with
 * -fno-plt and function-pointer uses go through GLOB_DAT slots. A slot inside the object's
 * PT_GNU_RELRO range (read-only after start-up, always with -z now) is made writable for the
 * store and read-only again. A slot that already holds the replacement is left alone, so
 * patching again only touches what is new, and so is one that holds any other function of
 * the profiler's (one user's replacement is not displaced by another's).
 */
#ifndef MEMPROF_LOADER_IMPORTS_H
#define MEMPROF_LOADER_IMPORTS_H

#include <stddef.h>

struct dl_phdr_info; /* <link.h> */

/* A function an object imports, by name, and what its slots should point at instead. */
struct memprof_import {
    const char *name;
    void *fn;
};

/* Rewrites the slots of `info`'s object that import any of `imports`. Takes no lock: the
 * caller serialises patching of one object. Not for allocation hooks. */
void memprof__imports_patch(const struct dl_phdr_info *info, const struct memprof_import *imports,
                            size_t n);
/* The same with the replacement chosen per slot: choose(ctx, i, value) gets the index in
 * `imports` of the slot's import (whose fn is not used) and what the slot holds, and
 * returns what it is to hold, or NULL to leave it. A slot that holds a function of the
 * profiler's is not offered. A choose that returns NULL reads the slots without writing. */
void memprof__imports_rewrite(const struct dl_phdr_info *info, const struct memprof_import *imports,
                              size_t n, void *(*choose)(void *ctx, size_t i, void *value),
                              void *ctx);
/* The same for the object that contains `addr`. Returns 0, or -ENOENT if no loaded object
 * contains it. Takes the loader's lock (dl_iterate_phdr). */
int memprof__imports_patch_at(const void *addr, const struct memprof_import *imports, size_t n);

#endif
