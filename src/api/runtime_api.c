/* SPDX-License-Identifier: MIT */
/*
 * The public runtime API (include/memprof/runtime.h): frame-source registration, the
 * custom-allocator reports, validated here and carried out by the core, and the launcher's
 * exit-time profile on a runtime's demand.
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "config.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "api/owner.h"
#include "common/atomic.h"
#include "core/capture.h"
#include "core/engine.h"
#include "core/platform.h"
#include "core/sources.h"
#include "memprof/runtime.h"

/* The struct as version 1.0 defined it: a binding built against that header passes this size
 * and must keep working when the struct grows. */
#define SOURCE_SIZE_1_0 (offsetof(memprof_frame_source, ctx) + sizeof(void *))

int memprof_register_frame_source(const memprof_frame_source *source)
{
    if (!source || source->size < SOURCE_SIZE_1_0)
        return -EINVAL;
    /* A newer header's fields are accepted only while unset, as memprof_init_config() does:
     * a callback this library cannot call must not be dropped silently. */
    for (size_t i = sizeof *source; i < source->size; i++)
        if (((const unsigned char *)source)[i])
            return -EINVAL;
    memprof_frame_source full;
    memset(&full, 0, sizeof full);
    memcpy(&full, source, source->size < sizeof full ? source->size : sizeof full);
    full.size = sizeof full;
    return memprof__sources_register(&full);
}

int memprof_unregister_frame_source(int source_id)
{
    return memprof__sources_unregister(source_id);
}

/* ---- hook code ------------------------------------------------------------------------ */

/* Whether `addr` lies in a loadable segment of the main program (the first object
 * dl_iterate_phdr() reports): the user's own code, never to be dropped from stacks. */
static int in_main_program(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    uintptr_t *addr = ctx;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && *addr >= lo && *addr < lo + ph->p_memsz)
            return 1;
    }
    return 2; /* stop after the first object either way */
}

/* Registrations of two bindings at once must not interleave in the core's small table, which
 * is filled at initialisation otherwise (capture.h). */
static pthread_mutex_t hook_lock = PTHREAD_MUTEX_INITIALIZER;

int memprof_register_hook_code(const void *address)
{
    uintptr_t lo, hi, a = (uintptr_t)address;
    if (!address || memprof__pf_text_range(address, &lo, &hi) != 0)
        return -EINVAL;
    if (dl_iterate_phdr(in_main_program, &a) == 1)
        return -EINVAL;
    pthread_mutex_lock(&hook_lock);
    int rc = memprof__capture_add_hook_object(address);
    pthread_mutex_unlock(&hook_lock);
    return rc;
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

MEMPROF_SAMPLING_TEXT uint64_t memprof_sample_interval(void)
{
    return memprof__sample_interval();
}

MEMPROF_SAMPLING_TEXT int memprof_report_sampled(uint64_t id, size_t size)
{
    if (MEMPROF_UNLIKELY(id & MEMPROF_REPORT_KEY_BIT))
        return -EINVAL;
    return memprof__report_record(id | MEMPROF_REPORT_KEY_BIT, size) ? 1 : 0;
}

/* ---- the launcher's exit-time profile ----------------------------------------------------- */

static int (*_Atomic exit_profile_writer)(void) MEMPROF_START_DATA;

MEMPROF_START_TEXT void memprof__set_exit_profile_writer(int (*writer)(void))
{
    memprof_atomic_store_release(&exit_profile_writer, writer);
}

int memprof_write_exit_profile(void)
{
    int (*writer)(void) = memprof_atomic_load_acquire(&exit_profile_writer);
    return writer ? writer() : -ENOTSUP;
}
