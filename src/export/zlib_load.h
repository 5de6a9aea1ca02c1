/* SPDX-License-Identifier: MIT */
/*
 * zlib for the pprof writer and reader, loaded with dlopen() on first use rather than linked:
 * linked, libz would be mapped and relocated in every process the preload plugin starts in,
 * most of which never write a compressed profile. Only used while writing or reading a
 * profile (a user thread, the plugin's writer), never in a hook or a signal handler.
 */
#ifndef MEMPROF_EXPORT_ZLIB_LOAD_H
#define MEMPROF_EXPORT_ZLIB_LOAD_H

#include <zlib.h>

/* The zlib functions the writers and readers call (zlib.h's macros deflateInit2() and
 * inflateInit2() pass ZLIB_VERSION and sizeof(z_stream) to the underscored functions). */
struct memprof__zlib {
    int (*deflate_init2)(z_streamp strm, int level, int method, int window_bits, int mem_level,
                         int strategy, const char *version, int stream_size);
    int (*deflate)(z_streamp strm, int flush);
    int (*deflate_end)(z_streamp strm);
    int (*inflate_init2)(z_streamp strm, int window_bits, const char *version, int stream_size);
    int (*inflate)(z_streamp strm, int flush);
    int (*inflate_reset)(z_streamp strm);
    int (*inflate_end)(z_streamp strm);
};

/* zlib, loaded by the first call (thread-safe); NULL when libz.so.1 cannot be loaded. */
const struct memprof__zlib *memprof__zlib(void);

#endif
