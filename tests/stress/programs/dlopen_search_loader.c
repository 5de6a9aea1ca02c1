/* SPDX-License-Identifier: MIT */
/*
 * A library with a DT_RUNPATH that opens libraries by bare name for dlopen_search.c. glibc
 * searches such a dlopen() with this library's paths: because it has a DT_RUNPATH, no
 * DT_RPATH is used (neither its own nor the program's), then LD_LIBRARY_PATH, its RUNPATH,
 * the cache and the system directories.
 */
#include <dlfcn.h>
#include <stddef.h>

void *dlopen_search_open(const char *name);

/* Not a tail call: glibc takes the caller of dlopen() from its return address, which must
 * lie in this library. */
__attribute__((noinline)) void *dlopen_search_open(const char *name)
{
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    __asm__ volatile("" : "+r"(h)::"memory");
    return h;
}
