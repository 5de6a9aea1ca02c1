/* SPDX-License-Identifier: MIT */
/*
 * Runtime frame-source registry (sources.h): registration, lock-free capture from the cold
 * path, and lookup for the resolver.
 */
#include "core/sources.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/atomic.h"

static struct slot {
    _Atomic int active;
    memprof_frame_source src;
    char name[32];
} slots[MEMPROF_MAX_FRAME_SOURCES];
static _Atomic int nactive;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int memprof__sources_register(const memprof_frame_source *src)
{
    if (!src || src->size < sizeof(memprof_frame_source) || !src->capture || !src->resolve ||
        !src->is_eval_frame)
        return -EINVAL;
    pthread_mutex_lock(&lock);
    int rc = -ENOSPC;
    for (int i = 0; i < MEMPROF_MAX_FRAME_SOURCES; i++) {
        struct slot *s = &slots[i];
        if (memprof_atomic_load_relaxed(&s->active))
            continue;
        s->src = *src;
        s->src.size = sizeof s->src;
        snprintf(s->name, sizeof s->name, "%s", src->name ? src->name : "runtime");
        s->src.name = s->name;
        memprof_atomic_store_release(&s->active, 1);
        memprof_atomic_add_relaxed(&nactive, 1);
        rc = i;
        break;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int memprof__sources_unregister(int index)
{
    if (index < 0 || index >= MEMPROF_MAX_FRAME_SOURCES)
        return -EINVAL;
    pthread_mutex_lock(&lock);
    int rc = -EINVAL;
    if (memprof_atomic_load_relaxed(&slots[index].active)) {
        memprof_atomic_store_release(&slots[index].active, 0);
        memprof_atomic_sub_relaxed(&nactive, 1);
        rc = 0;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

unsigned memprof__sources_capture(uint64_t *ids, unsigned max, unsigned *source)
{
    *source = 0;
    if (!memprof_atomic_load_acquire(&nactive))
        return 0;
    for (int i = 0; i < MEMPROF_MAX_FRAME_SOURCES; i++) {
        struct slot *s = &slots[i];
        if (!memprof_atomic_load_acquire(&s->active))
            continue;
        unsigned n = s->src.capture(s->src.ctx, ids, max);
        if (n > 0) {
            *source = (unsigned)i + 1;
            return n < max ? n : max;
        }
    }
    return 0;
}

const memprof_frame_source *memprof__sources_get(unsigned source)
{
    if (source == 0 || source > MEMPROF_MAX_FRAME_SOURCES)
        return NULL;
    struct slot *s = &slots[source - 1];
    return memprof_atomic_load_acquire(&s->active) ? &s->src : NULL;
}
