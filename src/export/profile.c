/* SPDX-License-Identifier: MIT */
/*
 * The writers' profile model (profile.h): freeing a profile, a frame's label, and whether a
 * profile is unsymbolized. Profiles are built from a snapshot by the API layer
 * (api/snapshot_profile.c) or read from a pprof file (pprof_read.c).
 */
#include "export/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void memprof__profile_free(struct memprof_profile *p)
{
    if (!p)
        return;
    free(p->arena);
    free(p->series);
    free(p->threads);
    free(p->thread_names);
    free(p->frames);
    free(p->stacks);
    free(p);
}

const char *memprof__pframe_label(const struct memprof_pframe *f, char *buf, size_t size)
{
    if (f->function)
        return f->function;
    if (f->module) {
        const char *base = strrchr(f->module, '/');
        snprintf(buf, size, "%s+0x%llx", base ? base + 1 : f->module,
                 (unsigned long long)(f->address - f->load_bias));
        return buf;
    }
    return "[unknown]";
}

size_t memprof__unnamed_modules(const struct memprof_profile *p, const char **out, size_t max,
                                bool *more)
{
    *more = false;
    if (p->unresolved_addresses == 0 || p->unresolved_addresses * 4 < p->total_addresses ||
        memprof__profile_unsymbolized(p)) /* a raw profile says so instead */
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < p->nframes && !*more; i++) {
        const struct memprof_pframe *f = &p->frames[i];
        if (f->function || !f->module || !f->address) /* named, or an interpreter's frame */
            continue;
        const char *base = strrchr(f->module, '/');
        base = base ? base + 1 : f->module;
        size_t k = 0;
        while (k < n && strcmp(out[k], base))
            k++;
        if (k == n && n == max)
            *more = true;
        else if (k == n)
            out[n++] = base;
    }
    return n;
}

bool memprof__profile_unsymbolized(const struct memprof_profile *p)
{
    bool native = false;
    for (size_t i = 0; i < p->nframes; i++) {
        const struct memprof_pframe *f = &p->frames[i];
        if (!f->module || !f->address || (f->flags & MEMPROF_FRAME_RUNTIME))
            continue;
        if (f->function)
            return false;
        native = true;
    }
    return native;
}
