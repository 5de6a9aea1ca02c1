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
#include <stdbool.h>
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

/* The sampled halves of the hot wrappers, out of line: the unsampled case then ends in a
 * tail call of the real function (no frame of ours, no return through us). In the sampling
 * text section so stack capture skips their frames. A failed allocation still goes through
 * memprof__alloc_slow, which then only draws the next countdown. */
MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE __attribute__((unused)) void *
memprof__malloc_sampled(const struct memprof_allocator *a, size_t n)
{
    void *p = a->malloc(n);
    memprof__alloc_slow(p, n);
    return p;
}

MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE __attribute__((unused)) void *
memprof__calloc_sampled(const struct memprof_allocator *a, size_t n, size_t size)
{
    void *p = a->calloc(n, size);
    memprof__alloc_slow(p, n * size);
    return p;
}

/* realloc with a possibly sampled old block or a sampled new one: the old block's sample is
 * taken out first, and put back if the real realloc fails and so keeps the old block. */
MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE __attribute__((unused)) void *
memprof__realloc_sampled(const struct memprof_allocator *a, void *old, size_t n, bool sample)
{
    struct memprof_hm_entry taken;
    bool had_sample = memprof__take(old, &taken);
    void *p = a->realloc(old, n);
    /* n == 0 and NULL: glibc freed the block. Otherwise NULL leaves the old block intact. */
    if (!p && had_sample && n != 0)
        memprof__restore(&taken);
    if (sample)
        memprof__alloc_slow(p, n);
    return p;
}

MEMPROF_INLINE void *memprof__wrap_malloc(const struct memprof_allocator *a, size_t n)
{
    if (MEMPROF_LIKELY(!memprof__sampler_charge(n)))
        return a->malloc(n);
    return memprof__malloc_sampled(a, n);
}

MEMPROF_INLINE void memprof__wrap_free(const struct memprof_allocator *a, void *p)
{
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
    if (MEMPROF_LIKELY(!memprof__sampler_charge(total)))
        return a->calloc(n, size);
    return memprof__calloc_sampled(a, n, size);
}

MEMPROF_INLINE void *memprof__wrap_realloc(const struct memprof_allocator *a, void *old, size_t n)
{
    if (!old)
        return memprof__wrap_malloc(a, n);
    bool sample = memprof__sampler_charge(n);
    if (MEMPROF_LIKELY(!sample && !memprof__maybe_sampled(old)))
        return a->realloc(old, n);
    return memprof__realloc_sampled(a, old, n, sample);
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
