/* SPDX-License-Identifier: MIT */
/*
 * Parsing of switches, sampling rates and signal names, path-template expansion (values.h),
 * and the one table of output formats, public through memprof_format_from_name(),
 * memprof_format_name(), memprof_format_extension(), memprof_format_from_path() and
 * memprof_parse_rate() (memprof.h).
 */
#define _GNU_SOURCE
#include "api/values.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>

#include "core/engine.h"

static const struct {
    const char *name;
    memprof_format format;
    const char *ext[3]; /* the first is the one written */
} formats[] = {
    {"pprof", MEMPROF_FORMAT_PPROF, {".pb.gz", ".pprof"}},
    {"speedscope", MEMPROF_FORMAT_SPEEDSCOPE, {".json"}},
    {"collapsed", MEMPROF_FORMAT_COLLAPSED, {".folded", ".collapsed"}},
    {"text", MEMPROF_FORMAT_TEXT, {".txt"}},
    {"html", MEMPROF_FORMAT_HTML, {".html", ".htm"}},
};
#define NFORMATS (sizeof formats / sizeof *formats)

MEMPROF_START_TEXT memprof_format memprof__format_by_name(const char *name)
{
    for (size_t i = 0; name && i < NFORMATS; i++)
        if (!strcmp(name, formats[i].name))
            return formats[i].format;
    return MEMPROF_FORMAT_AUTO;
}

const char *memprof__format_name(memprof_format f)
{
    for (size_t i = 0; i < NFORMATS; i++)
        if (formats[i].format == f)
            return formats[i].name;
    return "auto";
}

const char *memprof__format_extension(memprof_format f)
{
    for (size_t i = 0; i < NFORMATS; i++)
        if (formats[i].format == f)
            return formats[i].ext[0];
    return "";
}

int memprof_format_from_name(const char *name)
{
    memprof_format f = memprof__format_by_name(name);
    return f == MEMPROF_FORMAT_AUTO ? -EINVAL : (int)f;
}

const char *memprof_format_name(memprof_format format)
{
    return format == MEMPROF_FORMAT_AUTO || !*memprof__format_extension(format)
               ? NULL
               : memprof__format_name(format);
}

const char *memprof_format_extension(memprof_format format)
{
    const char *ext = memprof__format_extension(format);
    return *ext ? ext : NULL;
}

MEMPROF_START_TEXT int memprof_format_from_path(const char *path)
{
    return path ? (int)memprof__format_by_path(path) : -EINVAL;
}

MEMPROF_START_TEXT memprof_format memprof__format_by_path(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    for (size_t i = 0; i < NFORMATS; i++)
        for (size_t e = 0; e < 3 && formats[i].ext[e]; e++) {
            size_t m = strlen(formats[i].ext[e]);
            if (n >= m && !strcmp(path + n - m, formats[i].ext[e]))
                return formats[i].format;
        }
    return MEMPROF_FORMAT_AUTO;
}

MEMPROF_START_TEXT int memprof__parse_bool(const char *v)
{
    if (!v)
        return -1;
    /* The digits first: they are what `memprof run` sets, in every process it starts, and
     * strcasecmp() is a page of libc (a page fault) nothing else touches there. */
    if (!strcmp(v, "1"))
        return 1;
    if (!strcmp(v, "0"))
        return 0;
    if (!strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on"))
        return 1;
    if (!strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off"))
        return 0;
    return -1;
}

uint64_t memprof__parse_duration(const char *v)
{
    if (!v || ((*v < '0' || *v > '9') && *v != '.'))
        return 0;
    errno = 0;
    char *end;
    double n = strtod(v, &end);
    if (errno || end == v || !(n > 0))
        return 0;
    static const struct {
        const char *unit;
        double ns;
    } units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"", 1e9}};
    for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
        if (strcmp(end, units[i].unit) != 0)
            continue;
        double ns = n * units[i].ns;
        return ns >= 1 && ns <= 86400e9 ? (uint64_t)(ns + 0.5) : 0;
    }
    return 0;
}

uint64_t memprof__parse_rate(const char *v)
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
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    default:
        break;
    }
    if (shift) {
        end++;
        if (*end == 'i') /* 64Ki, 64KiB */
            end++;
        if (*end == 'b' || *end == 'B')
            end++;
    }
    if (*end || n == 0 || n > (MEMPROF_MAX_RATE >> shift))
        return 0;
    return (uint64_t)n << shift;
}

int memprof_parse_rate(const char *text, uint64_t *bytes)
{
    uint64_t r = bytes ? memprof__parse_rate(text) : 0;
    if (!r)
        return -EINVAL;
    *bytes = r;
    return 0;
}

static const struct {
    const char *name;
    int signo;
} signals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},     {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
    {"USR2", SIGUSR2}, {"PIPE", SIGPIPE},   {"ALRM", SIGALRM}, {"TERM", SIGTERM},
    {"CONT", SIGCONT}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU},
    {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM},
    {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"POLL", SIGPOLL}, {"PWR", SIGPWR},
    {"SYS", SIGSYS},
};

int memprof__parse_signal(const char *v)
{
    if (!v || !*v)
        return 0;
    if (!strncasecmp(v, "SIG", 3))
        v += 3;
    for (size_t i = 0; i < sizeof signals / sizeof *signals; i++)
        if (!strcasecmp(v, signals[i].name))
            return signals[i].signo;
    if (*v < '0' || *v > '9')
        return 0;
    errno = 0;
    char *end;
    long n = strtol(v, &end, 10);
    /* 32 .. SIGRTMIN-1 are glibc's own (thread cancellation, set*id broadcast): sigaction
     * refuses them, so the dump signal would silently never work. */
    if (errno || *end || n <= 0 || n >= NSIG || n == SIGKILL || n == SIGSTOP || n == SIGSEGV ||
        n == SIGBUS || n == SIGFPE || n == SIGILL || (n >= 32 && n < SIGRTMIN))
        return 0;
    return (int)n;
}

bool memprof__expand_path(const char *tmpl, pid_t pid, char *out, size_t size, bool *had_pid)
{
    size_t o = 0;
    if (had_pid)
        *had_pid = false;
    for (const char *p = tmpl; *p; p++) {
        char piece[32];
        if (*p == '%' && p[1] == 'p') {
            snprintf(piece, sizeof piece, "%d", (int)pid);
            if (had_pid)
                *had_pid = true;
            p++;
        } else if (*p == '%' && p[1] == '%') {
            piece[0] = '%', piece[1] = 0;
            p++;
        } else {
            piece[0] = *p, piece[1] = 0;
        }
        size_t n = strlen(piece);
        if (o + n >= size)
            return false;
        memcpy(out + o, piece, n);
        o += n;
    }
    out[o] = 0;
    return true;
}

MEMPROF_START_TEXT const char *memprof__program_name(void)
{
    const char *file = (const char *)getauxval(AT_EXECFN);
    /* A descriptor's name says nothing of the program: argv[0] does. */
    if (!file || !*file || !strncmp(file, "/proc/", 6) || !strncmp(file, "/dev/fd/", 8))
        file = program_invocation_name;
    if (!file)
        return ""; /* memprof__expand_program() makes that "program" */
    const char *slash = strrchr(file, '/');
    return slash ? slash + 1 : file;
}

MEMPROF_START_TEXT bool memprof__program_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '+' || c == '-';
}

#define PROGRAM_NAME_MAX 64

MEMPROF_START_TEXT bool memprof__expand_program(const char *tmpl, const char *name, char *out,
                                                size_t size)
{
    char safe[PROGRAM_NAME_MAX + 1];
    size_t n = 0;
    for (; name && name[n] && n < PROGRAM_NAME_MAX; n++)
        safe[n] = memprof__program_name_char(name[n]) ? name[n] : '_';
    safe[n] = 0;
    if (!n)
        strcpy(safe, "program");
    size_t o = 0;
    for (const char *p = tmpl; *p; p++) {
        const char *piece = safe;
        char two[3] = {p[0], p[1], 0};
        if (p[0] == '%' && p[1] == 'e')
            p++;
        else if (p[0] == '%' && p[1]) /* %p, %% and the rest: for memprof__expand_path() */
            piece = two, p++;
        else
            two[1] = 0, piece = two;
        size_t len = strlen(piece);
        if (o + len >= size)
            return false;
        memcpy(out + o, piece, len);
        o += len;
    }
    if (!size)
        return false;
    out[o] = 0;
    return true;
}
