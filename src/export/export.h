/* SPDX-License-Identifier: MIT */
/*
 * Profile writers: each turns the profile model (profile.h) into one file format on a stdio
 * stream. They know nothing about the engine or how the file is created (the API layer and
 * the `memprof` command write to a temporary file and rename it). Each returns 0, or -EIO
 * when the stream reports an error, or another negative errno.
 *
 * The human-facing writers (text, collapsed, speedscope, HTML) take the view to show
 * (profile.h, enum memprof_view; doc/guide.md, "Views"): the text and collapsed writers show
 * that view only, speedscope and HTML carry every view the profile has and open on the
 * selected one. pprof carries every view itself (peak and temporary as sample types, the
 * leak statistic, lifetimes and threads as labels) and takes none.
 */
#ifndef MEMPROF_EXPORT_EXPORT_H
#define MEMPROF_EXPORT_EXPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "export/profile.h"

/* What a collapsed-stack line's value counts, as `memprof report --value` names it: a view
 * (live or allocated) and a unit. memprof__value_view() splits it. */
enum memprof_value {
    MEMPROF_VALUE_INUSE_SPACE = 0, /* estimated live bytes (the default) */
    MEMPROF_VALUE_ALLOC_SPACE = 1, /* estimated bytes allocated since sampling began */
    MEMPROF_VALUE_INUSE_OBJECTS = 2,
    MEMPROF_VALUE_ALLOC_OBJECTS = 3,
};

/* The view a value names, and whether it counts objects rather than bytes. */
enum memprof_view memprof__value_view(enum memprof_value v, bool *objects);

/* Human-readable summary of one view: the heading of memprof__export_summary(), then the
 * view's top `top` sites with their intervals (live, peak), lifetimes, threads and call
 * paths; for the leaks view the suspects with their rates; a "Threads" section when the
 * profile knows its threads. */
int memprof__export_text(const struct memprof_profile *p, FILE *out, enum memprof_view view,
                         unsigned top);
/* One view's ranked sites (stacks merged across threads) without the heading: a title line,
 * then up to `top` sites with their intervals, lifetimes and call paths, or a line saying
 * there are none. For summaries that show several views. */
int memprof__export_text_sites(const struct memprof_profile *p, FILE *out, enum memprof_view view,
                               unsigned top);
/* The heading alone, a few lines any summary can start with: the live heap with its 95 %
 * interval, the peak (with interval and time) and the bytes allocated in total, a note when
 * the estimates rest on little information, and the profiler's health. */
int memprof__export_summary(const struct memprof_profile *p, FILE *out);
/* Collapsed stacks "root;...;leaf value", one line per call path with a non-zero value: the
 * view's estimated bytes, or its estimated objects with `objects` (the leaks view has
 * bytes only: with `objects` it writes nothing). Frames without a symbol are "module+?",
 * one per run in a module, so flame graphs merge them (stacks that become equal are one
 * line, their values summed); with `addresses` each keeps its "module+0x..." instead. */
int memprof__export_collapsed(const struct memprof_profile *p, FILE *out, enum memprof_view view,
                              bool objects, bool addresses);
/* Formats a byte count as "12.3 MiB" into buf; returns buf. */
const char *memprof__export_bytes(uint64_t bytes, char *buf, unsigned size);
/* Formats a duration in nanoseconds as "3.25 s", "16.4 ms", "4 us" into buf; returns buf. */
const char *memprof__export_duration(uint64_t ns, char *buf, unsigned size);

/* The 95 % interval of a site's (or the heap's) byte estimate with variance `var` from
 * `samples` samples at sampling rate `rate`, and whether the estimate rests on so little
 * information that a reader should take it as rough: memprof__interval_at_rate()
 * (interval.h). A view without a variance (alloc, temporary, leaks) passes var < 0: it gets
 * the mark, from the variance of `samples` equal shares of the estimate (so `samples`
 * effective samples), and an interval it should not print. Every writer marks sites through
 * this one function, so they agree. */
struct memprof_export_interval {
    uint64_t lo, hi;
    int low_information;
};
void memprof__export_interval(double est, double var, uint64_t samples, uint64_t rate,
                              struct memprof_export_interval *out);

/* speedscope JSON: one shared frame table and one sampled profile per view the profile has
 * (named "live", "alloc", "peak", "temporary", "leaks"; estimated bytes, stacks root first),
 * the selected view first and active. Live and allocated bytes are always there. */
int memprof__export_speedscope(const struct memprof_profile *p, FILE *out, enum memprof_view view);
/* One self-contained HTML page (no network resources): heap over time, a view switcher, a
 * flame graph and a sortable site table for every view, opening on `view`. */
int memprof__export_html(const struct memprof_profile *p, FILE *out, enum memprof_view view);

#endif
