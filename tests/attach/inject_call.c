/* SPDX-License-Identifier: MIT */
/*
 * attach-inject: calls one function of a library inside a running process through
 * tools/inject.c, the layer `memprof attach` uses, so tests/attach/attach_test.py can inject
 * the probes of probe.c (a signal raised, exit() or exec() in the middle of the call) and
 * see what the target and the command make of them. Usage: attach-inject PID LIBRARY
 * FUNCTION [ARG]; prints the function's result, or the reason on stderr and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>

#include "inject.h"

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: attach-inject PID LIBRARY FUNCTION [ARG]\n");
        return 2;
    }
    struct inject_result res;
    char err[512];
    if (memprof_inject_call((pid_t)atoi(argv[1]), argv[2], argv[3], argc == 5 ? argv[4] : "", &res,
                            err, sizeof err) != 0) {
        fprintf(stderr, "attach-inject: %s\n", err);
        return 1;
    }
    printf("%ld\n", res.value);
    return 0;
}
