/* A disk cache entry whose checksums are all valid but whose executable was edited: the arena
 * made smaller than what its steps reach, then the blob's and the entry's checksums computed
 * again, as someone who can write the cache directory would. Loading refuses it, naming the
 * step, so the command compiles afresh and prints the same values; it never runs code that
 * writes outside its buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "disk_test_util.h"
#include "hlo/hlo.h"
#include "runtime/cpu/blob_internal.h"
#include "runtime/cpu/exec_internal.h"
#include "test.h"

/* a = x.x lives in the arena until c reads it. */
static const char chain[] =
    "HloModule chain\n"
    "ENTRY e {\n"
    "  x = f32[8,8] parameter(0)\n"
    "  a = f32[8,8] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  b = f32[8,8] exponential(a)\n"
    "  ROOT c = f32[8,8] dot(b, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "}\n";

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *bytes = malloc((size_t)size + 1);
  *len = bytes ? fread(bytes, 1, (size_t)size, f) : 0;
  fclose(f);
  return bytes;
}

/* The one entry in dir, its path in out. */
static bool find_entry(const char *dir, char *out, size_t size) {
  DIR *d = opendir(dir);
  struct dirent *e;
  bool found = false;
  while (d && (e = readdir(d)))
    if (cache_disk_is_entry_name(e->d_name)) found = snprintf(out, size, "%s/%s", dir, e->d_name) > 0;
  if (d) closedir(d);
  return found;
}

/* The blob with its plan's arena cut to arena_bytes, serialized again (a fresh checksum);
 * NULL when the blob cannot be read. */
static void *shrink_arena(const void *blob, size_t len, int64_t arena_bytes, size_t *out_len) {
  hlo_module *module;
  rt_cpu_plan *plan;
  const char *source;
  size_t source_len;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (rt_cpu_deserialize(blob, len, &module, &plan, &source, &source_len, &diag) != HLO_OK) return NULL;
  CHECK_MSG(plan->arena_bytes > arena_bytes, "arena of %lld bytes", (long long)plan->arena_bytes);
  plan->arena_bytes = arena_bytes;
  void *bytes = NULL;
  if (rt_cpu_serialize(module, plan, source, source_len, &bytes, out_len, &diag) != HLO_OK) bytes = NULL;
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
  return bytes;
}

/* Rewrites the entry at path with its executable's arena cut, every checksum recomputed;
 * the crafted blob goes to *crafted. */
static bool craft(const char *path, void **crafted, size_t *crafted_len) {
  size_t len;
  unsigned char *file = (unsigned char *)read_all(path, &len);
  cache_disk_header header;
  if (!file || cache_disk_header_decode(file, len, &header) != CACHE_DISK_OK) return free(file), false;
  const char *fingerprint = (const char *)file + CACHE_DISK_HEADER_BYTES;
  unsigned char *payload = file + CACHE_DISK_HEADER_BYTES + header.fingerprint_len;
  size_t at = 0;
  while (at + 8 <= header.payload_len && memcmp(payload + at, RT_CPU_BLOB_MAGIC, 8) != 0) at++;
  CHECK_MSG(at + 8 <= header.payload_len, "no cpu executable in %s", path);
  if (at + 8 > header.payload_len) return free(file), false;
  *crafted = shrink_arena(payload + at, header.payload_len - at, 64, crafted_len);
  if (!*crafted) return free(file), false;
  size_t payload_len = at + *crafted_len;
  unsigned char *new_payload = malloc(payload_len);
  memcpy(new_payload, payload, at);
  memcpy(new_payload + at, *crafted, *crafted_len);
  unsigned char raw[CACHE_DISK_HEADER_BYTES];
  cache_disk_header_encode(header.key, fingerprint, header.fingerprint_len, new_payload, payload_len, raw);
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(raw, 1, sizeof raw, f) == sizeof raw &&
            fwrite(fingerprint, 1, header.fingerprint_len, f) == header.fingerprint_len &&
            fwrite(new_payload, 1, payload_len, f) == payload_len;
  if (f) ok = fclose(f) == 0 && ok;
  free(new_payload);
  free(file);
  return ok;
}

static void smaller_arena_is_refused(void) {
  if (!cli_setup()) return;
  char env[600], dir[600], entry[1024];
  snprintf(env, sizeof env, "LATCH_CACHE=disk LATCH_CACHE_DIR='%s/cache'", cli_dir);
  cli_write_text(cli_path("chain.hlo"), chain);
  CLI_CHECK(0, env, "run --backend cpu '%s'", cli_path("chain.hlo"));
  char first[1 << 12];
  snprintf(first, sizeof first, "%s", strstr(cli_out, "output 0:") ? strstr(cli_out, "output 0:") : "");
  *strchrnul(first, '\n') = 0;
  CHECK_MSG(first[0], "%s", cli_out);
  snprintf(dir, sizeof dir, "%s/cache", cli_dir);
  CHECK(find_entry(dir, entry, sizeof entry));
  void *crafted = NULL;
  size_t crafted_len = 0;
  CHECK(craft(entry, &crafted, &crafted_len));

  /* The edited blob itself: its checksum holds, its steps do not fit. */
  hlo_module *module = NULL;
  rt_cpu_plan *plan = NULL;
  const char *source;
  size_t source_len;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK(rt_cpu_deserialize(crafted, crafted_len, &module, &plan, &source, &source_len, &diag) == HLO_ERR_INPUT);
  CHECK_MSG(strstr(diag.message, "reaches outside the arena") != NULL, "%s", diag.message);
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
  free(crafted);

  /* The next run: the same values, compiled afresh; no crash. */
  CLI_CHECK(0, env, "run --backend cpu '%s'", cli_path("chain.hlo"));
  CLI_HAS(cli_out, first);
  CLI_HAS(cli_out, "1 compile");
  cli_cleanup();
}

int main(void) {
  RUN(smaller_arena_is_refused);
  return TEST_REPORT();
}
