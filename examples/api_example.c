/* SPDX-License-Identifier: MIT */
/* api_example: the C API example of README.md ("Using the C API"), built so it stays true. */
#include <memprof/memprof.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    int rc = memprof_init(64 * 1024); /* mean bytes between samples */
    if (rc >= 0) /* MEMPROF_JOINED (1): `memprof run` already profiles us; share it */
        rc = memprof_start();
    if (rc < 0) { /* e.g. no interposition backend in this process */
        fprintf(stderr, "memprof: %s\n", memprof_strerror(rc));
        return 1;
    }
    void *blocks[1000];
    for (int i = 0; i < 1000; i++)
        blocks[i] = malloc(10000); /* ~10 MB live */

    memprof_snapshot *snap;
    if (memprof_get_snapshot(&snap) == 0) {
        printf("%zu live samples, ~%llu bytes live\n", memprof_snapshot_live_samples(snap),
               (unsigned long long)memprof_snapshot_estimated_bytes(snap));
        memprof_snapshot_write(snap, "heap.txt", MEMPROF_FORMAT_TEXT); /* top sites */
        memprof_free_snapshot(snap);
    }
    for (int i = 0; i < 1000; i++)
        free(blocks[i]);
    memprof_shutdown();
    return 0;
}
