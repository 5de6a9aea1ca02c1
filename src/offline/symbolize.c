/* SPDX-License-Identifier: MIT */
/*
 * Symbolizing a profile model (symbolize.h). Each frame of the input becomes one or more
 * frames of the copy: an unresolved native frame the frames offline symbolization gives its
 * address (innermost first, all but the last flagged INLINED, as the in-process resolver
 * builds them), any other frame itself; stacks are re-indexed through that expansion.
 */
#include "offline/symbolize.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memprof/memprof.h"

#define MAX_FRAMES 32

static bool unresolved_native(const struct memprof_pframe *f)
{
    return f->module && f->address && (f->flags & MEMPROF_FRAME_UNRESOLVED) &&
           !(f->flags & MEMPROF_FRAME_RUNTIME);
}

int memprof__profile_symbolize(const struct memprof_profile *in, struct memprof_offline *o,
                               struct memprof_profile **out, size_t *named)
{
    *out = NULL;
    *named = 0;
    struct memprof_profile *p = malloc(sizeof *p);
    uint32_t *first = calloc(in->nframes + 1, sizeof *first);
    size_t cap = in->nframes ? in->nframes : 1, n = 0;
    struct memprof_pframe *frames = malloc(cap * sizeof *frames);
    if (!p || !first || !frames)
        goto oom;
    *p = *in;
    for (size_t i = 0; i < in->nframes; i++) {
        const struct memprof_pframe *f = &in->frames[i];
        struct memprof_sym_frame sf[MAX_FRAMES];
        uint64_t sym_offset = 0;
        unsigned k = unresolved_native(f)
                         ? memprof__offline_frames(o, f->module, f->build_id, f->load_bias,
                                                   f->address, sf, MAX_FRAMES, &sym_offset)
                         : 0;
        if (n + (k ? k : 1) > cap) {
            cap = 2 * cap + MAX_FRAMES;
            struct memprof_pframe *nf = realloc(frames, cap * sizeof *nf);
            if (!nf)
                goto oom;
            frames = nf;
        }
        first[i] = (uint32_t)n;
        if (!k || !sf[k - 1].function) {
            frames[n++] = *f; /* nothing better known: keep the address */
            continue;
        }
        (*named)++;
        for (unsigned j = 0; j < k; j++) {
            struct memprof_pframe *g = &frames[n++];
            *g = *f;
            g->function = sf[j].function;
            g->system_name = sf[j].system_name;
            g->file = sf[j].file;
            g->line = sf[j].line;
            g->sym_offset = j + 1 == k ? sym_offset : 0;
            /* The input frame's TRUNCATED mark belongs to the last of its frames. */
            g->flags =
                (f->flags & ~(uint32_t)(MEMPROF_FRAME_UNRESOLVED | MEMPROF_FRAME_TRUNCATED)) |
                (sf[j].inlined ? MEMPROF_FRAME_INLINED : 0) |
                (j + 1 == k ? (f->flags & MEMPROF_FRAME_TRUNCATED) : 0);
        }
    }
    first[in->nframes] = (uint32_t)n;
    size_t total = 0;
    for (size_t s = 0; s < in->nstacks; s++)
        for (uint32_t j = 0; j < in->stacks[s].nframes; j++) {
            uint32_t i = in->stacks[s].frames[j];
            total += first[i + 1] - first[i];
        }
    uint32_t *idx = malloc((total ? total : 1) * sizeof *idx);
    p->stacks = malloc((in->nstacks ? in->nstacks : 1) * sizeof *p->stacks);
    if (!idx || !p->stacks) {
        free(idx);
        free(p->stacks);
        goto oom;
    }
    p->arena = idx;
    p->frames = frames;
    p->nframes = n;
    for (size_t s = 0; s < in->nstacks; s++) {
        p->stacks[s] = in->stacks[s];
        p->stacks[s].frames = idx;
        for (uint32_t j = 0; j < in->stacks[s].nframes; j++) {
            uint32_t i = in->stacks[s].frames[j];
            for (uint32_t g = first[i]; g < first[i + 1]; g++)
                *idx++ = g;
        }
        p->stacks[s].nframes = (uint32_t)(idx - p->stacks[s].frames);
    }
    /* Health: the native addresses (each address's outermost frame) and those unnamed. */
    p->total_addresses = p->unresolved_addresses = 0;
    for (size_t i = 0; i < n; i++)
        if (frames[i].module && frames[i].address && !(frames[i].flags & MEMPROF_FRAME_RUNTIME) &&
            !(frames[i].flags & MEMPROF_FRAME_INLINED)) {
            p->total_addresses++;
            p->unresolved_addresses += !frames[i].function;
        }
    free(first);
    *out = p;
    return 0;
oom:
    free(p);
    free(first);
    free(frames);
    return -ENOMEM;
}

void memprof__profile_symbolized_free(struct memprof_profile *p)
{
    if (!p)
        return;
    free(p->arena);
    free(p->frames);
    free(p->stacks);
    free(p);
}
