/* SPDX-License-Identifier: MIT */
/*
 * The collapsed-stacks writer ("root;caller;leaf value" per line), the input of
 * flamegraph.pl, inferno, speedscope and most flame-graph tools. Frame labels are bare
 * function names so tools merge equal frames; the value is the estimated live bytes.
 */
#include <inttypes.h>
#include <string.h>

#include "export/export.h"
#include "resolve/stacks.h"

/* Separators inside a label would split or end the frame: replace them. */
static void sanitize(char *label)
{
    for (char *p = label; *p; p++)
        if (*p == ';' || *p == '\n' || *p == '\r')
            *p = '_';
}

int memprof__export_collapsed(const struct memprof_snapshot *s, FILE *out)
{
    for (size_t i = 0; i < s->nsites; i++) {
        const struct memprof_snap_site *site = &s->sites[i];
        uint64_t value = memprof__est_round(site->live.bytes);
        if (value == 0)
            continue;
        const struct memprof_rstack *r = memprof__resolve_stack(s->stacks, site->stack_id);
        unsigned depth = r ? r->n : 0;
        if (site->stack_id == MEMPROF_STACK_OVERFLOW_ID || depth == 0)
            fputs(site->stack_id == MEMPROF_STACK_OVERFLOW_ID ? "[stack table full]" : "[unknown]",
                  out);
        for (unsigned j = depth; j-- > 0;) {
            char buf[512], label[512];
            snprintf(label, sizeof label, "%s",
                     memprof__rframe_label(&r->frames[j], buf, sizeof buf));
            sanitize(label);
            fprintf(out, "%s%s", j + 1 == depth ? "" : ";", label);
        }
        fprintf(out, " %" PRIu64 "\n", value);
    }
    return ferror(out) ? -1 : 0;
}
