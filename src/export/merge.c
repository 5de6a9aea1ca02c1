/* SPDX-License-Identifier: MIT */
/*
 * Merging profiles: several files read back (`memprof report a.pb.gz b.pb.gz ...`, the
 * processes of one run, the same program on several machines) as one profile model, the way
 * pprof merges them: stacks side by side, every value summed. What is one process's alone
 * (the heap over time, the peak's time) is left out; whole-heap figures are sums, and the
 * peak a sum of the processes' peaks (an upper bound of the merged heap's peak, when the
 * processes ran at once).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "export/profile.h"

static uint64_t sat(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

int memprof__profile_merge(struct memprof_profile *const *in, size_t n,
                           struct memprof_profile **out)
{
    *out = NULL;
    size_t nframes = 0, nstacks = 0, nidx = 0, nthreads = 0;
    for (size_t i = 0; i < n; i++) {
        nframes += in[i]->nframes;
        nstacks += in[i]->nstacks;
        nthreads += in[i]->nthreads;
        for (size_t j = 0; j < in[i]->nstacks; j++)
            nidx += in[i]->stacks[j].nframes;
    }
    struct memprof_profile *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->frames = malloc((nframes ? nframes : 1) * sizeof *m->frames);
    m->stacks = malloc((nstacks ? nstacks : 1) * sizeof *m->stacks);
    m->threads = malloc((nthreads ? nthreads : 1) * sizeof *m->threads);
    uint32_t *idx = malloc((nidx ? nidx : 1) * sizeof *idx);
    m->arena = idx;
    if (!m->frames || !m->stacks || !m->threads || !idx) {
        memprof__profile_free(m);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const struct memprof_profile *p = in[i];
        uint32_t frame0 = (uint32_t)m->nframes, thread0 = (uint32_t)m->nthreads;
        memcpy(m->frames + m->nframes, p->frames, p->nframes * sizeof *p->frames);
        m->nframes += p->nframes;
        memcpy(m->threads + m->nthreads, p->threads, p->nthreads * sizeof *p->threads);
        m->nthreads += p->nthreads;
        for (size_t j = 0; j < p->nstacks; j++) {
            struct memprof_pstack *st = &m->stacks[m->nstacks++];
            *st = p->stacks[j];
            st->frames = idx;
            for (uint32_t k = 0; k < st->nframes; k++)
                *idx++ = frame0 + p->stacks[j].frames[k];
            if (st->thread)
                st->thread += thread0;
        }
        /* Mixed rates: the estimates still add; the largest rate keeps intervals wide enough. */
        if (p->sampling_rate > m->sampling_rate)
            m->sampling_rate = p->sampling_rate;
        if (p->time_unix_ns > m->time_unix_ns)
            m->time_unix_ns = p->time_unix_ns;
        m->temp_threshold_ns = i && m->temp_threshold_ns != p->temp_threshold_ns
                                   ? 0 /* differed: not known */
                                   : p->temp_threshold_ns;
        m->inuse_space = sat(m->inuse_space, p->inuse_space);
        m->inuse_objects = sat(m->inuse_objects, p->inuse_objects);
        m->live_samples = sat(m->live_samples, p->live_samples);
        m->inuse_space_var += p->inuse_space_var;
        m->inuse_objects_var += p->inuse_objects_var;
        m->peak_space = sat(m->peak_space, p->peak_space);
        m->peak_objects = sat(m->peak_objects, p->peak_objects);
        m->peak_samples = sat(m->peak_samples, p->peak_samples);
        m->peak_space_var += p->peak_space_var;
        m->truncated_stacks = sat(m->truncated_stacks, p->truncated_stacks);
        m->dropped_samples = sat(m->dropped_samples, p->dropped_samples);
        m->stack_overflows = sat(m->stack_overflows, p->stack_overflows);
        m->unresolved_addresses = sat(m->unresolved_addresses, p->unresolved_addresses);
        m->total_addresses = sat(m->total_addresses, p->total_addresses);
    }
    /* A peak is a moment of one process, a duration one process's run: the merged profile
     * has neither, nor one timeline. */
    m->peak_time_ns = m->duration_ns = 0;
    m->merged = (uint32_t)n;
    *out = m;
    return 0;
}
