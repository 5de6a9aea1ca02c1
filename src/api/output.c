/* SPDX-License-Identifier: MIT */
/*
 * Writing an output file (output.h): regular files and new paths atomically through a
 * temporary file and rename(), everything else in place. Shared by the library (profiles
 * from memprof_snapshot_write() and the plugin) and the command's -o.
 *
 * Why not always rename: renaming over a device, FIFO or socket destroys it (for root, also
 * /dev/null itself), and /dev/stdout, /dev/stderr and /proc/self/fd/N are symlinks (magic
 * ones in /proc) whose meaning is "this descriptor": replacing the link writes a file into
 * /dev instead of to the stream the user pointed at. Why not follow every symlink: a link
 * planted at PATH must not make the profiler write through it (to a file of the attacker's
 * choosing); so a symlink is followed only as far as a descriptor name, and any other is
 * replaced.
 */
#define _GNU_SOURCE
#include "config.h"

#include "api/output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/write_signals.h"

/* How a target is written. */
enum target {
    TARGET_REPLACE,    /* temporary file + rename */
    TARGET_DESCRIPTOR, /* one of the process's descriptors */
    TARGET_IN_PLACE,   /* device, FIFO or socket: opened (connected) where it is */
    TARGET_DIRECTORY,  /* refused */
};

/* Whether `name` is a descriptor number; stores it in *n. */
static bool parse_fd(const char *name, int *n)
{
    long v = 0;
    if (!*name)
        return false;
    for (const char *s = name; *s; s++) {
        if (*s < '0' || *s > '9' || v > INT_MAX / 10)
            return false;
        v = v * 10 + (*s - '0');
    }
    if (v > INT_MAX)
        return false;
    *n = (int)v;
    return true;
}

/* Whether the symlink `link` is a descriptor of this process by name: its directory
 * resolves to /proc/<our pid>/fd or /proc/<our pid>/task/<tid>/fd (reached as /proc/self/fd,
 * /proc/thread-self/fd or /dev/fd). Stores the descriptor in *n. */
static bool descriptor_link(const char *link, int *n)
{
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(link, '/');
    if (!slash || !parse_fd(slash + 1, n))
        return false;
    size_t len = (size_t)(slash - link);
    if (len == 0 || len >= sizeof dir)
        return false;
    memcpy(dir, link, len);
    dir[len] = 0;
    if (!realpath(dir, real))
        return false;
    char self[32];
    int k = snprintf(self, sizeof self, "/proc/%d/", (int)getpid());
    if (strncmp(real, self, (size_t)k) != 0)
        return false;
    const char *rest = real + k;
    if (!strcmp(rest, "fd"))
        return true;
    if (strncmp(rest, "task/", 5) != 0)
        return false;
    const char *tid_end = strchr(rest + 5, '/');
    return tid_end && tid_end > rest + 5 && !strcmp(tid_end, "/fd");
}

/* Classifies `path` (output.h). A chain of symlinks is followed only to learn whether it
 * ends in a descriptor name; the final object's type is in *st for TARGET_IN_PLACE. */
static enum target classify(const char *path, int *fd, struct stat *st)
{
    char cur[PATH_MAX], next[PATH_MAX], text[PATH_MAX];
    if (strlen(path) >= sizeof cur)
        return TARGET_REPLACE; /* the open fails with ENAMETOOLONG as it should */
    strcpy(cur, path);
    for (int hops = 0; hops < 40; hops++) {
        /* A descriptor's name whether or not the descriptor is open: a closed one (a
         * program that closed its stderr, MEMPROF_OUTPUT=/dev/stderr) fails with EBADF. It
         * is not a dangling link to replace: that would replace /dev/stderr itself. */
        if (descriptor_link(cur, fd))
            return TARGET_DESCRIPTOR;
        if (lstat(cur, st) != 0)
            return TARGET_REPLACE; /* a new file, or a dangling link to be replaced */
        if (!S_ISLNK(st->st_mode)) {
            if (hops > 0 || S_ISREG(st->st_mode))
                return TARGET_REPLACE; /* a symlink to anything else is replaced */
            return S_ISDIR(st->st_mode) ? TARGET_DIRECTORY : TARGET_IN_PLACE;
        }
        ssize_t n = readlink(cur, text, sizeof text - 1);
        if (n <= 0)
            return TARGET_REPLACE;
        text[n] = 0;
        const char *slash = strrchr(cur, '/');
        int w;
        if (text[0] == '/' || !slash)
            w = snprintf(next, sizeof next, "%s", text);
        else
            w = snprintf(next, sizeof next, "%.*s/%s", (int)(slash - cur), cur, text);
        if (w < 0 || (size_t)w >= sizeof next)
            return TARGET_REPLACE;
        memcpy(cur, next, (size_t)w + 1);
    }
    return TARGET_REPLACE; /* a loop: rename() replaces the link */
}

bool memprof__output_in_place(const char *path)
{
    int fd;
    struct stat st;
    enum target t = classify(path, &fd, &st);
    return t == TARGET_DESCRIPTOR || t == TARGET_IN_PLACE;
}

/* The stream a profile is written through. Not fdopen()'s: every FILE is on stdio's list
 * of streams, which any thread's fflush(NULL) flushes, and exit() too, on that thread and
 * in its descriptor table: the buffered part of a profile would go to whatever descriptor
 * `fd` is there (the plugin's profile-writing thread has a table of its own, where the
 * number means something else to the program: its stdin, a data file of its), and in a
 * fork() child, whose copy of the stream is flushed when it exits, into the parent's file.
 * So the stream is fopencookie()'s, whose write writes only on the thread that opened it,
 * in its process. Another thread's flush keeps the bytes for the owner's next write (in
 * room set aside: that thread may be one that must not allocate, such as exit() in a
 * signal handler), and a fork() child's is dropped: the profile is its parent's. */
#define STREAM_BUF 8192

struct stream {
    int fd;
    pid_t pid;
    pthread_t owner;
    bool lost; /* another thread's flush did not fit in `pending`: the profile is incomplete */
    size_t npending;
    char pending[2 * STREAM_BUF];
    char buf[STREAM_BUF]; /* the FILE's buffer: no flush of it is larger */
};

static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static ssize_t stream_write(void *cookie, const char *p, size_t n)
{
    struct stream *s = cookie;
    if (s->pid != getpid())
        return (ssize_t)n; /* a fork() child's exit: its parent writes this profile */
    if (!pthread_equal(s->owner, pthread_self())) {
        if (n > sizeof s->pending - s->npending) {
            s->lost = true;
            return (ssize_t)n;
        }
        memcpy(s->pending + s->npending, p, n);
        s->npending += n;
        return (ssize_t)n;
    }
    if (s->npending) {
        if (!write_all(s->fd, s->pending, s->npending))
            return 0;
        s->npending = 0;
    }
    return write_all(s->fd, p, n) ? (ssize_t)n : 0;
}

static int stream_close(void *cookie)
{
    struct stream *s = cookie;
    bool ok = !s->lost && (!s->npending || write_all(s->fd, s->pending, s->npending));
    int e = s->lost ? EIO : errno;
    int rc = close(s->fd); /* `s` is freed after fclose(), which may still use its buffer */
    if (!ok) {
        errno = e;
        return -1;
    }
    return rc;
}

/* Writes what `fill` produces to `fd` and closes it; 0 or a negative errno. */
static int fill_fd(int fd, int (*fill)(FILE *out, void *ctx), void *ctx)
{
    struct stream *s = malloc(sizeof *s);
    FILE *f = NULL;
    if (s) {
        s->fd = fd;
        s->pid = getpid();
        s->owner = pthread_self();
        s->lost = false;
        s->npending = 0;
        f = fopencookie(s, "w",
                        (cookie_io_functions_t){.write = stream_write, .close = stream_close});
    }
    if (!f || setvbuf(f, s->buf, _IOFBF, sizeof s->buf) != 0) {
        int e = errno ? errno : ENOMEM;
        if (f)
            fclose(f); /* closes fd */
        else
            close(fd);
        free(s);
        return -e;
    }
    errno = 0;
    int rc = fill(f, ctx);
    if (fflush(f) != 0 && rc == 0)
        rc = -(errno ? errno : EIO);
    if (ferror(f) && rc == 0)
        rc = -EIO;
    if (fclose(f) != 0 && rc == 0)
        rc = -(errno ? errno : EIO);
    free(s);
    return rc;
}

/* Connects to the Unix stream socket at `path`. */
static int connect_socket(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno == ECONNREFUSED ? ENXIO : errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* Opens the device or FIFO `path` where it is, as the type lstat() saw (*st). Opened
 * without blocking (a FIFO without a reader then fails with ENXIO, a serial line does not
 * wait for its carrier), then made blocking for the writes. */
static int open_in_place(const char *path, const struct stat *st, bool wait_fifo)
{
    if (S_ISSOCK(st->st_mode))
        return connect_socket(path);
    int flags = O_WRONLY | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC;
    if (!(S_ISFIFO(st->st_mode) && wait_fifo))
        flags |= O_NONBLOCK;
    int fd = open(path, flags);
    if (fd < 0)
        return -errno;
    struct stat now;
    /* The path may have changed since lstat(): never write to anything but what was seen. */
    if (fstat(fd, &now) != 0 || (now.st_mode & S_IFMT) != (st->st_mode & S_IFMT) ||
        now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
        close(fd);
        return -EINVAL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK))
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* Writes through PATH.tmp.XXXXXX and rename(). mkostemp creates it with O_EXCL and mode
 * 0600, so a name or symlink planted there is never opened, and close-on-exec, so a program
 * that starts another one meanwhile does not hand it the profile's descriptor. */
static int write_replacing(const char *path, int (*fill)(FILE *out, void *ctx), void *ctx)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + sizeof ".tmp.XXXXXX");
    if (!tmp)
        return -ENOMEM;
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    int rc;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
    } else {
        rc = fill_fd(fd, fill, ctx);
        if (rc == 0 && rename(tmp, path) != 0)
            rc = -errno;
        if (rc != 0)
            unlink(tmp);
    }
    free(tmp);
    return rc;
}

int memprof__output_write(const char *path, int (*fill)(FILE *out, void *ctx), void *ctx,
                          const struct memprof_output *how)
{
    static const struct memprof_output dflt;
    if (!how)
        how = &dflt;
    if (!path || !*path)
        return -EINVAL;
    struct memprof_write_signals held;
    memprof__write_signals_hold(&held);
    int n = -1, rc;
    struct stat st;
    switch (classify(path, &n, &st)) {
    case TARGET_DIRECTORY:
        rc = -EISDIR;
        break;
    case TARGET_DESCRIPTOR:
        rc = how->process_fd ? how->process_fd(n) : fcntl(n, F_DUPFD_CLOEXEC, 0);
        if (rc < 0 && !how->process_fd)
            rc = -errno;
        if (rc >= 0)
            rc = fill_fd(rc, fill, ctx);
        break;
    case TARGET_IN_PLACE:
        rc = open_in_place(path, &st, how->wait_for_fifo_reader);
        if (rc >= 0)
            rc = fill_fd(rc, fill, ctx);
        break;
    case TARGET_REPLACE:
    default:
        rc = write_replacing(path, fill, ctx);
        break;
    }
    memprof__write_signals_release(&held);
    return rc;
}
