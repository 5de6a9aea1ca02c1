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
 *   MEMPROF_OUTPUT  profile written at exit; "%p" is replaced by the pid, "%e" by the
 *                   program's name (api/values.h), "%%" by "%". A relative path is
 *                   relative to the directory the program started in.
 *                   Unset: nothing is written. Ignored in set-uid/set-gid programs.
 *   MEMPROF_FORMAT  pprof, speedscope, collapsed, text or html (default: from the file
 *                   extension, else text).
 *   MEMPROF_INTERVAL  also rewrite the profile every this many seconds (1 .. 86400).
 *   MEMPROF_SIGNAL  also rewrite the profile when the process receives this signal (a name
 *                   such as USR2 or SIGUSR2, or a number); the handler is replaced if the
 *                   program installs its own. A signal the program started with ignored
 *                   stays ignored (one line says so; preload_dump.c).
 *   MEMPROF_UNWIND  dwarf (default when built with libunwind) or fp (frame pointers:
 *                   faster, but stacks stop at code built without frame pointers).
 *   MEMPROF_SAMPLE_HEAP  1 (default) serves sampled blocks from the profiler's own heap,
 *                   so that free() recognises them by address; 0 leaves them with the real
 *                   allocator (every free() then asks the Bloom filter while samples are
 *                   live). Only in front of glibc's allocator, once libc's free entries
 *                   name the plugin (preload_retarget.c); otherwise always 0.
 *   MEMPROF_TEMP_THRESHOLD  freed allocations younger than this are temporary (the
 *                   temporary view): a duration such as 1ms (the default), 250us or 0.5s.
 *   MEMPROF_SYMBOLIZE  1 (default) writes profiles with function names, files and lines;
 *                   0 writes addresses with their modules' mappings and build ids only, a
 *                   cheaper exit, for `memprof report --symbolize` (or pprof) to name later
 *                   (`memprof run` does this and symbolizes after the program exits).
 *   MEMPROF_FOLLOW  1 (default) leaves the environment alone, so the programs this one
 *                   executes are profiled too; 0 profiles this program only: the plugin
 *                   removes itself from LD_PRELOAD and every MEMPROF_* variable from the
 *                   environment at start (preload_follow.c).
 *   MEMPROF_QUIET   1 silences every message.
 * Writing the profiles is preload_dump.c's job.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/owner.h"
#include "api/values.h"
#include "common/write_signals.h"
#include "core/backend.h"
#include "core/sandbox.h"
#include "interpose/preload.h"
#include "resolve/symbols.h"
#include "memprof/memprof.h"

static int quiet;

/* The stderr the program started with, by identity, recorded before the first message. A
 * program may close descriptor 2 and open a file of its own there (a daemon, a test harness);
 * the plugin's messages must not go into that file. Holding a duplicate of the original
 * stderr instead would be observable: it keeps a pipe's reader from seeing its end (a shell's
 * $(...) waiting for a daemon) and shows up in the program's descriptor listings and
 * close-range loops. So before each message the current descriptor 2 is compared with it:
 * fstat() of descriptor 2 itself, or, on the writer's own descriptor table, of the program's
 * descriptor 2 taken for the write (preload_dump.c). */
static struct {
    bool known;
    dev_t dev;
    ino_t ino;
} stderr_at_start;

static void record_stderr(void)
{
    struct stat st;
    stderr_at_start.known = fstat(STDERR_FILENO, &st) == 0;
    stderr_at_start.dev = st.st_dev;
    stderr_at_start.ino = st.st_ino;
}

/* The descriptor that is the program's original stderr now (the caller closes it if it is not
 * STDERR_FILENO), or -1. */
static int original_stderr(void)
{
    if (!stderr_at_start.known)
        return -1;
    int fd =
        memprof__preload_private_fds() ? memprof__preload_program_fd(STDERR_FILENO) : STDERR_FILENO;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == stderr_at_start.dev &&
        st.st_ino == stderr_at_start.ino)
        return fd;
    if (fd > STDERR_FILENO)
        close(fd);
    return -1;
}

void memprof__preload_say(const char *fmt, ...)
{
    if (quiet || !memprof__sys_allowed(MEMPROF_SYS_SAY)) /* a seccomp filter (sandbox.h) */
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
    /* One write() so lines from several processes do not interleave; a closed pipe on
     * stderr must not end the program (write_signals.h). */
    int fd = original_stderr();
    if (fd < 0)
        return;
    struct memprof_write_signals held;
    memprof__write_signals_hold(&held);
    (void)!write(fd, line, (size_t)n);
    memprof__write_signals_release(&held);
    if (fd != STDERR_FILENO)
        close(fd);
}

#define say memprof__preload_say

static int parse_bool(const char *name, const char *v, int dflt)
{
    if (!v)
        return dflt;
    int b = memprof__parse_bool(v);
    if (b >= 0)
        return b;
    say("memprof: ignoring %s='%s': expected 1 or 0; using %d", name, v, dflt);
    return dflt;
}

void memprof__preload_configure(bool sample_heap_ok)
{
    struct memprof_dump_config dump = {.format = MEMPROF_FORMAT_AUTO};
    record_stderr();
    quiet = parse_bool("MEMPROF_QUIET", getenv("MEMPROF_QUIET"), 0);
    int start = parse_bool("MEMPROF_START", getenv("MEMPROF_START"), 1);
    const char *sheap = getenv("MEMPROF_SAMPLE_HEAP");
    if (parse_bool("MEMPROF_SAMPLE_HEAP", sheap, 1)) {
        if (sample_heap_ok)
            memprof__engine_use_sample_heap();
        else if (sheap)
            say("memprof: ignoring MEMPROF_SAMPLE_HEAP=%s: the allocator behind the profiler is "
                "not glibc's",
                sheap);
    }

    /* Read now, acted on at the end: the rest of the configuration still reads MEMPROF_*. */
    int follow = parse_bool("MEMPROF_FOLLOW", getenv("MEMPROF_FOLLOW"), 1);

    if (!parse_bool("MEMPROF_SYMBOLIZE", getenv("MEMPROF_SYMBOLIZE"), 1))
        memprof__sym_set_symbolize(false);

    const char *rate_s = getenv("MEMPROF_RATE");
    uint64_t rate = memprof__parse_rate(rate_s);
    if (rate_s && !rate)
        say("memprof: ignoring MEMPROF_RATE='%s': expected bytes between 1 and 2^40, "
            "optionally with a K, M or G suffix (e.g. 524288 or 512K); using %u",
            rate_s, MEMPROF_DEFAULT_RATE);

    const char *fmt = getenv("MEMPROF_FORMAT");
    if (fmt && *fmt) {
        dump.format = memprof__format_by_name(fmt);
        if (dump.format == MEMPROF_FORMAT_AUTO)
            say("memprof: ignoring MEMPROF_FORMAT='%s': expected pprof, speedscope, collapsed, "
                "text or html; using the file extension",
                fmt);
    }

    /* secure_getenv: a set-uid/set-gid program must not be made to write files. A relative
     * path is taken from the directory the program started in: one that changes directory
     * (a daemon's chdir("/")) still writes where the user asked. */
    const char *out = secure_getenv("MEMPROF_OUTPUT");
    char cwd[PATH_MAX];
    int len = 0;
    if (out && *out && *out != '/' && getcwd(cwd, sizeof cwd))
        len = snprintf(dump.output, sizeof dump.output, "%s%s%s", cwd,
                       cwd[strlen(cwd) - 1] == '/' ? "" : "/", out);
    else if (out)
        len = snprintf(dump.output, sizeof dump.output, "%s", out);
    /* "%e", the program's name, is known now and for good: a fork() child is the same
     * program, and an exec()ed one loads the plugin afresh. */
    char named[PATH_MAX];
    if (len >= 0 && (size_t)len < sizeof dump.output) {
        if (memprof__expand_program(dump.output, memprof__program_name(), named, sizeof named))
            memcpy(dump.output, named, strlen(named) + 1);
        else
            len = -1;
    }
    if (len < 0 || (size_t)len >= sizeof dump.output) {
        say("memprof: ignoring MEMPROF_OUTPUT: longer than %d bytes", PATH_MAX - 1);
        dump.output[0] = 0;
    }

    const char *interval = getenv("MEMPROF_INTERVAL");
    if (interval && *interval) {
        char *end;
        errno = 0;
        long n = strtol(interval, &end, 10);
        if (errno || *end || n < 1 || n > 86400)
            say("memprof: ignoring MEMPROF_INTERVAL='%s': expected whole seconds from 1 to "
                "86400",
                interval);
        else
            dump.interval_s = (unsigned)n;
    }
    const char *sig = getenv("MEMPROF_SIGNAL");
    if (sig && *sig && !(dump.signo = memprof__parse_signal(sig)))
        say("memprof: ignoring MEMPROF_SIGNAL='%s': expected a signal name such as USR2, or a "
            "number",
            sig);

    const char *temp = getenv("MEMPROF_TEMP_THRESHOLD");
    uint64_t temp_threshold = memprof__parse_duration(temp);
    if (temp && *temp && !temp_threshold)
        say("memprof: ignoring MEMPROF_TEMP_THRESHOLD='%s': expected a duration such as 1ms, "
            "250us or 0.5s (up to a day); using 1ms",
            temp);

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
        int rc = memprof__init_owned(&c);
        if (rc == -ENOTSUP) {
            say("memprof: MEMPROF_UNWIND=dwarf is not available in this build; using fp");
            c.unwinder = MEMPROF_UNWIND_FP;
            rc = memprof__init_owned(&c);
        }
        if (rc == 0 && temp_threshold)
            memprof_set_temporary_threshold(temp_threshold);
        if (rc == 0)
            rc = memprof_start();
        if (rc != 0 && rc != -EALREADY)
            say("memprof: could not start profiling: %s", memprof_strerror(rc));
    }
    memprof__preload_dump_setup(&dump);
    if (!follow)
        memprof__preload_unfollow();
}
