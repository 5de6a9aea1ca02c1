/* SPDX-License-Identifier: MIT */
/*
 * Runtime frame-source registry (sources.h): registration, lock-free capture from the cold
 * path, and lookup for the resolver.
 *
 * Stacks keep the tag of the source that captured their interpreter frames for the life of
 * the process, so a tag is never given to a second registration: a slot freed by
 * unregistration is reused under a new tag, and the stacks of the old source do not resolve
 * through the new one's callbacks. Tags fit the stack record's byte (1 .. 255).
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
    _Atomic unsigned tag; /* the registration's tag; written under the lock, before `active` */
    memprof_frame_source src;
    char name[32];
} slots[MEMPROF_MAX_FRAME_SOURCES];
static _Atomic int nactive;
static unsigned last_tag; /* under the lock */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define MAX_TAG 255u

/* The active slot registered under `tag`, or NULL. */
static struct slot *slot_of(unsigned tag)
{
    for (int i = 0; i < MEMPROF_MAX_FRAME_SOURCES; i++)
        if (memprof_atomic_load_acquire(&slots[i].active) &&
            memprof_atomic_load_relaxed(&slots[i].tag) == tag)
            return &slots[i];
    return NULL;
}

int memprof__sources_register(const memprof_frame_source *src)
{
    if (!src || src->size < sizeof(memprof_frame_source) || !src->capture || !src->resolve ||
        !src->is_eval_frame)
        return -EINVAL;
    pthread_mutex_lock(&lock);
    int rc = -ENOSPC;
    for (int i = 0; i < MEMPROF_MAX_FRAME_SOURCES && last_tag < MAX_TAG; i++) {
        struct slot *s = &slots[i];
        if (memprof_atomic_load_relaxed(&s->active))
            continue;
        s->src = *src;
        s->src.size = sizeof s->src;
        snprintf(s->name, sizeof s->name, "%s", src->name ? src->name : "runtime");
        s->src.name = s->name;
        memprof_atomic_store_relaxed(&s->tag, ++last_tag);
        memprof_atomic_store_release(&s->active, 1);
        memprof_atomic_add_relaxed(&nactive, 1);
        rc = (int)last_tag - 1;
        break;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int memprof__sources_unregister(int id)
{
    if (id < 0 || id >= (int)MAX_TAG)
        return -EINVAL;
    pthread_mutex_lock(&lock);
    int rc = -EINVAL;
    struct slot *s = slot_of((unsigned)id + 1);
    if (s) {
        memprof_atomic_store_release(&s->active, 0);
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
            *source = memprof_atomic_load_relaxed(&s->tag);
            return n < max ? n : max;
        }
    }
    return 0;
}

const memprof_frame_source *memprof__sources_get(unsigned source)
{
    struct slot *s = source ? slot_of(source) : NULL;
    return s ? &s->src : NULL;
}
