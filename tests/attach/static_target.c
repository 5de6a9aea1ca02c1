/* SPDX-License-Identifier: MIT */
/*
 * A statically linked process for tests/attach/attach_test.py ("static"): it has no dynamic
 * loader and no libc.so.6 to load a library with, and `memprof attach` must say so. Prints
 * "ready" and waits to be killed.
 */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("ready\n");
    pause();
    return 0;
}
