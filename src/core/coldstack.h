/* SPDX-License-Identifier: MIT */
/*
 * Stacks of the profiler's own for the recording half of the sampled path.
 *
 * A sampled allocation captures its stack, interns it and inserts the sample
 * (memprof__sample_end()). With the DWARF unwinder that takes about 10 KiB of stack:
 * libunwind's cursor and context (2 KiB), its frame-by-frame state and the loader's
 * dl_iterate_phdr() callback, and the engine's frame buffers (5 KiB); frame pointers take
 * about 6 KiB. glibc's own malloc, free and snprintf need well under 4 KiB, so programs run
 * them on small stacks: a crash handler on an 8 KiB sigaltstack (of which the kernel's
 * signal frame takes 3.4 KiB with AVX-512), coroutines on 8 to 16 KiB stacks with a guard
 * page. On the program's stack, the sampled path ran off the end of those.
 *
 * So that step runs on a stack of the profiler's, from a pool of MEMPROF_COLDSTACK_SLOTS
 * stacks of MEMPROF_COLDSTACK_SIZE bytes. The pool is reserved at engine init as
 * inaccessible address space (no private writable memory, no commit charge), with 2 MiB
 * more of it either side; a stack is made writable the first time a thread needs it (one
 * mprotect() per stack in the life of the process). A thread claims a stack with a
 * compare-and-swap on a bitmap: first the writable ones, starting at the one its TLS
 * address hashes to, so that a thread keeps finding the stack its core's cache holds; with
 * none free, the lowest one not yet writable, so that the writable stacks stay one run of
 * pages (one mapping). It then switches its stack pointer to the stack's top, records there,
 * switches back and gives the stack back with an atomic AND. What stays on the program's
 * stack is the hook's frame, the engine's first half and the switch's 16 bytes: no more
 * than glibc's own calls need (tests/stress/programs/small_stacks.c reports the same
 * high-water marks with and without the profiler). No lock: a signal handler that
 * interrupts the sampled path cannot sample (the thread's re-entrancy guard is set), so a
 * thread holds at most one stack; a signal handler of the program without SA_ONSTACK runs
 * on the profiler's stack then, with more than 48 KiB to use.
 *
 * The switch is a few instructions of assembly whose call frame information says where the
 * program's stack continues (the frame address is in the callee-saved frame pointer
 * register), so unw_backtrace(), glibc's backtrace() (the DWARF unwinder), debuggers and crash
 * handlers unwind from the profiler's stack straight into the program's; the frame-pointer
 * walk starts from the frame the caller passes instead (capture.h). x86_64 only for now;
 * elsewhere, in sanitizer builds (which track one stack per thread), without a pool (the
 * reservation failed) and when no stack can be had (more than MEMPROF_COLDSTACK_SLOTS
 * threads inside the recording step at once, or a limit refuses a new stack's memory), the
 * step runs on the program's stack as before.
 */
#ifndef MEMPROF_CORE_COLDSTACK_H
#define MEMPROF_CORE_COLDSTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MEMPROF_COLDSTACK_SIZE  ((size_t)64 * 1024)
#define MEMPROF_COLDSTACK_SLOTS 128u

/* Reserves the pool, once (later calls do nothing). Returns the bytes of its stacks (0 if
 * there is no pool: unsupported architecture, sanitizer build, reservation failed). */
size_t memprof__coldstack_init(void);
/* The pool's range, [*lo, *hi), or false without one (for mlockall's exceptions). */
bool memprof__coldstack_range(uintptr_t *lo, uintptr_t *hi);
/* In a fork() child: the slots the vanished threads held are free again. */
void memprof__coldstack_after_fork(void);
/* Claims a stack of the pool for the calling thread: its top, or 0 if there is none free.
 * Async-signal-safe, no lock; a system call the first time a stack is used. */
uintptr_t memprof__coldstack_claim(void);
/* Gives back the stack whose top memprof__coldstack_claim() returned. */
void memprof__coldstack_release(uintptr_t top);
/* Calls fn(arg) with the stack pointer at `top` (a claimed stack's), and returns there. The
 * program's stack pointer is kept in the frame pointer register, which the call frame
 * information names as the frame's base, so an unwinder inside fn walks on into the caller's
 * frames on the program's stack. Only where memprof__coldstack_claim() can return a stack. */
__attribute__((visibility("hidden"))) void memprof__coldstack_call(void (*fn)(void *), void *arg,
                                                                   uintptr_t top);

#endif
