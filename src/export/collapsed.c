/* SPDX-License-Identifier: MIT */
/*
 * The collapsed-stacks writer ("root;caller;leaf value" per line), the input of
 * flamegraph.pl, inferno, speedscope and most flame-graph tools. Frame labels are bare
 * function names so tools merge equal frames; the value is the last space-separated field:
 * one view's estimated bytes or objects (profile.h, memprof__pstack_view()). Stacks whose
 * value is zero are left out, so the lines of a view sum to that view's total.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "export/export.h"

/* Separators inside a label would split or end the frame: replace them. */
static void put_label(const char *label, FILE *out)
{
    for (const char *c = label; *c; c++)
        fputc(*c == ';' || *c == '\n' || *c == '\r' ? '_' : *c, out);
}

enum memprof_view memprof__value_view(enum memprof_value v, bool *objects)
{
    *objects = v == MEMPROF_VALUE_INUSE_OBJECTS || v == MEMPROF_VALUE_ALLOC_OBJECTS;
    return v == MEMPROF_VALUE_ALLOC_SPACE || v == MEMPROF_VALUE_ALLOC_OBJECTS ? MEMPROF_VIEW_ALLOC
                                                                              : MEMPROF_VIEW_LIVE;
}

int memprof__export_collapsed(const struct memprof_profile *p, FILE *out, enum memprof_view view,
                              bool objects)
{
    if ((unsigned)view >= MEMPROF_VIEW_COUNT)
        return -EINVAL;
    /* One line per call path: stacks of several threads merged (profile.h). */
    struct memprof_profile *sites;
    if (memprof__profile_sites(p, &sites) != 0)
        return -ENOMEM;
    p = sites;
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        struct memprof_pvalue v;
        memprof__pstack_view(st, view, &v);
        uint64_t value = objects ? v.objects : v.bytes;
        if (value == 0)
            continue;
        if (st->nframes == 0)
            fputs("[no stack]", out);
        for (unsigned j = st->nframes; j-- > 0;) {
            char buf[512];
            if (j + 1 != st->nframes)
                fputc(';', out);
            put_label(memprof__pframe_label(&p->frames[st->frames[j]], buf, sizeof buf), out);
        }
        fprintf(out, " %" PRIu64 "\n", value);
    }
    memprof__profile_sites_free(sites);
    return ferror(out) ? -EIO : 0;
}
