/* SPDX-License-Identifier: MIT */
/**
 * @file memprof.h
 * @brief The public C API of libmemprof, a sampling heap profiler.
 *
 * libmemprof samples allocations as a Poisson process over allocated bytes (on average one
 * sample per `sampling_rate` bytes), records the call stack of each sample, keeps the samples
 * that are still live, and turns them into unbiased estimates of live and allocated memory per
 * call path. This header is the whole public interface: an engine lifecycle (init, start,
 * stop, shutdown), statistics, and snapshots read through an opaque handle and accessors.
 *
 * Conventions: every function that can fail returns `0` (or a count) on success and a
 * negative errno value on failure (see memprof_strerror()). Structs that cross the API begin
 * with a `size` member that the caller sets to `sizeof` the struct it was compiled with, so
 * they can grow in later versions without breaking callers. Nothing here aborts the process.
 */
#ifndef MEMPROF_MEMPROF_H
#define MEMPROF_MEMPROF_H

#include <stddef.h>
#include <stdint.h>

#include <memprof/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Marks a declaration as part of the exported API. Overridable by the includer. */
#ifndef MEMPROF_API
#if defined(_WIN32)
#define MEMPROF_API __declspec(dllimport)
#elif defined(__GNUC__)
#define MEMPROF_API __attribute__((visibility("default")))
#else
#define MEMPROF_API
#endif
#endif

/**
 * @defgroup errors Errors
 * Functions return 0 or a non-negative count on success and a negative errno value on
 * failure. The values used, and what they mean here:
 * - `-EINVAL`: a NULL or out-of-range argument, or a struct whose `size` is too small.
 * - `-EALREADY`: memprof_init() on an engine that is already initialised.
 * - `-ENOTCONN`: the call needs an initialised engine and memprof_init() was not called.
 * - `-EBUSY`: the call is not allowed in the current state (e.g. start while active).
 * - `-ESHUTDOWN`: memprof_shutdown() was called; the engine is gone for good.
 * - `-ENOMEM`: the engine could not map memory for its tables or a snapshot.
 * - `-ENOTSUP`: the feature or format is not available in this build.
 * - `-EIO` and other file errors: writing a profile failed.
 *
 * One success value besides 0: #MEMPROF_JOINED, when the program's lifecycle call meets a
 * profile that `memprof run` (the preload plugin) or `memprof attach` owns.
 * @{
 */

/**
 * @brief Returned (positive: success) by memprof_init(), memprof_init_config(),
 * memprof_start() and memprof_stop() when the process's profile belongs to `memprof run`
 * (the preload plugin started it) or to `memprof attach`.
 *
 * The program joins that profile: its configuration is ignored (the command's rate holds;
 * memprof_get_stats() tells it), memprof_start() finds sampling already on, memprof_stop()
 * leaves it on and memprof_shutdown() does nothing, so the command still writes the whole
 * profile when the program exits. Snapshots, statistics and writes work as usual. Test
 * results with `rc < 0` for failure, as every function here allows. @since 1.4
 */
#define MEMPROF_JOINED 1

/**
 * @brief **memprof_strerror()** describes an error code returned by this library.
 * @param err a negative (or positive) errno value returned by a libmemprof function.
 * @return a static, NUL-terminated English string; never NULL.
 *
 * Thread-safe, async-signal-safe, callable in any state. @since 1.0
 */
MEMPROF_API const char *memprof_strerror(int err);

/** @} */

/**
 * @brief **memprof_version()** returns the library's version as `MEMPROF_VERSION_HEX` does.
 * @return `(major << 16) | (minor << 8) | patch` of the loaded library.
 *
 * Thread-safe, async-signal-safe. @since 1.0
 */
MEMPROF_API unsigned memprof_version(void);

/**
 * @brief **memprof_version_string()** returns the library's version as text, e.g. "1.0.0".
 * @return a static string. Thread-safe, async-signal-safe. @since 1.0
 */
MEMPROF_API const char *memprof_version_string(void);

/* MEMPROF_DEFAULT_SAMPLING_RATE, the default mean number of bytes between samples, is in
 * <memprof/version.h>: it is generated from the build's option, as the library's own default. */

/** @brief Severity of a message passed to a memprof_log_fn. */
typedef enum memprof_log_level {
    MEMPROF_LOG_ERROR = 0, /**< Something failed (e.g. a profile could not be written). */
    MEMPROF_LOG_WARN = 1,  /**< Degraded operation (e.g. a table is full, samples dropped). */
    MEMPROF_LOG_INFO = 2,  /**< Lifecycle information. */
    MEMPROF_LOG_DEBUG = 3  /**< Details for developers. */
} memprof_log_level;

/**
 * @brief A log callback. Called outside allocation hooks, never with engine locks held.
 * @param ctx the `log_ctx` given in memprof_config.
 * @param level a memprof_log_level.
 * @param msg a NUL-terminated message without a trailing newline.
 */
typedef void (*memprof_log_fn)(void *ctx, int level, const char *msg);

/** @brief How native stacks are captured (memprof_config::unwinder, `MEMPROF_UNWIND`). */
typedef enum memprof_unwinder {
    MEMPROF_UNWIND_DEFAULT = 0, /**< DWARF if available, else frame pointers. */
    MEMPROF_UNWIND_FP = 1,      /**< Frame-pointer walk: fastest (~40 ns), but stops at the first
                                     function built without frame pointers (most of Debian's
                                     libc and python3). */
    MEMPROF_UNWIND_DWARF = 2    /**< DWARF unwind tables via libunwind (~250 ns for 20 frames):
                                     complete stacks through code without frame pointers. */
} memprof_unwinder;

/**
 * @brief Engine configuration, read by memprof_init_config().
 *
 * Initialise it with memprof_config_init(), then change the fields you care about. Fields
 * are only ever appended; the library reads the fields covered by `size` and uses defaults
 * for the rest.
 */
typedef struct memprof_config {
    size_t size;                /**< Set to sizeof(memprof_config) (memprof_config_init() does). */
    uint64_t sampling_rate;     /**< Mean bytes between samples; 0 = default (512 KiB). 1 samples
                                     every allocation. At most 2^40. */
    uint64_t heap_map_capacity; /**< Maximum live samples tracked; 0 = default (1,048,576).
                                     Rounded up to a power of two, at least 4096. */
    uint64_t max_stacks;        /**< Maximum distinct call stacks; 0 = default (1,048,576). Stacks
                                     beyond it are counted under one "overflow" stack. */
    uint32_t max_frames;        /**< Frames captured per stack; 0 = default (64), at most 256. */
    uint32_t flags;             /**< Reserved, must be 0. */
    uint64_t seed;              /**< PRNG seed for reproducible sampling; 0 = random per thread
                                     (getrandom() mixed with thread and process identity). */
    memprof_log_fn log_fn;      /**< Log callback; NULL = silent (the default). */
    void *log_ctx;              /**< Passed to log_fn. */
    uint32_t unwinder;          /**< A memprof_unwinder; 0 = MEMPROF_UNWIND_DEFAULT (DWARF when
                                     built with libunwind, else frame pointers). */
    uint32_t reserved0;         /**< Must be 0. */
} memprof_config;

/**
 * @brief **memprof_config_init()** fills a config with the defaults and sets its `size`.
 * @param cfg the config to fill; ignored if NULL.
 *
 * Thread-safe, async-signal-safe, callable in any state. @since 1.0
 */
MEMPROF_API void memprof_config_init(memprof_config *cfg);

/**
 * @brief **memprof_init()** initialises the engine with a sampling rate.
 *
 * Maps the engine's tables (address space only; memory is touched as it is used). The engine
 * starts in the INITIALIZED state: nothing is sampled until memprof_start(). A process has one
 * engine, shared by every user of the library (including the LD_PRELOAD plugin).
 *
 * @param sampling_rate mean bytes between samples; 0 selects the default (512 KiB).
 * @return 0 on success; #MEMPROF_JOINED if `memprof run` or `memprof attach` initialised it
 *         (nothing changes; the program shares that profile); `-EALREADY` if the engine is
 *         already initialised otherwise (nothing changes); `-ESHUTDOWN` after
 *         memprof_shutdown(); `-EINVAL` if the rate exceeds 2^40; `-ENOMEM` if the tables
 *         cannot be mapped.
 *
 * Thread-safe (concurrent calls: one wins, the others get `-EALREADY`). Not async-signal-safe;
 * must not be called from an allocation hook. @since 1.0
 */
MEMPROF_API int memprof_init(uint64_t sampling_rate);

/**
 * @brief **memprof_init_config()** initialises the engine from a configuration.
 * @param cfg the configuration, or NULL for the defaults.
 * @return as memprof_init(); `-EINVAL` if `cfg->size` is smaller than the first two fields,
 *         if a field is out of range, or if bytes beyond the known fields are non-zero;
 *         `-ENOTSUP` if MEMPROF_UNWIND_DWARF is asked for in a build without libunwind.
 *
 * Thread-safe as memprof_init(). @since 1.0
 */
MEMPROF_API int memprof_init_config(const memprof_config *cfg);

/**
 * @brief **memprof_start()** starts sampling allocations (INITIALIZED or STOPPED → ACTIVE).
 *
 * What the first start does to the process, unless the preload plugin of `memprof run`
 * (which intercepts the same calls from the program's start) is loaded:
 * - **Intercepted calls.** It rewrites the global offset table slots through which every
 *   loaded object, libc included, calls `malloc`, `free`, `calloc`, `realloc`,
 *   `reallocarray`, `posix_memalign`, `aligned_alloc`, `memalign`, `valloc`, `pvalloc`,
 *   `dlopen` (so objects loaded later are rewritten too; the search for them is unchanged),
 *   `prctl` and `syscall` (to see a seccomp filter being installed, before which the profiler
 *   makes its system calls), and `mlockall` where libc has it. The dynamic loader and this
 *   library are not rewritten. Frees of blocks allocated before the start arrive and cost
 *   one check. memprof_stop() and memprof_shutdown() leave the slots rewritten; the calls
 *   then pass straight through.
 * - **Memory.** The tables memprof_init() mapped take memory as samples arrive. Sampled
 *   blocks come from a sample heap the library maps, page by page as its blocks need, in a
 *   window of address space it chooses at random, never over an existing mapping, at rates
 *   of 64 pages or more (the default's case); at lower rates, or with
 *   `MEMPROF_SAMPLE_HEAP=0`, from libc.
 * - **Environment.** The start reads `MEMPROF_SAMPLE_HEAP`; the writers read
 *   `MEMPROF_WRAPPERS` and `MEMPROF_NATIVE`, the symbolizer `MEMPROF_DEBUGINFOD` (the
 *   user guide lists them). The other `MEMPROF_*` variables are the preload plugin's.
 * - **fork().** The child inherits the profiler as the parent had it: rewritten slots, the
 *   engine's state, and the samples of the blocks it inherits, which stay live until the
 *   child frees them. Sampling goes on in the forking thread with a random sequence of its
 *   own. The child writes no profile by itself; it profiles through this API as the parent
 *   does.
 *
 * @return 0 on success; #MEMPROF_JOINED if already active for `memprof run` or `memprof
 *         attach`; `-ENOTCONN` before init; `-EBUSY` if already active otherwise; `-ESHUTDOWN`
 *         after shutdown; `-ENOTSUP` if no interposition backend is available in the process.
 *
 * Thread-safe. Not async-signal-safe. @since 1.0
 */
MEMPROF_API int memprof_start(void);

/**
 * @brief **memprof_stop()** stops sampling new allocations (ACTIVE → STOPPED).
 *
 * Frees keep being tracked, so a block sampled while active and freed after stop leaves the
 * live set: the profile shows what is still live, not what was live at stop.
 *
 * @return 0 on success; #MEMPROF_JOINED (sampling goes on) if the profile is `memprof run`'s
 *         or `memprof attach`'s; `-ENOTCONN` before init; `-EBUSY` if not active; `-ESHUTDOWN`
 *         after shutdown. Thread-safe. Not async-signal-safe. @since 1.0
 */
MEMPROF_API int memprof_stop(void);

/**
 * @brief **memprof_shutdown()** ends profiling for the life of the process (one-way).
 *
 * Sampling and free tracking stop; later calls return `-ESHUTDOWN`. The tables are not
 * unmapped while allocation hooks may still run in other threads (they are reclaimed at
 * process exit). Snapshots already taken stay valid until memprof_free_snapshot().
 * Call it once, not concurrently with memprof_get_snapshot(). Calling it again is harmless;
 * calling it before memprof_init() also closes the door (a later init returns -ESHUTDOWN).
 * It does nothing when the profile is `memprof run`'s or `memprof attach`'s (#MEMPROF_JOINED):
 * the command ends that profile.
 *
 * Thread-safe. Not async-signal-safe. @since 1.0
 */
MEMPROF_API void memprof_shutdown(void);

/** @brief An opaque, immutable copy of the live samples and their stacks at one moment. */
typedef struct memprof_snapshot memprof_snapshot;

/**
 * @brief **memprof_get_snapshot()** copies the live samples and their stacks.
 *
 * Works in the INITIALIZED, ACTIVE and STOPPED states. The snapshot's memory comes from
 * `mmap`, not from malloc, and is released by memprof_free_snapshot(). Symbols are not
 * resolved here (see memprof_resolve_symbols()). Samples inserted concurrently may or may not
 * be included; each included sample is internally consistent.
 *
 * @param out receives the snapshot; set to NULL on failure.
 * @return 0 on success; `-EINVAL` if out is NULL; `-ENOTCONN` before init; `-ESHUTDOWN` after
 *         shutdown; `-ENOMEM`. Thread-safe (any thread, concurrently with allocation). Not
 *         async-signal-safe; must not be called from an allocation hook. @since 1.0
 */
MEMPROF_API int memprof_get_snapshot(memprof_snapshot **out);

/**
 * @brief **memprof_free_snapshot()** releases a snapshot. NULL is ignored.
 * @param snapshot a snapshot from memprof_get_snapshot(), or NULL.
 *
 * Thread-safe for distinct snapshots; valid in any state, also after shutdown. @since 1.0
 */
MEMPROF_API void memprof_free_snapshot(memprof_snapshot *snapshot);

/**
 * @brief **memprof_snapshot_live_samples()** returns the number of live samples.
 * @param snapshot a snapshot, or NULL.
 * @return the number of live samples in the snapshot; 0 for NULL. Thread-safe. @since 1.0
 */
MEMPROF_API size_t memprof_snapshot_live_samples(const memprof_snapshot *snapshot);

/**
 * @brief **memprof_snapshot_estimated_bytes()** returns the estimated live heap in bytes.
 *
 * The sum over live samples of `s / (1 - exp(-s / R))` for a sample of `s` bytes taken at
 * rate `R`: an unbiased estimate of all live bytes allocated while sampling was active.
 *
 * @param snapshot a snapshot, or NULL.
 * @return the estimated live bytes; 0 for NULL. Thread-safe. @since 1.0
 */
MEMPROF_API uint64_t memprof_snapshot_estimated_bytes(const memprof_snapshot *snapshot);

/** @brief The whole-heap estimate of a snapshot, with its uncertainty. */
typedef struct memprof_estimate {
    size_t size;             /**< Set to sizeof(memprof_estimate) before the call. */
    uint64_t live_samples;   /**< Live samples the estimate is built from. */
    uint64_t bytes;          /**< Estimated live bytes (as memprof_snapshot_estimated_bytes()). */
    uint64_t bytes_low;      /**< Lower end of the 95 % confidence interval of `bytes`. */
    uint64_t bytes_high;     /**< Upper end of the 95 % confidence interval of `bytes`. */
    uint64_t count;          /**< Estimated number of live allocations. */
    uint64_t count_low;      /**< Lower end of the 95 % interval of `count`. */
    uint64_t count_high;     /**< Upper end of the 95 % interval of `count`. */
    uint64_t sampling_rate;  /**< Mean bytes between samples, as configured. */
    uint64_t timestamp_ns;   /**< CLOCK_MONOTONIC time the snapshot was taken. */
    uint32_t low_confidence; /**< 1 if the estimate rests on little information (an effective
                                  sample count under 10: a few samples of small blocks),
                                  whatever the number of samples: treat it as a rough guide. */
    uint32_t reserved;       /**< Zero. */
} memprof_estimate;

/**
 * @brief **memprof_snapshot_estimate()** reads the whole-heap estimate with its interval.
 * @param snapshot a snapshot.
 * @param out filled up to `out->size` bytes.
 * @return 0; `-EINVAL` if an argument is NULL or `out->size` is too small to hold `bytes`.
 *
 * The interval is built from the Horvitz–Thompson estimator's variance (sum over samples of
 * `s^2 (1 - p) / p^2`) as an exact Poisson (Garwood) interval of the effective sample count,
 * so it holds at any number of samples, also where few samples of small blocks make the
 * normal approximation too narrow (the user guide's "Intervals").
 * Thread-safe. @since 1.0
 */
MEMPROF_API int memprof_snapshot_estimate(const memprof_snapshot *snapshot, memprof_estimate *out);

/** @brief One live sample of a snapshot (memprof_snapshot_sample()). */
typedef struct memprof_sample_info {
    size_t size;              /**< Set to sizeof(memprof_sample_info) before the call. */
    uint64_t bytes;           /**< Exact size of the sampled allocation. */
    uint64_t estimated_bytes; /**< Bytes this sample stands for: bytes / p(bytes). */
    double estimated_count;   /**< Allocations this sample stands for: 1 / p(bytes). */
    uint64_t timestamp_ns;    /**< CLOCK_MONOTONIC time of the allocation. */
    uint32_t stack_id;        /**< Its call stack (memprof_snapshot_stack_depth()). */
    uint32_t reserved;        /**< Zero. */
} memprof_sample_info;

/**
 * @brief **memprof_snapshot_sample()** reads one live sample.
 * @param snapshot a snapshot.
 * @param index 0 .. memprof_snapshot_live_samples() - 1 (in no particular order).
 * @param out filled up to `out->size` bytes.
 * @return 0; `-EINVAL` for NULL arguments, a too small `out->size`, or an index out of range.
 *         Thread-safe. @since 1.0
 */
MEMPROF_API int memprof_snapshot_sample(const memprof_snapshot *snapshot, size_t index,
                                        memprof_sample_info *out);

/** @brief A call site: one distinct stack and what it holds and has allocated. */
typedef struct memprof_site_info {
    size_t size;              /**< Set to sizeof(memprof_site_info) before the call. */
    uint32_t stack_id;        /**< The site's stack (memprof_snapshot_stack_depth()). */
    uint32_t reserved;        /**< Zero. */
    uint64_t live_samples;    /**< Live samples from this stack. */
    uint64_t live_bytes;      /**< Estimated live bytes. */
    uint64_t live_bytes_low;  /**< Lower end of the 95 % interval of live_bytes. */
    uint64_t live_bytes_high; /**< Upper end of the 95 % interval of live_bytes. */
    uint64_t live_count;      /**< Estimated live allocations. */
    uint64_t alloc_samples;   /**< Samples ever taken from this stack (live or freed). */
    uint64_t alloc_bytes;     /**< Estimated bytes ever allocated from this stack while
                                   sampling was active. */
    uint64_t alloc_count;     /**< Estimated allocations ever made from this stack. */
} memprof_site_info;

/**
 * @brief **memprof_snapshot_site_count()** returns the number of call sites in a snapshot:
 * every stack that has live samples or has allocated since init.
 * @param snapshot a snapshot, or NULL.
 * @return the number of sites; 0 for NULL. Thread-safe. @since 1.0
 */
MEMPROF_API size_t memprof_snapshot_site_count(const memprof_snapshot *snapshot);

/**
 * @brief **memprof_snapshot_site()** reads a call site; sites are sorted by estimated live
 * bytes, largest first (then by allocated bytes).
 * @param snapshot a snapshot.
 * @param index 0 .. memprof_snapshot_site_count() - 1.
 * @param out filled up to `out->size` bytes.
 * @return 0; `-EINVAL` for NULL arguments, a too small size or an index out of range.
 *         Thread-safe. @since 1.0
 */
MEMPROF_API int memprof_snapshot_site(const memprof_snapshot *snapshot, size_t index,
                                      memprof_site_info *out);

/** @brief memprof_frame::flags: the frame was inlined into its caller (same address). */
#define MEMPROF_FRAME_INLINED 0x1u
/** @brief memprof_frame::flags: an interpreter frame from a runtime frame source. */
#define MEMPROF_FRAME_RUNTIME 0x2u
/** @brief memprof_frame::flags: no symbol was found (function is NULL). */
#define MEMPROF_FRAME_UNRESOLVED 0x4u
/** @brief memprof_frame::flags: the stack was cut at the maximum depth beyond this frame. */
#define MEMPROF_FRAME_TRUNCATED 0x8u

/** @brief One resolved frame of a stack (memprof_snapshot_frame()). */
typedef struct memprof_frame {
    size_t size;          /**< Set to sizeof(memprof_frame) before the call. */
    const char *function; /**< Function name (C++ demangled); NULL if unknown. */
    const char *file;     /**< Source file; NULL if unknown. */
    uint32_t line;        /**< Source line; 0 if unknown. */
    uint32_t flags;       /**< MEMPROF_FRAME_* bits. */
    const char *module;   /**< Path of the loaded object; NULL for runtime frames. */
    uint64_t address;     /**< The return address (0 for runtime frames). */
    uint64_t load_bias;   /**< The module's load bias: address - load_bias is the address
                               in the module's ELF file, for offline symbolization. */
    const char *build_id; /**< The module's GNU build id in hex, or NULL. */
} memprof_frame;

/**
 * @brief **memprof_snapshot_stack_depth()** resolves a stack and returns its frame count.
 *
 * Frames are leaf first (the allocating function first, `main` last). Inlined functions
 * are separate frames; interpreter frames from a registered frame source replace the
 * interpreter's eval-loop frames. Resolution is cached per address for the process.
 *
 * @param snapshot a snapshot.
 * @param stack_id a stack id from a sample or site of this snapshot.
 * @return the number of frames (>= 0), `-EINVAL` for NULL or an unknown id, `-ENOMEM`.
 *         Thread-safe. Not async-signal-safe; not callable from an allocation hook. @since 1.0
 */
MEMPROF_API int memprof_snapshot_stack_depth(const memprof_snapshot *snapshot, uint32_t stack_id);

/**
 * @brief **memprof_snapshot_frame()** reads one resolved frame of a stack.
 * @param snapshot a snapshot.
 * @param stack_id a stack id from a sample or site.
 * @param index 0 (leaf) .. memprof_snapshot_stack_depth() - 1 (root).
 * @param out filled up to `out->size` bytes. Its strings stay valid until the snapshot is
 *        freed.
 * @return 0; `-EINVAL` for NULL arguments, an unknown id or an index out of range; `-ENOMEM`.
 *         Thread-safe. @since 1.0
 */
MEMPROF_API int memprof_snapshot_frame(const memprof_snapshot *snapshot, uint32_t stack_id,
                                       size_t index, memprof_frame *out);

/** @brief Output formats of memprof_snapshot_write(). Values are never renumbered. */
typedef enum memprof_format {
    MEMPROF_FORMAT_AUTO = 0,       /**< Chosen from the file name's extension (text if none). */
    MEMPROF_FORMAT_PPROF = 1,      /**< pprof profile.proto, gzip-compressed (`.pb.gz`). */
    MEMPROF_FORMAT_SPEEDSCOPE = 2, /**< speedscope JSON (`.json`). */
    MEMPROF_FORMAT_COLLAPSED = 3, /**< Collapsed stacks, `a;b;c bytes` (`.folded`, `.collapsed`). */
    MEMPROF_FORMAT_TEXT = 4,      /**< Human-readable summary of the top sites (`.txt`). */
    MEMPROF_FORMAT_HTML = 5       /**< Self-contained HTML flame graph (`.html`). */
} memprof_format;

/**
 * @brief **memprof_snapshot_write()** writes a snapshot to a file in a given format.
 *
 * Stacks are symbolized as by memprof_resolve_symbols(). A regular file (or a new one) is
 * written to a temporary name in the same directory and renamed over `path` (mode 0600); a
 * symlink there is replaced, never followed, unless it names a descriptor. A device, FIFO
 * (which must have a reader: else `-ENXIO`), Unix socket or a descriptor's name
 * (`/dev/stdout`, `/proc/self/fd/N`) is written in place. A file larger than the
 * process's RLIMIT_FSIZE fails with `-EFBIG`: SIGXFSZ, which would end the program, is
 * blocked in the calling thread while it writes. After the program installed a seccomp
 * filter that would kill it for a system call writing takes, nothing is written.
 *
 * @param snapshot a snapshot.
 * @param path destination file name.
 * @param format a memprof_format; MEMPROF_FORMAT_AUTO picks one from the extension.
 * @return 0 on success; `-EINVAL` for NULL arguments or an unknown format; `-ENOMEM`;
 *         `-EPERM` under such a seccomp filter; a negative errno from the file system (the
 *         temporary file is removed).
 *
 * Thread-safe. Not async-signal-safe; not callable from an allocation hook. @since 1.0
 */
MEMPROF_API int memprof_snapshot_write(const memprof_snapshot *snapshot, const char *path,
                                       memprof_format format);

/**
 * @brief **memprof_format_from_name()** the format of a name, as `memprof --format`,
 * `MEMPROF_FORMAT` and every binding spell them.
 * @param name "pprof", "speedscope", "collapsed", "text" or "html" (exactly, lower case).
 * @return the format (> 0); `-EINVAL` for NULL or any other name ("auto" included).
 *
 * The one table of format names, for bindings that take a format by name. Thread-safe,
 * async-signal-safe, callable in any state. @since 1.4
 */
MEMPROF_API int memprof_format_from_name(const char *name);

/**
 * @brief **memprof_format_name()** the name of a format.
 * @param format a memprof_format other than MEMPROF_FORMAT_AUTO.
 * @return a static string ("pprof", ...); NULL for MEMPROF_FORMAT_AUTO or an unknown value,
 *         so a loop from 1 until NULL lists every format this library writes.
 *
 * Thread-safe, async-signal-safe, callable in any state. @since 1.4
 */
MEMPROF_API const char *memprof_format_name(memprof_format format);

/**
 * @brief **memprof_format_extension()** the file extension profiles of a format are written
 * with.
 * @param format a memprof_format other than MEMPROF_FORMAT_AUTO.
 * @return a static string with its dot (".pb.gz", ".json", ".folded", ".txt", ".html");
 *         NULL for MEMPROF_FORMAT_AUTO or an unknown value. MEMPROF_FORMAT_AUTO also
 *         recognises ".pprof", ".collapsed" and ".htm".
 *
 * Thread-safe, async-signal-safe, callable in any state. @since 1.4
 */
MEMPROF_API const char *memprof_format_extension(memprof_format format);

/**
 * @brief **memprof_format_from_path()** the format a file name's extension names, as
 * MEMPROF_FORMAT_AUTO chooses it.
 * @param path a file name.
 * @return the format (> 0) its extension names (also ".pprof", ".collapsed", ".htm");
 *         MEMPROF_FORMAT_AUTO (0) when it names none; `-EINVAL` for NULL.
 *
 * Thread-safe, async-signal-safe, callable in any state. @since 1.4
 */
MEMPROF_API int memprof_format_from_path(const char *path);

/**
 * @brief **memprof_is_allocator_function()** whether a function is an allocator or an
 * allocator wrapper, which never names a site: the profiles' writers name a site by the
 * caller of such frames.
 *
 * The list is the library's (libc's, `operator new`, GLib's, CPython's, Ruby's, Perl's,
 * xmalloc and the like, SQLite's, Rust's; doc/guide.md, "Site names") plus the patterns of
 * `MEMPROF_WRAPPERS`. For bindings that name sites themselves.
 *
 * @param name a function name (demangled or mangled).
 * @return 1 if it is one, 0 if not; `-EINVAL` for NULL.
 *
 * Thread-safe, callable in any state; not async-signal-safe. @since 1.4
 */
MEMPROF_API int memprof_is_allocator_function(const char *name);

/**
 * @brief **memprof_parse_rate()** reads a sampling rate as `memprof run -r` and
 * `MEMPROF_RATE` do.
 *
 * Digits with an optional binary suffix: `K`, `M` or `G` (also `Ki`, `KiB`, `kb` and the
 * like, any case), from 1 byte to 2^40 bytes: "524288", "512K", "64KiB", "1M".
 *
 * @param text the rate as typed.
 * @param[out] bytes the rate in bytes, on success.
 * @return 0; `-EINVAL` for NULL arguments or a text that is not such a rate (out of range
 *         included; `*bytes` is then unchanged).
 *
 * Thread-safe, async-signal-safe, callable in any state. @since 1.4
 */
MEMPROF_API int memprof_parse_rate(const char *text, uint64_t *bytes);

/** @brief Engine states (memprof_stats::state). */
typedef enum memprof_state {
    MEMPROF_STATE_UNINITIALIZED = 0, /**< memprof_init() not yet called. */
    MEMPROF_STATE_INITIALIZED = 1,   /**< Tables ready, not sampling. */
    MEMPROF_STATE_ACTIVE = 2,        /**< Sampling allocations and tracking frees. */
    MEMPROF_STATE_STOPPED = 3,       /**< Tracking frees only. */
    MEMPROF_STATE_SHUTDOWN = 4       /**< Gone for good. */
} memprof_state;

/**
 * @brief Engine statistics (memprof_get_stats()). Every drop or degradation is counted here.
 *
 * Fields are only appended. Counters are cumulative since memprof_init() unless noted.
 */
typedef struct memprof_stats {
    size_t size;                    /**< Set to sizeof(memprof_stats) before the call. */
    uint32_t state;                 /**< A memprof_state. */
    uint32_t reserved;              /**< Zero. */
    uint64_t sampling_rate;         /**< Mean bytes between samples. */
    uint64_t total_samples;         /**< Allocations sampled (including dropped ones). */
    uint64_t live_samples;          /**< Samples currently live in the heap map. */
    uint64_t freed_samples;         /**< Sampled allocations later freed. */
    uint64_t unique_stacks;         /**< Distinct call stacks interned. */
    uint64_t estimated_live_bytes;  /**< Estimated live heap bytes (unbiased weights). */
    uint64_t heap_map_capacity;     /**< Maximum live samples the heap map can hold. */
    uint64_t heap_map_used;         /**< Heap-map slots in use (live, reserved or tombstone). */
    uint64_t heap_map_full_drops;   /**< Samples dropped because the heap map was full (or,
                                         under the preload plugin, its tables could not be
                                         mapped at the first sample). */
    uint64_t stack_table_capacity;  /**< Maximum distinct stacks. */
    uint64_t stack_table_overflows; /**< Samples attributed to the overflow stack. */
    uint64_t bloom_rebuilds;        /**< Rebuilds of the free-path Bloom filter. */
    uint64_t bloom_fill_permille;   /**< Bits set in the current Bloom filter, per mille. */
    uint64_t death_during_birth;    /**< Samples freed before their insertion completed. */
    uint64_t tombstones_reused;     /**< Heap-map tombstones reused by inserts. */
    uint64_t reentrant_skips;       /**< Allocations not sampled because the profiler itself
                                         was running on that thread. */
    uint64_t truncated_stacks;      /**< Samples whose stack hit the maximum depth or could not
                                         be walked further. */
    uint64_t profiler_bytes;        /**< Bytes the engine has mapped for its tables (mapped
                                         by segments as they fill, touched lazily; under the
                                         preload plugin 0 until the first sample or
                                         snapshot). */
    uint32_t unwinder;              /**< The memprof_unwinder in use (FP or DWARF). */
    uint32_t stack_depth_min;       /**< Fewest native frames in any sample (0 if none yet). */
    uint64_t stack_depth_total;     /**< Native frames over all samples; divide by
                                         total_samples for the average depth. */
    uint64_t shallow_stacks;        /**< Samples with fewer than 4 native frames: usually an
                                         unwinder stopped by code without frame pointers. */
    uint64_t unwind_confidence_permille; /**< 1000 x the share of samples that are neither
                                       shallow nor truncated: below ~900, stacks are
                                       unreliable (try MEMPROF_UNWIND=dwarf). */
    uint64_t resolved_addresses;         /**< Distinct code addresses symbolized so far. */
    uint64_t unresolved_addresses;       /**< Of those, addresses with no symbol at all (stripped,
                                             JIT or unknown code); shown as module+0xoffset. */
    uint64_t write_failures;             /**< memprof_snapshot_write() calls that failed (including
                                              the preload plugin's profile dumps). */
} memprof_stats;

/**
 * @brief **memprof_get_stats()** reads the engine statistics.
 * @param out filled up to `min(out->size, sizeof(memprof_stats))` bytes.
 * @return 0; `-EINVAL` if out is NULL or `out->size` is smaller than the `state` field.
 *         Works in every state (before init everything but `size` is zero and `state` is
 *         UNINITIALIZED). Thread-safe. Not async-signal-safe. @since 1.0
 */
MEMPROF_API int memprof_get_stats(memprof_stats *out);

/**
 * @brief **memprof_resolve_symbols()** symbolizes every interned stack not yet resolved.
 *
 * Resolution is cached per address, runs in the calling thread, and is also done implicitly
 * by memprof_snapshot_write(). Never called from a hook or a background thread.
 *
 * @return the number of addresses newly resolved (>= 0); `-ENOTCONN` before init;
 *         `-ESHUTDOWN` after shutdown. Thread-safe. Not async-signal-safe. @since 1.0
 */
MEMPROF_API int memprof_resolve_symbols(void);

/* ---- Views: peak, heap over time, temporary allocations, leak suspects (MEMPROF_1.2) --- */

/**
 * @brief The questions a snapshot answers, each a ranking of call sites by its own numbers.
 * Values are never renumbered.
 */
typedef enum memprof_view {
    MEMPROF_VIEW_LIVE = 0,      /**< Live at the snapshot (the memprof_snapshot_site() numbers). */
    MEMPROF_VIEW_ALLOC = 1,     /**< Allocated since sampling began, freed or not. */
    MEMPROF_VIEW_PEAK = 2,      /**< Live at the peak of the estimated heap. */
    MEMPROF_VIEW_TEMPORARY = 3, /**< Allocated and freed within the temporary threshold
                                     (memprof_set_temporary_threshold()). */
    MEMPROF_VIEW_LEAKS = 4      /**< Survivors of leak suspects: sites whose live samples were
                                     allocated at a steady rate through the run. */
} memprof_view;

/** @brief The peak of the estimated live heap (memprof_snapshot_peak()). */
typedef struct memprof_peak_info {
    size_t size;                     /**< Set to sizeof(memprof_peak_info) before the call. */
    uint64_t bytes;                  /**< Estimated live bytes at the peak. */
    uint64_t bytes_low;              /**< Lower end of the 95 % interval of `bytes`. */
    uint64_t bytes_high;             /**< Upper end of the 95 % interval of `bytes`. */
    uint64_t count;                  /**< Estimated live allocations at the peak. */
    uint64_t samples;                /**< Live samples at the peak. */
    uint64_t time_ns;                /**< When: nanoseconds since sampling first started. */
    uint64_t duration_ns;            /**< Nanoseconds from the first start to the snapshot. */
    uint64_t allocated_bytes;        /**< Estimated bytes allocated from the first start on. */
    uint64_t temporary_threshold_ns; /**< The threshold the temporary view used. */
} memprof_peak_info;

/**
 * @brief **memprof_snapshot_peak()** reads the peak of the estimated live heap.
 *
 * The engine records the per-site picture whenever a sampled allocation takes the estimate
 * more than 1/64 above the last recorded peak (and enough samples passed to amortize the
 * copy), so the recorded peak is within about 1.6 % of the highest estimate reached; if the
 * snapshot's own live heap is larger, that is the peak. Nothing is added to the allocation
 * fast paths.
 *
 * @param snapshot a snapshot.
 * @param out filled up to `out->size` bytes.
 * @return 0; `-EINVAL` for NULL arguments or an `out->size` too small to hold `bytes`.
 *         Thread-safe. @since 1.2
 */
MEMPROF_API int memprof_snapshot_peak(const memprof_snapshot *snapshot, memprof_peak_info *out);

/** @brief One point of the heap over time (memprof_snapshot_series()). */
typedef struct memprof_heap_point {
    uint64_t time_ns;         /**< Nanoseconds since sampling first started. */
    uint64_t live_bytes;      /**< Estimated live bytes then. */
    uint64_t allocated_bytes; /**< Estimated bytes allocated up to then. */
} memprof_heap_point;

/**
 * @brief **memprof_snapshot_series()** copies the heap over time: at most about 1,000 points
 * however long the run (neighbours are merged as it grows, keeping the higher one, so the
 * peak stays), oldest first, the last one the snapshot's own.
 * @param snapshot a snapshot.
 * @param out room for `max` points, or NULL to ask for the count.
 * @param max how many points `out` holds.
 * @return the number of points in the series (copying min(that, max) of them); 0 for a NULL
 *         snapshot. Thread-safe. @since 1.2
 */
MEMPROF_API size_t memprof_snapshot_series(const memprof_snapshot *snapshot,
                                           memprof_heap_point *out, size_t max);

/** @brief memprof_view_site::flags: the estimate rests on little information (a few
 * samples of small blocks): read it as an order of magnitude. */
#define MEMPROF_SITE_LOW_INFORMATION 0x1u
/** @brief memprof_view_site::flags: the site is a leak suspect (the leaks view lists only
 * these). */
#define MEMPROF_SITE_LEAK_SUSPECT 0x2u

/** @brief A call site as one view sees it (memprof_snapshot_view_site()). */
typedef struct memprof_view_site {
    size_t size;              /**< Set to sizeof(memprof_view_site) before the call. */
    uint32_t stack_id;        /**< The site's stack (memprof_snapshot_stack_depth()). */
    uint32_t flags;           /**< MEMPROF_SITE_* bits. */
    uint64_t bytes;           /**< The view's estimated bytes. */
    uint64_t bytes_low;       /**< Lower end of the 95 % interval of `bytes`. */
    uint64_t bytes_high;      /**< Upper end of the 95 % interval of `bytes`. */
    uint64_t count;           /**< The view's estimated allocations (0 for the leaks view). */
    uint64_t samples;         /**< Samples behind `bytes`. */
    uint64_t lifetime_p50_ns; /**< Median lifetime of the site's freed samples (the upper
                                   edge of its power-of-4 bucket); 0 if none was freed. */
    uint64_t lifetime_p90_ns; /**< 90th percentile of the same. */
    double leak_rate;         /**< Leaks view: estimated bytes per second leaked over the
                                   steady window; 0 otherwise. */
    uint64_t thread_id;       /**< Kernel id of the thread that allocated; 0 if not known
                                   (after the first 255 threads that sampled, threads share
                                   "not known"). A site allocated by several threads is one
                                   site per thread. */
    const char *thread_name;  /**< Its name (as `pthread_setname_np()` set it, read at its
                                   first sample and again at the snapshot while it runs);
                                   NULL if not known. Valid until the snapshot is freed. */
} memprof_view_site;

/**
 * @brief **memprof_snapshot_view_site_count()** returns how many sites a view ranks: those
 * with a non-zero value in it (for the leaks view, the suspects).
 * @param snapshot a snapshot, or NULL.
 * @param view a memprof_view.
 * @return the number of sites; 0 for NULL or an unknown view. Thread-safe. @since 1.2
 */
MEMPROF_API size_t memprof_snapshot_view_site_count(const memprof_snapshot *snapshot,
                                                    memprof_view view);

/**
 * @brief **memprof_snapshot_view_site()** reads a view's site, largest value first.
 *
 * Intervals: for the live and peak views from the estimate's variance, for the others from
 * the sample count (each sample taken to weigh the site's mean), always with a construction
 * that holds at small counts (the user guide's "Views").
 *
 * @param snapshot a snapshot.
 * @param view a memprof_view.
 * @param index 0 .. memprof_snapshot_view_site_count() - 1.
 * @param out filled up to `out->size` bytes.
 * @return 0; `-EINVAL` for NULL arguments, an unknown view, a too small size or an index out
 *         of range. Thread-safe. @since 1.2
 */
MEMPROF_API int memprof_snapshot_view_site(const memprof_snapshot *snapshot, memprof_view view,
                                           size_t index, memprof_view_site *out);

/**
 * @brief **memprof_set_temporary_threshold()** sets the lifetime under which a freed
 * allocation counts as temporary (the temporary view). Applies to frees from then on.
 * @param ns the threshold in nanoseconds; 0 restores the default (1 ms).
 * @return 0. Thread-safe, in any state. Not async-signal-safe. @since 1.2
 */
MEMPROF_API int memprof_set_temporary_threshold(uint64_t ns);

/**
 * @defgroup attach Attaching to a running process
 * Entry points for starting and stopping the profiler from outside the program: `memprof
 * attach PID` loads this library into a running process and calls them on one of its threads
 * (the user guide's "Attaching to a running process"), and any program may call them too. A
 * configuration is a string of `key=value` lines separated by newlines (`\n`):
 * - `rate=BYTES`: mean bytes between samples, as `MEMPROF_RATE` (e.g. `64K`); used only when
 *   this call initialises the engine.
 * - `output=PATH`: the profile's path, `%p` expanded to the process id; relative to the
 *   process's working directory. Default: `memprof.%p.pb.gz` (the extension of the format).
 * - `format=NAME`: pprof, speedscope, collapsed, text or html; default: from the extension.
 * - `interval=SECONDS`: also write the profile every SECONDS (1 to 86400) while sampling.
 * @{
 */

/**
 * @brief **memprof_attach_start()** initialises the engine if needed and starts sampling.
 *
 * Uses the backend the process has: the preload plugin's if it is loaded (a program started
 * with `MEMPROF_START=0`), else the run-time GOT backend as memprof_start(). Allocations made
 * before the call are unknown to the profiler; their frees are recognised and ignored. With
 * `interval`, a thread of the library's writes the profile periodically until
 * memprof_attach_stop(). Returns quickly (no file is written), so it can be called on a
 * thread borrowed from the program.
 *
 * @param config the configuration (see above), or NULL or "" for the defaults.
 * @return 0; `-EINVAL` for an unknown key or an invalid value; `-EBUSY` if sampling is
 *         already active (another start, or `memprof run`); others as memprof_init_config()
 *         and memprof_start().
 *
 * Thread-safe (serialised with memprof_attach_stop()). Not async-signal-safe; not from an
 * allocation hook. Needs only the stack alignment the ABI guarantees at a call. @since 1.3
 */
MEMPROF_API int memprof_attach_start(const char *config);

/**
 * @brief **memprof_attach_stop()** stops sampling and writes the profile.
 *
 * Stops the periodic writer of memprof_attach_start(), takes a snapshot, stops sampling (the
 * engine stays initialised: a later memprof_attach_start() samples again, its profile holding
 * what is still live from before) and writes the snapshot to the configured output. Writing
 * symbolizes the stacks, which takes from milliseconds to a second or so, on the calling
 * thread.
 *
 * @param config `output` and `format` override those given to memprof_attach_start(); NULL
 *        or "" keeps them. `background=1` writes the profile on a thread of the library's
 *        instead, and returns once the snapshot is taken and sampling stopped (what `memprof
 *        attach` does, so as not to keep the thread it borrows for the write).
 * @return 0; `-EINVAL` for an invalid configuration; `-ENOTCONN` if the engine was never
 *         initialised; a negative errno of memprof_snapshot_write(). If sampling was not
 *         active (already stopped), the profile is still written.
 *
 * Thread-safe (serialised with memprof_attach_start()). Not async-signal-safe; not from an
 * allocation hook. @since 1.3
 */
MEMPROF_API int memprof_attach_stop(const char *config);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* MEMPROF_MEMPROF_H */
