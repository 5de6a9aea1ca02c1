/* SPDX-License-Identifier: MIT */
/*
 * pprof profile.proto: the writer (pprof.c) and the reader of files it wrote (pprof_read.c),
 * which `memprof report` and `memprof diff` use to turn a saved profile back into the profile
 * model (profile.h). The encoding, including the memprof-specific labels and comments that
 * make the round trip lossless for the text and diff views, is documented in pprof.c.
 */
#ifndef MEMPROF_EXPORT_PPROF_H
#define MEMPROF_EXPORT_PPROF_H

#include <stddef.h>
#include <stdio.h>

#include "export/profile.h"

/* Largest decompressed profile the reader accepts (a decompression bomb stops here). */
#define MEMPROF_PPROF_MAX_SIZE ((size_t)1 << 30)

/* The function name the resolver (resolve/stacks.c) gives an interpreter frame its frame
 * source could not resolve; the reader maps it back to MEMPROF_FRAME_UNRESOLVED. */
#define MEMPROF_PPROF_UNKNOWN_RUNTIME "[unknown runtime frame]"

/* The Profile field carrying what profile.proto has no place for: the heap over time and
 * the times of the run (pprof.c). pprof's decoder, like every protobuf decoder, skips fields
 * it does not know; a profile re-encoded by pprof loses it, and the readers then do
 * without. Its own fields: */
#define MEMPROF_PPROF_EXTENSION 1000
enum {
    MEMPROF_PPROF_EXT_PEAK_TIME_NS = 1,
    MEMPROF_PPROF_EXT_DURATION_NS = 2,
    MEMPROF_PPROF_EXT_TEMP_THRESHOLD_NS = 3,
    MEMPROF_PPROF_EXT_SERIES_T_NS = 4, /* packed; the series' three columns, same length */
    MEMPROF_PPROF_EXT_SERIES_LIVE = 5,
    MEMPROF_PPROF_EXT_SERIES_ALLOC = 6,
    MEMPROF_PPROF_EXT_MAPPING_BIAS = 7,   /* packed; each mapping's load bias, by id */
    MEMPROF_PPROF_EXT_CALL_ADDRESSES = 8, /* 1: location addresses are return addresses - 1 */
};

/* The longest series the reader accepts (the engine keeps at most about 1,000 points). */
#define MEMPROF_PPROF_MAX_SERIES ((size_t)1 << 16)

/* The reader's size limit, MEMPROF_PPROF_MAX_SIZE; a seam so tests can exercise the
 * decompression-bomb check without inflating a gigabyte. */
extern size_t memprof__pprof_read_limit;

/* Writes `p` as gzip-compressed profile.proto. Returns 0, -ENOMEM, -EIO (stream error) or
 * -EOVERFLOW (a profile too large to encode). */
int memprof__export_pprof(const struct memprof_profile *p, FILE *out);

/* Reads a profile written by memprof__export_pprof from `len` bytes at `data`, gzip-compressed
 * or not. On success returns 0 and *out (free with memprof__profile_free), stacks sorted by
 * inuse_space, largest first. On failure returns -EINVAL (not a memprof pprof file, or
 * corrupt: `err` says why, always NUL-terminated when errlen > 0) or -ENOMEM, and *out is
 * NULL. Safe on any input: every read is bounds-checked and sizes and counts are capped. */
int memprof__pprof_read(const void *data, size_t len, struct memprof_profile **out, char *err,
                        size_t errlen);

#endif
