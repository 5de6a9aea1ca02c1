/* SPDX-License-Identifier: MIT */
/*
 * The preload backend's configuration and exit-time profile.
 *
 * The environment is read once, here, through one table (`options` below): each variable's
 * name, the kind of value it takes and what a bad value falls back to. A bad value prints one
 * line naming the variable, what was expected and what is used instead (unless
 * MEMPROF_QUIET=1), and the program runs on. doc/guide.md ("The preload plugin") documents
 * every row; the test env-documented keeps the two in step.
 * Writing the profiles is preload_dump.c's job.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/output.h"
#include "api/owner.h"
#include "api/values.h"
#include "common/write_signals.h"
#include "core/backend.h"
#include "core/sandbox.h"
#include "interpose/preload.h"
#include "memprof/memprof.h"

static int quiet MEMPROF_START_DATA;

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
} stderr_at_start MEMPROF_START_DATA;

static void record_stderr(void)
{
    struct stat st;
    /* fstat() would pass the kernel glibc's own empty path, on a page of libc that nothing
     * else reads at start (a page fault, in every process). */
    stderr_at_start.known = fstatat(STDERR_FILENO, "", &st, AT_EMPTY_PATH) == 0;
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

/* What the environment says, defaults filled in. */
struct settings {
    int quiet, start, sample_heap, follow, symbolize;
    uint64_t rate, temp_threshold_ns;
    unsigned interval_s;
    int signo;
    memprof_format format;
    uint32_t unwinder;
    const char *output; /* NULL: unset */
    bool sample_heap_set;
    struct empty_rule {
        int write;   /* 1: a process that took no sample writes its profile too */
        long except; /* with write = 0: the process that writes it anyway (0: none) */
    } empty;
};

enum kind { SWITCH, RATE, DURATION, SECONDS, SIGNAL, FORMAT, UNWIND, PATH, EMPTY };

/* One row per variable, in the order they are read (MEMPROF_QUIET first, so it silences the
 * others' messages). `expected` and `fallback` make the message for a bad value. */
static const struct option {
    const char *name;
    enum kind kind;
    size_t at; /* offsetof(struct settings, field) */
    const char *expected;
    const char *fallback;
} options[] = {
    {"MEMPROF_QUIET", SWITCH, offsetof(struct settings, quiet), "1 or 0", "0"},
    {"MEMPROF_START", SWITCH, offsetof(struct settings, start), "1 or 0", "1"},
    {"MEMPROF_SAMPLE_HEAP", SWITCH, offsetof(struct settings, sample_heap), "1 or 0", "1"},
    {"MEMPROF_FOLLOW", SWITCH, offsetof(struct settings, follow), "1 or 0", "1"},
    {"MEMPROF_SYMBOLIZE", SWITCH, offsetof(struct settings, symbolize), "1 or 0", "1"},
    {"MEMPROF_RATE", RATE, offsetof(struct settings, rate),
     "bytes between 1 and 2^40, optionally with a K, M or G suffix (e.g. 524288 or 512K)",
     NULL /* the default rate, in bytes */},
    {"MEMPROF_FORMAT", FORMAT, offsetof(struct settings, format),
     "pprof, speedscope, collapsed, text or html", "the file extension"},
    {"MEMPROF_OUTPUT", PATH, offsetof(struct settings, output), NULL, NULL},
    {"MEMPROF_INTERVAL", SECONDS, offsetof(struct settings, interval_s),
     "whole seconds from 1 to 86400", "none"},
    {"MEMPROF_SIGNAL", SIGNAL, offsetof(struct settings, signo),
     "a signal name such as USR2, or a number", "none"},
    {"MEMPROF_TEMP_THRESHOLD", DURATION, offsetof(struct settings, temp_threshold_ns),
     "a duration such as 1ms, 250us or 0.5s (up to a day)", "1ms"},
    {"MEMPROF_UNWIND", UNWIND, offsetof(struct settings, unwinder), "dwarf or fp", "the default"},
    {"MEMPROF_WRITE_EMPTY", EMPTY, offsetof(struct settings, empty),
     "1, 0, or 0:PID (a process id)", "1"},
};

/* Parses `v` as `o` says into the settings; false if it is not a valid value. */
static bool parse(const struct option *o, const char *v, struct settings *st)
{
    char *at = (char *)st + o->at;
    switch (o->kind) {
    case SWITCH: {
        int b = memprof__parse_bool(v);
        if (b >= 0)
            *(int *)at = b;
        return b >= 0;
    }
    case RATE:
        return (*(uint64_t *)at = memprof__parse_rate(v)) != 0;
    case DURATION:
        return (*(uint64_t *)at = memprof__parse_duration(v)) != 0;
    case SECONDS: {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno || *end || n < 1 || n > 86400)
            return false;
        *(unsigned *)at = (unsigned)n;
        return true;
    }
    case SIGNAL:
        return (*(int *)at = memprof__parse_signal(v)) != 0;
    case FORMAT:
        return (*(memprof_format *)at = memprof__format_by_name(v)) != MEMPROF_FORMAT_AUTO;
    case UNWIND:
        if (strcmp(v, "fp") && strcmp(v, "dwarf"))
            return false;
        *(uint32_t *)at = strcmp(v, "fp") ? MEMPROF_UNWIND_DWARF : MEMPROF_UNWIND_FP;
        return true;
    case PATH:
        *(const char **)at = v;
        return true;
    case EMPTY: {
        struct empty_rule *r = (struct empty_rule *)at;
        if (!strcmp(v, "1") || !strcmp(v, "0")) {
            *r = (struct empty_rule){.write = v[0] == '1', .except = 0};
            return true;
        }
        /* "0:<pid>", as `memprof run` sets it in every process it starts: the digits read
         * by hand, since strtol() would fault in two pages of libc in each. */
        if (strncmp(v, "0:", 2) != 0 || !v[2])
            return false;
        long pid = 0;
        for (const char *d = v + 2; *d; d++) {
            if (*d < '0' || *d > '9' || pid > (LONG_MAX - 9) / 10)
                return false;
            pid = pid * 10 + (*d - '0');
        }
        if (pid <= 0)
            return false;
        *r = (struct empty_rule){.write = 0, .except = pid};
        return true;
    }
    }
    return false;
}

/* The environment's MEMPROF_* entries, in its order, found in one pass: a getenv() per
 * option scanned the whole environment each time, in every process. More of them than fit
 * (never, in practice) are looked up with getenv(). */
#define ENV_SEEN_MAX 64
struct env_seen {
    const char *entry[ENV_SEEN_MAX];
    size_t n;
    bool overflow;
};

extern char **environ;
static void env_collect(struct env_seen *s)
{
    s->n = 0;
    s->overflow = false;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "MEMPROF_", 8) != 0)
            continue;
        if (s->n == ENV_SEEN_MAX) {
            s->overflow = true;
            return;
        }
        s->entry[s->n++] = *e;
    }
}

/* getenv(name) for a MEMPROF_* name, as env_collect() saw the environment. */
static const char *env_get(const struct env_seen *s, const char *name)
{
    if (s->overflow)
        return getenv(name);
    size_t len = strlen(name);
    for (size_t i = 0; i < s->n; i++)
        if (strncmp(s->entry[i], name, len) == 0 && s->entry[i][len] == '=')
            return s->entry[i] + len + 1;
    return NULL;
}

static void read_environment(const struct env_seen *env, struct settings *st)
{
    *st = (struct settings){.start = 1,
                            .sample_heap = 1,
                            .follow = 1,
                            .symbolize = 1,
                            .rate = MEMPROF_DEFAULT_RATE,
                            .format = MEMPROF_FORMAT_AUTO,
                            .unwinder = MEMPROF_UNWIND_DEFAULT,
                            .empty = {.write = 1}};
    bool secure = getauxval(AT_SECURE) != 0; /* what secure_getenv() asks */
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        const struct option *o = &options[i];
        /* secure_getenv for the output: a set-uid/set-gid program must not be made to
         * write files. */
        const char *v = o->kind == PATH && secure ? NULL : env_get(env, o->name);
        if (!v || (!*v && o->kind != SWITCH && o->kind != PATH))
            continue;
        if (o->at == offsetof(struct settings, sample_heap))
            st->sample_heap_set = true;
        if (parse(o, v, st))
            continue;
        if (o->kind == RATE) {
            st->rate = MEMPROF_DEFAULT_RATE;
            say("memprof: ignoring %s='%s': expected %s; using %u", o->name, v, o->expected,
                MEMPROF_DEFAULT_RATE);
        } else {
            say("memprof: ignoring %s='%s': expected %s; using %s", o->name, v, o->expected,
                o->fallback);
        }
        if (o->kind == FORMAT)
            st->format = MEMPROF_FORMAT_AUTO;
        if (o->kind == EMPTY)
            st->empty = (struct empty_rule){.write = 1};
    }
}

/* The profile's path: MEMPROF_OUTPUT made absolute from the directory the program started
 * in (one that changes directory, a daemon's chdir("/"), still writes where the user asked),
 * with "%e", the program's name, expanded now and for good: a fork() child is the same
 * program, and an exec()ed one loads the plugin afresh. */
static void output_path(const char *out, struct memprof_dump_config *dump)
{
    dump->output[0] = 0;
    if (!out)
        return;
    /* Joined by hand: snprintf() would bring libc's whole formatting code (several pages,
     * a page fault each) into every process `memprof run` starts. */
    char path[PATH_MAX];
    size_t len = 0, n = strlen(out);
    if (*out && *out != '/' && getcwd(path, sizeof path)) {
        len = strlen(path);
        if (path[len - 1] != '/' && len + 1 < sizeof path)
            path[len++] = '/';
    }
    bool fits = len + n < sizeof path;
    if (fits) {
        memcpy(path + len, out, n + 1);
        fits = memprof__expand_program(path, memprof__program_name(), dump->output,
                                       sizeof dump->output);
    }
    if (!fits) {
        say("memprof: ignoring MEMPROF_OUTPUT: longer than %d bytes", PATH_MAX - 1);
        dump->output[0] = 0;
    }
}

MEMPROF_START_TEXT void memprof__preload_configure(bool sample_heap_ok)
{
    record_stderr();
    /* MEMPROF_QUIET first, on its own: it decides whether the other rows may speak. */
    struct env_seen env;
    env_collect(&env);
    const char *q = env_get(&env, "MEMPROF_QUIET");
    quiet = q && memprof__parse_bool(q) == 1;
    struct settings st;
    read_environment(&env, &st);
    quiet = st.quiet;

    if (st.sample_heap) {
        if (sample_heap_ok)
            memprof__engine_use_sample_heap();
        else if (st.sample_heap_set)
            say("memprof: ignoring MEMPROF_SAMPLE_HEAP=%s: the allocator behind the profiler is "
                "not glibc's",
                env_get(&env, "MEMPROF_SAMPLE_HEAP"));
    }
    if (!st.symbolize)
        memprof__snapshot_write_names(false);

    struct memprof_dump_config dump; /* not zeroed: only the string's bytes are written */
    dump.format = st.format;
    dump.interval_s = st.interval_s;
    dump.signo = st.signo;
    dump.write_empty = st.empty.write;
    dump.write_empty_pid = (pid_t)st.empty.except;
    output_path(st.output, &dump);

    /* Whatever starts the engine in this process (now, the program, an attach). */
    memprof__engine_defer_tables();
    if (st.start) {
        memprof_config c;
        memprof_config_init(&c);
        c.sampling_rate = st.rate;
        c.unwinder = st.unwinder;
        int rc = memprof__init_owned(&c);
        if (rc == -ENOTSUP) {
            say("memprof: MEMPROF_UNWIND=dwarf is not available in this build; using fp");
            c.unwinder = MEMPROF_UNWIND_FP;
            rc = memprof__init_owned(&c);
        }
        if (rc == 0 && st.temp_threshold_ns)
            memprof_set_temporary_threshold(st.temp_threshold_ns);
        if (rc == 0)
            rc = memprof_start();
        if (rc != 0 && rc != -EALREADY)
            say("memprof: could not start profiling: %s", memprof_strerror(rc));
    }
    memprof__preload_dump_setup(&dump);
    /* Read with the others, acted on last: the rest of the configuration reads MEMPROF_*. */
    if (!st.follow)
        memprof__preload_unfollow();
}
