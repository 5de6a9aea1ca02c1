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

/* Maps `size` bytes of zeroed, readable and writable anonymous memory for the profiler's own
 * use. Pages are faulted in as they are first touched, also after the program's
 * mlockall(MCL_FUTURE) (then they are locked as they are touched, not faulted in at once),
 * but the whole mapping is address space (RLIMIT_AS), private writable memory (RLIMIT_DATA)
 * and, under vm.overcommit_memory=2, commit charge from the start: callers map what they are
 * about to use, not a capacity (the tables grow by segments). Returns NULL on failure;
 * leaves errno as it was. Never calls malloc. A few system calls: not for hot paths. */
void *memprof__pf_map(size_t size);
/* Says that no mlockall(MCL_FUTURE) can be in effect (the preload plugin's constructor: the
 * process was just exec()ed, which clears it, and any earlier call went through the plugin's
 * mlockall): until memprof__pf_mlockall_except() sees MCL_FUTURE, memprof__pf_map() is then one
 * mmap() instead of three system calls. Only before the first MCL_FUTURE: it never undoes one. */
MEMPROF_INTERNAL void memprof__pf_no_future_locks(void);
/* Returns memory from memprof__pf_map() or memprof__pf_map_at(). Only for memory no other
 * thread can still read. Returns 0 or -errno; leaves errno as it was. */
int memprof__pf_unmap(void *p, size_t size);
/* Maps [addr, addr + size) (page-aligned) like memprof__pf_map(), unless anything is mapped
 * there already, which it never replaces. Returns 0; -EEXIST if something is in the way;
 * another -errno (-ENOMEM under a limit) if the mapping fails. Leaves errno as it was. */
MEMPROF_INTERNAL int memprof__pf_map_at(void *addr, size_t size);
/* Asks for small pages in [p, p + size): touching one small block then costs one page, not
 * 2 MiB of transparent huge page. Advisory; leaves errno as it was. */
MEMPROF_INTERNAL void memprof__pf_no_huge_pages(void *p, size_t size);
/* An `align`-aligned window of `size` bytes of address space where nothing is mapped, away
 * from where the kernel puts mappings of its own choosing: at a random place between an
 * eighth and a quarter of the user address space (16 to 32 TiB on x86_64), far below the
 * libraries, thread stacks and mmap()ed blocks, which the kernel stacks downwards from near
 * the top, and above any brk heap. Nothing is reserved: the caller maps the parts it uses
 * with memprof__pf_map_at() and gives them back with memprof__pf_unmap_at(). 0 if no such
 * window is free. Probes the place with a mapping given back at once.
 * Under ThreadSanitizer, application memory must lie where the sanitizer says (it kills a
 * process that maps anything elsewhere): there the window is an inaccessible reservation the
 * kernel places (MEMPROF_WINDOW_RESERVED), which RLIMIT_AS counts, and its parts are made
 * accessible and inaccessible in place. */
MEMPROF_INTERNAL uintptr_t memprof__pf_window(size_t size, size_t align);
/* Gives back [p, p + size) of a window (page-aligned): its memory, commit charge and any
 * lock go; so does its address space, unless the window is a reservation. Returns 0 or
 * -errno; leaves errno as it was. */
MEMPROF_INTERNAL int memprof__pf_unmap_at(void *p, size_t size);
/* Drops a window's reservation, if it is one (tests: nothing in it may be in use). */
MEMPROF_INTERNAL void memprof__pf_window_release(uintptr_t base, size_t size);
#if defined(__SANITIZE_THREAD__)
#define MEMPROF_WINDOW_RESERVED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define MEMPROF_WINDOW_RESERVED 1
#endif
#endif
#ifndef MEMPROF_WINDOW_RESERVED
#define MEMPROF_WINDOW_RESERVED 0
#endif
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
