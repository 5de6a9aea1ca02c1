/* SPDX-License-Identifier: MIT */
/*
 * A program that says which shared objects the loader and the preload plugin mapped before
 * main(): it prints one "mapped=<path>" line per object of /proc/self/maps, read first
 * thing in main. Then it keeps 64 x 1 MiB allocated in itest_startup_site() until exit, so
 * that an exit-time profile has one site to name. The runner checks that the plugin maps
 * none of the symbolizer's libraries at start and that the profile names the site with its
 * file and line all the same (runner.py, startup-maps). It does not link libmemprof.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"

#define HELD 64

static void *held[HELD];

void itest_startup_site(void);

__attribute__((noinline)) void itest_startup_site(void)
{
    for (int i = 0; i < HELD; i++) {
        held[i] = malloc((size_t)1 << 20);
        CHECK(held[i] != NULL, "malloc(1 MiB) failed");
        itest_touch(held[i], (unsigned char)i);
    }
}

int main(void)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    CHECK(maps != NULL, "cannot open /proc/self/maps");
    char line[4096], last[4096] = "";
    while (fgets(line, sizeof line, maps)) {
        /* The path is the sixth field; an object has several mappings, listed together. */
        char *path = strchr(line, '/');
        if (!path)
            continue;
        path[strcspn(path, "\n")] = 0;
        if (strcmp(path, last) != 0)
            printf("mapped=%s\n", path);
        snprintf(last, sizeof last, "%s", path);
    }
    fclose(maps);
    itest_startup_site();
    return 0;
}
