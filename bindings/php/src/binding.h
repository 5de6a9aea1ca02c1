/* SPDX-License-Identifier: MIT */
/*
 * Internal interface between the translation units of the PHP extension memprof.so: the
 * module, its ini settings and the MEMPROF_PHP start-up (extension.c), the Zend Memory
 * Manager hooks (heap.c), the PHP frame source (frames.c), the functions PHP code calls
 * (functions.c) and the writing of profiles to files and PHP streams (output.c). Only the
 * installed headers of libmemprof are used (memprof.h, runtime.h); the extension exports
 * nothing but get_module.
 */
#ifndef MEMPROF_PHP_BINDING_H
#define MEMPROF_PHP_BINDING_H

#include <php.h>

#include <stdbool.h>
#include <stdint.h>

#include <memprof/memprof.h>
#include <memprof/runtime.h>

/* ---- extension.c ---- */

/* Starts the engine if it is not sampling: memprof_init() at the memprof.sampling_rate
 * setting (or `rate`, if non-zero) the first time, the frame source, memprof_start(), and
 * the Zend heap hooks for the current request. Returns 0 or a negative errno value. */
int mpphp_start(uint64_t rate);

/* Stops sampling (memprof_stop()); the heap hooks stay for the request so that frees of
 * sampled blocks are still seen. Returns 0 or a negative errno value. */
int mpphp_stop(void);

/* Whether the engine is sampling. */
bool mpphp_active(void);

/* The functions of functions.c, for the module entry. */
extern const zend_function_entry mpphp_functions[];

/* ---- heap.c: the Zend Memory Manager hooks ---- */

/* Puts the hooks on the request's heap (idempotent). False if the heap is not the Zend MM's
 * own (USE_ZEND_ALLOC=0 makes it malloc, which the library already samples; or another
 * extension installed handlers), in which case nothing is hooked. */
bool mpphp_heap_hook(void);

/* Takes the hooks off before the heap is torn down at the end of the request, and reports
 * every sampled block still live as freed: the Zend MM releases the request's memory in
 * bulk, without a free per block. */
void mpphp_heap_unhook(void);

/* Makes the next allocation draw a fresh countdown (after the engine started sampling). */
void mpphp_heap_rearm(void);

/* ---- frames.c: the PHP frame source ---- */

/* Registers the frame source (once per process). Returns its id or a negative errno. */
int mpphp_frames_register(void);

/* No more captures: the executor is going away (MSHUTDOWN). */
void mpphp_frames_close(void);

/* ---- output.c ---- */

/* Parses a format name ("pprof", "speedscope", "collapsed", "text", "html"); -1 if unknown. */
int mpphp_format_from_name(const char *name, size_t len);

/* Writes a snapshot of the profile to `path` (MEMPROF_FORMAT_AUTO: by its extension).
 * Returns 0 or a negative errno value. */
int mpphp_write_file(const char *path, memprof_format format);

/* Writes a snapshot of the profile to a PHP stream. Returns 0 or a negative errno value. */
int mpphp_write_stream(php_stream *stream, memprof_format format);

#endif /* MEMPROF_PHP_BINDING_H */
