/* SPDX-License-Identifier: MIT */
/*
 * Addresses nothing can symbolize -- JIT code in an anonymous executable mapping, unmapped
 * addresses, the null page -- resolve without crashing to frames marked UNRESOLVED (no
 * function, labelled "[unknown]" when no module contains them) and are counted.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <memprof/memprof.h>

#include "core/engine.h"
#include "../check.h"

int main(void)
{
    memprof__backend_register();
    if (memprof_init(1) != 0 || memprof_start() != 0)
        return 1;
    unsigned char *jit =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(jit != MAP_FAILED);
    uintptr_t frames[] = {(uintptr_t)jit + 100, 0x10, (uintptr_t)0xdeadbeef000ull, (uintptr_t)-4096,
                          (uintptr_t)main + 1};
    memprof__record(0x1000, 4096, frames, 5, false);
    memprof_snapshot *s = NULL;
    CHECK(memprof_get_snapshot(&s) == 0);
    memprof_site_info site = {.size = sizeof site};
    CHECK(memprof_snapshot_site(s, 0, &site) == 0);
    int depth = memprof_snapshot_stack_depth(s, site.stack_id);
    CHECK(depth == 5);
    for (int i = 0; i < depth && i < 4; i++) {
        memprof_frame f = {.size = sizeof f};
        CHECK(memprof_snapshot_frame(s, site.stack_id, (size_t)i, &f) == 0);
        CHECK(f.function == NULL);
        CHECK(f.flags & MEMPROF_FRAME_UNRESOLVED);
        CHECK(f.module == NULL);
    }
    memprof_frame last = {.size = sizeof last};
    CHECK(memprof_snapshot_frame(s, site.stack_id, 4, &last) == 0);
    CHECK(last.function && strcmp(last.function, "main") == 0);
    char path[] = "/tmp/memprof-unknown-XXXXXX.folded";
    int fd = mkstemps(path, 7);
    CHECK(fd >= 0);
    CHECK(memprof_snapshot_write(s, path, MEMPROF_FORMAT_COLLAPSED) == 0);
    FILE *in = fopen(path, "r");
    char line[1024] = "";
    CHECK(in && fgets(line, sizeof line, in));
    printf("%s", line);
    CHECK(strstr(line, "main;[unknown];[unknown];[unknown];[unknown] 4096") != NULL);
    if (in)
        fclose(in);
    unlink(path);
    memprof_free_snapshot(s);
    memprof_stats st = {.size = sizeof st};
    memprof_get_stats(&st);
    CHECK(st.unresolved_addresses >= 4);
    return failures ? 1 : 0;
}
