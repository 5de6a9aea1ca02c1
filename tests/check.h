/* SPDX-License-Identifier: MIT */
/*
 * CHECK for the standalone test programs (those outside the unit harness of unit/test.h):
 * a failed condition is printed with its place and counted in `failures`, and the program
 * goes on, so one run reports every failed check; main() exits non-zero if any failed.
 */
#ifndef MEMPROF_TESTS_CHECK_H
#define MEMPROF_TESTS_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#endif
