/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the pprof reader (src/export/pprof_read.c), the code that reads
 * untrusted files for `memprof report` and `memprof diff`. Every input must either be
 * rejected with -EINVAL and a message, or give a model whose indexes are all in range;
 * anything else (a crash, a sanitizer report, a leak, a hang) is a bug.
 *
 * The reader's size limit is lowered to 64 MiB here so a decompression bomb in the corpus
 * costs milliseconds and stays inside libFuzzer's memory limit; the check itself is the same.
 *
 * Built only with clang (tests/pprof/meson.build). To run it by hand:
 *
 *   CC=clang meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false
 *   ninja -C build-fuzz tests/pprof/fuzz-pprof-read tests/pprof/pprof-gen
 *   mkdir -p fuzz-corpus && build-fuzz/tests/pprof/pprof-gen fuzz-corpus
 *   build-fuzz/tests/pprof/fuzz-pprof-read -max_len=65536 -timeout=10 \
 *       -max_total_time=300 -jobs=1 fuzz-corpus
 *
 * pprof-gen seeds the corpus with real files (gzip-compressed; adding their inflated form,
 * e.g. `zcat rich.pb.gz > fuzz-corpus/rich.pb`, lets the fuzzer reach the protobuf parser
 * without fighting the CRC). A crash leaves crash-<sha1> in the current directory; replay it
 * with `build-fuzz/tests/pprof/fuzz-pprof-read crash-<sha1>`.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/pprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memprof__pprof_read_limit = (size_t)64 << 20;
    struct memprof_profile *p = NULL;
    char err[256];
    int rc = memprof__pprof_read(data, size, &p, err, sizeof err);
    if (rc != 0) {
        /* Rejected: cleanly, with a message. */
        if (p || (rc != -EINVAL && rc != -ENOMEM) || !err[0] || strlen(err) >= sizeof err)
            abort();
        return 0;
    }
    /* Accepted: every frame index in range, every string terminated. */
    for (size_t i = 0; i < p->nstacks; i++)
        for (uint32_t j = 0; j < p->stacks[i].nframes; j++)
            if (p->stacks[i].frames[j] >= p->nframes)
                abort();
    size_t sum = 0;
    for (size_t i = 0; i < p->nframes; i++) {
        const struct memprof_pframe *f = &p->frames[i];
        sum += (f->function ? strlen(f->function) : 0) + (f->file ? strlen(f->file) : 0) +
               (f->module ? strlen(f->module) : 0) + (f->build_id ? strlen(f->build_id) : 0);
    }
    /* Keep the reads. */
    __asm__ volatile("" : : "r"(sum) : "memory");
    memprof__profile_free(p);
    return 0;
}
