/* SPDX-License-Identifier: MIT */
/*
 * A module's function symbols sorted by address, and the lookup of an address in them: the
 * index both symbolizers keep per module (symbols.c reads the ELF symbol table itself,
 * symbolizer_dw.c through libdw, which also finds separate debug files). Header-only: the
 * two live in different shared objects (libmemprof.so.1 and its symbolizer module).
 */
#ifndef MEMPROF_RESOLVE_SYMTAB_H
#define MEMPROF_RESOLVE_SYMTAB_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

struct func_sym {
    uintptr_t start, size;
    const char *name, *system; /* demangled, and as spelled when that differs */
};

struct symtab {
    const char *path;
    struct func_sym *syms;
    size_t n;
    struct symtab *next;
};

static inline int memprof__func_sym_by_start(const void *a, const void *b)
{
    const struct func_sym *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Sorts t's symbols by address, for memprof__symtab_find(). */
static inline void memprof__symtab_sort(struct symtab *t)
{
    qsort(t->syms, t->n, sizeof *t->syms, memprof__func_sym_by_start);
}

/* The symbol whose function contains vaddr: the last starting at or before it, if vaddr is
 * within its size; NULL if none. */
static inline struct func_sym *memprof__symtab_find_sym(const struct symtab *t, uintptr_t vaddr)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->syms[mid].start <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    struct func_sym *f = &t->syms[lo - 1];
    return vaddr < f->start + f->size ? f : NULL;
}

/* What f (memprof__symtab_find_sym()'s answer for vaddr) says of it: the function's name,
 * with its spelling in *system and vaddr's offset in it in *offset; NULL if f is. */
static inline const char *memprof__symtab_answer(const struct func_sym *f, uintptr_t vaddr,
                                                 uintptr_t *offset, const char **system)
{
    if (!f)
        return NULL;
    *offset = vaddr - f->start;
    *system = f->system;
    return f->name;
}

/* The function containing vaddr, as memprof__symtab_answer() gives it. */
static inline const char *memprof__symtab_find(const struct symtab *t, uintptr_t vaddr,
                                               uintptr_t *offset, const char **system)
{
    return memprof__symtab_answer(memprof__symtab_find_sym(t, vaddr), vaddr, offset, system);
}

#endif
