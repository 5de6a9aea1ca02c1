/* SPDX-License-Identifier: MIT */
/*
 * Native stack capture for the sampling cold path.
 *
 * Two unwinders. DWARF (the default when built with libunwind) follows the .eh_frame unwind
 * tables and so sees through code built without frame pointers (Debian's libc and python3):
 * libgcc's _Unwind_Backtrace() (linked), where glibc has _dl_find_object() (2.35 and later),
 * which it reads without the loader's lock, so that a sample may be taken in a signal
 * handler that interrupted the loader and no fork() child inherits that lock held by a
 * sampling thread; libunwind's unw_backtrace() otherwise. libgcc interprets every frame's
 * CFI each time (bench_coldpath's 20-frame sample: ~7 us), so on x86-64 a cached walk goes
 * first (unwind_fast.h: ~0.8 us), handing libgcc the stacks it does not model. Never an
 * unw_step() loop, which makes system calls per frame. Frame pointers (opt-in, ~40 ns): the
 * walk never faults, since every frame address is checked against [the walker's own frame,
 * the top of the thread's stack) before it is read, must be aligned, and must strictly
 * increase.
 *
 * Frames inside the profiler's own code at the leaf end are skipped, so a stack starts at
 * the caller of malloc: the engine's sampling path (its own ELF section, which works when the
 * engine is linked statically too) and whole backend objects such as the preload plugin.
 */
#ifndef MEMPROF_CORE_CAPTURE_H
#define MEMPROF_CORE_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/unwind_fast.h"
#include "memprof/memprof.h" /* enum memprof_unwinder */

/* Registers [lo, hi) as profiler code to skip at the leaf end of stacks (up to 8 ranges).
 * Not thread-safe against itself; call during initialisation. */
void memprof__capture_add_own_range(uintptr_t lo, uintptr_t hi);
/* Registers the engine's sampling path (MEMPROF_SAMPLING_TEXT) as profiler code. */
void memprof__capture_add_own_sampling_text(void);
/* Registers the text of the loaded object containing `addr` as profiler code. */
void memprof__capture_add_own_object(const void *addr);
/* Registers the text of the loaded object containing `addr` as a binding's hook code
 * (memprof_register_hook_code()): profiler code at the leaf end, and a frame the resolver
 * drops anywhere in a stack (memprof__capture_is_hook()). Up to 4 objects; serialize calls.
 * Returns 0, -EINVAL (not in a loaded object's text) or -ENOSPC. */
int memprof__capture_add_hook_object(const void *addr);
/* Whether a return address is in a binding's hook code. Lock-free. */
bool memprof__capture_is_hook(uintptr_t pc);

/* Most native frames one capture stores. */
#define MEMPROF_CAPTURE_MAX 256

/* Whether the DWARF unwinder is compiled in. */
bool memprof__capture_have_dwarf(void);
/* Chooses the DWARF unwinder: libgcc's (linked), or where glibc has no _dl_find_object()
 * libunwind, which it loads and runs once so that its lazy initialisation (its caches and
 * mmap pools) happens outside any hook. Call with the re-entrancy guard set. */
void memprof__capture_warm_up(void);
/* Called in a fork() child: from now on DWARF captures use glibc's backtrace() also where
 * the parent used libunwind, which calls dl_iterate_phdr: the loader's lock it takes may
 * have been held at fork time by another thread (another sample being unwound, the GOT
 * backend patching after a dlopen, the program's own dlopen) and then stays locked in the
 * child forever. */
void memprof__capture_after_fork(void);
/* Captures with the given unwinder (see memprof__capture_fp for the contract). The DWARF
 * unwinder walks from `regs` (taken by a caller on the stack to walk, unwind_fast.h) with
 * the cached walk when it can; otherwise, or without `regs` (NULL), libgcc's unwinder starts
 * where it is called. It ignores `from` and `stack_top`; the frame-pointer walk `regs`. */
unsigned memprof__capture(enum memprof_unwinder how, uintptr_t *frames, unsigned max,
                          uintptr_t from, const struct memprof_regs *regs, uintptr_t stack_top,
                          bool *truncated);

/* Captures up to `max` return addresses (leaf first) into `frames`, walking the frame
 * records from `from` (a frame address, __builtin_frame_address(0) of a caller on the stack
 * to walk; 0 = this call's own frame) no higher than `stack_top` (exclusive; 0 = unknown,
 * then nothing is walked). `from` lets the walk start on the program's stack when it runs
 * on another (coldstack.h). Sets *truncated when the stack had more frames than `max`.
 * Returns the number of frames stored. */
unsigned memprof__capture_fp(uintptr_t *frames, unsigned max, uintptr_t from, uintptr_t stack_top,
                             bool *truncated);

#endif
