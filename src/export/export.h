/* SPDX-License-Identifier: MIT */
/*
 * Profile writers: each turns the profile model (profile.h) into one file format on a stdio
 * stream. They know nothing about the engine or how the file is created (the API layer and
 * the `memprof` command write to a temporary file and rename it). Each returns 0, or -EIO
 * when the stream reports an error, or another negative errno.
 */
#ifndef MEMPROF_EXPORT_EXPORT_H
#define MEMPROF_EXPORT_EXPORT_H

#include <stdio.h>

#include "export/profile.h"

/* What a collapsed-stack line's value counts. */
enum memprof_value {
    MEMPROF_VALUE_INUSE_SPACE = 0, /* estimated live bytes (the default) */
    MEMPROF_VALUE_ALLOC_SPACE = 1, /* estimated bytes allocated since sampling began */
    MEMPROF_VALUE_INUSE_OBJECTS = 2,
    MEMPROF_VALUE_ALLOC_OBJECTS = 3,
};

/* Human-readable summary: whole-heap estimate with interval, health, top sites. */
int memprof__export_text(const struct memprof_profile *p, FILE *out, unsigned top);
/* Collapsed stacks "root;...;leaf value", one line per stack with a non-zero value. */
int memprof__export_collapsed(const struct memprof_profile *p, FILE *out, enum memprof_value v);
/* Formats a byte count as "12.3 MiB" into buf; returns buf. */
const char *memprof__export_bytes(uint64_t bytes, char *buf, unsigned size);

/* speedscope JSON: one shared frame table and two sampled profiles, live bytes then
 * allocated bytes (estimates), stacks root first. */
int memprof__export_speedscope(const struct memprof_profile *p, FILE *out);
/* One self-contained HTML page (no network resources): flame graph, sortable site table. */
int memprof__export_html(const struct memprof_profile *p, FILE *out);

#endif
