/* SPDX-License-Identifier: MIT */
/*
 * The collapsed-stacks writer ("root;caller;leaf value" per line), the input of
 * flamegraph.pl, inferno, speedscope and most flame-graph tools. Frame labels are bare
 * function names so tools merge equal frames; the value is the last space-separated field:
 * one view's estimated bytes or objects (profile.h, memprof__pstack_view()). Stacks whose
 * value is zero are left out, so the lines of a view sum to that view's total.
 *
 * A frame without a symbol has only its module and address to go by, and addresses differ
 * from call site to call site, so a stripped library would split a flame graph into as many
 * towers as it has return addresses. Unless asked to keep the addresses, such a frame is
 * labelled "module+?", a run of them in one module is one frame, and stacks that become
 * equal are one line with their values summed.
 *
 * A line ends at its site's frame, the innermost that is the user's, and interpreter frames
 * follow each other without the interpreter's own C frames between them (sites.c);
 * MEMPROF_NATIVE=1 (`--native`) keeps every frame.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
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

/* A frame's label: its function, or (merging) "module+?" for one without a symbol, or the
 * module and address (memprof__pframe_label()). */
static const char *label_of(const struct memprof_pframe *f, bool addresses, char *buf, size_t size)
{
    if (!f->function && f->module && !addresses) {
        const char *base = strrchr(f->module, '/');
        snprintf(buf, size, "%s+?", base ? base + 1 : f->module);
        return buf;
    }
    return memprof__pframe_label(f, buf, size);
}

/* One output line: the frames, and the summed value of the stacks that make it. */
struct line {
    char *frames;
    uint64_t value;
};

struct lines {
    struct line *v;
    size_t n, cap;
    size_t *index; /* open addressing over v: i + 1, 0 when empty */
    size_t index_cap;
};

static uint64_t hash_text(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return memprof__mix64(h);
}

static size_t *slot_of(const struct lines *ls, const char *frames)
{
    for (size_t i = hash_text(frames) & (ls->index_cap - 1);; i = (i + 1) & (ls->index_cap - 1))
        if (!ls->index[i] || !strcmp(ls->v[ls->index[i] - 1].frames, frames))
            return &ls->index[i];
}

/* Adds value to the line of `frames` (taking the string), a new one if there is none. */
static int add_line(struct lines *ls, char *frames, uint64_t value)
{
    if ((ls->n + 1) * 2 > ls->index_cap) {
        size_t cap = ls->index_cap ? ls->index_cap * 2 : 256;
        size_t *index = calloc(cap, sizeof *index);
        if (!index) {
            free(frames);
            return -ENOMEM;
        }
        free(ls->index);
        ls->index = index;
        ls->index_cap = cap;
        for (size_t i = 0; i < ls->n; i++)
            *slot_of(ls, ls->v[i].frames) = i + 1;
    }
    size_t *slot = slot_of(ls, frames);
    if (*slot) {
        ls->v[*slot - 1].value += value;
        free(frames);
        return 0;
    }
    if (ls->n == ls->cap) {
        size_t cap = ls->cap ? ls->cap * 2 : 256;
        struct line *v = realloc(ls->v, cap * sizeof *v);
        if (!v) {
            free(frames);
            return -ENOMEM;
        }
        ls->v = v;
        ls->cap = cap;
    }
    ls->v[ls->n] = (struct line){frames, value};
    *slot = ++ls->n;
    return 0;
}

/* The frames of one stack, root first, as a new string. */
static char *frames_of(const struct memprof_profile *p, const struct memprof_pstack *st,
                       bool addresses)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return NULL;
    if (st->nframes == 0)
        fputs("[no stack]", out);
    char prev[512] = "";
    for (unsigned j = st->nframes; j-- > 0;) {
        char buf[512];
        const struct memprof_pframe *f = &p->frames[st->frames[j]];
        const char *label = label_of(f, addresses, buf, sizeof buf);
        /* A module's unresolved frames in a row are one frame: how many there are depends
         * on the addresses too. */
        bool merged = !addresses && !f->function && f->module;
        if (merged && !strcmp(label, prev))
            continue;
        snprintf(prev, sizeof prev, "%s", merged ? label : "");
        if (j + 1 != st->nframes)
            fputc(';', out);
        put_label(label, out);
    }
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

int memprof__export_collapsed(const struct memprof_profile *p, FILE *out, enum memprof_view view,
                              bool objects, bool addresses)
{
    if ((unsigned)view >= MEMPROF_VIEW_COUNT)
        return -EINVAL;
    /* One line per call path as people read it, ending at the site's frame (sites.c):
     * stacks of several threads merged (profile.h). */
    struct memprof_profile *shown, *sites;
    if (memprof__profile_presented(p, memprof__present_native(), &shown) != 0)
        return -ENOMEM;
    if (memprof__profile_sites(shown, &sites) != 0) {
        memprof__profile_presented_free(shown);
        return -ENOMEM;
    }
    p = sites;
    struct lines ls = {0};
    int rc = 0;
    for (size_t i = 0; i < p->nstacks && rc == 0; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        struct memprof_pvalue v;
        memprof__pstack_view(st, view, &v);
        uint64_t value = objects ? v.objects : v.bytes;
        if (value == 0)
            continue;
        char *frames = frames_of(p, st, addresses);
        rc = frames ? add_line(&ls, frames, value) : -ENOMEM;
    }
    for (size_t i = 0; i < ls.n; i++) {
        if (rc == 0)
            fprintf(out, "%s %" PRIu64 "\n", ls.v[i].frames, ls.v[i].value);
        free(ls.v[i].frames);
    }
    free(ls.v);
    free(ls.index);
    memprof__profile_sites_free(sites);
    memprof__profile_presented_free(shown);
    return rc ? rc : ferror(out) ? -EIO : 0;
}
