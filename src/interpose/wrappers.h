/* SPDX-License-Identifier: MIT */
/*
 * The allocator wrappers every backend shares: given the real allocator's functions, each
 * wrap_*() keeps the C semantics of the function it wraps (errno on failure, calloc and
 * reallocarray overflow -> ENOMEM, alignment errors from the real allocator, realloc(NULL, n)
 * = malloc(n), realloc(p, 0) as glibc's) and reports the allocation or free to the engine.
 * A realloc is the free of the old block and an allocation of the new size; a failed
 * realloc keeps the old block's sample. Backends differ only in how calls reach these (the
 * preload plugin's exported symbols, the GOT backend's patched slots) and in how the real
 * functions are found (perfetto's wrap_allocators.h is the precedent).
 */
#ifndef MEMPROF_INTERPOSE_WRAPPERS_H
#define MEMPROF_INTERPOSE_WRAPPERS_H

#include <errno.h>
#include <stddef.h>

#include "core/engine.h"

struct memprof_allocator {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t); /* NULL if the allocator has none */
    size_t (*malloc_usable_size)(void *);
};

MEMPROF_INLINE void *memprof__wrap_malloc(const struct memprof_allocator *a, size_t n)
{
    void *p = a->malloc(n);
    memprof__on_alloc(p, n);
    return p;
}

MEMPROF_INLINE void memprof__wrap_free(const struct memprof_allocator *a, void *p)
{
    if (!p)
        return;
    memprof__on_free(p);
    a->free(p);
}

MEMPROF_INLINE void *memprof__wrap_calloc(const struct memprof_allocator *a, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = a->calloc(n, size);
    memprof__on_alloc(p, total);
    return p;
}

MEMPROF_INLINE void *memprof__wrap_realloc(const struct memprof_allocator *a, void *old, size_t n)
{
    if (!old)
        return memprof__wrap_malloc(a, n);
    struct memprof_hm_entry taken;
    bool had_sample = memprof__take(old, &taken);
    void *p = a->realloc(old, n);
    if (!p) {
        /* n == 0: glibc freed the block. Otherwise the old block is intact: keep its
         * sample. */
        if (had_sample && n != 0)
            memprof__restore(&taken);
        return NULL;
    }
    memprof__on_alloc(p, n);
    return p;
}

MEMPROF_INLINE void *memprof__wrap_reallocarray(const struct memprof_allocator *a, void *old,
                                                size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return memprof__wrap_realloc(a, old, total);
}

MEMPROF_INLINE int memprof__wrap_posix_memalign(const struct memprof_allocator *a, void **out,
                                                size_t align, size_t n)
{
    int rc = a->posix_memalign(out, align, n);
    if (rc == 0)
        memprof__on_alloc(*out, n);
    return rc;
}

MEMPROF_INLINE void *memprof__wrap_aligned_alloc(const struct memprof_allocator *a, size_t align,
                                                 size_t n)
{
    void *p = a->aligned_alloc(align, n);
    memprof__on_alloc(p, n);
    return p;
}

MEMPROF_INLINE void *memprof__wrap_memalign(const struct memprof_allocator *a, size_t align,
                                            size_t n)
{
    void *p = a->memalign(align, n);
    memprof__on_alloc(p, n);
    return p;
}

MEMPROF_INLINE void *memprof__wrap_valloc(const struct memprof_allocator *a, size_t n)
{
    void *p = a->valloc(n);
    memprof__on_alloc(p, n);
    return p;
}

MEMPROF_INLINE void *memprof__wrap_pvalloc(const struct memprof_allocator *a, size_t n, size_t page)
{
    if (!a->pvalloc) {
        /* The allocator has no pvalloc: round up to whole pages ourselves. */
        size_t total;
        if (__builtin_add_overflow(n, page - 1, &total)) {
            errno = ENOMEM;
            return NULL;
        }
        return memprof__wrap_valloc(a, total & ~(page - 1));
    }
    void *p = a->pvalloc(n);
    memprof__on_alloc(p, n);
    return p;
}

#endif
