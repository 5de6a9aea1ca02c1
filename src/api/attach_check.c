/* SPDX-License-Identifier: MIT */
/*
 * The attach's seccomp judgement (attach_check.h): which groups of core/sandbox.h's system
 * calls an attached library cannot do without, checked with the library's interpreter of
 * filters. In a file of its own, beside core/sandbox.c, so the command links the two without
 * the engine.
 */
#include "api/attach_check.h"

#include <stdint.h>

#include "core/sandbox.h"

bool memprof__attach_forbidden_by(bool strict, const void *fprog)
{
    /* memprof_attach_start() reads its ids and /proc, and the profile is a file written. */
    const uint32_t needed =
        1u << MEMPROF_SYS_IDS | 1u << MEMPROF_SYS_PROC | 1u << MEMPROF_SYS_WRITE;
    return (memprof__sandbox_forbids(strict, fprog) & needed) != 0;
}
