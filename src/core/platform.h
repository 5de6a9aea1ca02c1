/* SPDX-License-Identifier: MIT */
/*
 * The engine's only door to the operating system: anonymous memory, time, randomness,
 * thread identity and stack bounds. Everything platform-specific in src/core/ goes through
 * these few functions (implemented in platform_linux.c), so the data structures stay
 * portable and a test can see exactly what the core asks of the system.
 */
#ifndef MEMPROF_CORE_PLATFORM_H
#define MEMPROF_CORE_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

/* Reserves `size` bytes of zeroed, readable and writable anonymous memory. Pages are
 * committed lazily by the kernel as they are first touched, so a large reservation costs
 * address space, not RSS. Returns NULL on failure. Never calls malloc. */
void *memprof__pf_map(size_t size);
/* Returns memory from memprof__pf_map(). Only for memory no other thread can still read. */
void memprof__pf_unmap(void *p, size_t size);
/* Like memprof__pf_map(), for a large range used sparsely (the sample heap): transparent huge
 * pages are off, so touching one small block commits one page, not 2 MiB, and the range is
 * left out of core dumps (a crash would otherwise write gigabytes of zeros to a pipe such as
 * systemd-coredump's) until memprof__pf_dump() puts the used parts back. Returns NULL when
 * the process's address space or data size is limited (RLIMIT_AS, RLIMIT_DATA), where the
 * reservation would be taken from the program's own budget, or when the mapping fails. */
void *memprof__pf_map_sparse(size_t size);
/* Gives the pages of [p, p + size) back to the kernel; they read as zero afterwards. p and
 * size are page-aligned. Leaves errno as it was. */
void memprof__pf_release(void *p, size_t size);
/* Puts [p, p + size), page-aligned, back into core dumps (memprof__pf_map_sparse() leaves its
 * range out of them). Leaves errno as it was. */
MEMPROF_INTERNAL void memprof__pf_dump(void *p, size_t size);
/* 64 bits from getrandom(), falling back to time and addresses if it is unavailable, and to
 * entropy drawn by memprof__pf_random_prepare() once a seccomp filter forbids it. */
uint64_t memprof__pf_random(void);
/* Draws the entropy memprof__pf_random() uses when getrandom() becomes forbidden. */
MEMPROF_INTERNAL void memprof__pf_random_prepare(void);
/* CLOCK_MONOTONIC in nanoseconds. Async-signal-safe. */
uint64_t memprof__pf_now_ns(void);
/* The kernel thread id of the caller; 0 if a seccomp filter forbids asking. */
uint64_t memprof__pf_thread_id(void);
/* The memory mapping [*lo, *hi) that holds `addr` (from /proc/self/maps), false if none or
 * unreadable. Used for the bounds of the stack a frame-pointer walk may read. Allocates
 * nothing and takes no lock -- not pthread_getattr_np(), which allocates while it holds the
 * thread's lock, so a sample taken inside it would wait for itself -- but reads a file:
 * a cold path's call. */
MEMPROF_INTERNAL bool memprof__pf_mapping_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi);
/* An address range [lo, hi). */
struct memprof_range {
    uintptr_t lo, hi;
};
/* mlockall(flags) for a program whose address space holds the profiler's tables `own`
 * (sorted here): with MCL_CURRENT, real_mlockall() would fault in every page of them,
 * hundreds of MiB never touched. Instead everything is locked on fault, every mapping but
 * the tables is then faulted in and locked with mlock() as MCL_CURRENT does, and MCL_FUTURE
 * is set as asked. Returns real_mlockall()'s result, with errno as it sets it. */
MEMPROF_INTERNAL int memprof__pf_mlockall_except(int flags, int (*real_mlockall)(int),
                                                 struct memprof_range *own, size_t n_own);
/* The executable address range [*lo, *hi) of the loaded object that contains `addr`
 * (the span of its executable PT_LOAD segments). Returns 0 or -ENOENT. Takes the loader
 * lock: not for hooks. */
MEMPROF_INTERNAL int memprof__pf_text_range(const void *addr, uintptr_t *lo, uintptr_t *hi);
/* Reserves `size` bytes of address space, inaccessible until memprof__pf_writable() opens
 * parts of it: until then it counts against RLIMIT_AS only, not as private writable memory
 * (RLIMIT_DATA, the commit charge). NULL on failure. Transparent huge pages are off in it. */
void *memprof__pf_reserve(size_t size);
/* Makes [p, p + size), page-aligned, readable and writable, whatever its protection was.
 * False if the kernel refuses (a limit on private writable memory or the commit charge).
 * A system call, no lock, not a cancellation point; leaves errno as it was. */
bool memprof__pf_writable(void *p, size_t size);

#endif
