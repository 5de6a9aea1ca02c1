/* SPDX-License-Identifier: MIT */
/*
 * A program that loads a library after it started: the eBPF tests attach to it (or run it
 * under --ebpf) before the library is there, so its allocator entry points can only be
 * probed when the command reads the maps again. dlopen_host LIB: prints "ready" and waits
 * for a line on stdin; dlopen()s LIB, prints "loaded" and waits for a line; calls LIB's
 * own_alloc_run() (own_alloc.rs built as a library: 100 MiB held at own_alloc::hold_big
 * among churn), prints "done" and waits for a line before exiting.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void say_and_wait(const char *word)
{
    char line[64];
    printf("%s\n", word);
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        line[0] = 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: dlopen_host LIBRARY\n");
        return 2;
    }
    say_and_wait("ready");
    void *lib = dlopen(argv[1], RTLD_NOW);
    void (*run)(void) = lib ? (void (*)(void))dlsym(lib, "own_alloc_run") : NULL;
    if (!run) {
        fprintf(stderr, "dlopen_host: %s\n", dlerror());
        return 1;
    }
    say_and_wait("loaded");
    run();
    say_and_wait("done");
    return 0;
}
