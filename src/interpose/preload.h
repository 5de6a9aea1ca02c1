/* SPDX-License-Identifier: MIT */
/*
 * The preload backend's start-up and exit handling (preload_env.c), shared with the hook
 * definitions (preload.c).
 */
#ifndef MEMPROF_INTERPOSE_PRELOAD_H
#define MEMPROF_INTERPOSE_PRELOAD_H

#include <limits.h>
#include <stdbool.h>

#include "memprof/memprof.h"

/* Reads MEMPROF_* from the environment, initialises and starts the engine as configured,
 * and sets up the profile files. `behind_glibc`: the real allocator is glibc's, which the
 * sample heap needs. Called once from the plugin's constructor. */
void memprof__preload_configure(bool behind_glibc);

/* Where, how and when profiles are written (preload_dump.c). */
struct memprof_dump_config {
    char output[PATH_MAX]; /* template with %p; empty = write nothing */
    memprof_format format;
    unsigned interval_s; /* 0 = no periodic dumps */
    int signo;           /* 0 = no dump signal */
};
void memprof__preload_dump_setup(const struct memprof_dump_config *cfg);

/* One line on stderr, unless MEMPROF_QUIET=1. */
void memprof__preload_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
