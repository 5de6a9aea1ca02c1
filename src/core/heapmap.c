/* SPDX-License-Identifier: MIT */
/*
 * The lock-free heap map of live samples: segment geometry, the two-phase insert with
 * "death during birth", removal with tombstones, and consistent iteration. The state
 * machine and the memory orders are documented in heapmap.h.
 */
#include "core/heapmap.h"

#include <errno.h>

#include "common/atomic.h"
#include "common/hash.h"
#include "core/platform.h"

/* ---- segment geometry ------------------------------------------------------------------ */

static size_t seg_offset(unsigned k)
{
    return (size_t)memprof__seg_start(k, MEMPROF_HM_SEG_BITS);
}

static size_t seg_size(unsigned k)
{
    return (size_t)memprof__seg_len(k, MEMPROF_HM_SEG_BITS);
}

/* Segment k, mapped if it was not: NULL if the mapping fails. */
static struct memprof_hm_slot *open_segment(struct memprof_heapmap *hm, unsigned k)
{
    return memprof__seg_open(&hm->segs[k], seg_size(k) * sizeof(struct memprof_hm_slot),
                             &hm->mapped_bytes);
}

/* Segment k if it is mapped, else NULL. */
static struct memprof_hm_slot *segment(struct memprof_heapmap *hm, unsigned k)
{
    return memprof_atomic_load_acquire(&hm->segs[k]);
}

MEMPROF_START_TEXT void memprof__hm_setup(struct memprof_heapmap *hm, uint64_t capacity)
{
    uint64_t cap = MEMPROF_HM_MIN_SEG;
    while (cap < capacity && cap < ((uint64_t)1 << 34))
        cap <<= 1;
    /* Twice as many slots as live samples: the newest segment opens the next one at 3/4
     * use, so this keeps probe sequences short even when the map is at capacity. */
    size_t nslots = (size_t)cap * 2;
    unsigned nsegs = 1;
    while (seg_offset(nsegs) + seg_size(nsegs) <= nslots)
        nsegs++;
    *hm = (struct memprof_heapmap){.nslots = nslots, .capacity = cap, .nsegs = nsegs};
}

int memprof__hm_open(struct memprof_heapmap *hm)
{
    return open_segment(hm, 0) ? 0 : -ENOMEM;
}

int memprof__hm_init(struct memprof_heapmap *hm, uint64_t capacity)
{
    memprof__hm_setup(hm, capacity);
    return memprof__hm_open(hm);
}

void memprof__hm_destroy(struct memprof_heapmap *hm)
{
    for (unsigned k = 0; k < hm->nsegs; k++) {
        memprof__pf_unmap(segment(hm, k), seg_size(k) * sizeof(struct memprof_hm_slot));
        hm->segs[k] = NULL;
    }
}

size_t memprof__hm_ranges(struct memprof_heapmap *hm, struct memprof_range *out, size_t max)
{
    size_t n = 0;
    for (unsigned k = 0; k < hm->nsegs && n < max; k++) {
        uintptr_t p = (uintptr_t)segment(hm, k);
        if (p)
            out[n++] = (struct memprof_range){p, p + seg_size(k) * sizeof(struct memprof_hm_slot)};
    }
    return n;
}

/* ---- insert ------------------------------------------------------------------------------ */

/* Tries to claim a slot for key in segment k (the first EMPTY or TOMB slot of its probe
 * sequence). */
static struct memprof_hm_slot *claim_in_segment(struct memprof_heapmap *hm, unsigned k,
                                                uint64_t key, uint64_t h)
{
    struct memprof_hm_slot *seg = segment(hm, k);
    if (!seg)
        return NULL;
    size_t mask = seg_size(k) - 1;
    for (size_t i = 0; i < MEMPROF_HM_MAX_PROBE; i++) {
        struct memprof_hm_slot *s = &seg[(h + i) & mask];
        uint64_t cur = memprof_atomic_load_relaxed(&s->key);
        if (cur != MEMPROF_HM_EMPTY && cur != MEMPROF_HM_TOMB)
            continue;
        /* seq_cst, not just acq_rel: the Bloom filter's rebuild (bloom.h) scans claimed keys
         * after a seq_cst fence, and an inserter that the scan missed must then see the new
         * generation; that needs this claim in the single total order. */
        if (memprof_atomic_cas_seqcst(&s->key, &cur, key)) {
            if (cur == MEMPROF_HM_EMPTY)
                memprof_atomic_add_relaxed(&hm->used[k], 1);
            else
                memprof_atomic_add_relaxed(&hm->tombstones_reused, 1);
            return s;
        }
        /* Lost the race for this slot; keep probing. */
    }
    return NULL;
}

struct memprof_hm_slot *memprof__hm_reserve(struct memprof_heapmap *hm, uint64_t key)
{
    if (memprof_atomic_load_relaxed(&hm->live) >= hm->capacity)
        goto full;
    uint64_t h = memprof__mix64(key);
    unsigned k = memprof_atomic_load_acquire(&hm->active);
    for (; k < hm->nsegs; k++) {
        unsigned cur = memprof_atomic_load_acquire(&hm->active);
        /* Open segment k (monotonic; losing the race to a larger value is fine), mapped
         * before any insert or lookup can go there. */
        if (cur < k && !open_segment(hm, k))
            break;
        /* acq_rel: publishes the segment mapped above to inserters and lookups that
         * acquire `active`. */
        while (cur < k && !memprof_atomic_cas_weak_acqrel(&hm->active, &cur, k))
            ;
        if (memprof_atomic_load_relaxed(&hm->used[k]) * 4 >= (uint64_t)seg_size(k) * 3)
            continue;
        struct memprof_hm_slot *s = claim_in_segment(hm, k, key, h);
        if (s)
            return s;
    }
    /* Every segment is at its fill limit. Live samples are below capacity (checked above),
     * so the limit was reached through tombstones of freed samples, which never turn back
     * into EMPTY: a long-running program with a small live set ends up here. Go past the
     * limit: longer probes for absent keys are the price (bounded by MEMPROF_HM_MAX_PROBE),
     * and once a segment is all tombstones every insert reuses one at once. The same when
     * the next segment cannot be mapped: then only up to the newest open segment, the last
     * one lookups probe. */
    unsigned last = memprof_atomic_load_acquire(&hm->active);
    for (k = 0; k <= last; k++) {
        struct memprof_hm_slot *s = claim_in_segment(hm, k, key, h);
        if (s)
            return s;
    }
full:
    memprof_atomic_add_relaxed(&hm->full_drops, 1);
    return NULL;
}

/* Releases a claimed slot: meta is cleared before the key is released, so that whoever
 * claims the slot next finds meta == 0 (heapmap.h). */
static void release_slot(struct memprof_hm_slot *s)
{
    memprof_atomic_store_relaxed(&s->meta, 0);
    memprof_atomic_store_release(&s->key, MEMPROF_HM_TOMB);
}

bool memprof__hm_finalize(struct memprof_heapmap *hm, struct memprof_hm_slot *slot,
                          uint32_t stack_id, uint64_t size, uint64_t ts)
{
    if (size > MEMPROF_HM_MAX_SIZE) {
        size = MEMPROF_HM_MAX_SIZE;
        memprof_atomic_add_relaxed(&hm->clamped_sizes, 1);
    }
    uint64_t meta = MEMPROF_HM_LIVE | ((uint64_t)stack_id << MEMPROF_HM_SIZE_BITS) | size;
    memprof_atomic_store_relaxed(&slot->ts, ts);
    uint64_t expected = 0;
    if (memprof_atomic_cas_release(&slot->meta, &expected, meta)) {
        memprof_atomic_add_relaxed(&hm->live, 1);
        return true;
    }
    /* A remover marked the reservation DYING: the block died during birth. */
    release_slot(slot);
    return false;
}

/* ---- remove and iterate ------------------------------------------------------------------ */

static void unpack(uint64_t key, uint64_t meta, uint64_t ts, struct memprof_hm_entry *out)
{
    out->key = key;
    out->size = meta & MEMPROF_HM_MAX_SIZE;
    out->stack_id = (uint32_t)((meta & ~MEMPROF_HM_LIVE) >> MEMPROF_HM_SIZE_BITS);
    out->ts = ts;
}

enum memprof_hm_result memprof__hm_remove(struct memprof_heapmap *hm, uint64_t key,
                                          struct memprof_hm_entry *out)
{
    uint64_t h = memprof__mix64(key);
    unsigned active = memprof_atomic_load_acquire(&hm->active);
    for (unsigned k = 0; k <= active; k++) {
        struct memprof_hm_slot *seg = segment(hm, k);
        if (!seg)
            continue;
        size_t mask = seg_size(k) - 1;
        for (size_t i = 0; i < MEMPROF_HM_MAX_PROBE; i++) {
            struct memprof_hm_slot *s = &seg[(h + i) & mask];
            uint64_t cur = memprof_atomic_load_acquire(&s->key);
            if (cur == MEMPROF_HM_EMPTY)
                break;
            if (cur != key)
                continue;
            uint64_t meta = memprof_atomic_exchange_acqrel(&s->meta, MEMPROF_HM_DYING);
            if (meta == MEMPROF_HM_DYING)
                continue; /* someone else is removing it (a double free) */
            if (meta == 0) {
                memprof_atomic_add_relaxed(&hm->death_during_birth, 1);
                return MEMPROF_HM_KILLED;
            }
            if (out)
                unpack(key, meta, memprof_atomic_load_relaxed(&s->ts), out);
            release_slot(s);
            memprof_atomic_sub_relaxed(&hm->live, 1);
            return MEMPROF_HM_FOUND;
        }
    }
    return MEMPROF_HM_NOT_FOUND;
}

size_t memprof__hm_for_each(struct memprof_heapmap *hm,
                            void (*fn)(void *ctx, const struct memprof_hm_entry *e), void *ctx)
{
    size_t found = 0;
    unsigned active = memprof_atomic_load_acquire(&hm->active);
    for (unsigned k = 0; k <= active; k++) {
        struct memprof_hm_slot *seg = segment(hm, k);
        /* A segment no slot of which was ever claimed holds nothing: not read, its pages are
         * never faulted in (the profile of a process without a sample: every `memprof run`
         * program that took none). */
        if (memprof_atomic_load_acquire(&hm->used[k]) == 0)
            continue;
        for (size_t i = 0; seg && i < seg_size(k); i++) {
            struct memprof_hm_slot *s = &seg[i];
            uint64_t key = memprof_atomic_load_acquire(&s->key);
            if (key == MEMPROF_HM_EMPTY || key == MEMPROF_HM_TOMB)
                continue;
            uint64_t meta = memprof_atomic_load_acquire(&s->meta);
            if (!(meta & MEMPROF_HM_LIVE) || meta == MEMPROF_HM_DYING)
                continue;
            uint64_t ts = memprof_atomic_load_relaxed(&s->ts);
            /* Re-validate: if the slot was freed (and maybe reused) meanwhile, skip it. */
            if (memprof_atomic_load_acquire(&s->meta) != meta ||
                memprof_atomic_load_relaxed(&s->key) != key)
                continue;
            struct memprof_hm_entry e;
            unpack(key, meta, ts, &e);
            fn(ctx, &e);
            found++;
        }
    }
    return found;
}

void memprof__hm_for_each_key(struct memprof_heapmap *hm, void (*fn)(void *ctx, uint64_t key),
                              void *ctx)
{
    unsigned active = memprof_atomic_load_acquire(&hm->active);
    for (unsigned k = 0; k <= active; k++) {
        struct memprof_hm_slot *seg = segment(hm, k);
        for (size_t i = 0; seg && i < seg_size(k); i++) {
            uint64_t key = memprof_atomic_load_acquire(&seg[i].key);
            if (key != MEMPROF_HM_EMPTY && key != MEMPROF_HM_TOMB)
                fn(ctx, key);
        }
    }
}

uint64_t memprof__hm_used(struct memprof_heapmap *hm)
{
    uint64_t used = 0;
    for (unsigned k = 0; k < hm->nsegs; k++)
        used += memprof_atomic_load_relaxed(&hm->used[k]);
    return used;
}
