/* SPDX-License-Identifier: MIT */
/*
 * Threads of its own, at the wrong moment: the kernel lets only a single-threaded process
 * enter a user namespace (unshare(CLONE_NEWUSER), setns() to one), and only a process whose
 * threads share no filesystem information join a mount namespace (setns()). unshare(1),
 * bubblewrap and other sandboxes do this from a single-threaded program; under
 * MEMPROF_INTERVAL the plugin's profile-writing thread made every such call fail with
 * EINVAL. argv: BACKEND DIR (prog.h); the run has MEMPROF_INTERVAL=1 and
 * MEMPROF_OUTPUT=DIR/profile.txt, so under the plugin a writer runs.
 *
 *   probe    a forked child (single-threaded whatever the profiler does) enters a new user
 *            and mount namespace and maps its user and group as `unshare -r` does; where
 *            the kernel or a sandbox refuses any of it, the test is skipped (77).
 *   setns    such a child waits; the program joins its user namespace, then its mount
 *            namespace, with setns(): both must succeed.
 *   unshare  the program enters a new user namespace of its own with unshare() (as
 *            unshare(1) does), which must succeed, and maps itself.
 * After each, the program allocates until the periodic profile has been rewritten (its
 * inode changes), so the writer runs again and can write where the program can. The
 * program's own allocations are unaffected throughout. A watchdog turns a hang into a
 * failure; nothing is timed.
 */
#include "prog.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WATCHDOG_S 60

static const char *dir;

static void on_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: still running after 60 s\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(1);
}

static bool write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    return close(fd) == 0 && ok;
}

/* Maps the caller's user and group to themselves in the user namespace it just entered (as
 * `unshare -r` maps them to root), so that it can create files there. */
static bool map_self(uid_t uid, gid_t gid)
{
    char line[64];
    snprintf(line, sizeof line, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
    if (!write_file("/proc/self/uid_map", line))
        return false;
    if (!write_file("/proc/self/setgroups", "deny\n"))
        return false;
    snprintf(line, sizeof line, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
    return write_file("/proc/self/gid_map", line);
}

/* A child in new user and mount namespaces, mapped; it writes one byte to `ready` once
 * there (or exits 1) and then waits for `go` to close. */
static pid_t namespaced_child(int *ready_fd, int *go_fd)
{
    int ready[2], go[2];
    CHECK(pipe2(ready, O_CLOEXEC) == 0 && pipe2(go, O_CLOEXEC) == 0, "pipe");
    uid_t uid = getuid();
    gid_t gid = getgid();
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(ready[0]);
        close(go[1]);
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0 || !map_self(uid, gid))
            _exit(1);
        (void)!write(ready[1], "x", 1);
        char c;
        (void)!read(go[0], &c, 1);
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    *ready_fd = ready[0];
    *go_fd = go[1];
    return pid;
}

static ino_t profile_inode(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* Allocates until the periodic profile has been replaced (under the plugin; by a writer
 * that ran after the call, since the call returns only once the one before it has ended);
 * in the other runs a round of allocations. */
static void profiles_go_on(const char *after)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/profile.txt", dir);
    int changes = 0;
    ino_t last = profile_inode(path);
    for (unsigned i = 0; changes < 1; i++) {
        void *p = malloc(64 + i % 4096);
        CHECK(p != NULL, "malloc after %s", after);
        prog_touch(p, 1);
        free(p);
        if (prog_backend != PROG_PRELOAD && i == 100000)
            break;
        if (i % 1000 == 0) {
            struct timespec tick = {0, 1000 * 1000};
            nanosleep(&tick, NULL);
            ino_t now = profile_inode(path);
            if (now && now != last) {
                changes++;
                last = now;
            }
        }
    }
    printf("%s: %s\n", after,
           prog_backend == PROG_PRELOAD ? "the periodic profile was written again since"
                                        : "allocations go on");
}

int main(int argc, char **argv)
{
    CHECK(argc >= 3, "usage: %s BACKEND DIR", argv[0]);
    signal(SIGALRM, on_watchdog);
    alarm(WATCHDOG_S);
    dir = argv[2];
    mkdir(dir, 0700);
    prog_setup(argv[1]);

    /* probe */
    int ready, go;
    pid_t probe = namespaced_child(&ready, &go);
    char c;
    bool there = read(ready, &c, 1) == 1;
    close(go);
    close(ready);
    int status;
    CHECK(waitpid(probe, &status, 0) == probe, "waitpid");
    if (!there) {
        printf("SKIP: this system does not let a process enter and map a new user and mount "
               "namespace\n");
        return 77;
    }
    profiles_go_on("start");

    /* setns */
    pid_t other = namespaced_child(&ready, &go);
    CHECK(read(ready, &c, 1) == 1, "the namespaced child did not get there");
    char ns[64];
    snprintf(ns, sizeof ns, "/proc/%d/ns/user", (int)other);
    int userns = open(ns, O_RDONLY | O_CLOEXEC);
    snprintf(ns, sizeof ns, "/proc/%d/ns/mnt", (int)other);
    int mntns = open(ns, O_RDONLY | O_CLOEXEC);
    CHECK(userns >= 0 && mntns >= 0, "open %s: %s", ns, strerror(errno));
    char cwd[4096];
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    /* Every call is made and reported, then the run fails if any did. */
    int failed = 0;
    if (setns(userns, CLONE_NEWUSER) != 0) {
        fprintf(stderr, "FAIL: setns(CLONE_NEWUSER) of a single-threaded program: %s\n",
                strerror(errno));
        failed++;
    } else if (setns(mntns, CLONE_NEWNS) != 0) {
        fprintf(stderr, "FAIL: setns(CLONE_NEWNS) of a single-threaded program: %s\n",
                strerror(errno));
        failed++;
    } else {
        CHECK(chdir(cwd) == 0, "chdir back to %s", cwd); /* setns() went to its root */
    }
    close(userns);
    close(mntns);
    close(go);
    close(ready);
    CHECK(waitpid(other, &status, 0) == other && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the namespaced child failed");
    profiles_go_on("setns");

    /* unshare */
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER) != 0) {
        fprintf(stderr, "FAIL: unshare(CLONE_NEWUSER) of a single-threaded program: %s\n",
                strerror(errno));
        failed++;
    } else {
        CHECK(map_self(uid, gid), "mapping the user and group in the new namespace: %s",
              strerror(errno));
    }
    profiles_go_on("unshare");
    alarm(0);
    return failed != 0;
}
