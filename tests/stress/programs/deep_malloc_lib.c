/* SPDX-License-Identifier: MIT */
/*
 * A library with a malloc family of its own (own_alloc.h), loaded with RTLD_DEEPBIND by
 * deep_malloc.c: its own code's allocator calls bind to its own definitions first, so every
 * block it allocates is its own and its free() sees only those. Built twice (two objects,
 * two arenas), for a library loaded before memprof_start() and one loaded after it.
 */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "own_alloc.h"

OWN_ALLOC_DEFINE_ENTRY_POINTS()

void deep_malloc_counts(uint64_t *allocs, uint64_t *foreign);
int deep_malloc_work(int rounds);

void deep_malloc_counts(uint64_t *allocs, uint64_t *foreign)
{
    *allocs = atomic_load(&own_allocs);
    *foreign = atomic_load(&own_foreign);
}

/* Every entry point, through the library's own calls (its PLT and GOT). Returns the number
 * of blocks it allocated, or -1 if a call failed. */
__attribute__((noinline)) int deep_malloc_work(int rounds)
{
    int blocks = 0;
    for (int i = 0; i < rounds; i++) {
        char *p = malloc(100 + (size_t)i % 300);
        char *q = calloc(4, 25);
        char *r = realloc(NULL, 40);
        void *a = NULL;
        if (!p || !q || !r || posix_memalign(&a, 64, 200) != 0)
            return -1;
        char *b = aligned_alloc(32, 64);
        char *m = memalign(128, 300);
        if (!b || !m || q[99] != 0 || malloc_usable_size(r) < 40)
            return -1;
        memset(p, 1, 100);
        r = realloc(r, 4000);
        if (!r)
            return -1;
        free(p);
        free(q);
        free(r);
        free(a);
        free(b);
        free(m);
        blocks += 7;
    }
    return blocks;
}
