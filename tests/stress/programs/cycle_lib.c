/* SPDX-License-Identifier: MIT */
/*
 * A library that libraries.c loads and unloads hundreds of times: it allocates in its
 * constructor (freed in its destructor), in exported functions (blocks that outlive the
 * library) and through libc (strdup), has a thread-local variable (dynamic TLS, which the
 * loader allocates and frees), and frees blocks its caller allocated.
 */
#include <stdlib.h>
#include <string.h>

void *hardening_cycle_alloc(size_t n);
char *hardening_cycle_strdup(const char *s);
void hardening_cycle_free(void *p);

static void *ctor_block;
static __thread unsigned calls;

__attribute__((constructor)) static void cycle_ctor(void)
{
    ctor_block = malloc(3000);
}

__attribute__((destructor)) static void cycle_dtor(void)
{
    free(ctor_block);
}

__attribute__((noinline)) void *hardening_cycle_alloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        memset(p, (int)(++calls & 0xff), n);
    return p;
}

__attribute__((noinline)) char *hardening_cycle_strdup(const char *s)
{
    return strdup(s);
}

__attribute__((noinline)) void hardening_cycle_free(void *p)
{
    free(p);
}
