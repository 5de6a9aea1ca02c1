/* SPDX-License-Identifier: MIT */
/*
 * Profile outputs that are not regular files. A profile is written atomically (a temporary
 * file renamed over the target) only when the target is a regular file, does not exist, or
 * is a symlink (which is replaced, never written through). Everything else is written in
 * place and must still be there afterwards: character devices, FIFOs, sockets, and the
 * names of a descriptor (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N, or a symlink
 * to one of these), which mean the stream itself: the profile goes to that descriptor, at
 * its offset. argv: BACKEND MEMPROF DIR (prog.h; MEMPROF is the command, DIR a directory of
 * this test's own). The run works in DIR/<pid>, emptied first and removed at the end:
 * instances run at once (meson test --repeat runs them in parallel) would otherwise empty
 * each other's directory and open each other's FIFOs (a FIFO "without a reader" had
 * another instance's reader).
 *
 *   api     (profiled runs) memprof_snapshot_write() to a FIFO with a reader (and without
 *           one: an error, at once), to a closed descriptor's name and a symlink to one (an
 *           error; the link stays), to /proc/self/fd/N, /dev/fd/N and a symlink to
 *           /proc/self/fd/N of a pipe, to symlinks to /dev/stdout and /dev/stderr in a child
 *           whose descriptor is a pipe, to /proc/self/fd/N of a regular file (the profile
 *           lands between what the program wrote before and after), to a listening Unix
 *           socket, and to a character device (mknod of /dev/null's numbers in DIR; as root).
 *   plugin  (preload runs) MEMPROF_OUTPUT naming a symlink to /dev/stdout or /dev/stderr: a
 *           child's exit-time profile arrives on its stdout or stderr pipe, and a child that
 *           closed that descriptor leaves the link alone; a FIFO with and without a reader
 *           (the child exits either way).
 *   cli     (plain runs) `memprof report -o` and `memprof run -o` to a symlink to
 *           /dev/stdout (the profile arrives on the pipe; with stdout closed, report fails
 *           and the link stays), to a FIFO with a reader, and to a
 *           character device (as root): each target is still what it was, and nothing else is
 *           left in DIR.
 * The real /dev/stdout and /dev/stderr are reached only through symlinks in DIR: a
 * regression would otherwise replace the machine's own. Parts that need root are skipped
 * (and say so) without it.
 */
#include "prog.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define HEADER "heap profile (sampling rate"

static const char *self, *memprof_cmd, *dir;
static memprof_snapshot *snap;
static int skipped_root;

static void in_dir(char *buf, size_t len, const char *name)
{
    CHECK(snprintf(buf, len, "%s/%s", dir, name) < (int)len, "path too long");
}

/* Empties DIR (creating it), so that what is left afterwards is what the test made. */
static void reset_dir(void)
{
    CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST, "mkdir(%s): %s", dir, strerror(errno));
    DIR *d = opendir(dir);
    CHECK(d != NULL, "opendir(%s)", dir);
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' || (e->d_name[1] && strcmp(e->d_name, "..")))
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
}

/* Fails if DIR holds a name other than those given (a temporary file left behind, a
 * FILE.<pid> profile not moved into place). */
static void only_in_dir(const char *const *names, size_t n)
{
    DIR *d = opendir(dir);
    CHECK(d != NULL, "opendir(%s)", dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        bool known = false;
        for (size_t i = 0; i < n; i++)
            known |= !strcmp(e->d_name, names[i]);
        CHECK(known, "%s/%s was left behind", dir, e->d_name);
    }
    closedir(d);
}

/* ---- readers ---------------------------------------------------------------------------- */

struct reader {
    int fd;
    char *buf;
    size_t len;
    pthread_t thread;
};

static void *read_all(void *arg)
{
    struct reader *r = arg;
    size_t cap = 0;
    for (;;) {
        if (r->len + 4096 > cap) {
            cap = cap ? cap * 2 : 65536;
            r->buf = realloc(r->buf, cap + 1);
            CHECK(r->buf != NULL, "realloc");
        }
        /* Wait until there is data or every writer has gone: a FIFO's read end returns EOF
         * at once while no writer has opened it yet, but poll() waits for one. */
        struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
        if (poll(&pfd, 1, -1) < 0) {
            CHECK(errno == EINTR, "poll: %s", strerror(errno));
            continue;
        }
        ssize_t n = read(r->fd, r->buf + r->len, cap - r->len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        CHECK(n >= 0, "read: %s", strerror(errno));
        if (n == 0)
            break;
        r->len += (size_t)n;
    }
    if (r->buf)
        r->buf[r->len] = 0;
    close(r->fd);
    return NULL;
}

static void reader_start(struct reader *r, int fd)
{
    memset(r, 0, sizeof *r);
    r->fd = fd;
    CHECK(pthread_create(&r->thread, NULL, read_all, r) == 0, "pthread_create");
}

/* Joins the reader and checks that it received a text profile (after `before`, if given). */
static void reader_expect(struct reader *r, const char *before, const char *what)
{
    pthread_join(r->thread, NULL);
    const char *text = r->buf ? r->buf : "";
    if (before)
        CHECK(strstr(text, before) != NULL, "%s: '%s' missing from what arrived: %.200s", what,
              before, text);
    CHECK(strstr(text, HEADER) != NULL, "%s: no text profile arrived (%zu bytes: %.200s)", what,
          r->len, text);
    free(r->buf);
}

/* A FIFO's read end, open before any writer comes (a writer that opens without blocking
 * needs a reader to exist); read_all() polls it. */
static int fifo_reader_fd(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    CHECK(fd >= 0, "open(%s): %s", path, strerror(errno));
    return fd;
}

/* ---- what must still be there ------------------------------------------------------------ */

static void expect_type(const char *path, mode_t type, const char *what)
{
    struct stat st;
    CHECK(lstat(path, &st) == 0, "%s: %s is gone: %s", what, path, strerror(errno));
    CHECK((st.st_mode & S_IFMT) == type, "%s: %s was replaced (mode %o)", what, path,
          (unsigned)st.st_mode);
}

static void expect_link(const char *path, const char *target, const char *what)
{
    char buf[4096];
    expect_type(path, S_IFLNK, what);
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    CHECK(n > 0, "readlink(%s)", path);
    buf[n] = 0;
    CHECK(!strcmp(buf, target), "%s: %s now points to %s", what, path, buf);
}

/* mknod of /dev/null's device numbers in DIR: a character device of the test's own. */
static bool make_null_device(const char *path)
{
    if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) == 0)
        return true;
    CHECK(errno == EPERM || errno == EACCES, "mknod(%s): %s", path, strerror(errno));
    skipped_root++;
    return false;
}

/* ---- running processes ------------------------------------------------------------------- */

/* Runs argv with `env` (NAME=VALUE entries added to the environment, NULL-terminated) and
 * stdout/stderr redirected to the given descriptors (-1: inherited); returns the exit
 * status (or 128 + signal). */
static int run(char *const argv[], const char *const env[], int out_fd, int err_fd)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        for (size_t i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        if (out_fd >= 0)
            dup2(out_fd, STDOUT_FILENO);
        if (err_fd >= 0)
            dup2(err_fd, STDERR_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Runs argv with its stdout (or stderr) on a pipe; returns what arrived there. */
static char *run_capture(char *const argv[], const char *const env[], bool capture_stderr,
                         int *status)
{
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
    struct reader r;
    reader_start(&r, p[0]);
    *status = run(argv, env, capture_stderr ? -1 : p[1], capture_stderr ? p[1] : -1);
    close(p[1]);
    pthread_join(r.thread, NULL);
    return r.buf ? r.buf : strdup("");
}

/* ---- api ----------------------------------------------------------------------------------- */

static void api_write(const char *path, int want, const char *what)
{
    int rc = memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT);
    CHECK(want ? rc != 0 : rc == 0, "%s: memprof_snapshot_write(%s): %s", what, path,
          rc ? memprof_strerror(rc) : "succeeded");
}

static void api_phase(void)
{
    char path[4096], link[4096];
    reset_dir();
    CHECK(memprof_get_snapshot(&snap) == 0, "memprof_get_snapshot");

    /* A FIFO with a reader gets the profile; one without fails at once and stays. */
    in_dir(path, sizeof path, "fifo");
    CHECK(mkfifo(path, 0600) == 0, "mkfifo");
    struct reader r;
    reader_start(&r, fifo_reader_fd(path));
    api_write(path, 0, "FIFO with a reader");
    reader_expect(&r, NULL, "FIFO with a reader");
    expect_type(path, S_IFIFO, "FIFO with a reader");
    api_write(path, 1, "FIFO without a reader");
    expect_type(path, S_IFIFO, "FIFO without a reader");

    /* A closed descriptor's names: the write fails, and a symlink to one is not a dangling
     * link to replace (that would replace /dev/stderr itself when the program has closed its
     * stderr). */
    int closed_fd = 1000;
    while (fcntl(closed_fd, F_GETFD) >= 0)
        closed_fd++;
    char closed_name[64];
    snprintf(closed_name, sizeof closed_name, "/proc/self/fd/%d", closed_fd);
    api_write(closed_name, 1, "a closed descriptor by /proc/self/fd/N");
    in_dir(link, sizeof link, "link-closed");
    CHECK(symlink(closed_name, link) == 0, "symlink");
    api_write(link, 1, "a symlink to a closed descriptor's name");
    expect_link(link, closed_name, "a symlink to a closed descriptor's name");
    unlink(link);

    /* A pipe's descriptor by its names. */
    for (int i = 0; i < 3; i++) {
        int p[2];
        CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
        char target[64];
        snprintf(target, sizeof target, "%s/%d", i == 1 ? "/dev/fd" : "/proc/self/fd", p[1]);
        if (i == 2) {
            in_dir(link, sizeof link, "link-fd");
            CHECK(symlink(target, link) == 0, "symlink");
        }
        reader_start(&r, p[0]);
        api_write(i == 2 ? link : target, 0, target);
        close(p[1]);
        reader_expect(&r, NULL, target);
        if (i == 2) {
            expect_link(link, target, "symlink to /proc/self/fd/N");
            unlink(link);
        }
    }

    /* Symlinks to /dev/stdout and /dev/stderr, in a child whose descriptor is a pipe. */
    for (int fd = 1; fd <= 2; fd++) {
        const char *target = fd == 1 ? "/dev/stdout" : "/dev/stderr";
        in_dir(link, sizeof link, fd == 1 ? "link-stdout" : "link-stderr");
        CHECK(symlink(target, link) == 0, "symlink");
        int p[2];
        CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
        reader_start(&r, p[0]);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0) {
            dup2(p[1], fd);
            (void)!write(fd, "before\n", 7);
            int rc = memprof_snapshot_write(snap, link, MEMPROF_FORMAT_TEXT);
            _exit(rc == 0 ? 0 : 1);
        }
        close(p[1]);
        int status;
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
              "writing to a symlink to %s failed", target);
        reader_expect(&r, "before\n", target);
        expect_link(link, target, target);
        unlink(link);
    }

    /* A regular file's descriptor: the profile goes in at the descriptor's offset, between
     * what the program wrote before and after; the file is the same one. */
    in_dir(path, sizeof path, "regular");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "open(%s)", path);
    struct stat before, after;
    CHECK(fstat(fd, &before) == 0 && write(fd, "HEAD\n", 5) == 5, "write");
    char byfd[64];
    snprintf(byfd, sizeof byfd, "/proc/self/fd/%d", fd);
    api_write(byfd, 0, "a regular file's /proc/self/fd/N");
    CHECK(write(fd, "TAIL\n", 5) == 5, "write");
    close(fd);
    CHECK(stat(path, &after) == 0 && after.st_ino == before.st_ino,
          "the regular file behind /proc/self/fd/N was replaced");
    fd = open(path, O_RDONLY | O_CLOEXEC);
    reader_start(&r, fd);
    pthread_join(r.thread, NULL);
    CHECK(r.buf && !strncmp(r.buf, "HEAD\n", 5) && strstr(r.buf, HEADER) && r.len > 10 &&
              !strcmp(r.buf + r.len - 5, "TAIL\n"),
          "the file behind /proc/self/fd/N is not HEAD, the profile, TAIL: %.100s", r.buf);
    free(r.buf);
    unlink(path);

    /* A listening Unix socket. */
    in_dir(path, sizeof path, "socket");
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    CHECK(strlen(path) < sizeof sa.sun_path, "socket path too long");
    strcpy(sa.sun_path, path);
    CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(ls, 1) == 0,
          "socket: %s", strerror(errno));
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) { /* the writer, so that this thread can accept */
        int rc = memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT);
        if (rc)
            fprintf(stderr, "writing to a socket: %s\n", memprof_strerror(rc));
        _exit(rc == 0 ? 0 : 1);
    }
    /* A writer that cannot connect exits, and the accept would wait forever: poll. */
    int status = 0, cs = -1;
    for (;;) {
        struct timespec tick = {0, 10 * 1000 * 1000};
        CHECK(fcntl(ls, F_SETFL, O_NONBLOCK) == 0, "fcntl");
        cs = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (cs >= 0)
            break;
        CHECK(errno == EAGAIN || errno == EINTR, "accept: %s", strerror(errno));
        if (waitpid(pid, &status, WNOHANG) == pid) {
            CHECK(0, "the write to a listening Unix socket failed (exit status %d)",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        }
        nanosleep(&tick, NULL);
    }
    CHECK(fcntl(cs, F_SETFL, 0) == 0, "fcntl");
    reader_start(&r, cs);
    reader_expect(&r, NULL, "a Unix socket");
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
          "the write to a listening Unix socket failed");
    close(ls);
    expect_type(path, S_IFSOCK, "a Unix socket");
    unlink(path);

    /* A character device of the test's own (root only). */
    in_dir(path, sizeof path, "null");
    if (make_null_device(path)) {
        api_write(path, 0, "a character device");
        expect_type(path, S_IFCHR, "a character device");
        unlink(path);
    }
    only_in_dir((const char *const[]){"fifo"}, 1);
    memprof_free_snapshot(snap);
    printf("api: FIFO, pipe by /proc/self/fd/N, /dev/fd/N and a symlink, symlinks to "
           "/dev/stdout and /dev/stderr, a regular file's descriptor, a Unix socket%s\n",
           skipped_root ? "" : ", a character device");
}

/* ---- the plugin's exit-time profile ------------------------------------------------------ */

static void plugin_phase(void)
{
    char link[4096], fifo[4096], env_out[4200];
    reset_dir();
    char *argv[] = {(char *)self, "exit-child", NULL};
    for (int fd = 1; fd <= 2; fd++) {
        const char *target = fd == 1 ? "/dev/stdout" : "/dev/stderr";
        in_dir(link, sizeof link, "link");
        CHECK(symlink(target, link) == 0, "symlink");
        snprintf(env_out, sizeof env_out, "MEMPROF_OUTPUT=%s", link);
        const char *env[] = {env_out, "MEMPROF_FORMAT=text", NULL};
        int status;
        char *got = run_capture(argv, env, fd == 2, &status);
        CHECK(status == 0, "the child exited %d", status);
        CHECK(strstr(got, HEADER) != NULL,
              "MEMPROF_OUTPUT naming a symlink to %s: no profile on the child's %s: %.200s", target,
              fd == 1 ? "stdout" : "stderr", got);
        if (fd == 1)
            CHECK(strstr(got, "exit-child stdout\n") != NULL, "the child's own output is gone");
        free(got);
        expect_link(link, target, target);

        /* The same when the child has closed that descriptor before exit: the profile
         * cannot be written, and the link stays. */
        char *closing[] = {(char *)self, fd == 1 ? "exit-child-close-1" : "exit-child-close-2",
                           NULL};
        CHECK(run(closing, env, -1, -1) == 0, "the child did not exit 0");
        expect_link(link, target, "MEMPROF_OUTPUT naming a symlink to a closed descriptor");
        unlink(link);
    }

    in_dir(fifo, sizeof fifo, "fifo");
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    snprintf(env_out, sizeof env_out, "MEMPROF_OUTPUT=%s", fifo);
    const char *env[] = {env_out, "MEMPROF_FORMAT=text", "MEMPROF_QUIET=1", NULL};
    struct reader r;
    reader_start(&r, fifo_reader_fd(fifo));
    CHECK(run(argv, env, -1, -1) == 0, "the child did not exit 0 (FIFO with a reader)");
    reader_expect(&r, NULL, "MEMPROF_OUTPUT naming a FIFO with a reader");
    /* Without a reader the write fails (counted) and the child still exits at once. */
    CHECK(run(argv, env, -1, -1) == 0, "the child did not exit 0 (FIFO without a reader)");
    expect_type(fifo, S_IFIFO, "MEMPROF_OUTPUT naming a FIFO");
    only_in_dir((const char *const[]){"fifo"}, 1);
    printf("plugin: MEMPROF_OUTPUT naming symlinks to /dev/stdout and /dev/stderr, a FIFO with "
           "and without a reader\n");
}

/* ---- the command ------------------------------------------------------------------------- */

static void cli_phase(void)
{
    char profile[4096], link[4096], fifo[4096], null[4096];
    reset_dir();
    in_dir(profile, sizeof profile, "p.pb.gz");
    char *mk[] = {(char *)memprof_cmd, "run",        "-q", "-o", profile, "--",
                  (char *)self,        "exit-child", NULL};
    CHECK(run(mk, NULL, -1, -1) == 0, "memprof run -o %s failed", profile);

    /* report and run to a symlink to /dev/stdout: the profile arrives on the pipe. */
    in_dir(link, sizeof link, "link");
    CHECK(symlink("/dev/stdout", link) == 0, "symlink");
    char *report[] = {(char *)memprof_cmd, "report", "-o", link, profile, NULL};
    int status;
    char *got = run_capture(report, NULL, false, &status);
    CHECK(status == 0 && strstr(got, HEADER),
          "memprof report -o (symlink to /dev/stdout): "
          "exit %d, stdout %.200s",
          status, got);
    free(got);
    expect_link(link, "/dev/stdout", "memprof report -o");
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    fflush(NULL);
    pid_t pid = fork(); /* the command with its stdout closed */
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        close(STDOUT_FILENO);
        dup2(devnull, STDERR_FILENO); /* its message about the failure */
        execv(report[0], report);
        _exit(127);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 1,
          "memprof report -o (symlink to a closed stdout) did not fail");
    close(devnull);
    expect_link(link, "/dev/stdout", "memprof report -o, stdout closed");
    char *runo[] = {(char *)memprof_cmd, "run",        "-q", "-f", "text", "-o", link, "--",
                    (char *)self,        "exit-child", NULL};
    got = run_capture(runo, NULL, false, &status);
    CHECK(status == 0 && strstr(got, HEADER) && strstr(got, "exit-child stdout\n"),
          "memprof run -o (symlink to /dev/stdout): exit %d, stdout %.200s", status, got);
    free(got);
    expect_link(link, "/dev/stdout", "memprof run -o");

    /* report to a FIFO with a reader. */
    in_dir(fifo, sizeof fifo, "fifo");
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    struct reader r;
    reader_start(&r, fifo_reader_fd(fifo));
    char *rfifo[] = {(char *)memprof_cmd, "report", "-o", fifo, profile, NULL};
    CHECK(run(rfifo, NULL, -1, -1) == 0, "memprof report -o FIFO failed");
    reader_expect(&r, NULL, "memprof report -o FIFO");
    expect_type(fifo, S_IFIFO, "memprof report -o FIFO");

    /* report and run to a character device (root only). */
    in_dir(null, sizeof null, "null");
    bool dev = make_null_device(null);
    if (dev) {
        char *rnull[] = {(char *)memprof_cmd, "report", "-o", null, profile, NULL};
        CHECK(run(rnull, NULL, -1, -1) == 0, "memprof report -o DEVICE failed");
        expect_type(null, S_IFCHR, "memprof report -o DEVICE");
        char *runnull[] = {(char *)memprof_cmd, "run",        "-q", "-o", null, "--",
                           (char *)self,        "exit-child", NULL};
        CHECK(run(runnull, NULL, -1, -1) == 0, "memprof run -o DEVICE failed");
        expect_type(null, S_IFCHR, "memprof run -o DEVICE");
    }
    const char *const left[] = {"p.pb.gz", "link", "fifo", "null"};
    only_in_dir(left, dev ? 4 : 3);
    printf("cli: report -o and run -o to a symlink to /dev/stdout, report -o to a FIFO%s\n",
           dev ? ", report -o and run -o to a character device" : "");
}

/* "exit-child": allocates, prints a line and exits, leaving its profile to the plugin;
 * "exit-child-close-N" closes descriptor N first. */
static int exit_child(const char *mode)
{
    for (int i = 0; i < 64; i++)
        prog_touch(malloc(1000 + (size_t)i), 1); /* left live for the profile */
    printf("exit-child stdout\n");
    fflush(stdout);
    if (!strncmp(mode, "exit-child-close-", 17))
        close(atoi(mode + 17));
    return 0;
}

int main(int argc, char **argv)
{
    self = argv[0];
    if (argc > 1 && !strncmp(argv[1], "exit-child", 10))
        return exit_child(argv[1]);
    CHECK(argc >= 4, "usage: %s BACKEND MEMPROF DIR", argv[0]);
    memprof_cmd = argv[2];
    CHECK(mkdir(argv[3], 0700) == 0 || errno == EEXIST, "mkdir(%s): %s", argv[3], strerror(errno));
    static char own[4096];
    CHECK(snprintf(own, sizeof own, "%s/%d", argv[3], (int)getpid()) < (int)sizeof own,
          "path too long");
    dir = own;
    signal(SIGPIPE, SIG_IGN);
    alarm(60);
    prog_setup(argv[1]);
    if (prog_profiled())
        api_phase();
    if (prog_backend == PROG_PRELOAD)
        plugin_phase();
    if (prog_backend == PROG_PLAIN)
        cli_phase();
    if (skipped_root)
        printf("the character-device checks were skipped: they need root (mknod)\n");
    reset_dir();
    CHECK(rmdir(dir) == 0, "rmdir(%s): %s", dir, strerror(errno));
    return 0;
}
