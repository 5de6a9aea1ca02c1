/* SPDX-License-Identifier: MIT */
/*
 * Whether `memprof attach` may load the library into a process that runs under seccomp:
 * the judgement of the process's filters on the system calls the library makes there once
 * attached (its start, the profile's files), for the command, which reads the filters from
 * outside before it loads anything. The library's own interpreter of filters (core/sandbox.h)
 * gives the verdicts, so the command and the library cannot disagree on them.
 */
#ifndef MEMPROF_API_ATTACH_CHECK_H
#define MEMPROF_API_ATTACH_CHECK_H

#include <stdbool.h>

/* Whether a seccomp filter would kill (trap, or hand to a tracer or supervisor) the process
 * for a system call the attached library makes: thread and process ids, /proc files, and
 * writing the profile. `strict` for SECCOMP_MODE_STRICT, else `fprog` is the filter's struct
 * sock_fprog. Filters stack: the process is safe only if no filter of it answers true. */
bool memprof__attach_forbidden_by(bool strict, const void *fprog);

#endif
