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
#define MEMPROF_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
