/* SPDX-License-Identifier: MIT */
/*
 * fork() under the preload plugin. Modes (argv[1]):
 *
 *   children-exit-cleanly   while a second thread keeps allocating and freeing (so the
 *                           profiler's cold path is likely to be running at fork time), the
 *                           parent forks 8 children one after another; each child frees
 *                           blocks it inherited, allocates and frees 20,000 blocks of its own,
 *                           and exits with status 0. An alarm turns a deadlock into a failure.
 *   profiles                the parent keeps 8 x 1 MiB live (itest_parent_hold), forks one
 *                           child that keeps 64 x 1 MiB live (itest_child_hold) and exits;
 *                           the parent prints "parent <pid> child <pid>" for the runner,
 *                           which checks the two profile files written at exit.
 *
 * It does not link libmemprof: it is profiled only through LD_PRELOAD.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"

#define INHERITED 256

static void *inherited[INHERITED];
static void *held[64];
static atomic_int stop_churn;

void itest_parent_hold(void);
void itest_child_hold(void);
void itest_child_work(void);

__attribute__((noinline)) void itest_parent_hold(void)
{
    for (int i = 0; i < 8; i++) {
        held[i] = malloc((size_t)1 << 20);
        CHECK(held[i] != NULL, "malloc failed");
        itest_touch(held[i], 1);
    }
}

__attribute__((noinline)) void itest_child_hold(void)
{
    for (int i = 0; i < 64; i++) {
        held[i] = malloc((size_t)1 << 20);
        CHECK(held[i] != NULL, "malloc failed");
        itest_touch(held[i], 2);
    }
}

__attribute__((noinline)) void itest_child_work(void)
{
    for (int i = 0; i < INHERITED; i++)
        free(inherited[i]); /* blocks (and samples) inherited from the parent */
    void *keep[64] = {0};
    for (int i = 0; i < 20000; i++) {
        void *p = malloc(32 + (size_t)(i % 4000));
        CHECK(p != NULL, "malloc failed in the child");
        itest_touch(p, (unsigned char)i);
        free(keep[i % 64]);
        keep[i % 64] = p;
    }
    for (int i = 0; i < 64; i++)
        free(keep[i]);
}

static void *churn(void *arg)
{
    (void)arg;
    unsigned i = 0;
    while (!atomic_load(&stop_churn)) {
        void *p = malloc(64 + i++ % 8192);
        itest_touch(p, 3);
        free(p);
    }
    return NULL;
}

static int children_exit_cleanly(void)
{
    for (int i = 0; i < INHERITED; i++) {
        inherited[i] = malloc(1000 + (size_t)i * 100);
        CHECK(inherited[i] != NULL, "malloc failed");
    }
    pthread_t tid;
    CHECK(pthread_create(&tid, NULL, churn, NULL) == 0, "pthread_create failed");
    alarm(30); /* a deadlocked child or parent fails the test instead of hanging it */
    for (int c = 0; c < 8; c++) {
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork failed");
        if (pid == 0) {
            itest_child_work();
            exit(0);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid, "waitpid failed");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "child %d ended with status 0x%x", c, (unsigned)status);
    }
    atomic_store(&stop_churn, 1);
    pthread_join(tid, NULL);
    for (int i = 0; i < INHERITED; i++)
        free(inherited[i]);
    printf("8 children exited cleanly\n");
    return 0;
}

static int profiles(void)
{
    itest_parent_hold();
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
        itest_child_hold();
        exit(0); /* normal exit: the child's profile is written by its atexit handler */
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid failed");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child ended with status 0x%x",
          (unsigned)status);
    printf("parent %d child %d\n", (int)getpid(), (int)pid);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "children-exit-cleanly"))
        return children_exit_cleanly();
    if (argc > 1 && !strcmp(argv[1], "profiles"))
        return profiles();
    fprintf(stderr, "usage: %s children-exit-cleanly|profiles\n", argv[0]);
    return 2;
}
