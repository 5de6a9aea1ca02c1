/* SPDX-License-Identifier: MIT */
/*
 * The plugin's lookup of the real function behind one it exports besides the allocator's
 * (mlockall, unshare, setns): the next definition (glibc's), found with dlsym(RTLD_NEXT)
 * the first time it is called and kept (most programs never make these calls, so start-up
 * does not pay for the lookups). Not for the allocator itself, whose
 * lookup must cope with dlsym() allocating (preload.c), nor for syscall() and prctl(),
 * which the allocator's own path may call before dlsym() is safe (preload_sandbox.c).
 */
#ifndef MEMPROF_INTERPOSE_PRELOAD_NEXT_H
#define MEMPROF_INTERPOSE_PRELOAD_NEXT_H

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>

#include "common/atomic.h"

/* The next definition of `name`, cached in *cache; NULL with errno ENOSYS if libc has none,
 * and the caller then fails as the call would without a libc function. Racing first calls
 * look it up twice and store the same address. */
static inline void *memprof__preload_next(_Atomic(void *) *cache, const char *name)
{
    void *f = memprof_atomic_load_acquire(cache);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        memprof_atomic_store_release(cache, f);
    }
    if (!f)
        errno = ENOSYS;
    return f;
}

#endif
