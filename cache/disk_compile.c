/* Get or compile through the on-disk cache (see disk_compile.h). */
#include <stdlib.h>

#include "cache.h"
#include "disk_internal.h"

void *cache_codec_value(const cache_codec *codec, const void *bytes, size_t len) {
  hlo_diag ignored; /* an unusable entry is the cache's problem, not the caller's */
  hlo_diag_clear(&ignored);
  return codec->deserialize(codec->ctx, bytes, len, &ignored);
}

void *cache_codec_take(const cache_codec *codec, void *bytes, size_t len) {
  if (!codec->adopt) {
    void *value = cache_codec_value(codec, bytes, len);
    free(bytes);
    return value;
  }
  hlo_diag ignored;
  hlo_diag_clear(&ignored);
  return codec->adopt(codec->ctx, bytes, len, &ignored);
}

void *cache_disk_load(cache_disk *disk, cache_key key, const char *fingerprint, const cache_codec *codec) {
  void *bytes = NULL;
  size_t len = 0;
  if (!cache_disk_get(disk, key, fingerprint, &bytes, &len)) return NULL;
  void *value = cache_codec_take(codec, bytes, len);
  if (!value) cache_disk_reject(disk, key, fingerprint, CACHE_DISK_UNLOADABLE);
  return value;
}

void *cache_codec_bytes(const cache_codec *codec, const void *value, size_t *len) {
  void *bytes = NULL;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (codec->serialize(codec->ctx, value, &bytes, len, &diag) != HLO_OK) {
    cache_disk_warn(CACHE_DISK_WRITE_ERROR, "cannot serialize a compiled graph: %s; it is not saved", diag.message);
    free(bytes);
    return NULL;
  }
  return bytes;
}

static bool save(cache_disk *disk, cache_key key, const char *fingerprint, const cache_codec *codec, const void *value,
                 bool (*put)(cache_disk *, cache_key, const char *, const void *, size_t)) {
  size_t len = 0;
  void *bytes = cache_codec_bytes(codec, value, &len);
  if (!bytes) return false;
  bool saved = put(disk, key, fingerprint, bytes, len);
  free(bytes);
  return saved;
}

bool cache_disk_save(cache_disk *disk, cache_key key, const char *fingerprint, const cache_codec *codec,
                     const void *value) {
  return save(disk, key, fingerprint, codec, value, cache_disk_put);
}

bool cache_disk_save_copy(cache_disk *disk, cache_key key, const char *fingerprint, const cache_codec *codec,
                          const void *value) {
  return save(disk, key, fingerprint, codec, value, cache_disk_put_copy);
}

void *cache_disk_get_or_compile(cache_disk *disk, cache_key key, const char *fingerprint, const cache_codec *codec,
                                cache_origin *origin, double *seconds, hlo_diag *diag) {
  double start = cache_now_seconds();
  void *value = disk ? cache_disk_load(disk, key, fingerprint, codec) : NULL;
  if (value) {
    if (origin) *origin = CACHE_ORIGIN_DISK;
    if (seconds) *seconds = cache_now_seconds() - start;
    return value;
  }
  value = codec->compile(codec->ctx, diag);
  if (origin) *origin = CACHE_ORIGIN_COMPILED;
  if (seconds) *seconds = cache_now_seconds() - start;
  if (value && disk) cache_disk_save(disk, key, fingerprint, codec, value);
  return value;
}
