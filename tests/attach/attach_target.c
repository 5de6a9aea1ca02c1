/* SPDX-License-Identifier: MIT */
/*
 * The process `memprof attach` attaches to in tests/attach/attach_test.py. It prints its
 * state on stdout ("ready") and then, by mode:
 *   blocked:  blocks in a raw read() system call on stdin with known values in every
 *             callee-saved register, xmm0-xmm15 and errno, and after the read returns checks
 *             that all of them, and the byte read, are as they were: the borrowed thread
 *             continued exactly where it was;
 *   eintr:    the same with a SIGUSR1 handler installed without SA_RESTART (it prints
 *             "handler"): the read must end with EINTR, registers and errno intact;
 *   restart:  the same with the handler installed with SA_RESTART: the read must go on;
 *   sleep:    sleeps 4 s in nanosleep(), which must return 0 with errno intact (the kernel
 *             continues a sleep through restart_syscall);
 *   loop:     three threads allocate 4 KiB blocks in attach_alloc_site() forever, each keeping
 *             the last 1024 (12 MiB live in all), until killed;
 *   fork:     two threads fork() children that allocate, free and exit 0, without pause;
 *             a byte on stdin ends it, printing "ok" if every child exited 0;
 *   seccomp:  installs a seccomp filter that kills the process for openat(), then blocks as
 *             `blocked` does: an attach, which would open files in it, must refuse;
 *   churn200: holds 200 MiB in 3,200 blocks (half 32 KiB, half 96 KiB) allocated in
 *             attach_alloc_site() and replaces every one of them each second, until killed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEEP 1024

void *attach_alloc_site(size_t n);

__attribute__((noinline)) void *attach_alloc_site(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory"); /* not a tail call: the site keeps its frame */
    return p;
}

static void *allocate(void *arg)
{
    void **keep = calloc(KEEP, sizeof *keep);
    (void)arg;
    for (unsigned i = 0;; i++) {
        unsigned k = i % KEEP;
        free(keep[k]);
        keep[k] = attach_alloc_site(4096);
        memset(keep[k], 1, 64);
    }
    return NULL;
}

/* read(0, buf, 1) as a raw system call with patterns in r12-r15, rbx, rbp and xmm0-xmm15,
 * which are stored back after it into `after` for the caller to compare. */
static long blocked_read(char *buf, uint64_t after[6], uint64_t xmm_after[16])
{
    long ret;
    __asm__ volatile("push %%rbp\n"
                     "movq $0x1111111111111111, %%r12\n"
                     "movq $0x2222222222222222, %%r13\n"
                     "movq $0x3333333333333333, %%r14\n"
                     "movq $0x4444444444444444, %%r15\n"
                     "movq $0x5555555555555555, %%rbx\n"
                     "movq $0x6666666666666666, %%rbp\n"
                     "movq $0x0101010101010101, %%rax\n"
                     "movq %%rax, %%xmm0\n"
                     "movq %%rax, %%xmm15\n"
                     "movq $0x0202020202020202, %%rax\n"
                     "movq %%rax, %%xmm1\n"
                     "movq %%rax, %%xmm8\n"
                     "xorl %%edi, %%edi\n"
                     "movl $1, %%edx\n"
                     "xorl %%eax, %%eax\n" /* read */
                     "syscall\n"
                     "movq %%r12, 0(%[a])\n"
                     "movq %%r13, 8(%[a])\n"
                     "movq %%r14, 16(%[a])\n"
                     "movq %%r15, 24(%[a])\n"
                     "movq %%rbx, 32(%[a])\n"
                     "movq %%rbp, 40(%[a])\n"
                     "movq %%xmm0, 0(%[x])\n"
                     "movq %%xmm15, 8(%[x])\n"
                     "movq %%xmm1, 16(%[x])\n"
                     "movq %%xmm8, 24(%[x])\n"
                     "pop %%rbp\n"
                     : "=a"(ret)
                     : "S"(buf), [a] "r"(after), [x] "r"(xmm_after)
                     : "rdi", "rdx", "rcx", "r11", "r12", "r13", "r14", "r15", "rbx", "xmm0",
                       "xmm1", "xmm8", "xmm15", "memory");
    return ret;
}

static void on_usr1(int sig)
{
    (void)sig;
    ssize_t n = write(1, "handler\n", 8);
    (void)n;
}

/* expect_eintr: the read must be interrupted (-EINTR) rather than return the byte. */
static int blocked(bool expect_eintr)
{
    char buf[2] = {0, 0};
    uint64_t after[6], xmm[16];
    static const uint64_t want[6] = {0x1111111111111111, 0x2222222222222222, 0x3333333333333333,
                                     0x4444444444444444, 0x5555555555555555, 0x6666666666666666};
    static const uint64_t want_xmm[4] = {0x0101010101010101, 0x0101010101010101, 0x0202020202020202,
                                         0x0202020202020202};
    errno = EDOM;
    long n = blocked_read(buf, after, xmm);
    int e = errno;
    if (expect_eintr && n != -EINTR) {
        printf("read returned %ld, expected -EINTR (%d)\n", n, -EINTR);
        return 1;
    }
    if (!expect_eintr && (n != 1 || buf[0] != 'x')) {
        printf("read returned %ld '%c', expected 1 'x'\n", n, buf[0]);
        return 1;
    }
    if (e != EDOM) {
        printf("errno is %d after the read, expected EDOM (%d)\n", e, EDOM);
        return 1;
    }
    if (memcmp(after, want, sizeof want)) {
        printf("a callee-saved register changed across the read\n");
        return 1;
    }
    if (memcmp(xmm, want_xmm, sizeof want_xmm)) {
        printf("an xmm register changed across the read\n");
        return 1;
    }
    printf("ok\n");
    return 0;
}

static int handled(int flags, bool expect_eintr)
{
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = flags};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    printf("ready\n");
    return blocked(expect_eintr);
}

static int sleeping(void)
{
    struct timespec ts = {4, 0};
    printf("ready\n");
    errno = EDOM;
    int rc = nanosleep(&ts, NULL);
    if (rc != 0 || errno != EDOM) {
        printf("nanosleep returned %d, errno %d\n", rc, errno);
        return 1;
    }
    printf("ok\n");
    return 0;
}

static volatile int forking = 1;
static int bad_children;
static pthread_mutex_t bad_lock = PTHREAD_MUTEX_INITIALIZER;

static void *fork_loop(void *arg)
{
    (void)arg;
    while (forking) {
        pid_t c = fork();
        if (c == 0) {
            free(attach_alloc_site(1000));
            _exit(0);
        }
        int st = 0;
        if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            pthread_mutex_lock(&bad_lock);
            bad_children++;
            pthread_mutex_unlock(&bad_lock);
        }
    }
    return NULL;
}

static int forker(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, fork_loop, NULL);
    printf("ready\n");
    char c;
    ssize_t n = read(0, &c, 1);
    (void)n;
    forking = 0;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    if (bad_children) {
        printf("%d children did not exit 0\n", bad_children);
        return 1;
    }
    printf("ok\n");
    return 0;
}

static int sandboxed(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof *code, code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
        perror("seccomp");
        return 2;
    }
    printf("ready\n");
    return blocked(false);
}

#define CHURN_BLOCKS 3200
#define CHURN_STEPS  100 /* per second */

static int churn(void)
{
    static void *blocks[CHURN_BLOCKS];
    for (unsigned i = 0; i < CHURN_BLOCKS; i++)
        blocks[i] = attach_alloc_site(i % 2 ? 96 << 10 : 32 << 10);
    printf("ready\n");
    for (unsigned step = 0;; step++) {
        /* 32 blocks every 10 ms: the whole working set each second. */
        for (unsigned k = 0; k < CHURN_BLOCKS / CHURN_STEPS; k++) {
            unsigned i = (step * (CHURN_BLOCKS / CHURN_STEPS) + k) % CHURN_BLOCKS;
            free(blocks[i]);
            blocks[i] = attach_alloc_site(i % 2 ? 96 << 10 : 32 << 10);
            memset(blocks[i], 1, 64);
        }
        struct timespec ts = {0, 1000 * 1000 * 1000 / CHURN_STEPS};
        nanosleep(&ts, NULL);
    }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argc == 2 ? argv[1] : "";
    if (!strcmp(mode, "blocked")) {
        printf("ready\n");
        return blocked(false);
    }
    if (!strcmp(mode, "eintr"))
        return handled(0, true);
    if (!strcmp(mode, "restart"))
        return handled(SA_RESTART, false);
    if (!strcmp(mode, "sleep"))
        return sleeping();
    if (!strcmp(mode, "fork"))
        return forker();
    if (!strcmp(mode, "churn200"))
        return churn();
    if (!strcmp(mode, "seccomp"))
        return sandboxed();
    if (!strcmp(mode, "loop")) {
        pthread_t t[3];
        for (int i = 0; i < 3; i++)
            pthread_create(&t[i], NULL, allocate, NULL);
        printf("ready\n");
        pause();
        return 0;
    }
    fprintf(stderr,
            "usage: attach-target blocked|eintr|restart|sleep|loop|fork|churn200|seccomp\n");
    return 2;
}
