/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the uncompressed gzip writer (src/export/gzip_stored.h), the pprof writer's
 * way when zlib cannot be loaded: zlib itself (linked into this test) must inflate what it
 * writes back to the same bytes, CRC and length checked, for an empty message, one byte,
 * exactly one and just over one stored block, and several blocks.
 */
#include <zlib.h>

#include "export/gzip_stored.h"
#include "test.h"

/* Writes n pseudo-random bytes through memprof__gzip_stored() and inflates them back. */
static bool round_trips(size_t n)
{
    unsigned char *in = malloc(n ? n : 1), *back = malloc(n + 1);
    uint64_t x = 0x9e3779b97f4a7c15u ^ n;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        in[i] = (unsigned char)x;
    }
    FILE *f = tmpfile();
    bool ok = f && memprof__gzip_stored(in, n, f) == 0 && fflush(f) == 0;
    long size = ok ? ftell(f) : -1;
    unsigned char *gz = size > 0 ? malloc((size_t)size) : NULL;
    ok = ok && gz && fseek(f, 0, SEEK_SET) == 0 && fread(gz, 1, (size_t)size, f) == (size_t)size;
    z_stream zs = {0};
    ok = ok && inflateInit2(&zs, 15 + 16) == Z_OK;
    if (ok) {
        zs.next_in = gz;
        zs.avail_in = (uInt)size;
        zs.next_out = back;
        zs.avail_out = (uInt)(n + 1);
        int rc = inflate(&zs, Z_FINISH);
        ok = rc == Z_STREAM_END && zs.total_out == n && zs.avail_in == 0 &&
             (n == 0 || memcmp(in, back, n) == 0);
        if (!ok)
            fprintf(stderr, "  %zu bytes: inflate %d, %lu out, %u left\n", n, rc, zs.total_out,
                    zs.avail_in);
        inflateEnd(&zs);
    }
    if (f)
        fclose(f);
    free(gz);
    free(back);
    free(in);
    return ok;
}

static void test_empty_and_tiny(void)
{
    EXPECT(round_trips(0));
    EXPECT(round_trips(1));
    EXPECT(round_trips(1000));
}

static void test_block_boundaries(void)
{
    EXPECT(round_trips(65535));
    EXPECT(round_trips(65536));
    EXPECT(round_trips(3 * 65535 + 17));
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_empty_and_tiny),
        TEST_CASE(test_block_boundaries),
    };
    return TEST_MAIN(cases, false);
}
