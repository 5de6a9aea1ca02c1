/* SPDX-License-Identifier: MIT */
/*
 * pthread_atfork() and atexit() for code that runs in every process at start. glibc defines
 * both as stubs in libc_nonshared.a, linked into the calling object and placed by the linker
 * at the end of its .text, so that calling them took a text page fault of their own in every
 * process under the preload plugin. These call what the stubs call, with the calling
 * object's handle (so the handlers still go away with the object).
 */
#ifndef MEMPROF_COMMON_PROCESS_HOOKS_H
#define MEMPROF_COMMON_PROCESS_HOOKS_H

#include <pthread.h>
#include <stdlib.h>

#if defined(__GLIBC__)
extern void *__dso_handle;
int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                      void *dso_handle);
int __cxa_atexit(void (*fn)(void *), void *arg, void *dso_handle);
#endif

/* pthread_atfork(): returns 0 or an error number. */
static inline int memprof_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
#if defined(__GLIBC__)
    return __register_atfork(prepare, parent, child, __dso_handle);
#else
    return pthread_atfork(prepare, parent, child);
#endif
}

/* atexit(): returns 0, or non-zero on failure. (The cast is glibc's own atexit()'s.) */
static inline int memprof_atexit(void (*fn)(void))
{
#if defined(__GLIBC__)
    return __cxa_atexit((void (*)(void *))fn, NULL, __dso_handle);
#else
    return atexit(fn);
#endif
}

#endif
