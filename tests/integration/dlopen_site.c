/* SPDX-License-Identifier: MIT */
/*
 * Call sites in a library loaded with dlopen. The program dlopens the module given as
 * argv[2] and calls its itest_dso_hold() to allocate 32 x 1 MiB, which stay live until exit.
 * Modes (argv[1]): "loaded" keeps the module loaded, so the exit-time profile can name
 * itest_dso_hold; "unloaded" dlcloses it first, so the profile is symbolized after the
 * code of its top call site was unmapped, which must not crash or hang the program.
 * It does not link libmemprof: it is profiled only through LD_PRELOAD.
 */
#include <dlfcn.h>
#include <string.h>

#include "itest.h"

static void *held[32];

int main(int argc, char **argv)
{
    CHECK(argc == 3 && (!strcmp(argv[1], "loaded") || !strcmp(argv[1], "unloaded")),
          "usage: %s loaded|unloaded MODULE", argv[0]);
    void *dso = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    CHECK(dso != NULL, "dlopen(%s): %s", argv[2], dlerror());
    int (*hold)(void **, int);
    *(void **)&hold = dlsym(dso, "itest_dso_hold");
    CHECK(hold != NULL, "dlsym(itest_dso_hold): %s", dlerror());
    CHECK(hold(held, 32) == 0, "itest_dso_hold failed");
    if (!strcmp(argv[1], "unloaded"))
        CHECK(dlclose(dso) == 0, "dlclose: %s", dlerror());
    return 0;
}
