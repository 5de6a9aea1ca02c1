/* SPDX-License-Identifier: MIT */
/*
 * The text writer: what a person reads first. It states the whole-heap estimate with its
 * 95 % interval and sample count, the profiler's health (anything dropped, truncated or
 * unresolved), and the top sites by estimated live bytes with their intervals and call paths.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "core/estimate.h"
#include "export/export.h"
#include "memprof/memprof.h"

#define PATH_FRAMES 10

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

/* The first frames of a stack, one per line, with file:line where known. */
static void print_path(const struct memprof_profile *p, const struct memprof_pstack *st, FILE *out)
{
    unsigned shown = st->nframes < PATH_FRAMES ? st->nframes : PATH_FRAMES;
    for (unsigned i = 0; i < shown; i++) {
        const struct memprof_pframe *f = &p->frames[st->frames[i]];
        char buf[256];
        fprintf(out, "        %s %s", i ? "<-" : "at", memprof__pframe_label(f, buf, sizeof buf));
        if (f->file)
            fprintf(out, " (%s:%u)", f->file, f->line);
        else if (f->function && f->sym_offset)
            fprintf(out, "+0x%llx", (unsigned long long)f->sym_offset); /* nothing better */
        fprintf(out, "%s%s\n", (f->flags & MEMPROF_FRAME_INLINED) ? " [inlined]" : "",
                (f->flags & MEMPROF_FRAME_TRUNCATED) ? " [stack truncated]" : "");
    }
    if (st->nframes > shown)
        fprintf(out, "        ... %u more frames\n", st->nframes - shown);
}

int memprof__export_text(const struct memprof_profile *p, FILE *out, unsigned top)
{
    char b1[32], b2[32], b3[32], label[256];
    uint64_t lo, hi;
    memprof__est_interval((double)p->inuse_space, p->inuse_space_var, &lo, &hi);
    fprintf(out, "libmemprof %s heap profile (sampling rate %" PRIu64 " bytes)\n",
            MEMPROF_VERSION_STRING, p->sampling_rate);
    fprintf(out,
            "Estimated live heap: %s (95%% interval %s to %s), ~%" PRIu64
            " allocations, from %" PRIu64 " live samples\n",
            memprof__export_bytes(p->inuse_space, b1, sizeof b1),
            memprof__export_bytes(lo, b2, sizeof b2), memprof__export_bytes(hi, b3, sizeof b3),
            p->inuse_objects, p->live_samples);
    if (p->live_samples < 100)
        fprintf(out, "Note: fewer than 100 live samples; treat the estimates as rough (a lower "
                     "sampling rate gives more precision).\n");
    fprintf(out,
            "Health: %" PRIu64 " samples dropped (heap map full), %" PRIu64
            " stack-table overflows, %" PRIu64 " truncated stacks, %" PRIu64 " of %" PRIu64
            " code addresses without symbols\n",
            p->dropped_samples, p->stack_overflows, p->truncated_stacks, p->unresolved_addresses,
            p->total_addresses);
    fprintf(out, "\nTop sites by estimated live bytes:\n");
    unsigned shown = 0;
    for (size_t i = 0; i < p->nstacks && shown < top; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        if (st->live_samples == 0)
            break;
        memprof__est_interval((double)st->inuse_space, st->inuse_space_var, &lo, &hi);
        const char *site =
            st->nframes ? memprof__pframe_label(&p->frames[st->frames[0]], label, sizeof label)
                        : "[no stack: stack table full]";
        fprintf(out, "%3u. %s (%s to %s), ~%" PRIu64 " allocations, %" PRIu64 " samples  %s\n",
                ++shown, memprof__export_bytes(st->inuse_space, b1, sizeof b1),
                memprof__export_bytes(lo, b2, sizeof b2), memprof__export_bytes(hi, b3, sizeof b3),
                st->inuse_objects, st->live_samples, site);
        print_path(p, st, out);
    }
    if (shown == 0)
        fprintf(out, "  (no live samples)\n");
    return ferror(out) ? -EIO : 0;
}
