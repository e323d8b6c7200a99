/* The bytes of a serialized cpu executable, written by serialize.c and read by
 * deserialize.c (and deserialize_module.c) through these helpers (blob.c), so that every read
 * is bounds-checked in one place: a read past the end, or a count or index out of its range,
 * sets the reader's sticky failed flag with a message naming what was being read, and returns
 * 0; the caller checks once per item and reports the message.
 *
 * Integers are zigzag LEB128 varints (most fields are small: one byte), floats their IEEE
 * bytes, little-endian; strings and byte runs are a length and the bytes (-1: NULL). */
#ifndef RT_CPU_BLOB_INTERNAL_H
#define RT_CPU_BLOB_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hlo/hlo.h"

/* The blob's header: magic, the format version byte, the checksum of what follows. */
#define RT_CPU_BLOB_MAGIC "LATCHCPU"
enum { RT_CPU_BLOB_VERSION = 6, RT_CPU_BLOB_HEADER = 17 };

/* ---- writing: into an hlo_strbuf, whose failed flag is the writer's ---- */
void rt_blob_put_int(hlo_strbuf *out, int64_t value);
void rt_blob_put_f32(hlo_strbuf *out, float value);
void rt_blob_put_str(hlo_strbuf *out, const char *text); /* NULL allowed */
void rt_blob_put_bytes(hlo_strbuf *out, const void *bytes, size_t len);

/* ---- reading ---- */
typedef struct rt_blob_in {
  const unsigned char *p, *end;
  bool failed;
  char why[160]; /* the first failure */
} rt_blob_in;

void rt_blob_in_init(rt_blob_in *in, const void *bytes, size_t len);
/* Sets the failure (the first one counts) and returns false. */
bool rt_blob_fail(rt_blob_in *in, const char *what);
/* Any varint (blob.c); rt_blob_get_int reads the one-byte ones inline, most of a blob. */
int64_t rt_blob_get_varint(rt_blob_in *in, const char *what);

static inline int64_t rt_blob_get_int(rt_blob_in *in, const char *what) {
  if (in->p < in->end && *in->p < 0x80 && !in->failed) {
    unsigned z = *in->p++;
    return (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
  }
  return rt_blob_get_varint(in, what);
}

/* An integer in [lo, hi]; lo on failure. */
static inline int64_t rt_blob_get_range(rt_blob_in *in, int64_t lo, int64_t hi, const char *what) {
  int64_t v = rt_blob_get_int(in, what);
  if (in->failed || v < lo || v > hi) {
    rt_blob_fail(in, what);
    return lo;
  }
  return v;
}
bool rt_blob_get_bool(rt_blob_in *in, const char *what);
float rt_blob_get_f32(rt_blob_in *in, const char *what);
/* A string copied into arena (NULL when it was written as NULL, or on failure). */
const char *rt_blob_get_str(rt_blob_in *in, hlo_arena *arena, const char *what);
/* A byte run left in place: *len bytes at the result, or NULL (and *len 0) for NULL. */
const void *rt_blob_get_bytes(rt_blob_in *in, size_t *len, const char *what);
/* A count of items each at least one byte long: at most what is left, and at most max. */
int64_t rt_blob_get_count(rt_blob_in *in, int64_t max, const char *what);

/* A 64-bit checksum of bytes, for telling a damaged blob from a good one. */
uint64_t rt_blob_checksum(const void *bytes, size_t len);

#endif
