/* SPDX-License-Identifier: MIT */
/*
 * A library that libraries.c loads with RTLD_DEEPBIND: its calls to the allocator bind to
 * its own dependencies first, that is to libc's malloc, not to a preloaded one. Its blocks
 * are freed by the program and the program's blocks are freed (and reallocated) here.
 */
#include <stdlib.h>
#include <string.h>

void *hardening_deep_alloc(size_t n);
void *hardening_deep_calloc(size_t n);
void *hardening_deep_realloc(void *p, size_t n);
char *hardening_deep_strdup(const char *s);
void hardening_deep_free(void *p);

__attribute__((noinline)) void *hardening_deep_alloc(size_t n)
{
    return malloc(n);
}

__attribute__((noinline)) void *hardening_deep_calloc(size_t n)
{
    return calloc(1, n);
}

__attribute__((noinline)) void *hardening_deep_realloc(void *p, size_t n)
{
    return realloc(p, n);
}

__attribute__((noinline)) char *hardening_deep_strdup(const char *s)
{
    return strdup(s);
}

__attribute__((noinline)) void hardening_deep_free(void *p)
{
    free(p);
}
