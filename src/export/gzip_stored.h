/* SPDX-License-Identifier: MIT */
/*
 * A gzip member without compression (deflate's stored blocks), for when zlib cannot be
 * loaded (zlib_load.h): a container image without libz.so.1, a process that took
 * libmemprof.so.1 from another mount namespace. Every gzip reader accepts it; the file is
 * only as large as the message plus 5 bytes per 64 KiB and 18 of header and trailer.
 */
#ifndef MEMPROF_EXPORT_GZIP_STORED_H
#define MEMPROF_EXPORT_GZIP_STORED_H

#include <stddef.h>
#include <stdio.h>

/* Writes `data` (len bytes) to `out` as one gzip member. Returns 0 or -EIO. */
int memprof__gzip_stored(const unsigned char *data, size_t len, FILE *out);

#endif
