/* SPDX-License-Identifier: MIT */
/*
 * Snapshots: an immutable copy of the live samples, aggregated per call stack, with the
 * whole-heap and per-site estimates. Built by the core without symbols; the resolve and
 * export layers read it. Memory comes from mmap, never from the hooked allocator.
 *
 * Stack records are not copied: they live in the engine's stack table, which is never
 * unmapped and whose published records never change except for their counters, so a
 * snapshot refers to them by id for as long as the process lives.
 */
#ifndef MEMPROF_CORE_SNAPSHOT_H
#define MEMPROF_CORE_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "common/estimate.h"
#include "core/history.h"
#include "core/leaks.h"
#include "core/stacktab.h"
#include "core/threads.h"

struct memprof_snap_sample {
    uint64_t size;
    uint64_t ts;
    uint32_t stack_id;
};

/* One call stack that has live samples or allocated anything. */
struct memprof_snap_site {
    uint32_t stack_id;
    struct memprof_est live; /* from the live samples in this snapshot */
    uint64_t alloc_samples;  /* cumulative, from the stack's counters */
    uint64_t alloc_est_bytes;
    uint64_t alloc_est_count;
    struct memprof_est peak; /* live at the snapshot's peak (count_var not kept: 0) */
    /* Freed within the temporary threshold (cumulative), and freed samples per lifetime
     * bucket (history.h). */
    uint64_t temp_samples, temp_est_bytes, temp_est_count;
    uint32_t lifetimes[MEMPROF_LIFETIME_BUCKETS];
    struct memprof_leak_stat leak; /* of the live samples (leaks.h) */
    uint64_t first_ns;             /* time of the stack's first sample */
    uint16_t thread;               /* threads.h index; 0 = other or unknown threads */
};

/* A thread that took samples; index i + 1 in memprof_snap_site::thread. */
struct memprof_snap_thread {
    uint64_t tid; /* 0 if not known */
    char name[MEMPROF_THREAD_NAME];
};

struct memprof_snapshot {
    size_t map_bytes; /* size of the mapping holding this struct and the samples */
    void *sites_map;  /* the mapping holding the sites (and a stack-id index) */
    size_t sites_bytes;
    uint64_t rate;
    uint64_t timestamp_ns;
    struct memprof_stacktab *stacks;
    struct memprof_est total;
    size_t nsamples;
    struct memprof_snap_sample *samples;
    size_t nsites;
    struct memprof_snap_site *sites; /* sorted by live estimated bytes, largest first */
    /* Times since the engine's origin (its first start). */
    uint64_t duration_ns;
    /* The peak: the recorded one, or the live heap of this snapshot if that is larger. */
    struct memprof_est peak;
    uint64_t peak_t_ns;
    uint64_t temp_threshold_ns;
    /* The heap over time, ending with this snapshot's point. */
    size_t nseries;
    struct memprof_hist_point *series;
    size_t nthreads;
    struct memprof_snap_thread *threads;
    /* Site indexes per view (memprof_view), largest value first, only sites with a value. */
    uint32_t *view_order[5];
    size_t view_nsites[5];
    /* Health at snapshot time. */
    uint64_t truncated_stacks, heap_map_full_drops, stack_table_overflows;
};

/* Builds a snapshot of the engine. Returns 0, -ENOTCONN, -ESHUTDOWN or -ENOMEM. */
int memprof__snapshot_take(struct memprof_snapshot **out);
void memprof__snapshot_free(struct memprof_snapshot *s);
/* A site's value in a view (memprof_view): the estimate its ranking uses, or NULL if the
 * site has none there (never sampled there, or not a leak suspect). */
const struct memprof_est *memprof__snapshot_view_est(const struct memprof_snap_site *site, int view,
                                                     struct memprof_est *buf);
/* The frames of a site (leaf first) and their count. */
const uintptr_t *memprof__snapshot_site_frames(const struct memprof_snapshot *s,
                                               const struct memprof_snap_site *site,
                                               unsigned *depth);

#endif
