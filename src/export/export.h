/* SPDX-License-Identifier: MIT */
/*
 * Snapshot writers: each turns a snapshot into one file format on a stdio stream. They
 * resolve frames through src/resolve/ and know nothing about how the file is created (the
 * API layer writes to a temporary file and renames it).
 */
#ifndef MEMPROF_EXPORT_EXPORT_H
#define MEMPROF_EXPORT_EXPORT_H

#include <stdio.h>

#include "core/snapshot.h"

/* Human-readable summary: whole-heap estimate with interval, health, top sites. */
int memprof__export_text(const struct memprof_snapshot *s, FILE *out, unsigned top);
/* Collapsed stacks "root;...;leaf value", value = estimated live bytes. */
int memprof__export_collapsed(const struct memprof_snapshot *s, FILE *out);
/* Formats a byte count as "12.3 MiB" into buf; returns buf. */
const char *memprof__export_bytes(uint64_t bytes, char *buf, unsigned size);
/* The label of the first frame of a site (its allocation site), for summaries; returns buf
 * or a string that lives as long as the process. */
const char *memprof__export_site_label(const struct memprof_snapshot *s,
                                       const struct memprof_snap_site *site, char *buf,
                                       unsigned size);

#endif
