/* SPDX-License-Identifier: MIT */
/*
 * Internal interface between the translation units of the Ruby extension
 * `memprof/memprof_ext`: the module, lifecycle and snapshot class (memprof_ext.c), the Ruby
 * frame source (frames.c) and the optional Ruby-object reporting (objects.c). Only the
 * installed headers of libmemprof are used (memprof.h, runtime.h); the extension exports
 * nothing but Init_memprof_ext.
 */
#ifndef MEMPROF_RB_BINDING_H
#define MEMPROF_RB_BINDING_H

#include <ruby.h>

#include <stdint.h>

#include <memprof/memprof.h>
#include <memprof/runtime.h>

/* Exported by libruby 3.1 (RUBY_SYMBOL_EXPORT in its internal thread.h) but not declared in
 * the installed headers: whether the calling native thread is a Ruby thread that holds its
 * ractor's GVL. It reads thread-local state only and never allocates. */
int ruby_thread_has_gvl_p(void);

/* The extension's entry point, called by `require 'memprof/memprof_ext'`. */
RUBY_FUNC_EXPORTED void Init_memprof_ext(void);

/* ---- frames.c: the Ruby frame source ---- */

/* Registers the frame source (once per process; later calls return the same id) and the
 * exit finalizer that stops capturing before the VM is torn down. Needs the GVL. Returns the
 * source id (>= 0) or a negative errno value. */
int mp_frames_init(void);

/* Adds the frame source's counters to a Hash (ruby_* keys). Needs the GVL. */
void mp_frames_stats(VALUE hash);

/* ---- objects.c: Ruby objects reported as allocations ---- */

/* Starts reporting object allocations (NEWOBJ) and frees (FREEOBJ) of Ruby heap slots of
 * `slot_size` bytes through memprof_report_alloc()/memprof_report_free(). Idempotent. */
void mp_objects_enable(size_t slot_size);

/* Stops reporting new objects; frees keep being reported (the engine's STOPPED state still
 * tracks frees). */
void mp_objects_pause(void);

/* Stops reporting both (after memprof_shutdown()). */
void mp_objects_disable(void);

/* Whether new objects are being reported. */
int mp_objects_enabled(void);

#endif /* MEMPROF_RB_BINDING_H */
