/* SPDX-License-Identifier: MIT */
/*
 * The profiler must never hold, take or write a file descriptor the program can observe.
 * argv: BACKEND DIR (prog.h; DIR a directory of this test's own). Under the plugin the run
 * has MEMPROF_INTERVAL=1 and MEMPROF_OUTPUT=DIR/profile.txt, so the profile is rewritten
 * every second while the program works with its descriptors:
 *
 *   lowest   the close(0); open() idiom, which relies on open() returning the lowest free
 *            descriptor: over three periodic profiles (found by the file's inode changing),
 *            each open() must return 0, and the data file must hold only the program's own
 *            lines (a profiler that wrote its temporary file on descriptor 0 when the
 *            program closed it would write into the program's file instead). Every 100
 *            rounds the program runs a child (exec of this program) that lists the
 *            descriptors it inherited: none but the program's own. Afterwards the program
 *            has exactly the descriptors it had at the start (the symbolizer's object and
 *            debug files are not kept among them).
 *   stderr   a child that closes stderr and opens its data file, which gets descriptor 2,
 *            then has a profile fail to be written (MEMPROF_OUTPUT in a missing
 *            directory, written on MEMPROF_SIGNAL and at exit): the plugin's message about
 *            the failure must not land in the data file, since descriptor 2 is no longer
 *            the stderr the program started with. The same child with its stderr intact
 *            gets the message there.
 *   tmpfile  (profiled runs, in a child without MEMPROF_INTERVAL, so that its stacks are
 *            resolved first by its own write) memprof_snapshot_write() to a regular file is
 *            written through DIR/tmpfile.txt.tmp.XXXXXX; a frame source of the program's,
 *            whose callbacks run while the profile is written, finds that temporary file
 *            among its descriptors and it must be close-on-exec: a program that starts
 *            another one meanwhile (another thread's fork and exec) does not hand it over.
 *            Also under the GOT start, where the write is the program's own call.
 * In a plain run the same steps run without a profiler (a fixed number of rounds). A
 * watchdog turns a hang into a failure; nothing is timed.
 */
#include "children.h"

#include <dirent.h>
#include <memprof/runtime.h>
#include <stdbool.h>

#define MAX_FDS 256

static const char *self, *dir;

/* The descriptors open now (not counting the one used to list them). */
static int list_fds(int *fds, int max)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL, "opendir(/proc/self/fd)");
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d) && n < max)
            fds[n++] = atoi(e->d_name);
    closedir(d);
    return n;
}

static bool has_fd(const int *fds, int n, int fd)
{
    for (int i = 0; i < n; i++)
        if (fds[i] == fd)
            return true;
    return false;
}

static void in_dir(char *buf, size_t len, const char *name)
{
    CHECK(snprintf(buf, len, "%s/%s", dir, name) < (int)len, "path too long");
}

/* "list-fds" mode: prints this process's descriptors. */
static int list_fds_mode(void)
{
    int fds[MAX_FDS];
    int n = list_fds(fds, MAX_FDS);
    for (int i = 0; i < n; i++)
        printf("%d ", fds[i]);
    printf("\n");
    return 0;
}

static void list_fds_child_setup(void *arg)
{
    (void)arg;
    unsetenv("MEMPROF_OUTPUT"); /* its own exit-time profile would replace ours */
}

/* Runs "list-fds" with stdout on a pipe and checks that it inherited only descriptors the
 * program had at the start without close-on-exec, its stdin (the data file is
 * close-on-exec) and the pipe. */
static void check_exec_child(const int *start, int nstart)
{
    char buf[4096];
    char *argv[] = {(char *)self, "list-fds", NULL};
    int status =
        children_run_capture(argv, STDOUT_FILENO, list_fds_child_setup, NULL, buf, sizeof buf);
    CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "the list-fds child failed");
    for (char *s = buf, *end; *s && *s != '\n'; s = end) {
        int fd = (int)strtol(s, &end, 10);
        CHECK(end != s, "bad list-fds output '%s'", buf);
        CHECK(fd <= 2 || has_fd(start, nstart, fd),
              "a child started meanwhile inherited descriptor %d, which is not the program's "
              "(its list: %s)",
              fd, buf);
        while (*end == ' ')
            end++;
    }
}

static ino_t profile_inode(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

static void lowest_phase(void)
{
    char data[4096], profile[4096];
    in_dir(data, sizeof data, "data.txt");
    in_dir(profile, sizeof profile, "profile.txt");
    const char *out = getenv("MEMPROF_OUTPUT");
    if (prog_backend == PROG_PRELOAD)
        CHECK(out && !strcmp(out, profile) && getenv("MEMPROF_INTERVAL"),
              "run with MEMPROF_OUTPUT=%s and MEMPROF_INTERVAL=1", profile);
    int start[MAX_FDS], nstart = list_fds(start, MAX_FDS);
    /* The descriptors a child may inherit: those without close-on-exec. */
    int inheritable[MAX_FDS], ninh = 0;
    for (int i = 0; i < nstart; i++)
        if (!(fcntl(start[i], F_GETFD) & FD_CLOEXEC))
            inheritable[ninh++] = start[i];
    int fd = open(data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "open(%s): %s", data, strerror(errno));
    close(fd);

    ino_t last = profile_inode(profile);
    int dumps = 0, rounds = 0;
    bool stdin_open = fcntl(0, F_GETFD) >= 0;
    while (prog_backend == PROG_PRELOAD ? dumps < 3 : rounds < 2000) {
        close(0);
        /* Descriptor 0 stays free most of the time, as in a program that works between
         * closing and opening, and the profile's writer has every chance to take it. */
        struct timespec pause = {0, 200 * 1000};
        nanosleep(&pause, NULL);
        for (int i = 0; i < 8; i++)
            prog_touch(malloc(64 + (size_t)i * 100), 1); /* live samples to write */
        fd = open(data, O_WRONLY | O_APPEND | O_CLOEXEC);
        CHECK(fd == 0, "round %d: open() returned %d, not the lowest free descriptor 0", rounds,
              fd);
        char line[64];
        int n = snprintf(line, sizeof line, "program line %d\n", rounds);
        CHECK(write(0, line, (size_t)n) == n, "write: %s", strerror(errno));
        if (++rounds % 100 == 0)
            check_exec_child(inheritable, ninh);
        ino_t now = profile_inode(profile);
        if (now && now != last) {
            dumps++;
            last = now;
        }
    }
    close(0);
    if (stdin_open)
        CHECK(open("/dev/null", O_RDONLY) == 0, "reopening stdin");

    /* Only the program's lines, in order. */
    FILE *f = fopen(data, "r");
    CHECK(f != NULL, "fopen(%s)", data);
    char line[4096];
    int expect = 0;
    while (fgets(line, sizeof line, f)) {
        char want[64];
        snprintf(want, sizeof want, "program line %d\n", expect);
        CHECK(!strcmp(line, want),
              "the data file holds a foreign line after %d of the "
              "program's: '%.100s'",
              expect, line);
        expect++;
    }
    fclose(f);
    CHECK(expect == rounds, "the data file holds %d of the program's %d lines", expect, rounds);

    /* The program has exactly the descriptors it started with. */
    int now[MAX_FDS], nnow = list_fds(now, MAX_FDS);
    for (int i = 0; i < nnow; i++) {
        char link[64], target[4096] = "";
        snprintf(link, sizeof link, "/proc/self/fd/%d", now[i]);
        ssize_t k = readlink(link, target, sizeof target - 1);
        target[k > 0 ? k : 0] = 0;
        CHECK(has_fd(start, nstart, now[i]),
              "descriptor %d (%s) is open that the program did not open", now[i], target);
    }
    CHECK(nnow == nstart, "the program has %d descriptors, not the %d it started with", nnow,
          nstart);
    printf("lowest: %d rounds of close(0); open() over %d periodic profiles, every open() got "
           "0, only the program's lines and descriptors\n",
           rounds, dumps);
}

/* "closed-stderr" mode: stderr closed, the data file opened as descriptor 2, then a failed
 * signalled profile (its message is the process's first) and a failed exit-time profile. */
static int closed_stderr_mode(const char *data, bool close_stderr)
{
    if (close_stderr) {
        close(STDERR_FILENO);
        int fd = open(data, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
        if (fd != STDERR_FILENO)
            return 3;
    }
    static const char mine[] = "program data\n";
    if (close_stderr && write(STDERR_FILENO, mine, sizeof mine - 1) != sizeof mine - 1)
        return 4;
    for (int i = 0; i < 32; i++)
        prog_touch(malloc(1000), 1);
    raise(SIGUSR2);
    /* Wait for the signalled profile to have failed (the plugin counts it). */
    for (;;) {
        memprof_stats s = prog_stats();
        if (s.write_failures >= 1)
            break;
        struct timespec tick = {0, 10 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    return 0; /* exit() writes (and fails) once more */
}

static void stderr_phase(void)
{
    char data[4096], bad[4200], errfile[4096];
    in_dir(data, sizeof data, "stderr-data.txt");
    in_dir(errfile, sizeof errfile, "stderr.txt");
    snprintf(bad, sizeof bad, "MEMPROF_OUTPUT=%s/no-such-dir/profile.txt", dir);
    for (int closed = 1; closed >= 0; closed--) {
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0) {
            int e = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(e, STDERR_FILENO);
            close(e);
            putenv(bad);
            putenv("MEMPROF_SIGNAL=USR2");
            putenv("MEMPROF_QUIET=0");
            unsetenv("MEMPROF_INTERVAL");
            execl(self, self, "preload", "closed-stderr", data, closed ? "closed" : "open",
                  (char *)NULL);
            _exit(127);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status),
              "the closed-stderr child did not exit");
        CHECK(WEXITSTATUS(status) == 0, "the closed-stderr child exited %d", WEXITSTATUS(status));
        char buf[4096] = "";
        FILE *f = fopen(closed ? data : errfile, "r");
        CHECK(f != NULL, "fopen");
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        if (closed)
            CHECK(!strcmp(buf, "program data\n"),
                  "the profiler wrote into the file the program opened as descriptor 2 after "
                  "closing stderr: '%.200s'",
                  buf);
        else
            CHECK(strstr(buf, "memprof: could not write") != NULL,
                  "with stderr intact the failure is reported there: '%.200s'", buf);
    }
    printf("stderr: no message in the data file on descriptor 2; the message on the original "
           "stderr\n");
}

/* What the frame source's callbacks saw of the profile's temporary file. */
static int tmp_seen, tmp_inheritable;
static char tmp_name[4200];

/* Called from the frame source's callbacks, that is while a profile is being written:
 * looks among the descriptors for the temporary file in DIR. */
static void look_for_tmpfile(void)
{
    int fds[MAX_FDS];
    int n = list_fds(fds, MAX_FDS);
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s/tmpfile.txt.tmp.", dir);
    for (int i = 0; i < n; i++) {
        char link[64], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fds[i]);
        ssize_t k = readlink(link, target, sizeof target - 1);
        if (k <= 0)
            continue;
        target[k] = 0;
        if (strncmp(target, prefix, strlen(prefix)) != 0)
            continue;
        tmp_seen++;
        if (!(fcntl(fds[i], F_GETFD) & FD_CLOEXEC)) {
            tmp_inheritable++;
            snprintf(tmp_name, sizeof tmp_name, "%s (descriptor %d)", target, fds[i]);
        }
    }
}

/* A frame source with one interpreter frame on every sample: the library calls back into
 * the program to resolve it, and to ask about the eval loop, while it writes. */
static unsigned one_frame(void *ctx, uint64_t *ids, unsigned max)
{
    (void)ctx;
    if (max == 0)
        return 0;
    ids[0] = 1;
    return 1;
}

static int resolve_frame(void *ctx, uint64_t id, memprof_runtime_frame *out)
{
    (void)ctx;
    (void)id;
    look_for_tmpfile();
    out->function = "interpreted";
    out->file = "script";
    out->line = 1;
    return 0;
}

static int is_eval_frame(void *ctx, const char *function, const char *module, uint64_t pc)
{
    (void)ctx;
    (void)function;
    (void)module;
    (void)pc;
    look_for_tmpfile();
    return 0;
}

/* "tmpfile" mode: samples with a frame of the program's source, then one profile written. */
static int tmpfile_mode(void)
{
    memprof_frame_source src = {.size = sizeof src,
                                .name = "descriptors-test",
                                .capture = one_frame,
                                .resolve = resolve_frame,
                                .is_eval_frame = is_eval_frame};
    int id = memprof_register_frame_source(&src);
    CHECK(id >= 0, "memprof_register_frame_source: %s", memprof_strerror(id));
    uint64_t rate = prog_rate() ? prog_rate() : PROG_DEFAULT_RATE;
    size_t block = rate * 4 > 64 ? (size_t)rate * 4 : 64; /* sampled with p = 1 - e^-4 */
    for (int i = 0; i < 16; i++)
        prog_touch(malloc(block), 1); /* left live for the profile */
    CHECK(prog_stats().live_samples > 0, "no sample was taken");
    char path[4200];
    in_dir(path, sizeof path, "tmpfile.txt");
    memprof_snapshot *snap = NULL;
    CHECK(memprof_get_snapshot(&snap) == 0, "memprof_get_snapshot");
    int rc = memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT);
    CHECK(rc == 0, "memprof_snapshot_write(%s): %s", path, memprof_strerror(rc));
    memprof_free_snapshot(snap);
    CHECK(tmp_seen > 0, "the frame source's callbacks never saw the temporary file of %s", path);
    CHECK(tmp_inheritable == 0,
          "the profile's temporary file %s is not close-on-exec: a program started meanwhile "
          "inherits it",
          tmp_name);
    unlink(path);
    return 0;
}

static void tmpfile_phase(const char *backend)
{
    char *argv[] = {(char *)self, (char *)backend, "tmpfile", (char *)dir, NULL};
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        unsetenv("MEMPROF_INTERVAL");
        unsetenv("MEMPROF_OUTPUT");
        execv(self, argv);
        _exit(127);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the tmpfile child failed (status %#x)", status);
    printf("tmpfile: the temporary file of a profile is close-on-exec while it is written\n");
}

int main(int argc, char **argv)
{
    self = argv[0];
    if (argc > 1 && !strcmp(argv[1], "list-fds"))
        return list_fds_mode();
    CHECK(argc >= 3, "usage: %s BACKEND DIR", argv[0]);
    if (!strcmp(argv[2], "tmpfile") && argc >= 4) {
        dir = argv[3];
        prog_setup(argv[1]);
        return tmpfile_mode();
    }
    if (!strcmp(argv[2], "closed-stderr") && argc >= 5) {
        prog_setup(argv[1]);
        return closed_stderr_mode(argv[3], !strcmp(argv[4], "closed"));
    }
    dir = argv[2];
    alarm(60);
    CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST, "mkdir(%s): %s", dir, strerror(errno));
    prog_setup(argv[1]);
    lowest_phase();
    if (prog_backend == PROG_PRELOAD)
        stderr_phase();
    if (prog_profiled())
        tmpfile_phase(argv[1]);
    return 0;
}
