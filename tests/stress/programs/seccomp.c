/* SPDX-License-Identifier: MIT */
/*
 * A program that sandboxes itself with seccomp, as OpenSSH's privilege-separated child and
 * many daemons do: after set-up it installs a filter that allows only the system calls it
 * needs itself (glibc's allocator, stdio on descriptors already open, threads, exit) and
 * kills the process (SECCOMP_RET_KILL_PROCESS, SIGSYS) for any other. The profiler must
 * keep it alive: it may make no system call on the allocation paths beyond what glibc's
 * allocator makes, finishing what it needs once (a thread's random seed, its registration,
 * its stack's bounds) before the filter lands, and it must skip what the filter would
 * punish at exit (writing the profile needs open and rename). argv: BACKEND (prog.h).
 *
 * Each phase runs in a forked child, since a filter stays for the life of a process; the
 * parent wants exit status 0 from each (not SIGSYS):
 *   prctl     the allowlist through prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER), open()
 *             failing with EACCES as under OpenSSH's filter;
 *   seccomp   the allowlist through syscall(SYS_seccomp) with SECCOMP_FILTER_FLAG_TSYNC,
 *             which also filters a thread started before and not yet allocating (libseccomp
 *             installs filters this way), open() killing the process too;
 *   single    a single-threaded program's allowlist, without the signal mask and threads'
 *             calls (libunwind's locks set the signal mask);
 *   denylist  a filter that kills only for a few calls nobody here makes (ptrace, mount,
 *             ...): the profiler must not give anything up for it, so under the plugin
 *             with MEMPROF_OUTPUT the child's exit-time profile is written.
 * After the filter each child allocates, reallocates and frees blocks of many sizes on its
 * own thread, on a thread started before the filter and on 4 started after it (their first
 * allocations; the single phase on its own thread only), prints a line and calls exit(0).
 * Profiled runs check that sampling went on after the filter (at rate 1, every allocation)
 * and that a snapshot can be taken; memprof_snapshot_write() must refuse with -EPERM under
 * the allowlists and write under the denylist (MEMPROF_OUTPUT.snapshot). Under the
 * allowlists the plugin cannot write the child's exit-time profile, and no file or
 * temporary file of it may appear. The plain run shows the allowlists are enough for the
 * program itself. alarm() turns a hang into a failure; nothing is timed.
 */
#include "prog.h"

#include <dirent.h>
#include <malloc.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define WATCHDOG_S 60

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "add this architecture's AUDIT_ARCH"
#endif

/* What the program needs after its set-up: glibc's allocator (brk, mmap and friends,
 * futex for arena locks), writes to its open stdout and stderr, and exit... */
#define SINGLE_THREAD_CALLS                                                                        \
    SYS_read, SYS_write, SYS_writev, SYS_exit, SYS_exit_group, SYS_brk, SYS_mmap, SYS_munmap,      \
        SYS_mprotect, SYS_madvise, SYS_mremap, SYS_futex, SYS_rt_sigreturn, SYS_newfstatat
static const int single_thread[] = {
    SINGLE_THREAD_CALLS,
#ifdef SYS_fstat
    SYS_fstat,
#endif
};
/* ... and with threads: clone3 (or clone where clone3 is refused), the new thread's robust
 * list and rseq area, the signal mask pthread_create sets, sched_yield. */
static const int allowed[] = {
    SINGLE_THREAD_CALLS, SYS_rt_sigprocmask, SYS_clone,       SYS_clone3,
    SYS_set_robust_list, SYS_rseq,           SYS_sched_yield,
#ifdef SYS_fstat
    SYS_fstat,
#endif
};

/* Calls no one in this program makes. */
static const int denied[] = {SYS_ptrace, SYS_mount, SYS_kexec_load, SYS_reboot, SYS_swapon};

#define MAX_FILTER 96

/* A filter that kills the process for a foreign architecture, then returns `hit` for each
 * listed call, `hit2` for each of a second list, and `miss` for any other. */
static struct sock_fprog build_filter(struct sock_filter *f, const int *nrs, size_t n, uint32_t hit,
                                      const int *nrs2, size_t n2, uint32_t hit2, uint32_t miss)
{
    size_t k = 0;
    f[k++] =
        (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    f[k++] =
        (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (size_t i = 0; i < n + n2; i++) {
        int nr = i < n ? nrs[i] : nrs2[i - n];
        f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1);
        f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, i < n ? hit : hit2);
    }
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, miss);
    return (struct sock_fprog){.len = (unsigned short)k, .filter = f};
}

/* Allocation calls of every kind, sizes from 1 byte to 1 MiB. */
static void allocate(void)
{
    for (size_t n = 1; n <= (1u << 20); n = n * 3 + 1) {
        char *p = malloc(n);
        CHECK(p != NULL, "malloc(%zu)", n);
        prog_touch(p, 1);
        char *q = calloc(1, n);
        CHECK(q != NULL && q[n - 1] == 0, "calloc(1, %zu)", n);
        p = realloc(p, n * 2 + 8);
        CHECK(p != NULL, "realloc(%zu)", n * 2 + 8);
        void *a = NULL;
        CHECK(posix_memalign(&a, 64, n) == 0, "posix_memalign(64, %zu)", n);
        prog_touch(a, 2);
        free(a);
        free(q);
        free(p);
    }
}

static void *allocating_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 4; i++)
        allocate();
    return NULL;
}

/* Started before the filter; makes its first allocation after it (the pipe is read with a
 * plain read(), which the allowlist has). */
static int go[2];

static void *waiting_thread(void *arg)
{
    (void)arg;
    char c;
    while (read(go[0], &c, 1) < 0 && errno == EINTR)
        ;
    return allocating_thread(NULL);
}

/* Where a child writes a snapshot under the filter (MEMPROF_OUTPUT.snapshot). */
static char snapshot_path[4096];

enum phase { PHASE_PRCTL, PHASE_SECCOMP, PHASE_SINGLE, PHASE_DENYLIST };
static const char *const phase_name[] = {"prctl", "seccomp", "single", "denylist"};

static void child(enum phase phase)
{
    bool threads = phase != PHASE_SINGLE;
    pthread_t early;
    if (threads) {
        CHECK(pipe(go) == 0, "pipe: %s", strerror(errno));
        CHECK(pthread_create(&early, NULL, waiting_thread, NULL) == 0, "pthread_create");
    }
    uint64_t before = prog_profiled() ? prog_stats().total_samples : 0;

    /* glibc's allocator reads /proc/sys/vm/overcommit_memory once, when a thread's arena
     * first shrinks: the prctl phase lets open() fail with EACCES, as OpenSSH's filter does;
     * the seccomp phase kills for it too, and keeps every thread in the main arena. */
    static const int eacces[] = {SYS_openat};
    struct sock_filter f[MAX_FILTER];
    struct sock_fprog prog;
    if (phase == PHASE_DENYLIST)
        prog = build_filter(f, denied, sizeof denied / sizeof *denied, SECCOMP_RET_KILL_PROCESS,
                            NULL, 0, 0, SECCOMP_RET_ALLOW);
    else if (phase == PHASE_SINGLE)
        prog = build_filter(f, single_thread, sizeof single_thread / sizeof *single_thread,
                            SECCOMP_RET_ALLOW, NULL, 0, 0, SECCOMP_RET_KILL_PROCESS);
    else
        prog = build_filter(f, allowed, sizeof allowed / sizeof *allowed, SECCOMP_RET_ALLOW, eacces,
                            phase == PHASE_PRCTL, SECCOMP_RET_ERRNO | EACCES,
                            SECCOMP_RET_KILL_PROCESS);
    if (phase == PHASE_SECCOMP)
        CHECK(mallopt(M_ARENA_MAX, 1) == 1, "mallopt(M_ARENA_MAX)");
    CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
    if (phase == PHASE_SECCOMP)
        CHECK(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0,
              "seccomp(SECCOMP_SET_MODE_FILTER): %s", strerror(errno));
    else
        CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0, "prctl(PR_SET_SECCOMP): %s",
              strerror(errno));

    /* Sandboxed from here on. */
    allocate();
    if (threads) {
        CHECK(write(go[1], "g", 1) == 1, "write");
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            CHECK(pthread_create(&t[i], NULL, allocating_thread, NULL) == 0, "pthread_create");
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
        pthread_join(early, NULL);
    } else {
        allocating_thread(NULL);
    }
    if (prog_profiled()) {
        /* A snapshot takes no system call but memory's; writing it is refused under the
         * allowlists (it would open and rename files) and done under the denylist. */
        memprof_snapshot *snap = NULL;
        CHECK(memprof_get_snapshot(&snap) == 0, "memprof_get_snapshot under the filter");
        int rc = memprof_snapshot_write(snap, snapshot_path, MEMPROF_FORMAT_TEXT);
        if (phase == PHASE_DENYLIST)
            CHECK(rc == 0, "memprof_snapshot_write under the denylist: %s", memprof_strerror(rc));
        else
            CHECK(rc == -EPERM, "memprof_snapshot_write under the allowlist: %d, not -EPERM", rc);
        memprof_free_snapshot(snap);
        uint64_t after = prog_stats().total_samples;
        CHECK(after > before, "no sample after the filter (%" PRIu64 " before and after)", before);
        if (prog_rate() == 1)
            CHECK(after - before > (threads ? 1000u : 200u),
                  "at rate 1 every allocation is sampled: %" PRIu64 " samples after the filter",
                  after - before);
    }
    printf("%s: allocated under the filter on %s\n", phase_name[phase],
           threads ? "6 threads" : "1 thread");
    exit(0);
}

/* Whether a file of the profile's (PATH or PATH.tmp.*) exists. */
static bool profile_files(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return true;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    CHECK(slash, "MEMPROF_OUTPUT is an absolute path");
    *slash = 0;
    const char *base = slash + 1;
    DIR *d = opendir(dir);
    CHECK(d, "opendir %s", dir);
    bool found = false;
    for (struct dirent *e; (e = readdir(d));)
        found |= !strncmp(e->d_name, base, strlen(base)) && strstr(e->d_name, ".tmp.");
    closedir(d);
    return found;
}

static void run_phase(enum phase phase)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0)
        child(phase);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(!WIFSIGNALED(status) || WTERMSIG(status) != SIGSYS,
          "%s: the child was killed by SIGSYS: a system call its filter forbids",
          phase_name[phase]);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the child ended with status %#x",
          phase_name[phase], status);
    if (prog_profiled()) {
        struct stat st;
        bool written = stat(snapshot_path, &st) == 0 && st.st_size > 0;
        CHECK(written == (phase == PHASE_DENYLIST), "%s: the snapshot %s %s written",
              phase_name[phase], snapshot_path, written ? "was" : "was not");
        unlink(snapshot_path);
    }
    const char *out = getenv("MEMPROF_OUTPUT");
    if (out && prog_backend == PROG_PRELOAD) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%d", out, (int)pid);
        bool written = profile_files(path);
        if (phase == PHASE_DENYLIST)
            CHECK(written, "%s: the child's profile %s was not written", phase_name[phase], path);
        else
            CHECK(!written,
                  "%s: a profile file of the child appeared under an allowlist "
                  "without open()",
                  phase_name[phase]);
        unlink(path);
    }
}

static void on_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: still running after 60 s\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(1);
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: %s BACKEND", argv[0]);
    /* A child killed by SIGSYS would dump core: the profiler's tables are large. */
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGALRM, on_watchdog);
    alarm(WATCHDOG_S);
    prog_setup(argv[1]);
    const char *out = getenv("MEMPROF_OUTPUT");
    CHECK(out && *out == '/' && strlen(out) < 2048, "MEMPROF_OUTPUT names an absolute path");
    snprintf(snapshot_path, sizeof snapshot_path, "%s.snapshot", out);
    unlink(snapshot_path);
    /* Set-up before any filter: stdio's buffers, the allocator's first blocks. */
    printf("seccomp: %s\n", argv[1]);
    allocate();
    run_phase(PHASE_PRCTL);
    run_phase(PHASE_SECCOMP);
    run_phase(PHASE_SINGLE);
    run_phase(PHASE_DENYLIST);
    alarm(0);
    return 0;
}
