/* SPDX-License-Identifier: MIT */
/*
 * The symbolizer (symbolizer.h) linked in, for the programs that link the library's objects
 * statically (the `memprof` command, the unit tests): they symbolize by design, so nothing
 * is gained by loading it later.
 */
#include "config.h"
#include "resolve/symbolizer.h"

#include "resolve/strpool.h"

const struct memprof__symbolizer *memprof__symbolizer_get(void)
{
    static const struct memprof__symbolizer_host host = {
        .abi = MEMPROF_SYMBOLIZER_ABI,
        .intern = memprof__strpool_intern,
    };
    return memprof__symbolizer_open(&host);
}
