/* SPDX-License-Identifier: MIT */
/*
 * The eBPF program in the kernel (session.c): loaded from the skeleton generated at build
 * time from memprof.bpf.c, set to one process and one sampling rate, its uprobes attached
 * to the entry points elfscan found, its ring buffer read and its counters summed.
 */
#ifndef MEMPROF_TOOLS_EBPF_SESSION_H
#define MEMPROF_TOOLS_EBPF_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dwarfscan.h"
#include "elfscan.h"
#include "events.h"

struct memprof_ebpf_session;

/* Loads the program for process `pid` at mean sampling interval `rate` bytes, with room
 * for `live_entries` live samples. Returns 0 or a negative errno: -EPERM when this process
 * may not load BPF programs (no CAP_BPF / CAP_SYS_ADMIN, or a lockdown), -ENOSYS when the
 * kernel has no BPF. */
int memprof__ebpf_session_open(pid_t pid, uint64_t rate, uint32_t live_entries,
                               struct memprof_ebpf_session **out);

/* Attaches the uprobes for the entry points in `elf` (found in `path`, a path this process
 * can open). Returns how many were attached, or a negative errno when none could be. */
int memprof__ebpf_session_attach(struct memprof_ebpf_session *s, const char *path,
                                 const struct memprof_ebpf_elf *elf);

/* Attaches the uprobes of the sites the debug information found in `path` (dwarfscan.h),
 * each with its descriptor in the program's `sites` map. Returns how many were attached,
 * or a negative errno when none could be. */
int memprof__ebpf_session_attach_sites(struct memprof_ebpf_session *s, const char *path,
                                       const struct memprof_ebpf_dwarf *dw);

/* Waits up to `timeout_ms` for records and hands each to `cb` (which returns 0, or a
 * negative errno that stops the poll). Returns how many were handled or a negative errno. */
int memprof__ebpf_session_poll(struct memprof_ebpf_session *s, int timeout_ms,
                               int (*cb)(void *ctx, const struct memprof_ebpf_event *e), void *ctx);

/* The program's counters (events.h), summed over CPUs. */
void memprof__ebpf_session_counters(struct memprof_ebpf_session *s,
                                    uint64_t out[MEMPROF_EBPF_COUNTERS]);

/* Detaches the probes and unloads the program. */
void memprof__ebpf_session_close(struct memprof_ebpf_session *s);

#endif
