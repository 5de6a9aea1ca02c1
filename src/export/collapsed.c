/* SPDX-License-Identifier: MIT */
/*
 * The collapsed-stacks writer ("root;caller;leaf value" per line), the input of
 * flamegraph.pl, inferno, speedscope and most flame-graph tools. Frame labels are bare
 * function names so tools merge equal frames; the value is the last space-separated field.
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

static uint64_t value_of(const struct memprof_pstack *st, enum memprof_value v)
{
    switch (v) {
    case MEMPROF_VALUE_ALLOC_SPACE:
        return st->alloc_space;
    case MEMPROF_VALUE_INUSE_OBJECTS:
        return st->inuse_objects;
    case MEMPROF_VALUE_ALLOC_OBJECTS:
        return st->alloc_objects;
    default:
        return st->inuse_space;
    }
}

int memprof__export_collapsed(const struct memprof_profile *p, FILE *out, enum memprof_value v)
{
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        uint64_t value = value_of(st, v);
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
    return ferror(out) ? -EIO : 0;
}
