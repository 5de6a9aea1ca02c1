/* SPDX-License-Identifier: MIT */
/*
 * New processes under the profiler. argv: BACKEND [ROUNDS] (prog.h); MEMPROF_OUTPUT must
 * name a text profile path with %p (its directory is created and emptied first). Phases:
 *
 *   fork     while 4 threads allocate and free (so the profiler's cold path is likely busy
 *            at fork time), fork ROUNDS children one after another; each child frees blocks
 *            it inherited, allocates from a new thread and from itself, forks a grandchild
 *            that does the same, and every one exits 0. Under the plugin each writes its
 *            own profile at exit (MEMPROF_OUTPUT's %p is its pid); under the GOT start each
 *            checks that it still samples and writes a snapshot through the API to the
 *            same path. The child checks its grandchild's file, the parent its child's.
 *   fork-dlopen  ROUNDS x 15 forks while another thread loads and unloads a library
 *            (cycle_lib.c, by bare name through RUNPATH $ORIGIN) in a loop: the children
 *            allocate and free, sampled from a call stack through libc's qsort, and exit 0.
 *            The profiler's cold path in a child must not wait for a lock the loader
 *            thread held at fork time. (A child that calls dlopen itself can deadlock in
 *            glibc 2.36 alone, so the children do not.)
 *   vfork    vfork + execv of this program ("exec-child" mode, which allocates and exits 0).
 *   spawn    posix_spawn of the same, with a file action.
 *   system   system() and popen() running the same through /bin/sh.
 * The exec'd children inherit the environment: under the plugin they are profiled too
 * (they check it) and write their own profiles, which the parent checks by pid; under the
 * GOT start they run unprofiled (they check that as well). alarm() turns a deadlock into a
 * failure.
 */
#include "prog.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

enum { CHURNERS = 4, INHERITED = 256 };

static const char *self;
static const char *out_template; /* MEMPROF_OUTPUT */
static void *inherited[INHERITED];
static atomic_int stop_churn;
static atomic_int churn_hot; /* the churners run flat out only around each fork */

void *hardening_process_alloc(size_t n);

__attribute__((noinline)) void *hardening_process_alloc(size_t n)
{
    void *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu) failed in pid %d", n, (int)getpid());
    prog_touch(p, 1);
    return p;
}

/* MEMPROF_OUTPUT with %p replaced by `pid`. */
static void profile_path(char *buf, size_t len, pid_t pid)
{
    const char *p = strstr(out_template, "%p");
    CHECK(p != NULL, "MEMPROF_OUTPUT (%s) has no %%p", out_template);
    snprintf(buf, len, "%.*s%d%s", (int)(p - out_template), out_template, (int)pid, p + 2);
}

/* The profile of process `pid` exists, is a non-empty text profile. */
static void expect_profile(pid_t pid, const char *who)
{
    char path[4096], head[64] = {0};
    profile_path(path, sizeof path, pid);
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0, "%s (pid %d) wrote no profile %s: %s", who, (int)pid, path, strerror(errno));
    ssize_t n = read(fd, head, sizeof head - 1);
    close(fd);
    CHECK(n > 0 && strstr(head, "heap profile"), "%s's profile %s is empty or not a profile", who,
          path);
}

static void *churn(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    while (!atomic_load_explicit(&stop_churn, memory_order_relaxed)) {
        if (!atomic_load_explicit(&churn_hot, memory_order_relaxed)) {
            /* Idle while a child runs: the children get the machine's (two) cores. */
            usleep(500);
            continue;
        }
        void *p = hardening_process_alloc(64 + i++ % 9000);
        free(p);
    }
    return NULL;
}

static void *child_thread(void *arg)
{
    (void)arg;
    void *keep[32] = {0};
    for (int i = 0; i < 5000; i++) {
        free(keep[i % 32]);
        keep[i % 32] = hardening_process_alloc(100 + (size_t)(i % 3000));
    }
    for (int i = 0; i < 32; i++)
        free(keep[i]);
    return NULL;
}

/* What a forked child or grandchild does: allocate from a thread and from itself. */
static void child_work(void)
{
    alarm(60);
    memprof_stats before = {0};
    if (prog_backend == PROG_GOT)
        before = prog_stats();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, child_thread, NULL) == 0, "pthread_create in a child");
    void *keep[64] = {0};
    for (int i = 0; i < 20000; i++) {
        free(keep[i % 64]);
        keep[i % 64] = hardening_process_alloc(32 + (size_t)(i % 4000));
    }
    for (int i = 0; i < 64; i++)
        free(keep[i]);
    CHECK(pthread_join(t, NULL) == 0, "pthread_join in a child");
    if (prog_backend == PROG_GOT) {
        /* The patched GOT is inherited: the child samples and can write a profile. */
        memprof_stats after = prog_stats();
        CHECK(after.state == MEMPROF_STATE_ACTIVE, "the child's engine is not active");
        if (prog_rate() == 1)
            CHECK(after.total_samples - before.total_samples >= 25000,
                  "the child took %" PRIu64 " samples at rate 1",
                  after.total_samples - before.total_samples);
        memprof_snapshot *s = NULL;
        CHECK(memprof_get_snapshot(&s) == 0, "memprof_get_snapshot in a child");
        char path[4096];
        profile_path(path, sizeof path, getpid());
        int rc = memprof_snapshot_write(s, path, MEMPROF_FORMAT_AUTO);
        CHECK(rc == 0, "memprof_snapshot_write(%s): %s", path, memprof_strerror(rc));
        memprof_free_snapshot(s);
    }
}

static void wait_ok(pid_t pid, const char *who)
{
    int st;
    pid_t r;
    while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ;
    CHECK(r == pid, "waitpid(%s): %s", who, strerror(errno));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s (pid %d) ended with status 0x%x", who,
          (int)pid, (unsigned)st);
}

/* Profiles exist for processes profiled by the plugin, or that wrote one through the API. */
static int expect_profiles_of_children(void)
{
    return prog_backend != PROG_PLAIN;
}

static void fork_phase(int rounds)
{
    for (int i = 0; i < INHERITED; i++)
        inherited[i] = hardening_process_alloc(1000 + (size_t)i * 64);
    pthread_t tids[CHURNERS];
    for (int i = 0; i < CHURNERS; i++)
        CHECK(pthread_create(&tids[i], NULL, churn, (void *)(uintptr_t)(i * 1000)) == 0,
              "pthread_create");
    for (int c = 0; c < rounds; c++) {
        fflush(NULL);
        atomic_store(&churn_hot, 1);
        usleep(2000); /* let the churners get going: fork lands amid their allocations */
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        atomic_store(&churn_hot, 0);
        if (pid == 0) {
            for (int i = 0; i < INHERITED; i++)
                free(inherited[i]);
            child_work();
            fflush(NULL);
            pid_t gpid = fork();
            CHECK(gpid >= 0, "fork in a child: %s", strerror(errno));
            if (gpid == 0) {
                child_work();
                exit(0);
            }
            wait_ok(gpid, "a grandchild");
            if (expect_profiles_of_children())
                expect_profile(gpid, "a grandchild");
            exit(0);
        }
        wait_ok(pid, "a forked child");
        if (expect_profiles_of_children())
            expect_profile(pid, "a forked child");
    }
    atomic_store(&stop_churn, 1);
    for (int i = 0; i < CHURNERS; i++)
        CHECK(pthread_join(tids[i], NULL) == 0, "pthread_join");
    for (int i = 0; i < INHERITED; i++)
        free(inherited[i]);
}

static atomic_int stop_loading;

static void *loader(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&stop_loading, memory_order_relaxed)) {
        void *h = dlopen("libhardening-cycle.so", RTLD_NOW | RTLD_LOCAL);
        CHECK(h != NULL, "dlopen(libhardening-cycle.so): %s", dlerror());
        dlclose(h);
    }
    return NULL;
}

static int compare_and_allocate(const void *a, const void *b)
{
    free(hardening_process_alloc(3000));
    return *(const int *)a - *(const int *)b;
}

static void fork_dlopen_phase(int rounds)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, loader, NULL) == 0, "pthread_create");
    for (int c = 0; c < 15 * rounds; c++) {
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            alarm(30);
            int v[8] = {5, 3, 1, 7, 2, 8, 6, 4};
            qsort(v, 8, sizeof *v, compare_and_allocate);
            for (int i = 0; i < 50; i++)
                free(hardening_process_alloc(1000 + (size_t)i));
            _exit(0);
        }
        wait_ok(pid, "a child forked amid dlopen");
    }
    atomic_store(&stop_loading, 1);
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
}

/* Exec'd children are profiled only by the plugin (through the inherited environment). */
static const char *exec_backend(void)
{
    return prog_backend == PROG_PRELOAD ? "preload" : "plain";
}

static void vfork_phase(void)
{
    char *argv[] = {(char *)self, "exec-child", (char *)exec_backend(), NULL};
    fflush(NULL);
    pid_t pid = vfork();
    CHECK(pid >= 0, "vfork: %s", strerror(errno));
    if (pid == 0) {
        execv(self, argv);
        _exit(127);
    }
    wait_ok(pid, "a vfork+exec child");
    if (prog_backend == PROG_PRELOAD)
        expect_profile(pid, "a vfork+exec child");
}

static void spawn_phase(void)
{
    char *argv[] = {(char *)self, "exec-child", (char *)exec_backend(), NULL};
    posix_spawn_file_actions_t fa;
    CHECK(posix_spawn_file_actions_init(&fa) == 0, "posix_spawn_file_actions_init");
    CHECK(posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) == 0,
          "posix_spawn_file_actions_addopen");
    pid_t pid;
    fflush(NULL);
    int rc = posix_spawn(&pid, self, &fa, NULL, argv, environ);
    CHECK(rc == 0, "posix_spawn: %s", strerror(rc));
    posix_spawn_file_actions_destroy(&fa);
    wait_ok(pid, "a posix_spawn child");
    if (prog_backend == PROG_PRELOAD)
        expect_profile(pid, "a posix_spawn child");
}

static void system_phase(const char *dir)
{
    char pidfile[4096], cmd[8192];
    snprintf(pidfile, sizeof pidfile, "%s/system.pid", dir);
    /* Two commands, so the shell forks the child instead of exec'ing it. */
    snprintf(cmd, sizeof cmd, "'%s' exec-child %s '%s'; true", self, exec_backend(), pidfile);
    fflush(NULL);
    int st = system(cmd);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "system(%s) = 0x%x", cmd,
          (unsigned)st);
    FILE *f = fopen(pidfile, "r");
    CHECK(f != NULL, "the system() child wrote no %s", pidfile);
    int pid = 0;
    CHECK(fscanf(f, "%d", &pid) == 1 && pid > 0, "bad %s", pidfile);
    fclose(f);
    if (prog_backend == PROG_PRELOAD)
        expect_profile(pid, "a system() child");

    snprintf(cmd, sizeof cmd, "'%s' exec-child %s", self, exec_backend());
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "popen: %s", strerror(errno));
    char line[256] = {0};
    CHECK(fgets(line, sizeof line, p) && !strncmp(line, "exec-child ", 11),
          "the popen() child printed '%s'", line);
    st = pclose(p);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pclose = 0x%x", (unsigned)st);
    if (prog_backend == PROG_PRELOAD)
        expect_profile(atoi(line + 11), "a popen() child");
}

/* An exec'd child: under the plugin (inherited LD_PRELOAD) or plain, as its parent says. */
static int exec_child(int argc, char **argv)
{
    CHECK(argc >= 3, "usage: %s exec-child BACKEND [PIDFILE]", argv[0]);
    prog_setup(argv[2]);
    if (argc > 3) {
        FILE *f = fopen(argv[3], "w");
        CHECK(f && fprintf(f, "%d\n", (int)getpid()) > 0 && fclose(f) == 0, "writing %s", argv[3]);
    }
    void *keep[16] = {0};
    for (int i = 0; i < 3000; i++) {
        free(keep[i % 16]);
        keep[i % 16] = hardening_process_alloc(64 + (size_t)(i % 2000));
    }
    for (int i = 0; i < 16; i++)
        free(keep[i]);
    printf("exec-child %d\n", (int)getpid());
    return 0;
}

/* Creates MEMPROF_OUTPUT's directory and removes old profiles from it. */
static void prepare_output_dir(char *dir, size_t len)
{
    snprintf(dir, len, "%s", out_template);
    char *slash = strrchr(dir, '/');
    CHECK(slash != NULL, "MEMPROF_OUTPUT (%s) must name a directory", out_template);
    *slash = 0;
    CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST, "mkdir(%s): %s", dir, strerror(errno));
    DIR *d = opendir(dir);
    CHECK(d != NULL, "opendir(%s)", dir);
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
}

int main(int argc, char **argv)
{
    self = argv[0];
    if (argc > 1 && !strcmp(argv[1], "exec-child"))
        return exec_child(argc, argv);
    CHECK(argc >= 2, "usage: %s plain|preload|got [ROUNDS]", argv[0]);
    out_template = getenv("MEMPROF_OUTPUT");
    CHECK(out_template && strstr(out_template, "%p"), "set MEMPROF_OUTPUT to DIR/NAME.%%p.txt");
    char dir[2048];
    prepare_output_dir(dir, sizeof dir); /* before any child (or the plugin) writes there */
    prog_setup(argv[1]);
    int rounds = argc > 2 ? atoi(argv[2]) : 4;
    alarm(120);
    fork_phase(rounds);
    fork_dlopen_phase(rounds);
    vfork_phase();
    spawn_phase();
    system_phase(dir);
    printf("%d forked children and grandchildren, vfork, posix_spawn, system and popen "
           "children all exited 0 (%s)\n",
           rounds, argv[1]);
    return 0;
}
