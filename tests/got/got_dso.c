/* SPDX-License-Identifier: MIT */
/*
 * A library the GOT test loads with dlopen() after profiling started: its allocations must
 * be seen (its GOT is patched when it is loaded).
 */
#include <stdlib.h>
#include <string.h>

void *dso_alloc(size_t n);

__attribute__((visibility("default"), noinline)) void *dso_alloc(size_t n)
{
    void *p = malloc(n);
    memset(p, 3, n);
    __asm__ volatile("" ::: "memory");
    return p;
}
