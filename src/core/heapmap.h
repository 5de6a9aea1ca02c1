/* SPDX-License-Identifier: MIT */
/*
 * The heap map: a lock-free table from the address of each live sampled allocation to its
 * size, stack id and allocation time.
 *
 * Layout. Open addressing with linear probing over a set of segments of growing size
 * (S, S, 2S, 4S, ... with S = 4096 slots), each mapped when it opens (segments.h). Inserts
 * go to the newest open segment; when it is three quarters used the next one is mapped and
 * opened. Lookups probe every open segment. So memory, address space and commit charge grow
 * with the number of live samples instead of with the configured capacity, and no entry
 * ever moves (no resize, no rehash). A segment that cannot be mapped (a limit reached)
 * leaves the map full for now: samples are dropped and counted.
 *
 * Slot states, as (key, meta):
 *   (EMPTY, 0)      never used; ends a probe sequence
 *   (TOMB, 0)       freed; skipped by lookups, reusable by inserts
 *   (K, 0)          RESERVED: an insert of K has claimed the slot but not finalised it
 *   (K, LIVE|...)   a live sample; meta packs the stack id and exact size
 *   (K, DYING)      claimed by a remover (or killed while reserved) and about to become TOMB
 *
 * Transitions and their memory orders:
 *   reserve   CAS key EMPTY|TOMB -> K (seq_cst: the Bloom filter's rebuild relies on it). A TOMB or EMPTY slot always has meta == 0,
 *             because removers clear meta before they release the key.
 *   finalise  store ts (relaxed), then CAS meta 0 -> LIVE|stack|size (release). If the CAS
 *             fails the block was freed during birth: meta := 0, key := TOMB (release).
 *   remove    exchange meta -> DYING (acq_rel) claims the slot; the old value says whether
 *             it was live (read it, meta := 0, key := TOMB with release) or still reserved
 *             ("death during birth": finalise will see DYING and clean up).
 *   snapshot  acquire key, acquire meta, relaxed ts, then re-read meta and key; a slot that
 *             changed in between is skipped, so every reported sample is consistent.
 * Only one thread can own an address at a time (the allocator hands it out once until it is
 * freed), and removal runs before the real free(), so an address is never live twice.
 */
#ifndef MEMPROF_CORE_HEAPMAP_H
#define MEMPROF_CORE_HEAPMAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/segments.h"

#define MEMPROF_HM_EMPTY     ((uint64_t)0)
#define MEMPROF_HM_TOMB      ((uint64_t)1)
#define MEMPROF_HM_DYING     (~(uint64_t)0)
#define MEMPROF_HM_LIVE      ((uint64_t)1 << 63)
#define MEMPROF_HM_SIZE_BITS 41
/* Largest exact size stored (2 TiB - 1); larger sizes are clamped and counted. */
#define MEMPROF_HM_MAX_SIZE (((uint64_t)1 << MEMPROF_HM_SIZE_BITS) - 1)
/* Stack ids must stay below this (the all-ones id would alias DYING). */
#define MEMPROF_HM_MAX_STACK (((uint32_t)1 << 22) - 1)
#define MEMPROF_HM_SEG_BITS  12 /* S = 4096 */
#define MEMPROF_HM_MIN_SEG   (1u << MEMPROF_HM_SEG_BITS)
#define MEMPROF_HM_MAX_SEGS  MEMPROF_SEG_MAX
/* An entry is never placed further than this from its home slot, which bounds lookups. */
#define MEMPROF_HM_MAX_PROBE 128

struct memprof_hm_slot {
    _Atomic uint64_t key;
    _Atomic uint64_t meta;
    _Atomic uint64_t ts;
};

/* A sample read out of the map. */
struct memprof_hm_entry {
    uint64_t key;
    uint64_t size;
    uint64_t ts;
    uint32_t stack_id;
};

struct memprof_heapmap {
    _Atomic(void *) segs[MEMPROF_HM_MAX_SEGS]; /* struct memprof_hm_slot[], NULL until open */
    size_t nslots;                             /* total slots in all segments */
    uint64_t capacity;                         /* maximum live samples */
    unsigned nsegs;
    _Atomic unsigned active;                    /* newest open segment */
    _Atomic uint64_t used[MEMPROF_HM_MAX_SEGS]; /* non-EMPTY slots per segment */
    _Atomic uint64_t live;
    _Atomic uint64_t full_drops;
    _Atomic uint64_t tombstones_reused;
    _Atomic uint64_t death_during_birth;
    _Atomic uint64_t clamped_sizes;
    _Atomic uint64_t mapped_bytes; /* of the segments mapped so far */
};

enum memprof_hm_result {
    MEMPROF_HM_NOT_FOUND = 0,
    MEMPROF_HM_FOUND = 1,  /* removed; the entry was filled in */
    MEMPROF_HM_KILLED = 2, /* the address was reserved, not yet finalised: death during birth */
};

/* Sets the table up for `capacity` live samples (rounded up to a power of two, >= 4096):
 * memprof__hm_setup() sizes it (nothing mapped: no slot can be reserved yet, every lookup and
 * walk finds nothing), memprof__hm_open() maps its first segment, memprof__hm_init() does
 * both. Those that map return 0 or -ENOMEM. */
void memprof__hm_setup(struct memprof_heapmap *hm, uint64_t capacity);
int memprof__hm_open(struct memprof_heapmap *hm);
int memprof__hm_init(struct memprof_heapmap *hm, uint64_t capacity);
/* Releases the mappings. Only when no other thread can use the map any more (tests). */
void memprof__hm_destroy(struct memprof_heapmap *hm);
/* Claims a slot for `key`. Returns NULL (and counts a drop) when the map is full. */
struct memprof_hm_slot *memprof__hm_reserve(struct memprof_heapmap *hm, uint64_t key);
/* Publishes a reserved slot. Returns false if the key was removed while reserved. */
bool memprof__hm_finalize(struct memprof_heapmap *hm, struct memprof_hm_slot *slot,
                          uint32_t stack_id, uint64_t size, uint64_t ts);
/* Removes `key`; on MEMPROF_HM_FOUND `out` (if not NULL) receives the sample. */
enum memprof_hm_result memprof__hm_remove(struct memprof_heapmap *hm, uint64_t key,
                                          struct memprof_hm_entry *out);
/* Calls fn for every live sample (consistent reads, see above); returns how many. */
size_t memprof__hm_for_each(struct memprof_heapmap *hm,
                            void (*fn)(void *ctx, const struct memprof_hm_entry *e), void *ctx);
/* Calls fn for every claimed key, live or reserved (used to rebuild the Bloom filter). */
void memprof__hm_for_each_key(struct memprof_heapmap *hm, void (*fn)(void *ctx, uint64_t key),
                              void *ctx);
/* Slots not EMPTY (live, reserved or tombstone) over all segments. */
uint64_t memprof__hm_used(struct memprof_heapmap *hm);
/* The segments mapped so far: writes at most `max` ranges to `out`, returns how many. */
size_t memprof__hm_ranges(struct memprof_heapmap *hm, struct memprof_range *out, size_t max);

#endif
