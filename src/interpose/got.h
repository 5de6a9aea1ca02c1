/* SPDX-License-Identifier: MIT */
/*
 * The run-time GOT backend (got.c): lets memprof_start() work in a process started without
 * LD_PRELOAD -- a C program linked with -lmemprof, or an interpreter that loaded a binding.
 */
#ifndef MEMPROF_INTERPOSE_GOT_H
#define MEMPROF_INTERPOSE_GOT_H

/* Patches the allocator entry points in every loaded object's GOT (and in objects loaded
 * later) and registers the backend with the engine. Idempotent. Returns 0, or -ENOTSUP
 * when libc's allocator cannot be found or another allocator is interposed (use the
 * preload plugin then). Not async-signal-safe; never from an allocation hook. */
int memprof__got_install(void);

#endif
