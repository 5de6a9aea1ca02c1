/* SPDX-License-Identifier: MIT */
/*
 * The plugin's call about the process's memory that must know of the profiler's own
 * mappings: mlockall(MCL_CURRENT) would fault in every page of the engine's tables mapped so
 * far, most of them never touched, so memprof__engine_mlockall() locks them on fault instead
 * and faults in and locks everything else, as the kernel would. It forwards to the next
 * definition (glibc's).
 *
 * Resource limits need no such care: nothing the profiler maps is a capacity reserved ahead
 * of use (sampleheap.h, segments.h), so RLIMIT_AS and RLIMIT_DATA, however a program sets
 * them (setrlimit(), prlimit() on any of its threads, the raw system call), count only
 * memory in use.
 */
#define _GNU_SOURCE
#include "config.h"

#include <sys/mman.h>

#include "interpose/preload_next.h"
#include "interpose/wrappers.h"

#define EXPORT __attribute__((visibility("default")))

static _Atomic(void *) next_mlockall;

EXPORT int mlockall(int flags)
{
    int (*f)(int) = (int (*)(int))memprof__preload_next(&next_mlockall, "mlockall");
    if (!f)
        return -1;
    return memprof__engine_mlockall(flags, f);
}
