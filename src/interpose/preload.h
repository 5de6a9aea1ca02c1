/* SPDX-License-Identifier: MIT */
/*
 * The preload backend's start-up and exit handling (preload_env.c), shared with the hook
 * definitions (preload.c).
 */
#ifndef MEMPROF_INTERPOSE_PRELOAD_H
#define MEMPROF_INTERPOSE_PRELOAD_H

/* Reads MEMPROF_* from the environment, initialises and starts the engine as configured,
 * and arranges the exit-time profile. Called once from the plugin's constructor. */
void memprof__preload_configure(void);

#endif
