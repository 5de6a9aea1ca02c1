/* SPDX-License-Identifier: MIT */
/*
 * memprof_attach_start() and memprof_attach_stop(): start and stop the profiler from a
 * configuration string, for `memprof attach PID`, which loads this library into a running
 * process and calls them on a thread it borrows for the call (tools/inject.c). A borrowed
 * thread must come back quickly, so start only initialises and starts the engine (the GOT
 * backend, or the preload plugin's when the process has it) and, with an interval, leaves
 * the periodic profiles to a thread of its own; stop writes the profile on the calling thread
 * because the command waits for it, or with `background=1` on a thread of its own (the
 * command's way: symbolizing a large program takes seconds) whose result
 * memprof__attach_result() gives afterwards. The configuration is text so that an injected call
 * needs nothing but a string in the target's memory: no struct layout to agree on.
 *
 * In a CPython process the command then calls memprof__attach_python() with Python code that
 * loads the Python binding and joins the profile (Python frames, the PyMem hooks). Python
 * code may run only under the interpreter's lock, which the borrowed thread may not hold (or
 * hold in the middle of a bytecode), so it is queued with Py_AddPendingCall(), which any
 * thread may call: the main thread runs it at its next bytecode boundary, with the lock.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/owner.h"
#include "api/values.h"
#include "common/compiler.h"
#include "memprof/memprof.h"

/* The result of the last stop's profile: 0, a negative errno, or -EINPROGRESS while its
 * background write runs. An internal entry point (MEMPROF_PRIVATE) that `memprof attach`
 * calls in the process after the writer thread ("memprof-write") has ended. */
MEMPROF_INTERNAL int memprof__attach_result(const char *unused);

/* Queues Python code (the text given) to run in the process's main interpreter thread; ""
 * instead returns the state of the last code queued: 0 waiting for the interpreter, 1 run
 * and joined, or the negative errno the code reported (-ENOENT: no binding for this
 * interpreter; -EIO: it failed). Returns -ENOENT in a process without CPython, -EAGAIN if the
 * interpreter's queue is full. MEMPROF_PRIVATE, for `memprof attach`. */
MEMPROF_INTERNAL int memprof__attach_python(const char *code);

#define ATTACH_DEFAULT_OUTPUT "memprof.%p.pb.gz"
#define ATTACH_MAX_INTERVAL   86400

struct attach_config {
    uint64_t rate;
    unsigned interval_s;
    memprof_format format;
    char output[PATH_MAX]; /* template, %p not yet expanded */
    bool has_output, has_format;
    bool background; /* stop: write on a thread of its own (memprof attach's stop) */
};

/* Serialises start and stop; also guards `current` and the writer's state. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct attach_config current; /* what the last start asked for */
static bool writer_running, writer_quit;
static pthread_t writer;
/* The background write of a stop: its snapshot, and its result once done (-EINPROGRESS
 * while it runs); read by memprof__attach_result(). */
static memprof_snapshot *final_snap;
static int final_result;

/* Parses one "key=value" of `len` bytes into c. */
static int parse_entry(const char *s, size_t len, struct attach_config *c)
{
    const char *eq = memchr(s, '=', len);
    if (!eq)
        return -EINVAL;
    size_t klen = (size_t)(eq - s), vlen = len - klen - 1;
    char value[PATH_MAX];
    if (vlen >= sizeof value)
        return -EINVAL;
    memcpy(value, eq + 1, vlen);
    value[vlen] = 0;
    if (klen == 4 && !memcmp(s, "rate", 4)) {
        if (!(c->rate = memprof__parse_rate(value)))
            return -EINVAL;
    } else if (klen == 6 && !memcmp(s, "output", 6)) {
        if (!vlen)
            return -EINVAL;
        memcpy(c->output, value, vlen + 1);
        c->has_output = true;
    } else if (klen == 6 && !memcmp(s, "format", 6)) {
        if ((c->format = memprof__format_by_name(value)) == MEMPROF_FORMAT_AUTO)
            return -EINVAL;
        c->has_format = true;
    } else if (klen == 10 && !memcmp(s, "background", 10)) {
        if (strcmp(value, "1") && strcmp(value, "0"))
            return -EINVAL;
        c->background = value[0] == '1';
    } else if (klen == 8 && !memcmp(s, "interval", 8)) {
        char *end;
        errno = 0;
        unsigned long n = strtoul(value, &end, 10);
        if (errno || end == value || *end || n < 1 || n > ATTACH_MAX_INTERVAL)
            return -EINVAL;
        c->interval_s = (unsigned)n;
    } else {
        return -EINVAL;
    }
    return 0;
}

/* Parses a configuration of newline-separated entries; empty lines are skipped. */
static int parse_config(const char *config, struct attach_config *c)
{
    memset(c, 0, sizeof *c);
    c->format = MEMPROF_FORMAT_AUTO;
    if (!config)
        return 0;
    for (const char *s = config; *s;) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        if (len) {
            int rc = parse_entry(s, len, c);
            if (rc)
                return rc;
        }
        s += len + (nl != NULL);
    }
    return 0;
}

/* Writes `snap` (NULL: a new snapshot) to the configured output. Called with `lock` held. */
static int write_profile(const struct attach_config *c, memprof_snapshot *snap)
{
    char path[PATH_MAX];
    if (!memprof__expand_path(c->has_output ? c->output : ATTACH_DEFAULT_OUTPUT, getpid(), path,
                              sizeof path, NULL))
        return -ENAMETOOLONG;
    int rc = snap ? 0 : memprof_get_snapshot(&snap);
    if (rc)
        return rc;
    rc = memprof_snapshot_write(snap, path, c->format);
    memprof_free_snapshot(snap);
    return rc;
}

/* The periodic writer of `interval`: writes the profile every interval until told to quit. A
 * condition variable, not sleep(), so stop does not wait out an interval. */
static void *writer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    while (!writer_quit) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += current.interval_s;
        int rc = 0;
        while (!writer_quit && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&wake, &lock, &until);
        if (!writer_quit)
            (void)write_profile(&current, NULL); /* the next one may succeed; stop reports errors */
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* Ends the periodic writer, if any. Called with `lock` held; returns with it held. */
static void end_writer(void)
{
    if (!writer_running)
        return;
    writer_quit = true;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    pthread_join(writer, NULL);
    pthread_mutex_lock(&lock);
    writer_running = false;
}

/* The background write of memprof_attach_stop(): symbolizing a large program takes seconds,
 * which a borrowed thread must not spend. Named, so the command can see it end. */
static void *final_writer(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "memprof-write");
    pthread_mutex_lock(&lock);
    final_result = write_profile(&current, final_snap);
    pthread_mutex_unlock(&lock);
    return NULL;
}

int memprof__attach_result(const char *unused)
{
    (void)unused;
    pthread_mutex_lock(&lock);
    int rc = final_result;
    pthread_mutex_unlock(&lock);
    return rc;
}

int memprof_attach_start(const char *config)
{
    struct attach_config c;
    int rc = parse_config(config, &c);
    if (rc)
        return rc;
    pthread_mutex_lock(&lock);
    memprof_config ec;
    memprof_config_init(&ec);
    if (c.rate)
        ec.sampling_rate = c.rate;
    rc = memprof__init_owned(&ec);
    if (rc == -EALREADY) /* an earlier attach, the preload plugin, or the program itself */
        rc = 0;
    if (!rc)
        rc = memprof_start();
    if (rc == MEMPROF_JOINED) /* sampling for `memprof run` or an attach still going */
        rc = -EBUSY;
    if (!rc) {
        current = c;
        if (c.interval_s) {
            /* The writer's condition waits on the monotonic clock. */
            static bool cond_set;
            if (!cond_set) {
                pthread_condattr_t a;
                pthread_condattr_init(&a);
                pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
                pthread_cond_destroy(&wake);
                pthread_cond_init(&wake, &a);
                pthread_condattr_destroy(&a);
                cond_set = true;
            }
            writer_quit = false;
            if (pthread_create(&writer, NULL, writer_main, NULL) == 0)
                writer_running = true;
            else
                current.interval_s = 0; /* the final profile is still written by stop */
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int memprof_attach_stop(const char *config)
{
    struct attach_config c;
    int rc = parse_config(config, &c);
    if (rc)
        return rc;
    pthread_mutex_lock(&lock);
    end_writer();
    /* The snapshot before the stop: frees go on being tracked after it, and a program that
     * turns its heap over in milliseconds would otherwise leave nothing live in it. */
    memprof_snapshot *snap = NULL;
    rc = memprof_get_snapshot(&snap);
    if (rc == 0) {
        int st = memprof__stop_owned();
        (void)st; /* -EBUSY: not active (stopped already); the profile is still wanted */
        if (c.has_output) {
            memcpy(current.output, c.output, sizeof c.output);
            current.has_output = true;
        }
        if (c.has_format)
            current.format = c.format;
        pthread_t t;
        final_snap = snap;
        final_result = -EINPROGRESS;
        if (c.background && pthread_create(&t, NULL, final_writer, NULL) == 0) {
            pthread_detach(t);
            rc = 0;
        } else {
            rc = final_result = write_profile(&current, snap);
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* ---- CPython ------------------------------------------------------------------------------- */

/* The code queued and its state (memprof__attach_python()). A lock of their own: the code runs
 * with the interpreter's lock held, and must not wait for a stop's write. */
static pthread_mutex_t python_lock = PTHREAD_MUTEX_INITIALIZER;
static char *python_code;
static int python_state;

/* The CPython functions used, by name: the library does not link libpython. */
typedef int (*py_pending_fn)(int (*)(void *), void *);
typedef int (*py_run_fn)(const char *, void *);
typedef void *(*py_sys_get_fn)(const char *);
typedef int (*py_sys_set_fn)(const char *, void *);
typedef long (*py_long_fn)(void *);
typedef int (*py_initialized_fn)(void);

/* Runs the code queued, in the main thread with the interpreter's lock (a pending call).
 * The code never raises (it would be printed in the program's stderr); it leaves its result
 * in sys._memprof_attach_state, read and removed here. */
static int python_join(void *arg)
{
    (void)arg;
    py_run_fn run = (py_run_fn)dlsym(RTLD_DEFAULT, "PyRun_SimpleStringFlags");
    py_sys_get_fn get = (py_sys_get_fn)dlsym(RTLD_DEFAULT, "PySys_GetObject");
    py_sys_set_fn set = (py_sys_set_fn)dlsym(RTLD_DEFAULT, "PySys_SetObject");
    py_long_fn as_long = (py_long_fn)dlsym(RTLD_DEFAULT, "PyLong_AsLong");
    int state = -EIO;
    pthread_mutex_lock(&python_lock);
    if (run && get && set && as_long && python_code && run(python_code, NULL) == 0) {
        void *v = get("_memprof_attach_state");
        if (v)
            state = (int)as_long(v);
        set("_memprof_attach_state", NULL);
    }
    __atomic_store_n(&python_state, state, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&python_lock);
    return 0;
}

int memprof__attach_python(const char *code)
{
    if (!code || !code[0])
        return __atomic_load_n(&python_state, __ATOMIC_ACQUIRE);
    py_pending_fn pending = (py_pending_fn)dlsym(RTLD_DEFAULT, "Py_AddPendingCall");
    py_initialized_fn initialized = (py_initialized_fn)dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    if (!pending || !initialized || !initialized())
        return -ENOENT;
    char *copy = strdup(code);
    if (!copy)
        return -ENOMEM;
    pthread_mutex_lock(&python_lock);
    free(python_code);
    python_code = copy;
    __atomic_store_n(&python_state, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&python_lock);
    return pending(python_join, NULL) == 0 ? 0 : -EAGAIN;
}
