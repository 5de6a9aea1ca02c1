/* SPDX-License-Identifier: MIT */
/*
 * Compiler helpers shared by every layer: branch hints, inlining and visibility
 * attributes. Kept tiny so that any file may include it without pulling in more.
 */
#ifndef MEMPROF_COMMON_COMPILER_H
#define MEMPROF_COMMON_COMPILER_H

#define MEMPROF_LIKELY(x)   __builtin_expect(!!(x), 1)
#define MEMPROF_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MEMPROF_INLINE      static inline __attribute__((always_inline))
#define MEMPROF_NOINLINE    __attribute__((noinline))
#define MEMPROF_COLD        __attribute__((cold, noinline))
/* Internal entry points shared between libmemprof.so and the preload plugin. They are
 * exported in the MEMPROF_PRIVATE version node and are not API. */
#define MEMPROF_INTERNAL __attribute__((visibility("default")))
/* Code that runs between an allocator hook and the stack capture is placed in this section,
 * so capture can skip the profiler's own frames by address even when the engine is linked
 * statically into a program (the linker provides __start_/__stop_ symbols for it). */
#define MEMPROF_SAMPLING_TEXT __attribute__((section("memprof_sampling_text")))
/* Zero-initialised state that every process under the preload plugin writes at start: in
 * .bss each such variable's page would take a page fault of its own (two when it is read
 * first), in .data it shares the page the loader has already written for relocations. */
#define MEMPROF_START_DATA __attribute__((section(".data.memprof_start")))
/* Code that every process under the preload plugin runs at start (and at an exit without a
 * profile to write), placed with the constructors in .text.startup, which the linker puts
 * at the start of .text. A page fault on the text maps the 64 KiB around it at once; spread
 * through .text by link order, this code took three text faults more per process. */
#define MEMPROF_START_TEXT    __attribute__((section(".text.startup")))
#define MEMPROF_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
