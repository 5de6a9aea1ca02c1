/* SPDX-License-Identifier: MIT */
/*
 * One eBPF trace of one process, shared by `run --ebpf` and `attach --ebpf` (trace.c): load
 * the program, find and probe the entry points of the given files, collect records as they
 * come, and at the end write the profile through the project's writers with the same
 * summary as every other mode, after the lines only this mode needs: what was probed, what
 * the stacks lack without frame pointers, what was dropped, and that allocations made
 * before the probes were attached are not in the profile.
 */
#ifndef MEMPROF_TOOLS_EBPF_TRACE_H
#define MEMPROF_TOOLS_EBPF_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "memprof/memprof.h"

struct memprof_ebpf_trace;

/* A file to probe: `path` as this process opens it; `libc`: its malloc family too (the
 * Rust allocator's always). */
struct memprof_ebpf_file {
    const char *path;
    bool libc;
};

/* Loads the program for `pid` and attaches its probes to `files`. On failure prints one
 * line (prefixed with `cmd`) and returns a CLI_EXIT_* status, CLI_EXIT_NO_BPF when BPF is
 * not allowed; 0 on success. */
int memprof__ebpf_trace_start(const char *cmd, pid_t pid, uint64_t rate,
                              const struct memprof_ebpf_file *files, unsigned nfiles,
                              struct memprof_ebpf_trace **out);

/* Probes the files the process has mapped since the start or the last rescan (a library
 * it dlopen()ed, the libraries a program started by `run` loaded after its exec): their
 * malloc family where they define it, their Rust allocator. Says so in one line per file
 * unless `quiet`. Returns how many files got probes. Allocations a library made before
 * its rescan are not seen. */
int memprof__ebpf_trace_rescan(struct memprof_ebpf_trace *t, bool quiet);

/* Collects records for up to `timeout_ms`. Returns 0 or a negative errno. */
int memprof__ebpf_trace_poll(struct memprof_ebpf_trace *t, int timeout_ms);

/* Takes whatever the ring buffer still holds (at the end, with the process stopped or
 * gone). */
void memprof__ebpf_trace_drain(struct memprof_ebpf_trace *t);

struct memprof_ebpf_output {
    const char *path; /* absolute */
    memprof_format format;
    const char *program; /* for the messages */
    bool quiet;          /* no summary */
    bool attached;       /* attach: allocations before it are unknown */
};

/* Builds, symbolizes and writes the profile and prints the summary. Returns 0 or
 * CLI_EXIT_FAILURE after one line. */
int memprof__ebpf_trace_finish(struct memprof_ebpf_trace *t, const struct memprof_ebpf_output *o);

/* The profile's path: `tmpl` (-o) or "memprof.NAME.%p.EXT", %p expanded with `pid`, made
 * absolute, into out[PATH_MAX]. Returns false when too long. */
bool memprof__ebpf_output_path(const char *tmpl, const char *name, memprof_format format, pid_t pid,
                               char *out);

/* Detaches and frees (after finish, or instead of it). */
void memprof__ebpf_trace_free(struct memprof_ebpf_trace *t);

#endif
