/* SPDX-License-Identifier: MIT */
/*
 * What the eBPF mode learns, turned into the project's profile model (export/profile.h) so
 * that every writer, the summary and `memprof report` treat it as any other profile
 * (record.c). It takes the program's records (events.h) one by one: a sampled allocation
 * with its stack and thread, the free of a sample. It keeps the live samples, the
 * per-site estimates with the library's weights (common/estimate.h), the recorded peak, the
 * heap over time, the short-lived allocations and the lifetimes of freed samples; frames
 * are left unresolved (module, build id, load bias, address) for the offline symbolizer.
 */
#ifndef MEMPROF_TOOLS_EBPF_RECORD_H
#define MEMPROF_TOOLS_EBPF_RECORD_H

#include <stdint.h>

#include "events.h"
#include "export/profile.h"
#include "procmaps.h"

struct memprof_ebpf_record;

/* A record for process `maps->pid` (maps must outlive it) sampled at `rate`, from
 * CLOCK_MONOTONIC time `start_ns`. NULL when out of memory. */
struct memprof_ebpf_record *memprof__ebpf_record_new(struct memprof_ebpf_maps *maps, uint64_t rate,
                                                     uint64_t start_ns);
/* Takes one record of the program. Returns 0 or -ENOMEM. */
int memprof__ebpf_record_event(struct memprof_ebpf_record *r, const struct memprof_ebpf_event *e);

/* Health the program counted (events.h), for the profile. */
struct memprof_ebpf_health {
    uint64_t dropped;      /* map full + ring buffer full */
    uint64_t stack_errors; /* samples kept without a stack */
    uint64_t free_lost;    /* frees not reported: those samples stay live */
};

/* The profile so far, ending at CLOCK_MONOTONIC `end_ns`: frames unresolved (the command
 * symbolizes it), stacks sorted by live bytes. Free it with memprof__profile_free().
 * Returns 0 or -ENOMEM. */
int memprof__ebpf_record_profile(struct memprof_ebpf_record *r, uint64_t end_ns,
                                 const struct memprof_ebpf_health *h, struct memprof_profile **out);

void memprof__ebpf_record_free(struct memprof_ebpf_record *r);

#endif
