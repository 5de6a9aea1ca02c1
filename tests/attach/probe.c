/* SPDX-License-Identifier: MIT */
/*
 * Probes attach_test.py injects with attach-inject (inject_call.c), each doing in the middle
 * of an injected call what a target may do during an attach:
 *   probe_signal  raises SIGUSR1 on its own thread between two lines on stdout ("probe",
 *                 "probe-end"): the target's handler must run after the call, not inside it;
 *   probe_exit    ends the process (status 7);
 *   probe_exec    has another thread exec() the target again with ARG as its mode, and
 *                 waits: the exec ends the borrowed thread.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int probe_signal(const char *arg);
int probe_exit(const char *arg);
int probe_exec(const char *arg);

static void say(const char *s)
{
    ssize_t n = write(1, s, strlen(s));
    (void)n;
}

int probe_signal(const char *arg)
{
    (void)arg;
    say("probe\n");
    syscall(SYS_tgkill, getpid(), gettid(), SIGUSR1);
    say("probe-end\n");
    return 0;
}

int probe_exit(const char *arg)
{
    (void)arg;
    _exit(7);
}

static char mode[64];

static void *exec_main(void *arg)
{
    (void)arg;
    char *argv[] = {"attach-target", mode, NULL};
    execv("/proc/self/exe", argv);
    return NULL;
}

int probe_exec(const char *arg)
{
    pthread_t t;
    strncpy(mode, arg, sizeof mode - 1);
    if (pthread_create(&t, NULL, exec_main, NULL) != 0)
        return -1;
    sleep(60);
    return 0;
}
