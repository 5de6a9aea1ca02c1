/* SPDX-License-Identifier: MIT */
/*
 * The text writer: what a person reads first. It states the whole-heap estimate with its
 * 95 % interval and sample count, the profiler's health (anything dropped or truncated), and
 * the top sites by estimated live bytes with their intervals and call paths.
 */
#include <inttypes.h>
#include <string.h>

#include "export/export.h"
#include "memprof/version.h"
#include "memprof/memprof.h"
#include "resolve/stacks.h"
#include "resolve/symbols.h"

const char *memprof__export_bytes(uint64_t bytes, char *buf, unsigned size)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    unsigned u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof *units) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 " B", bytes);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

const char *memprof__export_site_label(const struct memprof_snapshot *s,
                                       const struct memprof_snap_site *site, char *buf,
                                       unsigned size)
{
    const struct memprof_rstack *r = memprof__resolve_stack(s->stacks, site->stack_id);
    if (site->stack_id == MEMPROF_STACK_OVERFLOW_ID)
        return "[stack table full]";
    if (!r || r->n == 0)
        return "[unknown]";
    return memprof__rframe_label(&r->frames[0], buf, size);
}

/* The first frames of a site's stack, one per line, with file:line where known. */
static void print_path(const struct memprof_snapshot *s, const struct memprof_snap_site *site,
                       FILE *out)
{
    const struct memprof_rstack *r = memprof__resolve_stack(s->stacks, site->stack_id);
    unsigned n = r ? r->n : 0, shown = n < 10 ? n : 10;
    for (unsigned i = 0; i < shown; i++) {
        const struct memprof_rframe *f = &r->frames[i];
        char label[256];
        fprintf(out, "        %s %s", i ? "<-" : "at", memprof__rframe_label(f, label, sizeof label));
        if (f->file)
            fprintf(out, " (%s:%u)", f->file, f->line);
        else if (f->function && f->sym_offset)
            fprintf(out, "+0x%lx", (unsigned long)f->sym_offset);
        fprintf(out, "%s\n", (f->flags & MEMPROF_FRAME_INLINED) ? " [inlined]" : "");
    }
    if (n > shown)
        fprintf(out, "        ... %u more frames\n", n - shown);
}

int memprof__export_text(const struct memprof_snapshot *s, FILE *out, unsigned top)
{
    char b1[32], b2[32], b3[32], label[256];
    uint64_t lo, hi, clo, chi;
    memprof__est_interval(s->total.bytes, s->total.bytes_var, &lo, &hi);
    memprof__est_interval(s->total.count, s->total.count_var, &clo, &chi);
    fprintf(out, "libmemprof %s heap profile (sampling rate %" PRIu64 " bytes)\n",
            MEMPROF_VERSION_STRING, s->rate);
    fprintf(out, "Estimated live heap: %s (95%% interval %s to %s), ~%" PRIu64
                 " allocations, from %zu live samples\n",
            memprof__export_bytes(memprof__est_round(s->total.bytes), b1, sizeof b1),
            memprof__export_bytes(lo, b2, sizeof b2), memprof__export_bytes(hi, b3, sizeof b3),
            memprof__est_round(s->total.count), s->nsamples);
    if (s->nsamples < 100)
        fprintf(out, "Note: fewer than 100 live samples; treat the estimates as rough (lower "
                     "the sampling rate for more precision).\n");
    /* Resolve what will be shown first, so the health line counts its addresses. */
    for (size_t i = 0; i < s->nsites && i < top; i++)
        memprof__resolve_stack(s->stacks, s->sites[i].stack_id);
    uint64_t resolved, unresolved;
    memprof__sym_counts(&resolved, &unresolved);
    fprintf(out, "Health: %" PRIu64 " samples dropped (heap map full), %" PRIu64
                 " stack-table overflows, %" PRIu64 " truncated stacks, %" PRIu64 " of %" PRIu64
                 " code addresses without symbols\n",
            s->heap_map_full_drops, s->stack_table_overflows, s->truncated_stacks, unresolved,
            resolved);
    fprintf(out, "\nTop sites by estimated live bytes:\n");
    unsigned shown = 0;
    for (size_t i = 0; i < s->nsites && shown < top; i++) {
        const struct memprof_snap_site *site = &s->sites[i];
        if (site->live.samples == 0)
            break;
        memprof__est_interval(site->live.bytes, site->live.bytes_var, &lo, &hi);
        fprintf(out, "%3u. %s (%s to %s), ~%" PRIu64 " allocations, %" PRIu64 " samples  %s\n",
                ++shown,
                memprof__export_bytes(memprof__est_round(site->live.bytes), b1, sizeof b1),
                memprof__export_bytes(lo, b2, sizeof b2), memprof__export_bytes(hi, b3, sizeof b3),
                memprof__est_round(site->live.count), site->live.samples,
                memprof__export_site_label(s, site, label, sizeof label));
        print_path(s, site, out);
    }
    if (shown == 0)
        fprintf(out, "  (no live samples)\n");
    return ferror(out) ? -1 : 0;
}
