/* SPDX-License-Identifier: MIT */
/*
 * The public runtime API (include/memprof/runtime.h): frame-source registration and the
 * custom-allocator reports, validated here and carried out by the core. The caller-countdown
 * pair (memprof_sample_interval(), memprof_report_sampled()) is built here from the engine's
 * existing cold path rather than by new entry points in src/core (see those functions).
 */
#include "config.h"

#include <errno.h>

#include "common/atomic.h"

#include "core/engine.h"
#include "core/sources.h"
#include "memprof/runtime.h"

int memprof_register_frame_source(const memprof_frame_source *source)
{
    return memprof__sources_register(source);
}

int memprof_unregister_frame_source(int source_id)
{
    return memprof__sources_unregister(source_id);
}

MEMPROF_SAMPLING_TEXT int memprof_report_alloc(uint64_t id, size_t size)
{
    if (MEMPROF_UNLIKELY(id & MEMPROF_REPORT_KEY_BIT))
        return -EINVAL;
    /* The sampler's fast path inline: runtimes report nearly every allocation. */
    if (MEMPROF_LIKELY(!memprof__sampler_charge(size)))
        return 0;
    return memprof__report_slow(id | MEMPROF_REPORT_KEY_BIT, size);
}

int memprof_report_free(uint64_t id)
{
    if (id & MEMPROF_REPORT_KEY_BIT)
        return -EINVAL;
    return memprof__report_free(id | MEMPROF_REPORT_KEY_BIT);
}

/* The draw comes from the calling thread's generator (struct memprof_tls), the one the
 * engine's own countdown uses. A thread the engine has not seen yet is seeded through the
 * cold path with no block (key 0: "the allocation failed", which only seeds and redraws the
 * thread's malloc countdown; a redraw is harmless, the remainder of a countdown being
 * exponential anyway), so seeding stays in one place and follows memprof_config::seed. */
MEMPROF_SAMPLING_TEXT uint64_t memprof_sample_interval(void)
{
    struct memprof_tls *t = &memprof__tls;
    if (memprof__engine_state() != MEMPROF_STATE_ACTIVE || t->guard)
        return 0;
    if (MEMPROF_UNLIKELY(!t->seeded)) {
        memprof__report_slow(0, 0);
        if (!t->seeded)
            return 0;
    }
    uint64_t rate = memprof__engine.rate ? memprof__engine.rate : MEMPROF_DEFAULT_RATE;
    return (uint64_t)memprof__sampler_draw(&t->rng, rate);
}

/* The engine's cold path (memprof__report_slow) records unconditionally when the thread's
 * countdown belongs to the current engine generation, and otherwise decides afresh, which
 * would sample the caller's already-chosen allocation a second time with probability p(size).
 * So the thread's generation is made current first: the cold path then records and redraws
 * the thread's malloc countdown (harmless, as above). A start or stop racing with this call
 * makes it decide afresh or not record: a state change is not instantaneous anyway. */
MEMPROF_SAMPLING_TEXT int memprof_report_sampled(uint64_t id, size_t size)
{
    if (MEMPROF_UNLIKELY(id & MEMPROF_REPORT_KEY_BIT))
        return -EINVAL;
    if (size == 0)
        return 0;
    memprof__tls.generation = memprof_atomic_load_relaxed(&memprof__engine.generation);
    return memprof__report_slow(id | MEMPROF_REPORT_KEY_BIT, size) ? 1 : 0;
}
