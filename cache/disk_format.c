/* The entry file format and entry names (layout in disk_internal.h). Integers are written
 * byte by byte in little-endian order so a cache directory means the same on every host. */
#include <string.h>

#include <xxhash.h>

#include "disk_internal.h"

static const unsigned char magic[8] = {'L', 'A', 'T', 'C', 'H', 'C', 'E', '\n'};

/* Seeds for the two checksums, so a payload that happens to hold a header cannot pass for one. */
enum { PAYLOAD_SEED = 0x7061796c, HEADER_SEED = 0x68656164 };

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static uint64_t header_sum(const unsigned char raw[CACHE_DISK_HEADER_BYTES], const char *fingerprint,
                           size_t fingerprint_len) {
  XXH3_state_t *state = XXH3_createState();
  if (!state) return 0; /* out of memory: the entry then reads as damaged, a miss */
  XXH3_64bits_reset_withSeed(state, HEADER_SEED);
  XXH3_64bits_update(state, raw, 56);
  XXH3_64bits_update(state, fingerprint, fingerprint_len);
  uint64_t sum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return sum;
}

void cache_disk_header_encode(cache_key key, const char *fingerprint, size_t fingerprint_len,
                              const void *payload, size_t payload_len,
                              unsigned char out[CACHE_DISK_HEADER_BYTES]) {
  memset(out, 0, CACHE_DISK_HEADER_BYTES);
  memcpy(out, magic, sizeof magic);
  put_u32(out + 8, CACHE_DISK_FORMAT);
  put_u32(out + 12, (uint32_t)fingerprint_len);
  put_u64(out + 16, key.lo);
  put_u64(out + 24, key.hi);
  put_u64(out + 32, payload_len);
  put_u64(out + 40, XXH3_64bits_withSeed(payload, payload_len, PAYLOAD_SEED));
  put_u64(out + 56, header_sum(out, fingerprint, fingerprint_len));
}

cache_disk_problem cache_disk_header_decode(const unsigned char *bytes, uint64_t file_size,
                                            cache_disk_header *header) {
  if (file_size < CACHE_DISK_HEADER_BYTES) return CACHE_DISK_SHORT;
  if (memcmp(bytes, magic, sizeof magic) != 0) return CACHE_DISK_MAGIC;
  header->version = get_u32(bytes + 8);
  if (header->version != CACHE_DISK_FORMAT) return CACHE_DISK_VERSION;
  header->fingerprint_len = get_u32(bytes + 12);
  header->key.lo = get_u64(bytes + 16);
  header->key.hi = get_u64(bytes + 24);
  header->payload_len = get_u64(bytes + 32);
  header->payload_sum = get_u64(bytes + 40);
  header->header_sum = get_u64(bytes + 56);
  if (header->fingerprint_len > CACHE_DISK_FINGERPRINT_MAX) return CACHE_DISK_HEADER;
  /* Compared by subtraction: a damaged length near 2^64 must not wrap around. */
  uint64_t body = file_size - CACHE_DISK_HEADER_BYTES;
  if (body < header->fingerprint_len || body - header->fingerprint_len < header->payload_len)
    return CACHE_DISK_SHORT;
  if (body - header->fingerprint_len > header->payload_len) return CACHE_DISK_LENGTH;
  return CACHE_DISK_OK;
}

cache_disk_problem cache_disk_check_body(const cache_disk_header *header,
                                         const unsigned char raw[CACHE_DISK_HEADER_BYTES],
                                         const char *fingerprint, const void *payload) {
  if (header_sum(raw, fingerprint, header->fingerprint_len) != header->header_sum) return CACHE_DISK_HEADER;
  if (payload && XXH3_64bits_withSeed(payload, header->payload_len, PAYLOAD_SEED) != header->payload_sum)
    return CACHE_DISK_CHECKSUM;
  return CACHE_DISK_OK;
}

/* ---- names ---- */

void cache_disk_entry_name(cache_key key, const char *fingerprint, char out[CACHE_DISK_NAME_MAX]) {
  unsigned char key_bytes[16];
  put_u64(key_bytes, key.lo);
  put_u64(key_bytes + 8, key.hi);
  XXH3_state_t *state = XXH3_createState();
  XXH128_hash_t name = {0, 0};
  if (state) {
    XXH3_128bits_reset_withSeed(state, CACHE_DISK_FORMAT);
    XXH3_128bits_update(state, key_bytes, sizeof key_bytes);
    XXH3_128bits_update(state, fingerprint, strlen(fingerprint));
    name = XXH3_128bits_digest(state);
    XXH3_freeState(state);
  } else { /* out of memory: the one-shot form needs no state; fold the fingerprint in first */
    uint64_t fp = XXH3_64bits(fingerprint, strlen(fingerprint));
    put_u64(key_bytes, key.lo ^ fp);
    name = XXH3_128bits_withSeed(key_bytes, sizeof key_bytes, CACHE_DISK_FORMAT);
  }
  cache_key_hex((cache_key){.lo = name.low64, .hi = name.high64}, out);
  memcpy(out + 32, ".latch", 7);
}

static bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool cache_disk_is_entry_name(const char *name) {
  for (int i = 0; i < 32; i++)
    if (!is_hex_digit(name[i])) return false;
  return strcmp(name + 32, ".latch") == 0;
}

bool cache_disk_is_temp_name(const char *name) {
  return strncmp(name, CACHE_DISK_TEMP_PREFIX, strlen(CACHE_DISK_TEMP_PREFIX)) == 0;
}

const char *cache_disk_problem_name(cache_disk_problem problem) {
  static const char *const names[CACHE_DISK_PROBLEM_COUNT] = {
      [CACHE_DISK_OK] = "ok",
      [CACHE_DISK_SHORT] = "truncated entry",
      [CACHE_DISK_MAGIC] = "not a cache entry (bad magic)",
      [CACHE_DISK_VERSION] = "unknown entry format version",
      [CACHE_DISK_HEADER] = "header checksum mismatch",
      [CACHE_DISK_LENGTH] = "entry longer than its header says",
      [CACHE_DISK_CHECKSUM] = "payload checksum mismatch",
      [CACHE_DISK_MISMATCH] = "key or fingerprint differs from the entry's name",
      [CACHE_DISK_FOREIGN] = "owned by another user",
      [CACHE_DISK_UNLOADABLE] = "backend could not load the entry",
      [CACHE_DISK_READ_ERROR] = "read error",
      [CACHE_DISK_WRITE_ERROR] = "write error",
      [CACHE_DISK_DIR_ERROR] = "directory error",
      [CACHE_DISK_UNSAFE_DIR] = "directory not private",
      [CACHE_DISK_UNSIGNED] = "unsigned entry (a secret is set)",
      [CACHE_DISK_BAD_SIGNATURE] = "signature mismatch",
  };
  return (unsigned)problem < CACHE_DISK_PROBLEM_COUNT ? names[problem] : "unknown problem";
}
