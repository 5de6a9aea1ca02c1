/* SPDX-License-Identifier: MIT */
/**
 * @file runtime.h
 * @brief The API for language runtimes: interpreter frame sources and custom allocators.
 *
 * A binding (Python, Ruby, ...) registers a *frame source* so that heap profiles show the
 * interpreter's own stack (function, file, line) in place of the interpreter's eval-loop C
 * frames. A runtime whose allocator never reaches malloc reports its allocations and frees
 * itself, and they are sampled like any other.
 *
 * How frames merge ("trim and sandwich"): when a sample is taken, the engine captures the
 * native stack and asks each registered source, in registration order, for the ids of the
 * current thread's interpreter frames (innermost first); the first source that returns
 * frames is used. When the stack is resolved, each native frame for which the source's
 * is_eval_frame() is true is replaced by interpreter frames: the innermost eval frame gets
 * the innermost group of interpreter frames, and so on outward, where a group ends at a frame
 * flagged MEMPROF_RUNTIME_FRAME_ENTRY (the first frame an eval-loop invocation ran). Without
 * entry flags every interpreter frame goes in place of the innermost eval frame and further
 * eval frames are dropped. Interpreter frames left over are placed at the outermost eval
 * frame.
 */
#ifndef MEMPROF_RUNTIME_H
#define MEMPROF_RUNTIME_H

#include <memprof/memprof.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief memprof_runtime_frame::flags: this frame was the first one run by its eval-loop
 *  invocation (the outermost interpreter frame of that C frame). */
#define MEMPROF_RUNTIME_FRAME_ENTRY 0x1u

/** @brief An interpreter frame, filled in by a memprof_resolve_fn. */
typedef struct memprof_runtime_frame {
    size_t size;          /**< Set by the library to the size it passes; fill only that much. */
    const char *function; /**< Function or method name; copied by the library. */
    const char *file;     /**< Source file; copied; may be NULL. */
    uint32_t line;        /**< Line number, 0 if unknown. */
    uint32_t flags;       /**< MEMPROF_RUNTIME_FRAME_* bits. */
} memprof_runtime_frame;

/**
 * @brief Captures the calling thread's interpreter frames as opaque ids, innermost first.
 *
 * Called inside the sampling cold path of an allocation, on the allocating thread, with the
 * profiler's re-entrancy guard set (allocations it makes are not sampled). It must be fast,
 * must not take locks that an allocating thread could hold, and must only read interpreter
 * state when that is safe (e.g. Python: the thread holds the GIL); otherwise return 0.
 * The ids must stay resolvable until memprof_unregister_frame_source(): a binding keeps the
 * objects behind them alive, or makes the ids stable keys into its own table.
 * @param ctx the source's `ctx`.
 * @param ids receives up to `max` ids.
 * @param max capacity of ids.
 * @return the number of ids stored (0 = no interpreter frames on this thread now).
 */
typedef unsigned (*memprof_capture_fn)(void *ctx, uint64_t *ids, unsigned max);

/**
 * @brief Resolves an id captured by memprof_capture_fn to a frame. Called on the thread
 * that resolves or exports a snapshot, never inside an allocation hook.
 * @param ctx the source's `ctx`.
 * @param id an id stored by the source's memprof_capture_fn.
 * @param out the frame to fill, up to `out->size` bytes; its strings are copied.
 * @return 0 on success, negative if the id is unknown (shown as "[unknown runtime frame]").
 */
typedef int (*memprof_resolve_fn)(void *ctx, uint64_t id, memprof_runtime_frame *out);

/**
 * @brief Says whether a resolved native frame is the interpreter's eval loop (e.g. Python's
 * `_PyEval_EvalFrameDefault`), to be replaced by interpreter frames.
 * @param ctx the source's `ctx`.
 * @param function the native frame's function name, or NULL if unknown.
 * @param module path of the object containing the frame, or NULL.
 * @param pc the frame's address.
 * @return non-zero for an eval-loop frame.
 */
typedef int (*memprof_is_eval_frame_fn)(void *ctx, const char *function, const char *module,
                                        uint64_t pc);

/** @brief A frame source: the callbacks a runtime registers. */
typedef struct memprof_frame_source {
    size_t size;                            /**< Set to sizeof(memprof_frame_source). */
    const char *name;                       /**< Short name, e.g. "python"; copied. */
    memprof_capture_fn capture;             /**< Required. */
    memprof_resolve_fn resolve;             /**< Required. */
    memprof_is_eval_frame_fn is_eval_frame; /**< Required. */
    void *ctx;                              /**< Passed to every callback. */
} memprof_frame_source;

/** @brief Most frame sources registered at once. */
#define MEMPROF_MAX_FRAME_SOURCES 4
/** @brief Most interpreter frames captured per sample. */
#define MEMPROF_MAX_RUNTIME_FRAMES 128

/**
 * @brief **memprof_register_frame_source()** adds a frame source.
 *
 * May be called before or after memprof_init(). Sampling threads start calling `capture`
 * at their next sample.
 * @param source the callbacks (copied). `size` may be that of an older or a newer header:
 *        fields a newer header added are accepted while they are zero.
 * @return a source id (>= 0) for memprof_unregister_frame_source(), never given to another
 *         registration of this process; `-EINVAL` for a NULL or incomplete source, a size
 *         below version 1.0's, or a newer field set; `-ENOSPC` if MEMPROF_MAX_FRAME_SOURCES
 *         are registered, or after 255 registrations in one process.
 *         Thread-safe. Not callable from an allocation hook. @since 1.0
 */
MEMPROF_API int memprof_register_frame_source(const memprof_frame_source *source);

/**
 * @brief **memprof_unregister_frame_source()** stops capturing from a source.
 *
 * Stacks captured earlier still resolve through the source's `resolve` callback until this
 * returns; stacks first resolved afterwards show their native frames only (the eval loop's
 * included), never frames of a source registered later. A capture
 * already running on another thread may still complete: keep `ctx` valid until those
 * threads have allocated again (or until exit).
 * @param source_id the id memprof_register_frame_source() returned.
 * @return 0; `-EINVAL` for an unknown id. Thread-safe. @since 1.0
 */
MEMPROF_API int memprof_unregister_frame_source(int source_id);

/**
 * @brief **memprof_register_hook_code()** marks the shared object containing `address` as
 * hook code: the profiler's own, like the library itself.
 *
 * A binding whose allocator hooks call memprof_report_sampled() or memprof_report_alloc()
 * (a PyMem allocator, a Zend heap handler, an allocation tracepoint) is on the stack of every
 * sample it reports, innermost, and a hook that forwards to the allocator it replaced (a PyMem
 * hook calling pymalloc, which calls malloc) is on the stacks of that allocator's samples
 * too: the binding would name sites after itself. Once its object is registered, its frames
 * are dropped: at the innermost end of a stack when the stack is captured, as the library's
 * own are, and anywhere else when it is resolved, so stacks go from the code that allocated
 * to the allocator without the binding in between.
 *
 * Call it once, from the object itself (the address of one of its functions), before its
 * hooks are installed: a sample taken while it runs may still keep the object's frames.
 * The whole text segment of the object is marked: the object must hold the binding only,
 * never the program's code (the binding's own functions called by the program disappear
 * from stacks too). Up to four objects per process; registering one again is harmless.
 * @param address any address in the object's text segment, e.g. a function of the binding.
 * @return 0; `-EINVAL` for NULL, an address outside any loaded object's text, or one in the
 *         main program; `-ENOSPC` when four objects are registered. Thread-safe; not
 *         callable from an allocation hook (it reads the process's memory mappings).
 *         @since 1.4
 */
MEMPROF_API int memprof_register_hook_code(const void *address);

/**
 * @brief **memprof_report_alloc()** reports an allocation made by a custom allocator.
 *
 * The allocation is sampled like a malloc of `size` bytes on the calling thread (stack and
 * interpreter frames included) while the engine is ACTIVE.
 * @param id a key identifying the block until memprof_report_free() (its address, usually),
 *        below 2^63; ids live in their own space and never collide with malloc'ed addresses.
 * @param size the block's size in bytes.
 * @return 1 if the allocation was sampled, 0 if not; `-EINVAL` if id >= 2^63.
 *         Thread-safe; callable from inside an allocator (it does not allocate through
 *         malloc when not sampling). @since 1.0
 */
MEMPROF_API int memprof_report_alloc(uint64_t id, size_t size);

/**
 * @brief **memprof_report_free()** reports that a block reported by memprof_report_alloc()
 * was freed. Tracked in the ACTIVE and STOPPED states.
 * @param id the id given to memprof_report_alloc().
 * @return 1 if the block was sampled and is no longer live, 0 if it was not sampled;
 *         `-EINVAL` if id >= 2^63. Thread-safe. @since 1.0
 */
MEMPROF_API int memprof_report_free(uint64_t id);

/**
 * @brief **memprof_sample_interval()** draws the number of bytes to the next sample point,
 * for a runtime that counts its allocations itself (see memprof_report_sampled()).
 *
 * memprof_report_alloc() costs a call into the library per allocation. A runtime whose
 * allocator is hot, and which can keep a byte countdown where it is cheap to reach (Python:
 * a variable guarded by the GIL), charges its allocations to that countdown inline and only
 * calls the library when a sample point falls within an allocation. The countdown then
 * follows the engine's own rule: a draw from this function, reduced by each allocation's
 * size; an allocation of `s` bytes with the countdown `c <= s` is sampled and is reported
 * with memprof_report_sampled(), and a new countdown is drawn:
 * @code
 * if (size < c) {                 // the fast path: no call
 *     c -= size;
 * } else {
 *     bool sample = true;
 *     if (c == 0) {               // not drawn yet (or sampling was off): decide afresh
 *         c = memprof_sample_interval();
 *         sample = c != 0 && c <= size;
 *         if (c > size) c -= size;
 *     }
 *     if (sample) {
 *         memprof_report_sampled(id, size);
 *         c = memprof_sample_interval();
 *     }
 * }
 * @endcode
 * Each allocation is then sampled with the engine's probability `1 - exp(-size/rate)`,
 * independently of the others, and weighed like any sample. The draws are exponential with
 * mean the sampling rate, from the calling thread's generator (seeded like the engine's own,
 * so `memprof_config::seed` makes them reproducible). A countdown may be shared by several
 * threads only if the runtime serializes their allocations (a global lock). While this
 * returns 0 a caller may poll less often: the engine itself polls about every 64 KiB.
 * @return the bytes to the next sample point (>= 1) while the engine is ACTIVE; 0 when it
 *         is not (not initialised, not started, stopped, shut down) or when called from the
 *         profiler's own code (a frame-source callback). Thread-safe; callable from inside
 *         an allocator (it never allocates). @since 1.1
 */
MEMPROF_API uint64_t memprof_sample_interval(void);

/**
 * @brief **memprof_report_sampled()** records an allocation that the caller's own countdown
 * has selected as a sample (see memprof_sample_interval()).
 *
 * Unlike memprof_report_alloc() nothing is decided here: while the engine is ACTIVE the
 * allocation is recorded as a sample of `size` bytes on the calling thread, with its stack
 * and interpreter frames, and is tracked until memprof_report_free(id).
 * @param id a key identifying the block until memprof_report_free(), below 2^63; ids share
 *        memprof_report_alloc()'s space, separate from malloc'ed addresses.
 * @param size the block's size in bytes.
 * @return 1 if recorded; 0 if not (the engine is not ACTIVE, `size` is 0, or the call comes
 *         from the profiler's own code); `-EINVAL` if id >= 2^63. Thread-safe; callable from
 *         inside an allocator (it may allocate through malloc while it records, and those
 *         allocations are not sampled). @since 1.1
 */
MEMPROF_API int memprof_report_sampled(uint64_t id, size_t size);

/**
 * @brief **memprof_write_exit_profile()** writes the launcher's exit-time profile now, for a
 * runtime whose exit frees the program's data before the process ends.
 *
 * Under `memprof run` (or the preload plugin with `MEMPROF_OUTPUT` set) the profile is
 * written when the process exits, after the program's atexit handlers: for a C program that
 * is the program's end, with its data still live. An interpreter frees its objects first
 * (CPython's finalization, PHP's request shutdown), so a profile taken then shows almost
 * nothing live. A binding calls this at the program's end instead (Python's last atexit
 * handler, PHP's request shutdown): the profile is written at once, with the same path,
 * format and rules as at exit, and the process's exit then writes none. Later periodic and
 * signalled profiles (`MEMPROF_INTERVAL`, `MEMPROF_SIGNAL`) are not written either, so this
 * profile stays the last one. Sampling goes on, for the program's own snapshots. A forked
 * child has an exit-time profile of its own.
 * @return 0 when written (or when the launcher's rules write none for this process: a
 *         process of a run that took no sample); `-ENOTSUP` if this process has no
 *         exit-time profile (no launcher, or one without an output file, such as `memprof
 *         attach`); `-EALREADY` if it was written already; `-ETIMEDOUT` if the writing
 *         thread made no progress (see the guide); another negative errno if writing failed
 *         (counted in memprof_stats::write_failures, and said on stderr by the launcher).
 *         Thread-safe; not async-signal-safe; not callable from an allocation hook or a
 *         frame source. Blocks while the profile is written (symbolization included).
 *         @since 1.5
 */
MEMPROF_API int memprof_write_exit_profile(void);

#ifdef __cplusplus
}
#endif

#endif /* MEMPROF_RUNTIME_H */
