/* SPDX-License-Identifier: MIT */
/*
 * What the eBPF program (memprof.bpf.c) and the command (session.c) share: the record the
 * program sends through its ring buffer for each sampled allocation and each free of a
 * sampled block, the layout of its per-CPU counters, and the sizes both sides agree on.
 * Only fixed-width types, so the one header serves the BPF target and the host.
 */
#ifndef MEMPROF_TOOLS_EBPF_EVENTS_H
#define MEMPROF_TOOLS_EBPF_EVENTS_H

#include <linux/types.h>

/* The most user frames one sample records (the kernel's perf_event_max_stack default). */
#define MEMPROF_EBPF_MAX_FRAMES 127
/* Entries of the table of ln(1 + i/1024) the program draws countdowns with. */
#define MEMPROF_EBPF_LN_STEPS 1024

enum memprof_ebpf_event_kind {
    MEMPROF_EBPF_ALLOC = 1, /* a sampled allocation: every field */
    MEMPROF_EBPF_FREE = 2,  /* a sampled block freed: serial and time_ns */
};

/* A sampled allocation or the free of one. The ring buffer hands records over in the
 * order they were reserved, and the program reserves an allocation's record before the
 * block can be found by a free, so a free always follows its allocation. */
struct memprof_ebpf_event {
    __u32 kind;
    __u32 tid;
    __u64 serial; /* unique per sample: frees name it, not the address, which is reused */
    __u64 size;
    __u64 time_ns; /* CLOCK_MONOTONIC */
    __s32 nframes; /* < 0: bpf_get_stack() failed with this errno */
    __u32 pad;
    __u64 frames[MEMPROF_EBPF_MAX_FRAMES]; /* return addresses, innermost first */
};

/* Where a probe site (dwarfscan.c) finds a value when the uprobe fires, as the debug
 * information says: a constant, a register plus an addend, or the word at a register plus
 * an offset. Registers are DWARF-numbered. */
enum memprof_ebpf_loc_kind {
    MEMPROF_EBPF_LOC_NONE = 0, /* not known */
    MEMPROF_EBPF_LOC_CONST,    /* value */
    MEMPROF_EBPF_LOC_REG,      /* reg + value */
    MEMPROF_EBPF_LOC_MEM,      /* *(u64 *)(reg + value), in the process's memory */
};

struct memprof_ebpf_loc {
    __u32 kind;
    __u32 reg;
    __s64 value;
};

enum memprof_ebpf_site_kind {
    MEMPROF_EBPF_SITE_ALLOC = 1, /* size */
    MEMPROF_EBPF_SITE_REALLOC,   /* ptr (the old block), size (the new one's) */
    MEMPROF_EBPF_SITE_FREE,      /* ptr */
    MEMPROF_EBPF_SITE_RESULT,    /* ptr: the block an inlined allocation (site `entry`) made */
};

/* The descriptor of one probe site, in the program's `sites` array at the index the
 * probe's cookie names. An inlined site has no return: an allocation's stack is taken at
 * its entry (already in the caller's body, so the caller's frame is right); its block's
 * address is read where the debug information shows it after the inlined code (a RESULT
 * site, `has_result`), and without one a sample there is never seen freed. */
struct memprof_ebpf_site {
    __u32 kind;
    __u32 inlined;
    __u32 entry;      /* RESULT: the index of the allocation's site */
    __u32 has_result; /* an inlined allocation with RESULT sites */
    struct memprof_ebpf_loc size, ptr;
};

/* The most probe sites the debug information may add (the `sites` map's size). */
#define MEMPROF_EBPF_MAX_SITES 8192

/* The per-CPU counters (an array map of this many __u64), summed by the command. */
enum memprof_ebpf_counter {
    MEMPROF_EBPF_CALLS,          /* probed allocator calls on the outermost level */
    MEMPROF_EBPF_SAMPLES,        /* allocations sampled */
    MEMPROF_EBPF_DROP_MAP_FULL,  /* samples lost: the live map was full */
    MEMPROF_EBPF_DROP_RING_FULL, /* samples lost: the ring buffer was full */
    MEMPROF_EBPF_STACK_ERRORS,   /* samples kept without a stack: bpf_get_stack() failed */
    MEMPROF_EBPF_FREE_LOST,      /* frees of sampled blocks not reported (ring full) */
    MEMPROF_EBPF_NO_ADDRESS,     /* samples at inlined sites: their block's address unknown */
    MEMPROF_EBPF_COUNTERS
};

#endif
