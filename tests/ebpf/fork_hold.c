/* SPDX-License-Identifier: MIT */
/*
 * A program that forks, for the eBPF tests of children under `memprof run --ebpf`: the
 * parent holds 10 MiB at parent_site (40 blocks of 256 KiB), forks, and waits; the child
 * holds 100 MiB at child_site (400 blocks) and exits. Each process's profile must show its
 * own site on top; the child prints its pid ("child N") so the test finds its profile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK (256u << 10)

static void *held[400];

__attribute__((noinline)) static void hold(int n)
{
    for (int i = 0; i < n; i++) {
        held[i] = malloc(BLOCK);
        if (!held[i])
            exit(1);
        memset(held[i], 1, 64);
    }
}

__attribute__((noinline)) static void parent_site(void)
{
    hold(40);
}

__attribute__((noinline)) static void child_site(void)
{
    hold(400);
}

int main(void)
{
    parent_site();
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        printf("child %d\n", (int)getpid());
        fflush(stdout);
        child_site();
        return 0;
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    puts("parent done");
    return 0;
}
