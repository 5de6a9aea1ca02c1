/* SPDX-License-Identifier: MIT */
/*
 * memprof_strerror(): the text of the library's error codes. In a file of its own, apart
 * from the engine's front (api.c), because the `memprof` command prints these codes too (an
 * attached process's result) and links the library's objects without the engine.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "memprof/memprof.h"

const char *memprof_strerror(int err)
{
    /* Negate in unsigned arithmetic: -INT_MIN would overflow. */
    unsigned e = err < 0 ? 0u - (unsigned)err : (unsigned)err;
    switch (e) {
    case 0u:
        return "Success";
    case EINVAL:
        return "Invalid argument";
    case EALREADY:
        return "The profiler is already initialized";
    case ENOTCONN:
        return "The profiler is not initialized (call memprof_init first)";
    case EBUSY:
        return "Not allowed in the profiler's current state";
    case ESHUTDOWN:
        return "The profiler has been shut down";
    case ENOMEM:
        return "Out of memory";
    case ENOTSUP:
        return "Not supported by this build or process";
    case EIO:
        return "Input/output error";
    case EACCES:
        return "Permission denied";
    case ENOENT:
        return "No such file or directory";
    case ENOSPC:
        return "No space left on device";
    case EEXIST:
        return "File exists";
    case EPERM:
        return "Operation not permitted";
    default:
        break;
    }
#if HAVE_STRERRORDESC_NP
    /* Other file errors (EFBIG, EROFS, EISDIR, ...): glibc's static text, unlike strerror()
     * never a buffer of its own. */
    const char *desc = e <= INT_MAX ? strerrordesc_np((int)e) : NULL;
    if (desc)
        return desc;
#endif
    return "Unknown error";
}
