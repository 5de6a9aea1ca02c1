/* SPDX-License-Identifier: MIT */
/*
 * The module: its entry (extension=memprof.so), the memprof.sampling_rate ini setting, the
 * request hooks that put the Zend heap hooks on and take them off, and profiling without a
 * code change: with MEMPROF_PHP=1 in the environment the engine starts at module start-up
 * (so persistent allocations of the start-up are seen too) and each request's profile is
 * written at its end (RSHUTDOWN, while the script's globals are still live) to
 * MEMPROF_OUTPUT (`%p` = pid, `%%` = %; the format from its extension), or as text on
 * standard error when MEMPROF_OUTPUT is unset. Without MEMPROF_PHP nothing starts until the
 * script calls memprof_enable(), and the extension costs nothing. Under `memprof run` (which
 * sets MEMPROF_PHP=1 and loads the extension) or `memprof attach`, the engine is theirs:
 * memprof_init() and memprof_start() answer MEMPROF_JOINED, the extension adds its PHP frames
 * and Zend heap hooks to that profile, and writes nothing itself; in the CLI it has memprof
 * run's exit-time profile written at the script's end (memprof_write_exit_profile()).
 *
 * The engine is libmemprof's, in libmemprof.so.1: memprof_start() puts its GOT backend on
 * malloc in every loaded object. PHP unloads extensions at module shutdown, which would take
 * libmemprof.so.1 (and this module's frame-source callbacks) out from under those patched
 * slots while the process still frees memory; both objects are therefore pinned
 * (RTLD_NODELETE) when profiling first starts.
 */
#define _GNU_SOURCE
#include "binding.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <SAPI.h>
#include <ext/standard/info.h>

#define MPPHP_VERSION "0.1.0"

static zend_long ini_rate; /* memprof.sampling_rate, bytes */
static bool from_env;      /* MEMPROF_PHP=1 */
static bool joined;        /* the profile is memprof run's or memprof attach's */
static bool joined_said;   /* memprof_enable() said so (once) */
static bool in_rinit;      /* mpphp_start() for a request's start: joins silently */
static bool warned_custom; /* the Zend heap could not be hooked (said once) */
static bool pinned;

static ZEND_INI_MH(on_update_rate)
{
    (void)entry, (void)mh_arg1, (void)mh_arg2, (void)mh_arg3, (void)stage;
    zend_long v = zend_ini_parse_quantity_warn(new_value, entry->name);
    if (v < 1)
        return FAILURE;
    ini_rate = v;
    return SUCCESS;
}

PHP_INI_BEGIN()
PHP_INI_ENTRY("memprof.sampling_rate", "512K", PHP_INI_ALL, on_update_rate)
PHP_INI_END()

static bool quiet(void)
{
    const char *q = getenv("MEMPROF_QUIET");
    return q && strcmp(q, "1") == 0;
}

/* Keeps an object loaded for the life of the process (see the top of the file). */
static void pin(const void *addr)
{
    Dl_info info;
    if (dladdr(addr, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

/* A rate from the environment (MEMPROF_RATE: bytes, K/M/G suffixes), 0 if none or invalid. */
static uint64_t env_rate(void)
{
    const char *s = getenv("MEMPROF_RATE");
    if (!s || !*s)
        return 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    if (*end || v == 0 || v > (UINT64_MAX >> shift)) {
        if (!quiet())
            fprintf(stderr, "memprof: MEMPROF_RATE=%s is not a rate in bytes (512K, 1M, ...)\n", s);
        return 0;
    }
    return (uint64_t)v << shift;
}

static uint32_t engine_state(void)
{
    memprof_stats st = {.size = sizeof st};
    return memprof_get_stats(&st) < 0 ? MEMPROF_STATE_UNINITIALIZED : st.state;
}

bool mpphp_active(void)
{
    return engine_state() == MEMPROF_STATE_ACTIVE;
}

int mpphp_start(uint64_t rate)
{
    uint32_t state = engine_state();
    if (state == MEMPROF_STATE_SHUTDOWN)
        return -ESHUTDOWN;
    if (state == MEMPROF_STATE_UNINITIALIZED) {
        int rc = memprof_init(rate ? rate : (uint64_t)ini_rate);
        if (rc < 0 && rc != -EALREADY)
            return rc;
    }
    if (!pinned) {
        pin((const void *)(uintptr_t)&memprof_init);
        pin((const void *)(uintptr_t)&mpphp_start);
        pinned = true;
    }
    int rc = mpphp_frames_register();
    if (rc < 0)
        return rc;
    /* Under memprof run or memprof attach the profile is theirs: join it (MEMPROF_JOINED),
     * at their rate, which the script is told once. */
    rc = memprof_start();
    if (rc == MEMPROF_JOINED) {
        joined = true;
        if (!in_rinit && !joined_said && !quiet()) {
            memprof_stats st = {.size = sizeof st};
            memprof_get_stats(&st);
            fprintf(stderr,
                    "memprof: memprof_enable(): joined the running profile (memprof run, the "
                    "preload plugin or memprof attach) at its sampling rate, %llu KiB; it is "
                    "written by whoever started it\n",
                    (unsigned long long)(st.sampling_rate / 1024));
        }
        joined_said = joined_said || !in_rinit;
    } else if (rc < 0 && rc != -EALREADY && !(rc == -EBUSY && state == MEMPROF_STATE_ACTIVE)) {
        return rc;
    }
    mpphp_heap_rearm();
    if (!mpphp_heap_hook() && !warned_custom) {
        warned_custom = true;
        if (!quiet() && !getenv("USE_ZEND_ALLOC"))
            php_error_docref(NULL, E_NOTICE,
                             "the Zend heap has custom handlers already: only allocations "
                             "that reach malloc are profiled");
    }
    return 0;
}

int mpphp_stop(void)
{
    return engine_state() == MEMPROF_STATE_ACTIVE ? memprof_stop() : 0;
}

/* MEMPROF_OUTPUT with %p and %% expanded; "" when unset. */
static void output_path(char *buf, size_t size)
{
    const char *tmpl = getenv("MEMPROF_OUTPUT");
    size_t at = 0;
    buf[0] = '\0';
    if (!tmpl)
        return;
    for (const char *s = tmpl; *s && at + 1 < size; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            int n = snprintf(buf + at, size - at, "%ld", (long)getpid());
            at = n > 0 && (size_t)n < size - at ? at + (size_t)n : size - 1;
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            buf[at++] = '%';
            s++;
        } else {
            buf[at++] = *s;
        }
    }
    buf[at] = '\0';
}

static void write_env_profile(void)
{
    char path[4096];
    output_path(path, sizeof path);
    memprof_format format = MEMPROF_FORMAT_AUTO;
    if (!path[0]) {
        snprintf(path, sizeof path, "/dev/stderr");
        format = MEMPROF_FORMAT_TEXT;
    }
    int rc = mpphp_write_file(path, format);
    if (rc < 0 && !quiet())
        fprintf(stderr, "memprof: cannot write the profile to %s: %s\n", path,
                memprof_strerror(rc));
}

static PHP_MINIT_FUNCTION(memprof)
{
    (void)type, (void)module_number;
    REGISTER_INI_ENTRIES();
    const char *env = getenv("MEMPROF_PHP");
    from_env = env && strcmp(env, "1") == 0;
    if (from_env) {
        uint64_t rate = env_rate();
        int rc = memprof_init(rate ? rate : (uint64_t)ini_rate);
        joined = rc == MEMPROF_JOINED;
        if ((rc < 0 && rc != -EALREADY) || ((rc = mpphp_frames_register()) < 0) ||
            ((rc = memprof_start()) < 0 && rc != -EALREADY)) {
            if (!quiet())
                fprintf(stderr, "memprof: cannot start profiling: %s\n", memprof_strerror(rc));
            from_env = false;
        } else {
            pin((const void *)(uintptr_t)&memprof_init);
            pin((const void *)(uintptr_t)&mpphp_start);
            pinned = true;
        }
    }
    return SUCCESS;
}

static PHP_MSHUTDOWN_FUNCTION(memprof)
{
    (void)type, (void)module_number;
    UNREGISTER_INI_ENTRIES();
    mpphp_frames_close();
    return SUCCESS;
}

static PHP_RINIT_FUNCTION(memprof)
{
    (void)type, (void)module_number;
    if (mpphp_active()) {
        in_rinit = true;
        (void)mpphp_start(0); /* the hooks on this request's heap */
        in_rinit = false;
    }
    return SUCCESS;
}

static PHP_RSHUTDOWN_FUNCTION(memprof)
{
    (void)type, (void)module_number;
    /* A joined profile is written by whoever started it (memprof run's plugin at exit). The
     * CLI's one request ends the program: have memprof run's exit-time profile written now,
     * while the script's globals are live, not at exit, after the heap is released. A
     * server's requests each end here, so there the profile stays the process's exit's. */
    if (from_env && !joined)
        write_env_profile();
    else if (joined && strcmp(sapi_module.name, "cli") == 0)
        (void)memprof_write_exit_profile(); /* -ENOTSUP under memprof attach */
    mpphp_heap_unhook();
    return SUCCESS;
}

static PHP_MINFO_FUNCTION(memprof)
{
    (void)zend_module;
    php_info_print_table_start();
    php_info_print_table_row(2, "memprof support", "enabled");
    php_info_print_table_row(2, "extension version", MPPHP_VERSION);
    php_info_print_table_row(2, "libmemprof version", memprof_version_string());
    php_info_print_table_row(2, "profiling", mpphp_active() ? "active" : "off");
    php_info_print_table_end();
    DISPLAY_INI_ENTRIES();
}

static zend_module_entry memprof_module_entry = {
    STANDARD_MODULE_HEADER, "memprof",
    mpphp_functions,        PHP_MINIT(memprof),
    PHP_MSHUTDOWN(memprof), PHP_RINIT(memprof),
    PHP_RSHUTDOWN(memprof), PHP_MINFO(memprof),
    MPPHP_VERSION,          STANDARD_MODULE_PROPERTIES,
};

ZEND_DLEXPORT zend_module_entry *get_module(void);
ZEND_DLEXPORT zend_module_entry *get_module(void)
{
    return &memprof_module_entry;
}
