/* SPDX-License-Identifier: MIT */
/*
 * Writes the pprof tests' profiles to files for outside tools (go_pprof.sh runs
 * `go tool pprof` on them): DIR/rich.pb.gz, the hand-built profile with every case of the
 * encoding, and DIR/engine.pb.gz, a real engine profile of fixture.c's functions.
 *
 *   pprof_gen DIR
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/pprof.h"
#include "../export/profiles.h"
#include "fixture.h"

static int write_file(const char *dir, const char *name, const struct memprof_profile *p)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 1;
    }
    int rc = memprof__export_pprof(p, f);
    if (fclose(f) != 0 || rc != 0) {
        fprintf(stderr, "%s: writing failed (%d)\n", path, rc);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    int bad = write_file(argv[1], "rich.pb.gz", fixture_rich());
    bad |= write_file(argv[1], "views.pb.gz", &views_profile);
    (void)basic_profile, (void)special_profile, (void)empty_profile;
    struct memprof_profile *p = NULL;
    int rc = fixture_engine(&p);
    if (rc != 0) {
        fprintf(stderr, "engine profile: %d\n", rc);
        return 1;
    }
    bad |= write_file(argv[1], "engine.pb.gz", p);
    memprof__profile_free(p);
    return bad;
}
