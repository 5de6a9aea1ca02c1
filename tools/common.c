/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the `memprof` subcommands: messages, strict parsing of option values
 * (rates and signals accept exactly what the preload plugin's MEMPROF_RATE and MEMPROF_SIGNAL
 * accept, so `memprof run` can reject a bad value before the program starts instead of the
 * plugin ignoring it), format names, reading a saved profile through the pprof reader, and
 * atomic output files.
 */
#define _GNU_SOURCE
#include "config.h"

#include "api/output.h"
#include "api/values.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "export/pprof.h"
#include "offline/offline.h"

/* ---- messages ------------------------------------------------------------------------------- */

void memprof_cli_error(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "memprof: %s\n", line);
}

int memprof_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fflush(stdout);
    if (cmd)
        fprintf(stderr, "memprof %s: %s (see 'memprof %s --help')\n", cmd, line, cmd);
    else
        fprintf(stderr, "memprof: %s (see 'memprof --help')\n", line);
    return CLI_EXIT_USAGE;
}

int memprof_cli_bad_option(const char *cmd, int c, char **argv)
{
    /* getopt_long leaves the offending word at argv[optind - 1]; for a bundled short option
     * ("-qx") optopt names the letter. */
    const char *word = optind > 0 ? argv[optind - 1] : "?";
    if (c == ':') {
        if (optopt && word[0] == '-' && word[1] != '-')
            return memprof_cli_usage_error(cmd, "option -%c needs a value", optopt);
        return memprof_cli_usage_error(cmd, "option %s needs a value", word);
    }
    if (optopt && isprint(optopt))
        return memprof_cli_usage_error(cmd, "unknown option -%c", optopt);
    return memprof_cli_usage_error(cmd, "unknown option '%s'", word);
}

/* ---- values --------------------------------------------------------------------------------- */

uint64_t memprof_cli_parse_rate(const char *v)
{
    return memprof__parse_rate(v);
}

bool memprof_cli_add_wrapper(const char *cmd, const char *pattern)
{
    if (!*pattern || strchr(pattern, ',')) {
        memprof_cli_usage_error(cmd, "--wrapper '%s': expected a function name or a shell "
                                     "pattern of them, without a comma",
                                pattern);
        return false;
    }
    /* Appended to what the environment already says: the user's own MEMPROF_WRAPPERS. */
    const char *old = getenv("MEMPROF_WRAPPERS");
    size_t n = (old ? strlen(old) + 1 : 0) + strlen(pattern) + 1;
    char *list = malloc(n);
    if (!list) {
        memprof_cli_error("%s", strerror(ENOMEM));
        return false;
    }
    snprintf(list, n, "%s%s%s", old && *old ? old : "", old && *old ? "," : "", pattern);
    bool ok = setenv("MEMPROF_WRAPPERS", list, 1) == 0;
    free(list);
    if (!ok)
        memprof_cli_error("%s", strerror(errno));
    return ok;
}

void memprof_cli_show_native(void)
{
    setenv("MEMPROF_NATIVE", "1", 1);
}

bool memprof_cli_parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long n = strtoul(s, &end, 10);
    if (errno || *end || n > max)
        return false;
    *out = n;
    return true;
}

int memprof_cli_parse_signal(const char *v)
{
    return memprof__parse_signal(v);
}

const char *memprof_cli_signal_name(int signo, char *buf, size_t size)
{
    const char *abbrev = sigabbrev_np(signo);
    if (abbrev)
        snprintf(buf, size, "SIG%s", abbrev);
    else if (signo >= SIGRTMIN && signo <= SIGRTMAX)
        snprintf(buf, size, "SIGRTMIN+%d", signo - SIGRTMIN);
    else
        snprintf(buf, size, "signal %d", signo);
    return buf;
}

int memprof_cli_parse_value(const char *name, int *view, bool *objects)
{
    /* pprof's sample-type names, which also name a view, then the bare units. */
    static const struct {
        const char *name;
        int view;
        bool objects;
    } values[] = {
        {"inuse_space", MEMPROF_VIEW_LIVE, false},
        {"alloc_space", MEMPROF_VIEW_ALLOC, false},
        {"inuse_objects", MEMPROF_VIEW_LIVE, true},
        {"alloc_objects", MEMPROF_VIEW_ALLOC, true},
        {"bytes", -1, false},
        {"objects", -1, true},
    };
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        if (!strcmp(name, values[i].name)) {
            *view = values[i].view;
            *objects = values[i].objects;
            return 0;
        }
    return -1;
}

int memprof_cli_view_by_name(const char *name)
{
    return memprof__view_by_name(name);
}

/* ---- reading a profile ---------------------------------------------------------------------- */

/* Reads all of fd, up to `max` bytes; returns 0 or a positive errno (EFBIG when larger). */
static int read_all(int fd, size_t max, unsigned char **data, size_t *len)
{
    size_t cap = 64 * 1024, n = 0;
    unsigned char *buf = malloc(cap);
    if (!buf)
        return ENOMEM;
    for (;;) {
        if (n == cap) {
            if (cap > max) {
                free(buf);
                return EFBIG;
            }
            unsigned char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return ENOMEM;
            }
            buf = bigger;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            return e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > max) {
        free(buf);
        return EFBIG;
    }
    *data = buf;
    *len = n;
    return 0;
}

/* Names demangled in profiles read back. They live as long as the command (pointed at from
 * here, so no leak checker reports them), however many profiles it reads and frees. */
static char **demangled;
static size_t ndemangled, demangled_cap;

/* Demangles the function names a profile holds still mangled: profiles written by older
 * versions, which demangled C++ only when the program had a C++ runtime loaded, and Rust
 * never. Out of memory, a name stays as it is. */
static void demangle_frames(struct memprof_profile *p)
{
    for (size_t i = 0; i < p->nframes; i++) {
        char *readable = memprof__offline_demangle(p->frames[i].function);
        if (!readable)
            continue;
        if (!p->frames[i].system_name) /* the mangled name stays pprof's system_name */
            p->frames[i].system_name = p->frames[i].function;
        if (ndemangled == demangled_cap) {
            size_t cap = demangled_cap ? demangled_cap * 2 : 64;
            char **v = realloc(demangled, cap * sizeof *v);
            if (!v) {
                free(readable);
                return;
            }
            demangled = v;
            demangled_cap = cap;
        }
        demangled[ndemangled++] = readable;
        p->frames[i].function = readable;
    }
}

struct memprof_profile *memprof_cli_read_profile(const char *path)
{
    bool is_stdin = !strcmp(path, "-");
    int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        memprof_cli_error("cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct memprof_profile *p = memprof_cli_read_profile_fd(fd, is_stdin ? "standard input" : path);
    if (!is_stdin)
        close(fd);
    return p;
}

struct memprof_profile *memprof_cli_read_profile_fd(int fd, const char *name)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        memprof_cli_error("cannot read %s: %s", name, strerror(EISDIR));
        return NULL;
    }
    unsigned char *data = NULL;
    size_t len = 0;
    /* A compressed profile is smaller than its decompressed form, which the reader caps at
     * MEMPROF_PPROF_MAX_SIZE; the same cap on the file keeps the read bounded. */
    int e = read_all(fd, MEMPROF_PPROF_MAX_SIZE, &data, &len);
    if (e == EFBIG) {
        memprof_cli_error("cannot read %s: larger than %zu MiB, not a profile memprof wrote", name,
                          (size_t)(MEMPROF_PPROF_MAX_SIZE >> 20));
        return NULL;
    }
    if (e) {
        memprof_cli_error("cannot read %s: %s", name, strerror(e));
        return NULL;
    }
    if (len == 0) {
        free(data);
        memprof_cli_error("cannot read %s: the file is empty, not a profile", name);
        return NULL;
    }
    struct memprof_profile *p = NULL;
    char err[256] = "";
    int rc = memprof__pprof_read(data, len, &p, err, sizeof err);
    free(data);
    if (rc == -ENOMEM) {
        memprof_cli_error("cannot read %s: %s", name, strerror(ENOMEM));
        return NULL;
    }
    if (rc != 0 || !p) {
        memprof__profile_free(p);
        memprof_cli_error("cannot read %s: %s", name,
                          err[0] ? err : "not a profile written by memprof");
        return NULL;
    }
    demangle_frames(p);
    return p;
}

/* ---- writing files -------------------------------------------------------------------------- */

/* The directory part of path ("." when there is none), into dir. */
static bool dir_of(const char *path, char *dir, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return snprintf(dir, size, ".") < (int)size;
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= size)
        return false;
    memcpy(dir, path, n);
    dir[n] = 0;
    return true;
}

int memprof_cli_check_writable(const char *path, char *dir, size_t dirsize)
{
    if (!dir_of(path, dir, dirsize))
        return ENAMETOOLONG;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return EISDIR;
    if (stat(dir, &st) != 0)
        return errno;
    if (!S_ISDIR(st.st_mode))
        return ENOTDIR;
    char probe[PATH_MAX];
    if (snprintf(probe, sizeof probe, "%s/.memprof-probe-XXXXXX", dir) >= (int)sizeof probe)
        return ENAMETOOLONG;
    int fd = mkostemp(probe, O_CLOEXEC); /* not inherited by a concurrent fork+exec */
    if (fd < 0)
        return errno;
    close(fd);
    unlink(probe);
    return 0;
}

int memprof_cli_write_atomic(const char *path, int (*fill)(FILE *out, void *ctx), void *ctx)
{
    /* The library's implementation (api/output.c): a regular file through a temporary file
     * and rename(), a device, FIFO (waiting for its reader, as a shell redirection does),
     * socket or /dev/stdout-like name in place. */
    const struct memprof_output how = {.wait_for_fifo_reader = true};
    int rc = memprof__output_write(path, fill, ctx, &how);
    if (rc != 0) {
        memprof_cli_error("cannot write %s: %s", path, strerror(-rc));
        return -1;
    }
    return 0;
}

/* Writes data over fd from its start and cuts it there. */
static int replace_content(int fd, const char *data, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = pwrite(fd, data + done, len - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        done += (size_t)n;
    }
    return ftruncate(fd, (off_t)len) == 0 ? 0 : -errno;
}

int memprof_cli_rewrite_in_place(int fd, const char *path, int (*fill)(FILE *out, void *ctx),
                                 void *ctx)
{
    char *now = NULL;
    unsigned char *old = NULL;
    size_t now_len = 0, old_len = 0;
    FILE *mem = open_memstream(&now, &now_len);
    int rc = mem ? fill(mem, ctx) : -ENOMEM;
    if (mem && fclose(mem) != 0 && rc == 0)
        rc = -EIO;
    if (rc == 0)
        rc = lseek(fd, 0, SEEK_SET) == 0 ? -read_all(fd, SIZE_MAX / 4, &old, &old_len) : -errno;
    if (rc == 0 && (rc = replace_content(fd, now, now_len)) != 0 &&
        replace_content(fd, (const char *)old, old_len) != 0)
        memprof_cli_error("%s is damaged: rewriting it failed, and so did restoring it", path);
    free(now);
    free(old);
    if (rc != 0) {
        memprof_cli_error("cannot write %s: %s", path, strerror(-rc));
        return -1;
    }
    return 0;
}

int memprof_cli_export(const struct memprof_profile *p, memprof_format f, FILE *out, unsigned top,
                       enum memprof_view view, bool objects, bool addresses)
{
    switch (f) {
    case MEMPROF_FORMAT_PPROF:
        return memprof__export_pprof(p, out); /* every view: sample types, labels */
    case MEMPROF_FORMAT_SPEEDSCOPE:
        return memprof__export_speedscope(p, out, view);
    case MEMPROF_FORMAT_COLLAPSED:
        return memprof__export_collapsed(p, out, view, objects, addresses);
    case MEMPROF_FORMAT_HTML:
        return memprof__export_html(p, out, view);
    case MEMPROF_FORMAT_TEXT:
    case MEMPROF_FORMAT_AUTO:
    default:
        return memprof__export_text(p, out, view, top);
    }
}
