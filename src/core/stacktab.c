/* SPDX-License-Identifier: MIT */
/*
 * Lock-free interning of call stacks into stable ids (protocol in stacktab.h).
 */
#include "core/stacktab.h"

#include <errno.h>
#include <string.h>

#include "common/atomic.h"
#include "common/hash.h"
#include "core/platform.h"

/* Average frames per stack the arena is sized for; deeper stacks just fill it sooner. */
#define ARENA_FRAMES_PER_STACK 32

static size_t rec_bytes(unsigned k)
{
    return (size_t)memprof__seg_len(k, MEMPROF_STACK_REC_BITS) * sizeof(struct memprof_stack);
}

static size_t frame_bytes(unsigned k)
{
    return (size_t)memprof__seg_len(k, MEMPROF_STACK_FRAME_BITS) * sizeof(uintptr_t);
}

/* The record of id, its segment mapped if `open` (NULL if that fails), else NULL if its
 * segment is not mapped. */
static struct memprof_stack *record(struct memprof_stacktab *st, uint64_t id, bool open)
{
    unsigned k = memprof__seg_of(id, MEMPROF_STACK_REC_BITS);
    struct memprof_stack *seg =
        open ? memprof__seg_open(&st->recs[k], rec_bytes(k), &st->mapped_bytes)
             : memprof_atomic_load_acquire(&st->recs[k]);
    return seg ? seg + (id - memprof__seg_start(k, MEMPROF_STACK_REC_BITS)) : NULL;
}

int memprof__st_init(struct memprof_stacktab *st, size_t max_stacks)
{
    size_t nbuckets = 1024;
    /* Chains average at most 16 records when the table is full. */
    while (nbuckets * 16 < max_stacks)
        nbuckets <<= 1;
    *st = (struct memprof_stacktab){.max_stacks = max_stacks,
                                    .nbuckets = nbuckets,
                                    .arena_cap = max_stacks * ARENA_FRAMES_PER_STACK};
    st->buckets = memprof__pf_map(nbuckets * sizeof *st->buckets);
    struct memprof_stack *overflow = st->buckets ? record(st, 0, true) : NULL;
    if (!overflow) {
        memprof__st_destroy(st);
        return -ENOMEM;
    }
    st->mapped_bytes += nbuckets * sizeof *st->buckets;
    /* Id 0: the overflow stack, empty and published from the start. */
    overflow->flags = MEMPROF_STACK_PUBLISHED | MEMPROF_STACK_OVERFLOW;
    st->nids = 1;
    st->published = 1;
    return 0;
}

void memprof__st_destroy(struct memprof_stacktab *st)
{
    for (unsigned k = 0; k < MEMPROF_SEG_MAX; k++) {
        memprof__pf_unmap(st->recs[k], rec_bytes(k));
        memprof__pf_unmap(st->arena[k], frame_bytes(k));
        st->recs[k] = st->arena[k] = NULL;
    }
    memprof__pf_unmap((void *)st->buckets, st->nbuckets * sizeof *st->buckets);
    st->buckets = NULL;
}

size_t memprof__st_ranges(struct memprof_stacktab *st, struct memprof_range *out, size_t max)
{
    size_t n = 0;
    if (st->buckets && n < max)
        out[n++] = (struct memprof_range){
            (uintptr_t)st->buckets, (uintptr_t)st->buckets + st->nbuckets * sizeof *st->buckets};
    for (unsigned k = 0; k < MEMPROF_SEG_MAX; k++) {
        uintptr_t r = (uintptr_t)memprof_atomic_load_acquire(&st->recs[k]);
        uintptr_t f = (uintptr_t)memprof_atomic_load_acquire(&st->arena[k]);
        if (r && n < max)
            out[n++] = (struct memprof_range){r, r + rec_bytes(k)};
        if (f && n < max)
            out[n++] = (struct memprof_range){f, f + frame_bytes(k)};
    }
    return n;
}

/* Arena space for `depth` frames, within one segment, mapped: the first frame's index, or
 * UINT64_MAX when the arena is full or its segment cannot be mapped. */
static uint64_t arena_alloc(struct memprof_stacktab *st, unsigned depth)
{
    uint64_t off = memprof_atomic_load_relaxed(&st->arena_used), start;
    do {
        /* A stack that would cross into the next segment starts there (the rest of this
         * one, at most MEMPROF_STACK_MAX_DEPTH frames, stays unused). */
        unsigned k = memprof__seg_of(off, MEMPROF_STACK_FRAME_BITS);
        uint64_t end = memprof__seg_start(k, MEMPROF_STACK_FRAME_BITS) +
                       memprof__seg_len(k, MEMPROF_STACK_FRAME_BITS);
        start = off + depth > end ? end : off;
        if (start + depth > st->arena_cap)
            return UINT64_MAX;
    } while (!memprof_atomic_cas_weak_relaxed(&st->arena_used, &off, start + depth));
    unsigned k = memprof__seg_of(start, MEMPROF_STACK_FRAME_BITS);
    return memprof__seg_open(&st->arena[k], frame_bytes(k), &st->mapped_bytes) ? start : UINT64_MAX;
}

uint64_t memprof__st_hash(const uintptr_t *frames, unsigned depth)
{
    uint64_t h = 0x243F6A8885A308D3ull ^ depth;
    for (unsigned i = 0; i < depth; i++)
        h = memprof__mix64(h ^ (uint64_t)frames[i]) + i;
    return h;
}

struct key {
    uint64_t hash;
    const uintptr_t *frames;
    unsigned depth, native, source, thread;
};

static bool same_stack(const struct memprof_stacktab *st, const struct memprof_stack *s,
                       const struct key *k)
{
    return s->hash == k->hash && s->depth == k->depth && s->native_depth == k->native &&
           s->source == k->source && s->thread == k->thread &&
           memcmp(memprof__st_frames(st, s), k->frames, k->depth * sizeof *k->frames) == 0;
}

/* Marks a linked record published. Any thread that reaches a record through a bucket chain
 * knows it is linked, so the first one to get there (its creator or a finder) sets the flag;
 * whoever flips it counts it. */
static void publish(struct memprof_stacktab *st, struct memprof_stack *s)
{
    if (memprof_atomic_load_acquire(&s->flags) & MEMPROF_STACK_PUBLISHED)
        return;
    uint16_t old = memprof_atomic_or_acqrel(&s->flags, MEMPROF_STACK_PUBLISHED);
    if (!(old & MEMPROF_STACK_PUBLISHED))
        memprof_atomic_add_relaxed(&st->published, 1);
}

/* Searches the chain from `from` (an id + 1) up to, not including, `until`. */
static uint32_t find_in_chain(struct memprof_stacktab *st, uint32_t from, uint32_t until,
                              const struct key *k)
{
    for (uint32_t link = from; link != until && link != 0;) {
        struct memprof_stack *s = record(st, link - 1, false);
        if (same_stack(st, s, k)) {
            publish(st, s);
            return link;
        }
        link = memprof_atomic_load_acquire(&s->next);
    }
    return 0;
}

static uint32_t overflow(struct memprof_stacktab *st)
{
    memprof_atomic_add_relaxed(&st->overflows, 1);
    return MEMPROF_STACK_OVERFLOW_ID;
}

uint32_t memprof__st_intern(struct memprof_stacktab *st, const uintptr_t *frames, unsigned depth,
                            bool truncated)
{
    if (depth > MEMPROF_STACK_MAX_DEPTH)
        depth = MEMPROF_STACK_MAX_DEPTH;
    return memprof__st_intern_mixed(st, frames, depth, depth, 0, 0, truncated);
}

uint32_t memprof__st_intern_mixed(struct memprof_stacktab *st, const uintptr_t *frames,
                                  unsigned depth, unsigned native, unsigned source, unsigned thread,
                                  bool truncated)
{
    if (depth > MEMPROF_STACK_MAX_DEPTH)
        depth = MEMPROF_STACK_MAX_DEPTH;
    if (native > depth)
        native = depth;
    struct key k = {
        .frames = frames, .depth = depth, .native = native, .source = source, .thread = thread};
    k.hash = memprof__st_hash(frames, depth) ^ ((uint64_t)native << 48) ^ ((uint64_t)source << 40) ^
             ((uint64_t)thread * 0x9E3779B97F4A7C15ull);
    uint64_t hash = k.hash;
    _Atomic uint32_t *bucket = &st->buckets[hash & (st->nbuckets - 1)];
    uint32_t head = memprof_atomic_load_acquire(bucket);
    uint32_t hit = find_in_chain(st, head, 0, &k);
    if (hit)
        return hit - 1;

    uint64_t id = memprof_atomic_add_relaxed(&st->nids, 1);
    if (id >= st->max_stacks)
        return overflow(st);
    /* The record's and the frames' segments are mapped before the id is linked anywhere. */
    struct memprof_stack *s = record(st, id, true);
    uint64_t off = s ? arena_alloc(st, depth) : UINT64_MAX;
    if (off == UINT64_MAX)
        return overflow(st); /* the id stays unpublished */
    s->frames_off = off;
    memcpy((uintptr_t *)memprof__st_frames(st, s), frames, depth * sizeof *frames);
    s->hash = hash;
    s->depth = (uint16_t)depth;
    s->native_depth = (uint16_t)native;
    s->source = (uint8_t)source;
    s->thread = (uint16_t)thread;
    memprof_atomic_store_relaxed(&s->flags, truncated ? MEMPROF_STACK_TRUNCATED : 0);

    uint32_t link = (uint32_t)id + 1;
    for (;;) {
        memprof_atomic_store_relaxed(&s->next, head);
        uint32_t seen = head;
        if (memprof_atomic_cas_release(bucket, &head, link))
            break;
        /* Records pushed since we looked: the chain from the new head down to `seen`. */
        hit = find_in_chain(st, head, seen, &k);
        if (hit)
            return hit - 1; /* another thread interned it first; ours stays unpublished */
    }
    publish(st, s);
    return (uint32_t)id;
}

uint64_t memprof__st_nids(struct memprof_stacktab *st)
{
    uint64_t n = memprof_atomic_load_acquire(&st->nids);
    return n < st->max_stacks ? n : st->max_stacks;
}

struct memprof_stack *memprof__st_get(struct memprof_stacktab *st, uint32_t id)
{
    if (id >= st->max_stacks)
        return NULL;
    struct memprof_stack *s = record(st, id, false);
    return s && (memprof_atomic_load_acquire(&s->flags) & MEMPROF_STACK_PUBLISHED) ? s : NULL;
}
