/* SPDX-License-Identifier: MIT */
/*
 * Who owns the process's one profile. When the preload plugin (`memprof run`, LD_PRELOAD) or
 * `memprof attach` initialises the engine, the profile is the command's: the program's own
 * memprof_init()/memprof_start() then join it (MEMPROF_JOINED) instead of failing, and its
 * memprof_stop()/memprof_shutdown() leave it running, so the command still gets the whole
 * profile at exit. These are the owners' lifecycle calls (src/api/api.c).
 */
#ifndef MEMPROF_API_OWNER_H
#define MEMPROF_API_OWNER_H

#include "common/compiler.h"
#include "memprof/memprof.h"

/* memprof_init_config() for a command: on success the profile is the command's. Returns as
 * memprof_init_config(). */
MEMPROF_INTERNAL int memprof__init_owned(const memprof_config *cfg);

/* True if the engine was initialised by memprof__init_owned(). */
MEMPROF_INTERNAL int memprof__owned(void);

/* memprof_stop() for the owner (the program's own memprof_stop() does not stop an owned
 * profile). Returns as memprof_stop() did before joining existed. */
MEMPROF_INTERNAL int memprof__stop_owned(void);

/* The launcher's exit-time profile, written at once (memprof_write_exit_profile()): the
 * preload plugin registers its writer when it has an output file; returns as that function.
 * Set once, before the program runs. */
MEMPROF_INTERNAL void memprof__set_exit_profile_writer(int (*writer)(void));

#endif
