/* SPDX-License-Identifier: MIT */
/*
 * The preload backend's configuration and exit-time profile.
 *
 * Environment (parsed strictly; a bad value prints one line naming the variable and the
 * default is used, unless MEMPROF_QUIET=1):
 *   MEMPROF_START   1 (default) starts sampling at load; 0 installs the hooks idle and
 *                   leaves memprof_init()/memprof_start() to the program.
 *   MEMPROF_RATE    mean bytes between samples, with an optional K, M or G suffix (KiB,
 *                   MiB, GiB); default 512K.
 *   MEMPROF_OUTPUT  profile written at exit; "%p" is replaced by the pid, "%%" by "%".
 *                   Unset: nothing is written. Ignored in set-uid/set-gid programs.
 *   MEMPROF_FORMAT  text or collapsed (default: from the file extension, else text).
 *   MEMPROF_UNWIND  dwarf (default when built with libunwind) or fp (frame pointers:
 *                   faster, but stacks stop at code built without frame pointers).
 *   MEMPROF_QUIET   1 silences every message.
 * A forked child that exits writes its own profile: to the %p expansion of its pid, or,
 * when the path has no %p, to "<path>.<pid>", so it never overwrites its parent's file.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine.h"
#include "interpose/preload.h"
#include "memprof/memprof.h"

static struct {
    int quiet;
    char output[PATH_MAX];
    memprof_format format;
    pid_t pid_at_start;
} cfg;

static void say(const char *fmt, ...)
{
    if (cfg.quiet)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    /* One write() so lines from several processes do not interleave. */
    (void)!write(STDERR_FILENO, line, (size_t)n);
}

static int parse_bool(const char *name, const char *v, int dflt)
{
    if (!v)
        return dflt;
    if (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on"))
        return 1;
    if (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off"))
        return 0;
    say("memprof: ignoring %s='%s': expected 1 or 0; using %d", name, v, dflt);
    return dflt;
}

/* A rate: digits with an optional K/M/G (binary) suffix, 1 .. 2^40. Returns 0 if invalid. */
static uint64_t parse_rate(const char *v)
{
    if (!v || *v < '0' || *v > '9')
        return 0;
    errno = 0;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno)
        return 0;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end == 'i' && shift) /* accept "KiB"-style spellings: 64Ki, 64KiB */
        end++;
    if ((*end == 'b' || *end == 'B') && shift)
        end++;
    if (*end || n == 0 || n > (MEMPROF_MAX_RATE >> shift))
        return 0;
    return (uint64_t)n << shift;
}

/* Expands %p and %% in the output template for the given pid; false if too long or bad. */
static bool expand_path(const char *tmpl, pid_t pid, char *out, size_t size)
{
    size_t o = 0;
    bool had_pid = false;
    for (const char *p = tmpl; *p; p++) {
        char piece[32];
        const char *add = piece;
        if (*p == '%' && p[1] == 'p') {
            snprintf(piece, sizeof piece, "%d", (int)pid);
            had_pid = true;
            p++;
        } else if (*p == '%' && p[1] == '%') {
            piece[0] = '%', piece[1] = 0;
            p++;
        } else {
            piece[0] = *p, piece[1] = 0;
        }
        size_t n = strlen(add);
        if (o + n >= size)
            return false;
        memcpy(out + o, add, n);
        o += n;
    }
    out[o] = 0;
    if (!had_pid && pid != cfg.pid_at_start) {
        /* A forked child: never overwrite the parent's profile. */
        int n = snprintf(out + o, size - o, ".%d", (int)pid);
        if (n < 0 || (size_t)n >= size - o)
            return false;
    }
    return true;
}

static void write_profile_at_exit(void)
{
    if (!cfg.output[0] || memprof__engine_readable() != 0)
        return;
    char path[PATH_MAX];
    if (!expand_path(cfg.output, getpid(), path, sizeof path)) {
        say("memprof: MEMPROF_OUTPUT is too long; no profile written");
        return;
    }
    memprof_snapshot *snap = NULL;
    int rc = memprof_get_snapshot(&snap);
    if (rc == 0)
        rc = memprof_snapshot_write(snap, path, cfg.format);
    memprof_free_snapshot(snap);
    if (rc != 0)
        say("memprof: could not write the profile to %s: %s", path, memprof_strerror(rc));
}

void memprof__preload_configure(void)
{
    cfg.pid_at_start = getpid();
    cfg.quiet = parse_bool("MEMPROF_QUIET", getenv("MEMPROF_QUIET"), 0);
    int start = parse_bool("MEMPROF_START", getenv("MEMPROF_START"), 1);

    const char *rate_s = getenv("MEMPROF_RATE");
    uint64_t rate = parse_rate(rate_s);
    if (rate_s && !rate)
        say("memprof: ignoring MEMPROF_RATE='%s': expected bytes between 1 and 2^40, "
            "optionally with a K, M or G suffix (e.g. 524288 or 512K); using %u",
            rate_s, MEMPROF_DEFAULT_RATE);

    const char *fmt = getenv("MEMPROF_FORMAT");
    cfg.format = MEMPROF_FORMAT_AUTO;
    if (fmt && !strcmp(fmt, "text"))
        cfg.format = MEMPROF_FORMAT_TEXT;
    else if (fmt && !strcmp(fmt, "collapsed"))
        cfg.format = MEMPROF_FORMAT_COLLAPSED;
    else if (fmt && *fmt)
        say("memprof: ignoring MEMPROF_FORMAT='%s': expected text or collapsed; using the "
            "file extension", fmt);

    /* secure_getenv: a set-uid/set-gid program must not be made to write files. */
    const char *out = secure_getenv("MEMPROF_OUTPUT");
    if (out && strlen(out) >= sizeof cfg.output)
        say("memprof: ignoring MEMPROF_OUTPUT: longer than %d bytes", PATH_MAX - 1);
    else if (out)
        strcpy(cfg.output, out);

    const char *unwind = getenv("MEMPROF_UNWIND");
    uint32_t unwinder = MEMPROF_UNWIND_DEFAULT;
    if (unwind && !strcmp(unwind, "fp"))
        unwinder = MEMPROF_UNWIND_FP;
    else if (unwind && !strcmp(unwind, "dwarf"))
        unwinder = MEMPROF_UNWIND_DWARF;
    else if (unwind && *unwind)
        say("memprof: ignoring MEMPROF_UNWIND='%s': expected dwarf or fp; using the default",
            unwind);

    if (start) {
        memprof_config c;
        memprof_config_init(&c);
        c.sampling_rate = rate;
        c.unwinder = unwinder;
        int rc = memprof_init_config(&c);
        if (rc == -ENOTSUP) {
            say("memprof: MEMPROF_UNWIND=dwarf is not available in this build; using fp");
            c.unwinder = MEMPROF_UNWIND_FP;
            rc = memprof_init_config(&c);
        }
        if (rc == 0)
            rc = memprof_start();
        if (rc != 0 && rc != -EALREADY)
            say("memprof: could not start profiling: %s", memprof_strerror(rc));
    }
    /* Registered from the constructor, so it runs after the program's own atexit
     * handlers: the profile sees what is still live at the very end. */
    atexit(write_profile_at_exit);
}
