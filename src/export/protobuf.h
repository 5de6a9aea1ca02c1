/* SPDX-License-Identifier: MIT */
/*
 * A tiny protobuf wire-format encoder and a bounds-checked decoder: just what profile.proto
 * needs (varints, length-delimited fields, packed repeated varints, nested messages), with no
 * schema compiler. The decoder reads untrusted files (`memprof report`), so every read is
 * checked against the end of its buffer, every length against what is left, and it never
 * allocates: it hands out views into the caller's buffer.
 *
 * Wire format summary (https://protobuf.dev/programming-guides/encoding/): a field is a
 * varint key (field_number << 3 | wire_type) followed by a varint (type 0), 8 bytes (1), a
 * varint length and that many bytes (2), or 4 bytes (5). Types 3 and 4 (groups) are obsolete
 * and rejected.
 */
#ifndef MEMPROF_EXPORT_PROTOBUF_H
#define MEMPROF_EXPORT_PROTOBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    MEMPROF_PB_VARINT = 0,
    MEMPROF_PB_I64 = 1,
    MEMPROF_PB_LEN = 2,
    MEMPROF_PB_I32 = 5,
};

/* ---- encoder ------------------------------------------------------------------------------ */

/* A growable output buffer. Out of memory is sticky (`oom`): the encoding functions then do
 * nothing, so callers check once at the end instead of after every field. */
struct memprof_pb_buf {
    uint8_t *data;
    size_t len, cap;
    bool oom;
};

void memprof__pb_buf_free(struct memprof_pb_buf *b);
void memprof__pb_raw_varint(struct memprof_pb_buf *b, uint64_t v);
/* Fields. Scalar fields equal to zero are omitted, as proto3 does for defaults. */
void memprof__pb_uint(struct memprof_pb_buf *b, uint32_t field, uint64_t v);
void memprof__pb_int(struct memprof_pb_buf *b, uint32_t field, int64_t v);
void memprof__pb_bool(struct memprof_pb_buf *b, uint32_t field, bool v);
void memprof__pb_bytes(struct memprof_pb_buf *b, uint32_t field, const void *data, size_t len);
/* A nested message or packed repeated field: begin writes the key and returns a mark, end
 * inserts the length in front of what was written since (moving it when the length needs
 * more than one byte). Marks nest. */
size_t memprof__pb_begin(struct memprof_pb_buf *b, uint32_t field);
void memprof__pb_end(struct memprof_pb_buf *b, size_t mark);

/* ---- decoder ------------------------------------------------------------------------------ */

/* A view of bytes not yet decoded: [p, end). */
struct memprof_pb_reader {
    const uint8_t *p, *end;
};

/* One decoded field. For MEMPROF_PB_LEN, data/len view the payload; otherwise `value` holds
 * the varint or the little-endian fixed-width number. */
struct memprof_pb_field {
    uint32_t number;
    uint32_t wire;
    uint64_t value;
    const uint8_t *data;
    size_t len;
};

/* Reads a varint: 0, or -1 when truncated or longer than 10 bytes / 64 bits. */
int memprof__pb_read_varint(struct memprof_pb_reader *r, uint64_t *v);
/* Reads the next field: 1 when one was read, 0 at the end, or -1 on malformed input (a
 * truncated key or value, field number 0 or above 2^29 - 1, a group, a length past the end).
 * *why is set to a static description of the problem on -1. */
int memprof__pb_next(struct memprof_pb_reader *r, struct memprof_pb_field *f, const char **why);
/* Repeated varint fields may come packed (one LEN field) or one by one (VARINT fields).
 * Counts the values of one occurrence: 0, or -1 if the field has another wire type or a
 * packed payload is malformed. */
int memprof__pb_count_varints(const struct memprof_pb_field *f, size_t *n);
/* Reads the values of one occurrence counted above into out[0..n-1] (n as counted). */
void memprof__pb_get_varints(const struct memprof_pb_field *f, uint64_t *out);

#endif
