/* SPDX-License-Identifier: MIT */
/*
 * The summary a person reads after profiling (memprof attach; the same text as the exit
 * summary of memprof run): the profile's heading, the top sites at the peak when the peak
 * was above the heap at the end, the top sites live at the end, and the leak suspects when
 * there are any. Most programs free before they end, so the peak is what answers "what used
 * my memory".
 */
#include <stdbool.h>
#include <stdio.h>

#include "cli.h"

/* Whether a view has any site to show. */
static bool view_has_sites(const struct memprof_profile *p, enum memprof_view v)
{
    for (size_t i = 0; i < p->nstacks; i++) {
        struct memprof_pvalue val;
        memprof__pstack_view(&p->stacks[i], v, &val);
        if (val.bytes)
            return true;
    }
    return false;
}

void memprof_cli_write_summary(const struct memprof_profile *p, FILE *out, unsigned top)
{
    memprof__export_summary(p, out);
    /* The peak's sites only when it was above the heap at the end (by more than rounding and
     * the recording margin): else they are the live ones. */
    if (p->peak_space > p->inuse_space + p->inuse_space / 32 &&
        view_has_sites(p, MEMPROF_VIEW_PEAK)) {
        fputc('\n', out);
        memprof__export_text_sites(p, out, MEMPROF_VIEW_PEAK, top);
    }
    fputc('\n', out);
    char rate[32];
    if (!view_has_sites(p, MEMPROF_VIEW_ALLOC))
        fprintf(out,
                "No allocation was sampled: the program allocated too little for a sample every "
                "%s on average (-r sets a lower rate).\n",
                memprof__export_bytes(p->sampling_rate, rate, sizeof rate));
    else if (p->inuse_space == 0)
        fprintf(out, "Nothing sampled was live at the end: the program freed what it "
                     "allocated.\n");
    else
        memprof__export_text_sites(p, out, MEMPROF_VIEW_LIVE, top);
    if (view_has_sites(p, MEMPROF_VIEW_LEAKS)) {
        fputc('\n', out);
        memprof__export_text_sites(p, out, MEMPROF_VIEW_LEAKS, top);
    }
}
