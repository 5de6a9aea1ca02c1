/* SPDX-License-Identifier: MIT */
/*
 * A cached DWARF stack walk for x86-64, in front of libgcc's unwinder.
 *
 * libgcc's _Unwind_Backtrace() finds each frame's FDE and interprets its call frame
 * instructions again at every sample: ~270 ns a frame warm, several microseconds cold. Most
 * samples of a program pass through the same return addresses, so this walk keeps, per
 * return address, the three rules a walk needs on x86-64 -- where the CFA is (rsp or rbp plus
 * an offset), where the return address is saved, where rbp is saved (if it is) -- in a
 * table shared by all threads, and steps a frame with two or three loads when the address is
 * known. An address it has not seen is looked up with libgcc's own _Unwind_Find_FDE() and its
 * instructions interpreted here, for those three rules only.
 *
 * Anything outside that subset -- a CFA or saved register given by a DWARF expression or in
 * another register (stack realignment), a signal frame, an augmentation it does not know, code
 * without an FDE (a JIT's, registered with the process's libgcc_s) -- makes the walk give up,
 * and the caller unwinds the whole stack with libgcc as before; the address is remembered as
 * one to give up at. Every load is checked first against the stack's bounds, and each frame's
 * CFA must lie above the previous one's, so a wrong rule (a module unloaded and another
 * mapped at its addresses) can make a wrong stack, never a wild read. The bounds come without
 * a system call or a file (the program must never see a descriptor of the profiler's): a
 * thread's stack ends at its thread descriptor, which glibc puts at the top of every stack it
 * starts a thread on (its own or one the program gave), and the main thread's at the page
 * holding __libc_stack_end, the stack pointer the program started with; a stack pointer
 * more than MEMPROF_UNWIND_FAST_SPAN below either (a coroutine's stack, a signal stack, a
 * deeper stack than that) is not walked here.
 *
 * The table's entries are written without a lock: a reader takes an entry only when its key
 * and the check bits in its rule both match the address (a write racing another write to the
 * same slot leaves them disagreeing). Async-signal-safe: no lock, no allocation, no system
 * call (libgcc's FDE lookup reads glibc's _dl_find_object() tables, lock-free).
 */
#ifndef MEMPROF_CORE_UNWIND_FAST_H
#define MEMPROF_CORE_UNWIND_FAST_H

#include <stdbool.h>
#include <stdint.h>

#include "common/compiler.h"

/* The registers a walk starts from: a code address in the function that captured them, and
 * that function's stack and frame pointers at that address. */
struct memprof_regs {
    uintptr_t pc, sp, bp;
};

#if defined(__x86_64__) && defined(__GNUC__)
#define MEMPROF_HAVE_UNWIND_FAST 1
/* Captures the calling function's registers at this point (a macro: the function is the
 * caller, not a helper). */
#define MEMPROF_REGS_HERE(r)                                                                       \
    __asm__ volatile("leaq 0f(%%rip), %0\n0:\n\tmovq %%rsp, %1\n\tmovq %%rbp, %2"                  \
                     : "=r"((r)->pc), "=r"((r)->sp), "=r"((r)->bp))
#else
#define MEMPROF_HAVE_UNWIND_FAST 0
#define MEMPROF_REGS_HERE(r)     ((r)->pc = (r)->sp = (r)->bp = 0)
#endif

/* How far below the end of its stack (above) a walk may start. */
#define MEMPROF_UNWIND_FAST_SPAN ((uintptr_t)64 << 20)

/* Walks the calling thread's stack from `r` (its pc is the first address written, as
 * backtrace() writes its caller's), taken by a caller of this function on that stack: writes
 * at most `max` return addresses to `frames`. Returns how many, with *ended true when the
 * stack's outermost frame was reached (false: `max` was); or -1 when a frame needs libgcc's
 * full unwinder, the stack is not one it knows the end of (see above), or the walk is not
 * available here. */
int memprof__unwind_fast(const struct memprof_regs *r, void **frames, int max, bool *ended);

#endif
