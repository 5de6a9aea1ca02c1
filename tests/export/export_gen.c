/* SPDX-License-Identifier: MIT */
/*
 * Writes the known profiles of profiles.h with the speedscope and HTML writers, for the
 * Python checkers (check_views.py) to parse:
 *
 *     export-gen DIR    ->  DIR/<name>.speedscope.json, DIR/<name>.html   (name: basic,
 *                           special, empty, views, big; the live view selected),
 *                           DIR/views-<view>.speedscope.json and DIR/views-<view>.html
 *                           (the views profile with each view selected),
 *                           and DIR/big.expect.json
 *
 * big.expect.json holds what the big profile must show, derived here independently of the
 * writers: per stack its labels root first and its live and allocated bytes. (Its labels
 * are plain ASCII, so printing them needs no escaping.) Exit status 0, or 1 with a message.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "export/export.h"
#include "profiles.h"

static int write_one(const char *dir, const char *name, const struct memprof_profile *p, int html,
                     enum memprof_view view)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, name, html ? "html" : "speedscope.json");
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "export-gen: %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = html ? memprof__export_html(p, f, view) : memprof__export_speedscope(p, f, view);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long size = ftell(f);
    if (fclose(f) != 0 && rc == 0)
        rc = -EIO;
    if (rc != 0) {
        fprintf(stderr, "export-gen: writing %s failed: %s\n", path, strerror(-rc));
        return -1;
    }
    printf("%-28s %9ld bytes in %.1f ms\n", strrchr(path, '/') + 1, size,
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6);
    return 0;
}

static int write_expectation(const char *dir, const struct memprof_profile *p)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/big.expect.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "export-gen: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fputs("{\"stacks\":[", f);
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        fprintf(f, "%s\n[[", i ? "," : "");
        for (uint32_t j = 0; j < st->nframes; j++)
            fprintf(f, "%s\"%s\"", j ? "," : "",
                    p->frames[st->frames[st->nframes - 1 - j]].function);
        fprintf(f, "],%" PRIu64 ",%" PRIu64 "]", st->inuse_space, st->alloc_space);
    }
    fputs("]}\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: export-gen DIR\n");
        return 1;
    }
    struct memprof_profile *big = big_profile_new();
    if (!big) {
        fprintf(stderr, "export-gen: out of memory\n");
        return 1;
    }
    const struct {
        const char *name;
        const struct memprof_profile *p;
    } all[] = {
        {"basic", &basic_profile},
        {"special", &special_profile},
        {"empty", &empty_profile},
        {"views", &views_profile},
        {"big", big},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all && rc == 0; i++)
        rc = write_one(argv[1], all[i].name, all[i].p, 0, MEMPROF_VIEW_LIVE) ||
             write_one(argv[1], all[i].name, all[i].p, 1, MEMPROF_VIEW_LIVE);
    for (int v = 0; v < MEMPROF_VIEW_COUNT && rc == 0; v++) {
        char name[64];
        snprintf(name, sizeof name, "views-%s", memprof__view_name((enum memprof_view)v));
        rc = write_one(argv[1], name, &views_profile, 0, (enum memprof_view)v) ||
             write_one(argv[1], name, &views_profile, 1, (enum memprof_view)v);
    }
    if (rc == 0)
        rc = write_expectation(argv[1], big);
    big_profile_free(big);
    return rc ? 1 : 0;
}
