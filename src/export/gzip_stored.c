/* SPDX-License-Identifier: MIT */
/*
 * gzip without compression (gzip_stored.h): RFC 1952's header and trailer around RFC 1951's
 * stored blocks, with the CRC-32 the trailer needs computed here.
 */
#include "export/gzip_stored.h"

#include <errno.h>
#include <stdint.h>

/* The largest stored block (its length is 16 bits). */
#define BLOCK 65535u

/* CRC-32 of RFC 1952 (reflected polynomial 0xEDB88320), four bits at a time: every process
 * of a `memprof run` writes its raw profile through here, and bit by bit took ~0.1 ms for a
 * cc1's 7 KiB; a 16-entry table (the remainder of each nibble) keeps it small and constant. */
static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
    static const uint32_t nibble[16] = {0x00000000u, 0x1db71064u, 0x3b6e20c8u, 0x26d930acu,
                                        0x76dc4190u, 0x6b6b51f4u, 0x4db26158u, 0x5005713cu,
                                        0xedb88320u, 0xf00f9344u, 0xd6d6a3e8u, 0xcb61b38cu,
                                        0x9b64c2b0u, 0x86d3d2d4u, 0xa00ae278u, 0xbdbdf21cu};
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        crc = crc >> 4 ^ nibble[crc & 15];
        crc = crc >> 4 ^ nibble[crc & 15];
    }
    return ~crc;
}

static void le32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> 8 * i);
}

int memprof__gzip_stored(const unsigned char *data, size_t len, FILE *out)
{
    /* ID1 ID2, CM = deflate, no flags, no time, no extra flags, OS unknown. */
    static const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};
    if (fwrite(header, 1, sizeof header, out) != sizeof header)
        return -EIO;
    size_t done = 0;
    do {
        size_t n = len - done < BLOCK ? len - done : BLOCK;
        /* BFINAL on the last block, BTYPE 00 (stored), then LEN and its complement. */
        unsigned char head[5] = {done + n == len, (unsigned char)n, (unsigned char)(n >> 8),
                                 (unsigned char)~n, (unsigned char)(~n >> 8)};
        if (fwrite(head, 1, sizeof head, out) != sizeof head ||
            (n && fwrite(data + done, 1, n, out) != n))
            return -EIO;
        done += n;
    } while (done < len);
    unsigned char trailer[8];
    le32(trailer, crc32_update(0, data, len));
    le32(trailer + 4, (uint32_t)len); /* ISIZE: the length modulo 2^32 */
    if (fwrite(trailer, 1, sizeof trailer, out) != sizeof trailer)
        return -EIO;
    return ferror(out) ? -EIO : 0;
}
