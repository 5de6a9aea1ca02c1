/* SPDX-License-Identifier: MIT */
/*
 * Starting the process-wide engine for tests that feed it themselves (no interposition
 * backend): configure, register as the backend (start needs one), start; and reading its
 * stats. Shared by the engine, estimator and runtime-API tests.
 */
#ifndef MEMPROF_TESTS_ENGINE_FIXTURE_H
#define MEMPROF_TESTS_ENGINE_FIXTURE_H

#include "core/engine.h"
#include "memprof/memprof.h"
#include "test.h"

/* Initialises and starts the engine (0 for a capacity is the library's default). Returns 0
 * or memprof_init_config()'s / memprof_start()'s error. */
static inline int fixture_start_engine(uint64_t rate, uint64_t heap_map_capacity,
                                       uint64_t max_stacks, uint64_t seed)
{
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = rate;
    c.heap_map_capacity = heap_map_capacity;
    c.max_stacks = max_stacks;
    c.seed = seed;
    int rc = memprof_init_config(&c);
    if (rc == 0) {
        memprof__backend_register(); /* the test feeds the engine itself */
        rc = memprof_start();
    }
    return rc;
}

static inline memprof_stats fixture_stats(void)
{
    memprof_stats s = {.size = sizeof s};
    EXPECT_EQ(memprof_get_stats(&s), 0);
    return s;
}

#endif
