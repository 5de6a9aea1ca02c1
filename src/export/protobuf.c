/* SPDX-License-Identifier: MIT */
/*
 * Protobuf wire format (protobuf.h): the encoder used by the pprof writer and the decoder
 * used by the pprof reader. The decoder is the first code to touch untrusted bytes, so it
 * checks every read explicitly against the end of its view and never trusts a length before
 * comparing it with what is left (a comparison, not `p + len`, which could overflow).
 */
#include "export/protobuf.h"

#include <stdlib.h>
#include <string.h>

/* ---- encoder ------------------------------------------------------------------------------ */

void memprof__pb_buf_free(struct memprof_pb_buf *b)
{
    free(b->data);
    *b = (struct memprof_pb_buf){0};
}

/* Makes room for `more` bytes; false (and oom set) when that is impossible. */
static bool reserve(struct memprof_pb_buf *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->cap - b->len >= more)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more) {
        if (cap > SIZE_MAX / 2) {
            b->oom = true;
            return false;
        }
        cap *= 2;
    }
    uint8_t *d = realloc(b->data, cap);
    if (!d) {
        b->oom = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

static unsigned varint_size(uint64_t v)
{
    unsigned n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void put_varint(uint8_t *d, uint64_t v)
{
    while (v >= 0x80) {
        *d++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *d = (uint8_t)v;
}

void memprof__pb_raw_varint(struct memprof_pb_buf *b, uint64_t v)
{
    if (!reserve(b, 10))
        return;
    put_varint(b->data + b->len, v);
    b->len += varint_size(v);
}

static void key(struct memprof_pb_buf *b, uint32_t field, unsigned wire)
{
    memprof__pb_raw_varint(b, (uint64_t)field << 3 | wire);
}

void memprof__pb_uint(struct memprof_pb_buf *b, uint32_t field, uint64_t v)
{
    if (v == 0)
        return;
    key(b, field, MEMPROF_PB_VARINT);
    memprof__pb_raw_varint(b, v);
}

void memprof__pb_int(struct memprof_pb_buf *b, uint32_t field, int64_t v)
{
    /* int64 (not sint64) fields carry negative numbers as their two's complement: ten
     * bytes. */
    memprof__pb_uint(b, field, (uint64_t)v);
}

void memprof__pb_bool(struct memprof_pb_buf *b, uint32_t field, bool v)
{
    memprof__pb_uint(b, field, v ? 1 : 0);
}

void memprof__pb_bytes(struct memprof_pb_buf *b, uint32_t field, const void *data, size_t len)
{
    key(b, field, MEMPROF_PB_LEN);
    memprof__pb_raw_varint(b, len);
    if (len && reserve(b, len)) {
        memcpy(b->data + b->len, data, len);
        b->len += len;
    }
}

size_t memprof__pb_begin(struct memprof_pb_buf *b, uint32_t field)
{
    key(b, field, MEMPROF_PB_LEN);
    /* One byte for the length, which is enough for most nested messages; end() widens it. */
    if (reserve(b, 1))
        b->data[b->len++] = 0;
    return b->len;
}

void memprof__pb_end(struct memprof_pb_buf *b, size_t mark)
{
    if (b->oom)
        return;
    size_t len = b->len - mark;
    unsigned extra = varint_size(len) - 1;
    if (extra) {
        if (!reserve(b, extra))
            return;
        memmove(b->data + mark + extra, b->data + mark, len);
        b->len += extra;
    }
    put_varint(b->data + mark - 1, len);
}

/* ---- decoder ------------------------------------------------------------------------------ */

int memprof__pb_read_varint(struct memprof_pb_reader *r, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (r->p >= r->end)
            return -1; /* truncated */
        uint8_t c = *r->p++;
        /* The tenth byte may only hold the top bit of a 64-bit value. */
        if (i == 9 && c > 1)
            return -1;
        x |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1; /* more than ten bytes */
}

int memprof__pb_next(struct memprof_pb_reader *r, struct memprof_pb_field *f, const char **why)
{
    if (r->p >= r->end)
        return 0;
    uint64_t k;
    if (memprof__pb_read_varint(r, &k)) {
        *why = "truncated or overlong varint in a field key";
        return -1;
    }
    uint64_t number = k >> 3;
    if (number == 0 || number > 0x1fffffff) {
        *why = "invalid field number";
        return -1;
    }
    f->number = (uint32_t)number;
    f->wire = (uint32_t)(k & 7);
    f->value = 0;
    f->data = NULL;
    f->len = 0;
    size_t left;
    switch (f->wire) {
    case MEMPROF_PB_VARINT:
        if (memprof__pb_read_varint(r, &f->value)) {
            *why = "truncated or overlong varint";
            return -1;
        }
        return 1;
    case MEMPROF_PB_I64:
    case MEMPROF_PB_I32: {
        size_t n = f->wire == MEMPROF_PB_I64 ? 8 : 4;
        left = (size_t)(r->end - r->p);
        if (left < n) {
            *why = "truncated fixed-width field";
            return -1;
        }
        uint64_t x = 0;
        for (size_t i = 0; i < n; i++)
            x |= (uint64_t)r->p[i] << (8 * i);
        r->p += n;
        f->value = x;
        return 1;
    }
    case MEMPROF_PB_LEN: {
        uint64_t len;
        if (memprof__pb_read_varint(r, &len)) {
            *why = "truncated or overlong length";
            return -1;
        }
        left = (size_t)(r->end - r->p);
        if (len > left) {
            *why = "length-delimited field runs past the end of its message";
            return -1;
        }
        f->data = r->p;
        f->len = (size_t)len;
        r->p += len;
        return 1;
    }
    default:
        *why = "unsupported wire type (group or reserved)";
        return -1;
    }
}

int memprof__pb_count_varints(const struct memprof_pb_field *f, size_t *n)
{
    if (f->wire == MEMPROF_PB_VARINT) {
        *n = 1;
        return 0;
    }
    if (f->wire != MEMPROF_PB_LEN)
        return -1;
    /* A varint ends at each byte below 0x80; validate each one fully so the second pass
     * (get_varints) cannot fail. */
    struct memprof_pb_reader r = {f->data, f->data + f->len};
    size_t count = 0;
    uint64_t v;
    while (r.p < r.end) {
        if (memprof__pb_read_varint(&r, &v))
            return -1;
        count++;
    }
    *n = count;
    return 0;
}

void memprof__pb_get_varints(const struct memprof_pb_field *f, uint64_t *out)
{
    if (f->wire == MEMPROF_PB_VARINT) {
        out[0] = f->value;
        return;
    }
    struct memprof_pb_reader r = {f->data, f->data + f->len};
    size_t i = 0;
    while (r.p < r.end && memprof__pb_read_varint(&r, &out[i]) == 0)
        i++;
}
