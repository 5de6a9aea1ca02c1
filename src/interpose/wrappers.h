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
#include <string.h>
#include <unistd.h>

#include "core/backend.h"

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
    /* Its sampled blocks stay its own: an allocator that is not glibc's (a program's or a
     * library's own malloc family under the GOT start), whose free() would not take a block
     * of the sample heap. Zero: sampled blocks may come from the sample heap. */
    bool no_sample_heap;
    /* NULL, or whether every free of a sampled block will reach the profiler: the preload
     * plugin first has libc's own entries name its functions (preload_retarget.c). Asked
     * before each sampled block until it says yes, and before each private block; while it
     * says no, the sample heap serves none. */
    bool (*frees_reach_us)(void);
};

static inline bool memprof__frees_reach_us(const struct memprof_allocator *a)
{
    return !a->frees_reach_us || a->frees_reach_us();
}

/* Whether memprof__first_block() has been through (glibc's allocator behind: an allocator
 * whose blocks must stay its own never gets there). */
static _Atomic bool memprof__real_called;

/* What comes before the first sampled block of glibc's allocator, from the sample heap or
 * not: `a`'s frees_reach_us() (until it says yes, the sample heap serves nothing), and one
 * call of `a` (nothing changes if the program has called it already): glibc's allocator
 * sets itself up on its first call, and before glibc 2.37 that reads its tcache key with
 * getrandom(), a cancellation point. Served from the sample heap, the program's first
 * allocations would leave that call to a later one, perhaps in a thread with a pending
 * pthread_cancel(), which would die inside malloc (tests/stress/programs/cancel.c). Made
 * here, at the first sampled allocation, it comes where the program's own first call would
 * have; a process that never allocates (a /bin/true) makes none, and pays no getrandom(),
 * brk() or heap page at start. Returns whether the sample heap may serve the block. */
static inline bool memprof__first_block(const struct memprof_allocator *a)
{
    if (MEMPROF_LIKELY(memprof_atomic_load_relaxed(&memprof__real_called)))
        return true;
    if (a->no_sample_heap || !memprof__frees_reach_us(a))
        return false;
    a->free(a->malloc(1));
    memprof_atomic_store_relaxed(&memprof__real_called, true);
    return true;
}

/* A block of the sample heap for a sampled request of `a`'s, or NULL (none, or `a`'s
 * blocks must stay its own). */
static inline void *memprof__heap_block(const struct memprof_allocator *a, size_t n, size_t align,
                                        bool zero)
{
    if (a->no_sample_heap || !memprof__first_block(a))
        return NULL;
    return memprof__sample_heap_alloc(n, align, zero);
}

/* An allocation of the profiler's own on a thread whose guard is MEMPROF_GUARD_PRIVATE
 * (sampler.h): the thread that calls exit() while it starts the profile-writing thread
 * (preload_dump.c) may have interrupted the real allocator in a signal handler, holding its
 * lock. The sample heap takes no lock; NULL without one, and the caller uses the real
 * allocator after all. */
static inline void *memprof__private_alloc(const struct memprof_allocator *a, size_t n, bool zero)
{
    if (MEMPROF_LIKELY(memprof__tls.guard != MEMPROF_GUARD_PRIVATE) || n == 0 ||
        a->no_sample_heap || !memprof__frees_reach_us(a))
        return NULL;
    return memprof__sample_heap_alloc(n, 0, zero);
}

/* The sampled halves of the hot wrappers, out of line: the unsampled case then ends in a
 * tail call of the real function (no frame of ours, no return through us). In the sampling
 * text section so stack capture skips their frames. A sampled block comes from the sample
 * heap when the engine has one (the preload plugin's, or the GOT start's with glibc's chunk
 * framing) and it can serve the request exactly as the real allocator would; otherwise from
 * the real allocator. */

MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE __attribute__((unused)) void *
memprof__malloc_sampled(const struct memprof_allocator *a, size_t n)
{
    int saved;
    if (!memprof__sample_begin(n, &saved)) {
        void *own = memprof__private_alloc(a, n, false);
        return own ? own : a->malloc(n);
    }
    void *p = memprof__heap_block(a, n, 0, false);
    if (!p)
        p = a->malloc(n);
    memprof__sample_end(p, n, saved);
    return p;
}

MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE __attribute__((unused)) void *
memprof__calloc_sampled(const struct memprof_allocator *a, size_t n, size_t size, size_t total)
{
    int saved;
    if (!memprof__sample_begin(total, &saved)) {
        void *own = memprof__private_alloc(a, total, true);
        return own ? own : a->calloc(n, size);
    }
    void *p = memprof__heap_block(a, total, 0, true);
    if (!p)
        p = a->calloc(n, size);
    memprof__sample_end(p, total, saved);
    return p;
}

/* realloc of a block of the sample heap. Its sample (if any: a block whose heap-map insert
 * was dropped has none) is taken out; the block stays in place if the new size has the same
 * slot size, and moves otherwise (to the sample heap if the new block is sampled, else to
 * the real allocator). The sample heap only exists in front of glibc's allocator, so
 * realloc(p, 0) frees p and returns NULL, as glibc's does. */
MEMPROF_SAMPLING_TEXT static __attribute__((unused)) void *
memprof__realloc_heap_block(const struct memprof_allocator *a, void *old, size_t n, bool sample,
                            int saved)
{
    struct memprof_hm_entry taken;
    if (n == 0) {
        memprof__free_sampled_block(old);
        return NULL;
    }
    void *p = old;
    if (memprof__sheap_resize(&memprof__hot.sheap, old, n)) {
        memprof__take(old, &taken);
    } else {
        p = sample ? memprof__heap_block(a, n, 0, false) : NULL;
        if (!p)
            p = a->malloc(n);
        if (!p) { /* the old block and its sample stay */
            if (sample)
                memprof__sample_end(NULL, n, saved);
            return NULL;
        }
        size_t have = memprof__sheap_usable(&memprof__hot.sheap, old);
        memcpy(p, old, have < n ? have : n);
        memprof__free_sampled_block(old);
    }
    if (sample)
        memprof__sample_end(p, n, saved);
    return p;
}

/* realloc with a block of the sample heap, a possibly sampled old block or a sampled new one
 * (`charge`: the sampler's charge for n said to decide). The old block's sample is taken out
 * first, and put back if the real realloc fails and so keeps the old block. */
MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE __attribute__((unused)) void *
memprof__realloc_sampled(const struct memprof_allocator *a, void *old, size_t n, bool charge)
{
    int saved = 0;
    bool sample = charge && memprof__sample_begin(n, &saved);
    if (memprof__in_sample_heap(old) && memprof__sample_heap_block(old))
        return memprof__realloc_heap_block(a, old, n, sample, saved);
    struct memprof_hm_entry taken;
    void *p = sample ? memprof__heap_block(a, n, 0, false) : NULL;
    if (p) { /* a sampled new block moves to the sample heap */
        size_t have = a->malloc_usable_size(old);
        memcpy(p, old, have < n ? have : n);
        memprof__take(old, &taken);
        a->free(old);
    } else {
        bool had_sample = memprof__take(old, &taken);
        p = a->realloc(old, n);
        /* n == 0 and NULL: glibc freed the block. Otherwise NULL leaves the old block intact. */
        if (!p && had_sample && n != 0)
            memprof__restore(&taken);
    }
    if (sample)
        memprof__sample_end(p, n, saved);
    return p;
}

/* realloc of a block outside the sample heap, not sampled anew, while samples outside the
 * heap are live: the old block's sample is looked for only if the filter may know it. */
MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE __attribute__((unused)) void *
memprof__realloc_checked(const struct memprof_allocator *a, void *old, size_t n)
{
    if (MEMPROF_UNLIKELY(memprof__maybe_sampled(old)))
        return memprof__realloc_sampled(a, old, n, false);
    return a->realloc(old, n);
}

/* An aligned request the sample heap serves as glibc would: a power-of-two alignment
 * (glibc's error cases and its rounding of other alignments stay with glibc). */
static inline bool memprof__sheap_alignment(size_t align)
{
    return align != 0 && (align & (align - 1)) == 0;
}

MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE __attribute__((unused)) int
memprof__posix_memalign_sampled(const struct memprof_allocator *a, void **out, size_t align,
                                size_t n)
{
    int saved;
    if (!memprof__sample_begin(n, &saved))
        return a->posix_memalign(out, align, n);
    void *p = NULL;
    int rc = 0;
    if (memprof__sheap_alignment(align) && align >= sizeof(void *))
        p = memprof__heap_block(a, n, align, false);
    else
        (void)memprof__first_block(a);
    if (p)
        *out = p;
    else
        rc = a->posix_memalign(out, align, n);
    memprof__sample_end(rc == 0 ? *out : NULL, n, saved);
    return rc;
}

/* aligned_alloc and memalign (`real`, one of `a`'s). */
MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE __attribute__((unused)) void *
memprof__aligned_sampled(const struct memprof_allocator *a, void *(*real)(size_t, size_t),
                         size_t align, size_t n)
{
    int saved;
    if (!memprof__sample_begin(n, &saved))
        return real(align, n);
    void *p = NULL;
    if (memprof__sheap_alignment(align))
        p = memprof__heap_block(a, n, align, false);
    else
        (void)memprof__first_block(a);
    if (!p)
        p = real(align, n);
    memprof__sample_end(p, n, saved);
    return p;
}

/* valloc and pvalloc (`real`, one of `a`'s): a request of n bytes served with `whole`
 * page-aligned bytes. */
MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE __attribute__((unused)) void *
memprof__page_sampled(const struct memprof_allocator *a, void *(*real)(size_t), size_t n,
                      size_t whole, size_t page)
{
    int saved;
    if (!memprof__sample_begin(n, &saved))
        return real(n);
    void *p = memprof__heap_block(a, whole, page, false);
    if (!p)
        p = real(n);
    memprof__sample_end(p, n, saved);
    return p;
}

MEMPROF_INLINE void *memprof__wrap_malloc(const struct memprof_allocator *a, size_t n)
{
    if (MEMPROF_LIKELY(!memprof__sampler_charge(n)))
        return a->malloc(n);
    return memprof__malloc_sampled(a, n);
}

/* The free of a block the Bloom filter may know. */
MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE __attribute__((unused)) void
memprof__free_maybe_sampled(const struct memprof_allocator *a, void *p)
{
    memprof__free_slow(p);
    a->free(p);
}

/* The free of any block but the sample heap's while samples outside the heap are live:
 * out of line, so that every other free is two tests and a tail call with no stack frame,
 * and so is this one when the filter says no. */
MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE __attribute__((unused)) void
memprof__free_filtered(const struct memprof_allocator *a, void *p)
{
    if (MEMPROF_UNLIKELY(memprof__maybe_sampled(p)))
        memprof__free_maybe_sampled(a, p);
    else
        a->free(p);
}

/* The free of a block in the sample heap's range: the heap's, or the real allocator's in
 * address space the heap does not map (a hole glibc left by unmapping a framed slot, or
 * someone else's mapping in the window), which may be a sample the filter knows. */
MEMPROF_SAMPLING_TEXT static MEMPROF_NOINLINE MEMPROF_COLD __attribute__((unused)) void
memprof__free_in_range(const struct memprof_allocator *a, void *p)
{
    if (!memprof__free_sampled_block(p))
        memprof__free_filtered(a, p);
}

MEMPROF_INLINE void memprof__wrap_free(const struct memprof_allocator *a, void *p)
{
    if (MEMPROF_UNLIKELY(memprof__in_sample_heap(p)))
        memprof__free_in_range(a, p);
    else if (MEMPROF_UNLIKELY(memprof_atomic_load_relaxed(&memprof__hot.outside_live) != 0))
        memprof__free_filtered(a, p);
    else
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
    return memprof__calloc_sampled(a, n, size, total);
}

MEMPROF_INLINE void *memprof__wrap_realloc(const struct memprof_allocator *a, void *old, size_t n)
{
    if (!old)
        return memprof__wrap_malloc(a, n);
    bool charge = memprof__sampler_charge(n);
    if (MEMPROF_UNLIKELY(charge) || MEMPROF_UNLIKELY(memprof__in_sample_heap(old)))
        return memprof__realloc_sampled(a, old, n, charge);
    /* As in free: while samples outside the heap are live, the filter is asked out of line. */
    if (MEMPROF_UNLIKELY(memprof_atomic_load_relaxed(&memprof__hot.outside_live) != 0))
        return memprof__realloc_checked(a, old, n);
    return a->realloc(old, n);
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
    if (MEMPROF_LIKELY(!memprof__sampler_charge(n)))
        return a->posix_memalign(out, align, n);
    return memprof__posix_memalign_sampled(a, out, align, n);
}

MEMPROF_INLINE void *memprof__wrap_aligned_alloc(const struct memprof_allocator *a, size_t align,
                                                 size_t n)
{
    if (MEMPROF_LIKELY(!memprof__sampler_charge(n)))
        return a->aligned_alloc(align, n);
    return memprof__aligned_sampled(a, a->aligned_alloc, align, n);
}

MEMPROF_INLINE void *memprof__wrap_memalign(const struct memprof_allocator *a, size_t align,
                                            size_t n)
{
    if (MEMPROF_LIKELY(!memprof__sampler_charge(n)))
        return a->memalign(align, n);
    return memprof__aligned_sampled(a, a->memalign, align, n);
}

MEMPROF_INLINE void *memprof__wrap_valloc(const struct memprof_allocator *a, size_t n, size_t page)
{
    if (MEMPROF_LIKELY(!memprof__sampler_charge(n)))
        return a->valloc(n);
    return memprof__page_sampled(a, a->valloc, n, n, page);
}

MEMPROF_INLINE void *memprof__wrap_pvalloc(const struct memprof_allocator *a, size_t n, size_t page)
{
    size_t whole;
    if (__builtin_add_overflow(n, page - 1, &whole)) {
        errno = ENOMEM;
        return NULL;
    }
    whole &= ~(page - 1);
    if (!a->pvalloc) /* the allocator has none: round up to whole pages ourselves */
        return memprof__wrap_valloc(a, whole, page);
    if (MEMPROF_LIKELY(!memprof__sampler_charge(n)))
        return a->pvalloc(n);
    return memprof__page_sampled(a, a->pvalloc, n, whole ? whole : page, page);
}

#endif
