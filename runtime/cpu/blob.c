/* The byte writer and bounds-checked reader of serialized cpu executables (blob_internal.h
 * says the encoding). */
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "blob_internal.h"
#include "runtime/runtime.h"

void rt_blob_put_int(hlo_strbuf *out, int64_t value) {
  uint64_t z = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63); /* zigzag: small magnitudes, few bytes */
  unsigned char bytes[10];
  size_t n = 0;
  do {
    unsigned char b = z & 0x7f;
    z >>= 7;
    bytes[n++] = (unsigned char)(b | (z ? 0x80 : 0));
  } while (z);
  hlo_sb_append(out, (const char *)bytes, n);
}

void rt_blob_put_f32(hlo_strbuf *out, float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  rt_blob_put_int(out, (int64_t)bits);
}

void rt_blob_put_bytes(hlo_strbuf *out, const void *bytes, size_t len) {
  if (!bytes) {
    rt_blob_put_int(out, -1);
    return;
  }
  rt_blob_put_int(out, (int64_t)len);
  hlo_sb_append(out, bytes, len);
}

void rt_blob_put_str(hlo_strbuf *out, const char *text) { rt_blob_put_bytes(out, text, text ? strlen(text) : 0); }

void rt_blob_in_init(rt_blob_in *in, const void *bytes, size_t len) {
  in->p = bytes;
  in->end = in->p + len;
  in->failed = false;
  in->why[0] = '\0';
}

bool rt_blob_fail(rt_blob_in *in, const char *what) {
  if (!in->failed) snprintf(in->why, sizeof in->why, "%s", what);
  in->failed = true;
  return false;
}

int64_t rt_blob_get_varint(rt_blob_in *in, const char *what) {
  uint64_t z = 0;
  for (int shift = 0; !in->failed; shift += 7) {
    if (in->p == in->end || shift > 63) {
      rt_blob_fail(in, what);
      break;
    }
    unsigned char b = *in->p++;
    z |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
  }
  return 0;
}

bool rt_blob_get_bool(rt_blob_in *in, const char *what) { return rt_blob_get_range(in, 0, 1, what) == 1; }

float rt_blob_get_f32(rt_blob_in *in, const char *what) {
  uint32_t bits = (uint32_t)rt_blob_get_range(in, 0, UINT32_MAX, what);
  float v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

const void *rt_blob_get_bytes(rt_blob_in *in, size_t *len, const char *what) {
  *len = 0;
  int64_t n = rt_blob_get_range(in, -1, INT64_MAX, what);
  if (in->failed || n < 0) return NULL;
  if (n > in->end - in->p) {
    rt_blob_fail(in, what);
    return NULL;
  }
  const void *at = in->p;
  in->p += n;
  *len = (size_t)n;
  return at;
}

const char *rt_blob_get_str(rt_blob_in *in, hlo_arena *arena, const char *what) {
  size_t len;
  const char *text = rt_blob_get_bytes(in, &len, what);
  if (!text) return NULL;
  if (memchr(text, '\0', len)) {
    rt_blob_fail(in, what);
    return NULL;
  }
  const char *copy = hlo_arena_strndup(arena, text, len);
  if (!copy) rt_blob_fail(in, "out of memory");
  return copy;
}

int64_t rt_blob_get_count(rt_blob_in *in, int64_t max, const char *what) {
  int64_t left = in->end - in->p;
  return rt_blob_get_range(in, 0, max < left ? max : left, what);
}

/* XXH3 (libxxhash, as the cache's keys): fast, and any change of a few bytes changes it. */
uint64_t rt_blob_checksum(const void *bytes, size_t len) { return XXH3_64bits(bytes, len); }
