/* SPDX-License-Identifier: MIT */
/*
 * Writing an output file: the one implementation behind memprof_snapshot_write() (and so
 * the plugin's profiles) and the command's -o (`memprof report`, `memprof diff`,
 * `memprof run`). A regular file, a path that does not exist yet, or a symlink is written
 * atomically: a temporary file PATH.tmp.XXXXXX in the same directory (created exclusively,
 * mode 0600, close-on-exec) renamed over PATH, so a reader never sees a partial file and a
 * symlink at PATH is replaced, never written through. Anything else is written in place
 * and stays what it is: a character or block device, a FIFO, a Unix socket (connected to),
 * and a name of one of the process's descriptors (/dev/stdout, /dev/stderr, /dev/fd/N,
 * /proc/self/fd/N, or a chain of symlinks ending in one), which means that descriptor: the
 * output goes to the open file it refers to, at its offset, as if written to the stream.
 */
#ifndef MEMPROF_API_OUTPUT_H
#define MEMPROF_API_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

#include "common/compiler.h"
#include "memprof/memprof.h"

/* How the caller wants descriptors and FIFOs handled. */
struct memprof_output {
    /* A new close-on-exec descriptor for the process's descriptor `n` (the same open file),
     * or a negative errno. NULL: fcntl(n, F_DUPFD_CLOEXEC) in the calling thread. */
    int (*process_fd)(int n);
    /* true: a FIFO without a reader is waited for (the command, like a shell redirection);
     * false: it fails at once with ENXIO, so a program is never blocked by its profiler. */
    bool wait_for_fifo_reader;
};

/* Writes `path` with what `fill` writes to the stream it is given (fill returns 0 or a
 * negative errno). SIGXFSZ and SIGPIPE are held in the calling thread meanwhile
 * (write_signals.h), so a full file-size limit or a closed pipe is an error, not the end of
 * the process. `how` may be NULL. Returns 0 or a negative errno: -EISDIR for a directory,
 * -ENXIO for a FIFO without a reader (unless waited for) or a socket nobody listens on. */
MEMPROF_INTERNAL int memprof__output_write(const char *path, int (*fill)(FILE *out, void *ctx),
                                           void *ctx, const struct memprof_output *how);

/* memprof_snapshot_write() with `how` (the plugin's writer reaches the program's descriptors
 * its own way: preload_dump.c). Counts failures in write_failures as it does. */
MEMPROF_INTERNAL int memprof__snapshot_write_how(const memprof_snapshot *snapshot, const char *path,
                                                 memprof_format format,
                                                 const struct memprof_output *how);

/* Whether profiles this process writes carry function names, files and lines (the default)
 * or addresses with their modules' mappings and build ids only, for `memprof report
 * --symbolize` to name later (the plugin's MEMPROF_SYMBOLIZE=0). */
MEMPROF_INTERNAL void memprof__snapshot_write_names(bool on);

/* Whether `path` would be written in place (a device, FIFO, socket or descriptor name) and
 * not replaced by a new file. */
MEMPROF_INTERNAL bool memprof__output_in_place(const char *path);

#endif
