/* SPDX-License-Identifier: MIT */
/*
 * A minimal consumer of the INSTALLED library. The installed-tree tests compile it with
 * nothing but `cc consumer.c $(pkg-config --cflags --libs memprof)` against a
 * `meson install --destdir` tree, run it with LD_LIBRARY_PATH, and check what it prints:
 * the version string, the engine state before init (ACTIVE when the installed preload
 * plugin is loaded), the result of memprof_init(65536), the rate and state the engine
 * reports, and the paths of the libmemprof objects mapped into the process.
 */
#include <stdio.h>
#include <string.h>

#include <memprof/memprof.h>

int main(void)
{
    memprof_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (memprof_get_stats(&st) != 0)
        return 1;
    printf("version=%s\n", memprof_version_string());
    printf("state_before_init=%u\n", (unsigned)st.state);
    printf("init=%d\n", memprof_init(65536));
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    int rc = memprof_get_stats(&st);
    printf("stats=%d rate=%llu state=%u\n", rc, (unsigned long long)st.sampling_rate,
           (unsigned)st.state);

    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096], last[4096] = "";
    while (maps && fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (!path || !strstr(path, "libmemprof") || !strcmp(path, last))
            continue;
        snprintf(last, sizeof last, "%s", path);
        printf("mapped=%s", path);
    }
    if (maps)
        fclose(maps);
    return 0;
}
