/* SPDX-License-Identifier: MIT */
/*
 * An allocator of its own for a program or library of the hardening suite to define as its
 * malloc family (OWN_ALLOC_DEFINE_ENTRY_POINTS()), as programs with custom or static
 * allocators do: blocks are bumped from a static arena of this object's (never reused) behind
 * a header with this object's magic number, so that free() can tell its own blocks from
 * anyone else's, and counts both. A foreign block is counted and left alone (realloc() of
 * one returns a fresh block without its contents): the checks then report it instead of a
 * crash. Thread-safe (one atomic add per block); zero-filled (the arena is never reused).
 */
#ifndef MEMPROF_TESTS_OWN_ALLOC_H
#define MEMPROF_TESTS_OWN_ALLOC_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define OWN_ARENA_BYTES ((size_t)128 << 20)

struct own_header {
    uint64_t magic;
    uint64_t size;
};

static _Alignas(4096) unsigned char own_arena[OWN_ARENA_BYTES];
static _Atomic size_t own_top;
static _Atomic uint64_t own_allocs, own_frees, own_foreign;

/* This object's magic number: its arena's address, scrambled. */
static inline uint64_t own_magic(void)
{
    return (uint64_t)(uintptr_t)own_arena * 0x9E3779B97F4A7C15ull ^ 0x6f776e616c6c6f63ull;
}

static inline void *own_alloc(size_t n, size_t align)
{
    if (align < 16)
        align = 16;
    if (n > OWN_ARENA_BYTES) {
        errno = ENOMEM;
        return NULL;
    }
    size_t need = (sizeof(struct own_header) + align + n + 15) & ~(size_t)15;
    size_t start = atomic_fetch_add(&own_top, need);
    if (start + need > OWN_ARENA_BYTES) {
        errno = ENOMEM;
        return NULL;
    }
    uintptr_t lo = (uintptr_t)own_arena + start + sizeof(struct own_header);
    uintptr_t p = (lo + align - 1) & ~(uintptr_t)(align - 1);
    struct own_header *h = (struct own_header *)p - 1;
    h->magic = own_magic();
    h->size = n;
    atomic_fetch_add(&own_allocs, 1);
    return (void *)p;
}

static inline bool own_block(const void *p)
{
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)own_arena;
    return a >= lo + sizeof(struct own_header) && a < lo + OWN_ARENA_BYTES &&
           ((const struct own_header *)p - 1)->magic == own_magic();
}

static inline void own_free(void *p)
{
    if (!p)
        return;
    if (own_block(p))
        atomic_fetch_add(&own_frees, 1);
    else
        atomic_fetch_add(&own_foreign, 1);
}

static inline void *own_realloc(void *p, size_t n)
{
    if (!p)
        return own_alloc(n, 0);
    if (n == 0) {
        own_free(p);
        return NULL;
    }
    void *q = own_alloc(n, 0);
    if (q && own_block(p)) {
        size_t have = ((struct own_header *)p - 1)->size;
        memcpy(q, p, have < n ? have : n);
    }
    if (q)
        own_free(p);
    return q;
}

/* The entry points glibc asks a replacement allocator to define. */
#define OWN_ALLOC_DEFINE_ENTRY_POINTS()                                                            \
    void *malloc(size_t n)                                                                         \
    {                                                                                              \
        return own_alloc(n, 0);                                                                    \
    }                                                                                              \
    void free(void *p)                                                                             \
    {                                                                                              \
        own_free(p);                                                                               \
    }                                                                                              \
    void *calloc(size_t n, size_t size)                                                            \
    {                                                                                              \
        size_t total;                                                                              \
        if (__builtin_mul_overflow(n, size, &total)) {                                             \
            errno = ENOMEM;                                                                        \
            return NULL;                                                                           \
        }                                                                                          \
        return own_alloc(total, 0); /* fresh arena memory is zero */                               \
    }                                                                                              \
    void *realloc(void *p, size_t n)                                                               \
    {                                                                                              \
        return own_realloc(p, n);                                                                  \
    }                                                                                              \
    int posix_memalign(void **out, size_t align, size_t n)                                         \
    {                                                                                              \
        if (align < sizeof(void *) || (align & (align - 1)))                                       \
            return EINVAL;                                                                         \
        void *p = own_alloc(n, align);                                                             \
        if (!p)                                                                                    \
            return ENOMEM;                                                                         \
        *out = p;                                                                                  \
        return 0;                                                                                  \
    }                                                                                              \
    void *aligned_alloc(size_t align, size_t n)                                                    \
    {                                                                                              \
        return own_alloc(n, align);                                                                \
    }                                                                                              \
    void *memalign(size_t align, size_t n)                                                         \
    {                                                                                              \
        return own_alloc(n, align);                                                                \
    }                                                                                              \
    void *valloc(size_t n)                                                                         \
    {                                                                                              \
        return own_alloc(n, 4096);                                                                 \
    }                                                                                              \
    void *pvalloc(size_t n)                                                                        \
    {                                                                                              \
        return own_alloc((n + 4095) & ~(size_t)4095, 4096);                                        \
    }                                                                                              \
    size_t malloc_usable_size(void *p)                                                             \
    {                                                                                              \
        return own_block(p) ? ((struct own_header *)p - 1)->size : 0;                              \
    }

#endif
