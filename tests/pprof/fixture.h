/* SPDX-License-Identifier: MIT */
/*
 * Profiles for the pprof tests, and the checks they share: a hand-built model that uses
 * every case of the encoding (inlined lines, runtime and unresolved frames, a truncated
 * stack, a stack without frames, a module loaded at two load biases, a frame without a
 * module, whole-heap totals that differ from the sums), one built by the real engine from
 * named functions (test_pprof and pprof_gen, which feeds `go tool pprof`), and the
 * comparison that says what a round trip through the writer and reader must preserve.
 */
#ifndef MEMPROF_TESTS_PPROF_FIXTURE_H
#define MEMPROF_TESTS_PPROF_FIXTURE_H

#include <stddef.h>
#include <stdio.h>

#include "export/profile.h"

/* The hand-built profile (static storage, stacks already in the reader's order). */
const struct memprof_profile *fixture_rich(void);

/* Starts the engine at rate 1 (once per process), allocates through fixture_* functions
 * (including an always-inline one), and builds the profile of a snapshot. 0 or -errno. */
int fixture_engine(struct memprof_profile **out);

/* The model's invariants (indexes in range, stacks sorted, strings terminated); 0 or -1
 * with a message on `log`. Used on whatever the reader accepts, including fuzzed input. */
int fixture_consistent(const struct memprof_profile *p, FILE *log);

/* What a round trip must give back: every frame field, stack values, sample counts and the
 * variances as the square of the rounded standard deviation, totals and health exactly.
 * Returns the number of differences, each reported on `log`. */
int fixture_compare(const struct memprof_profile *want, const struct memprof_profile *got,
                    FILE *log);

/* Writes p as pprof into a malloc'ed buffer (*data, *len). 0 or -errno. */
int fixture_write(const struct memprof_profile *p, unsigned char **data, size_t *len);

#endif
