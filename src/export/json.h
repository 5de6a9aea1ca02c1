/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the two JSON-speaking writers, speedscope and HTML (the HTML file embeds
 * its data as JSON). They are defined in speedscope.c, which is always built together with
 * html.c, so the build lists need no extra file.
 *
 * Frame merging: the profile model keeps one frame per code address, but viewers should
 * merge what a person sees as the same frame, so both writers map profile frames to
 * "unique frames" keyed by (label, file, line). Two synthetic frames stand for what has no
 * real frame: a stack the stack table could not store, and the missing part of a stack cut
 * at the maximum depth (a root above the outermost captured frame, so such stacks group
 * together instead of posing as roots of their own).
 */
#ifndef MEMPROF_EXPORT_JSON_H
#define MEMPROF_EXPORT_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "export/profile.h"

/*
 * Writes `s` as a JSON string literal, quotes included. The output is valid JSON whatever
 * the bytes: quotes, backslashes and control characters are escaped, and bytes that are not
 * well-formed UTF-8 become U+FFFD (one per maximal ill-formed subsequence, as Unicode
 * recommends). With `html`, '<', '>', '&', U+2028 and U+2029 are escaped too, so the literal
 * can sit inside an HTML <script> element ("</script>" and "<!--" cannot appear) and is
 * also valid JavaScript.
 */
void memprof__json_string(FILE *out, const char *s, bool html);

/* Which synthetic frame a unique frame index stands for (see above). */
#define MEMPROF_UFRAME_NO_STACK_LABEL  "[no stack: stack table full]"
#define MEMPROF_UFRAME_TRUNCATED_LABEL "[truncated stack]"

struct memprof_uframes {
    uint32_t *of;  /* profile frame index -> unique frame index */
    uint32_t *rep; /* unique frame index -> a profile frame index (UINT32_MAX: synthetic) */
    uint32_t n;    /* unique frames, synthetic ones included */
    uint32_t no_stack, truncated; /* the synthetic frames' indexes, UINT32_MAX if unused */
};

/* Builds the unique frames of `p`. Returns 0 or -ENOMEM (nothing to free then). */
int memprof__uframes_build(const struct memprof_profile *p, struct memprof_uframes *u);
void memprof__uframes_free(struct memprof_uframes *u);

/* The label, file (NULL if none) and line (0 if none) of unique frame `i`. */
const char *memprof__uframe_label(const struct memprof_profile *p, const struct memprof_uframes *u,
                                  uint32_t i, char *buf, size_t size, const char **file,
                                  uint32_t *line);

/*
 * The unique frames of stack `st`, root first, into `path` (room for st->nframes + 1):
 * the synthetic "[truncated stack]" root first when the stack was cut, "[no stack]" alone
 * for an empty stack. Returns the count.
 */
uint32_t memprof__uframes_path(const struct memprof_profile *p, const struct memprof_uframes *u,
                               const struct memprof_pstack *st, uint32_t *path);

#endif
