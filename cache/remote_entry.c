/* A remote entry's key and value. The value is the disk entry's bytes, so a value pulled
 * from Redis is checked exactly as a file is, and, under a secret, a trailer: "LATCHMAC" and
 * the HMAC-SHA256 of the entry bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote_internal.h"

static const char trailer_magic[8] = {'L', 'A', 'T', 'C', 'H', 'M', 'A', 'C'};

/* "latch:<namespace>:", then what, then the 32 hex digits that name the entry's disk file. */
static void named(const char *namespace_name, const char *what, cache_key key, const char *fingerprint,
                  char out[REMOTE_KEY_MAX]) {
  char name[CACHE_DISK_NAME_MAX];
  cache_disk_entry_name(key, fingerprint, name);
  snprintf(out, REMOTE_KEY_MAX, "latch:%s:%s%.32s", namespace_name, what, name);
}

void remote_entry_key(const char *namespace_name, cache_key key, const char *fingerprint, char out[REMOTE_KEY_MAX]) {
  named(namespace_name, "", key, fingerprint, out);
}

void remote_lease_key(const char *namespace_name, cache_key key, const char *fingerprint, char out[REMOTE_KEY_MAX]) {
  named(namespace_name, "lease:", key, fingerprint, out);
}

bool remote_is_entry_key(const char *namespace_name, const char *name, size_t len) {
  size_t prefix = 6 + strlen(namespace_name) + 1;
  if (len != prefix + 32 || memcmp(name, "latch:", 6) != 0 ||
      memcmp(name + 6, namespace_name, prefix - 7) != 0 || name[prefix - 1] != ':')
    return false;
  char file[CACHE_DISK_NAME_MAX];
  memcpy(file, name + prefix, 32);
  memcpy(file + 32, ".latch", 7);
  return cache_disk_is_entry_name(file);
}

unsigned char *remote_entry_encode(cache_key key, const char *fingerprint, const void *payload, size_t len,
                                   const unsigned char *secret, size_t secret_len, size_t *value_len) {
  size_t fingerprint_len = strlen(fingerprint);
  size_t entry_len = CACHE_DISK_HEADER_BYTES + fingerprint_len + len;
  size_t total = entry_len + (secret_len ? REMOTE_TRAILER_BYTES : 0);
  if (fingerprint_len > CACHE_DISK_FINGERPRINT_MAX || total < len) return NULL;
  unsigned char *value = hlo_malloc(total);
  if (!value) return NULL;
  cache_disk_header_encode(key, fingerprint, fingerprint_len, payload, len, value);
  memcpy(value + CACHE_DISK_HEADER_BYTES, fingerprint, fingerprint_len);
  if (len) memcpy(value + CACHE_DISK_HEADER_BYTES + fingerprint_len, payload, len);
  if (secret_len) {
    memcpy(value + entry_len, trailer_magic, sizeof trailer_magic);
    remote_mac(secret, secret_len, value, entry_len, value + entry_len + sizeof trailer_magic);
  }
  *value_len = total;
  return value;
}

/* The entry's length inside value: the whole value, or all but a trailer; *signed_ says which. */
static cache_disk_problem entry_length(const unsigned char *value, size_t value_len, size_t *entry_len,
                                       bool *signed_, cache_disk_header *header) {
  cache_disk_problem problem = cache_disk_header_decode(value, value_len, header);
  *signed_ = false;
  *entry_len = value_len;
  if (problem == CACHE_DISK_LENGTH && value_len >= CACHE_DISK_HEADER_BYTES + REMOTE_TRAILER_BYTES &&
      memcmp(value + value_len - REMOTE_TRAILER_BYTES, trailer_magic, sizeof trailer_magic) == 0) {
    *entry_len = value_len - REMOTE_TRAILER_BYTES;
    *signed_ = true;
    problem = cache_disk_header_decode(value, *entry_len, header);
  }
  return problem;
}

cache_disk_problem remote_entry_decode(const unsigned char *value, size_t value_len, const cache_key *key,
                                       const char *fingerprint, const unsigned char *secret, size_t secret_len,
                                       bool allow_unsigned, cache_disk_entry_info *info,
                                       const unsigned char **payload) {
  cache_disk_header header;
  size_t entry_len;
  bool signed_;
  cache_disk_problem problem = entry_length(value, value_len, &entry_len, &signed_, &header);
  if (problem) return problem;
  const char *stored = (const char *)value + CACHE_DISK_HEADER_BYTES;
  const unsigned char *body = value + CACHE_DISK_HEADER_BYTES + header.fingerprint_len;
  problem = cache_disk_check_body(&header, value, stored, body);
  if (problem) return problem;
  if (secret_len && !signed_ && !allow_unsigned) return CACHE_DISK_UNSIGNED;
  if (secret_len && signed_) {
    unsigned char want[REMOTE_MAC_BYTES];
    remote_mac(secret, secret_len, value, entry_len, want);
    if (!remote_mac_equal(want, value + entry_len + sizeof trailer_magic)) return CACHE_DISK_BAD_SIGNATURE;
  }
  if (fingerprint && (!cache_key_equal(header.key, *key) || strlen(fingerprint) != header.fingerprint_len ||
                      memcmp(fingerprint, stored, header.fingerprint_len) != 0))
    return CACHE_DISK_MISMATCH;
  info->key = header.key;
  info->payload_bytes = header.payload_len;
  info->file_bytes = value_len;
  memcpy(info->fingerprint, stored, header.fingerprint_len);
  info->fingerprint[header.fingerprint_len] = '\0';
  if (payload) *payload = body;
  return CACHE_DISK_OK;
}
