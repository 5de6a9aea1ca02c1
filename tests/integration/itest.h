/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by the integration-test programs: a CHECK macro that reports the
 * failed condition with its file and line and exits 1, the exit code Meson reads as
 * "skipped" (77), and a helper that keeps the compiler from eliding an allocation whose
 * result is otherwise unused (GCC removes malloc/free pairs it can see through).
 *
 * Every program in this directory is built with -fno-omit-frame-pointer and -rdynamic
 * (export_dynamic) and marks its allocating functions noinline, so the profiler's stacks
 * and dladdr-based symbols name them.
 */
#ifndef MEMPROF_ITEST_H
#define MEMPROF_ITEST_H

#include <stdio.h>
#include <stdlib.h>

#define ITEST_SKIP 77

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                   \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

/* Writes one byte through a volatile pointer so the block is "used". */
static inline void itest_touch(void *p, unsigned char v)
{
    if (p)
        *(volatile unsigned char *)p = v;
}

#endif /* MEMPROF_ITEST_H */
