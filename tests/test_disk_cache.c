/* The on-disk compile cache within one process: round trips, damaged entries of every kind
 * (misses, warned about once per kind, replaced), fingerprints that differ, LRU eviction,
 * filesystem failures (injected through the test-only fault hook, and real
 * ones on a small tmpfs where this process may mount one), listing, verifying and clearing. */
#include <errno.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "cache/cache.h"
#include "capture/capture.h"
#include "disk_test_util.h"
#include "runtime/runtime.h"
#include "runtime/cpu/cpu.h"
#include "test.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include "runtime/reference/reference.h"

static const char *const FP = "backend=test/1 latch=0 arch=x cpu= options=";

/* fault: the test-only hook (OP:ERRNO), NULL for none. */
static cache_disk *open_faulty(const char *dir, uint64_t max_bytes, const char *fault) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_disk_test_hooks hooks = {.fault = fault};
  cache_disk *disk = cache_disk_open(dir, max_bytes, &hooks, &diag);
  CHECK_MSG(disk != NULL, "%s", diag.message);
  return disk;
}

static cache_disk *open_dir(const char *dir, uint64_t max_bytes) { return open_faulty(dir, max_bytes, NULL); }

static void round_trip(void) {
  char dir[64];
  make_temp_dir(dir);
  char nested[128];
  snprintf(nested, sizeof nested, "%s/a/b/cache", dir); /* created with its parents */
  cache_disk *disk = open_dir(nested, 1 << 20);
  if (!disk) return;
  CHECK(!get_matches(disk, 1, FP));
  CHECK(put_payload(disk, 1, FP));
  CHECK(put_payload(disk, 2, FP));
  CHECK(get_matches(disk, 1, FP));
  CHECK(get_matches(disk, 2, FP));
  CHECK(!get_matches(disk, 3, FP));
  /* an empty payload is a valid entry */
  CHECK(cache_disk_put(disk, test_key(9), FP, "", 0));
  void *bytes = NULL;
  size_t len = 99;
  CHECK(cache_disk_get(disk, test_key(9), FP, &bytes, &len));
  CHECK_EQ_INT(len, 0);
  free(bytes);
  /* a second put replaces the first */
  CHECK(cache_disk_put(disk, test_key(1), FP, "new", 3));
  bytes = NULL;
  CHECK(cache_disk_get(disk, test_key(1), FP, &bytes, &len));
  CHECK(len == 3 && bytes && memcmp(bytes, "new", 3) == 0);
  free(bytes);
  cache_disk_stats s;
  cache_disk_get_stats(disk, &s);
  CHECK_EQ_INT(s.hits, 4);
  CHECK_EQ_INT(s.misses, 2);
  CHECK_EQ_INT(s.writes, 4);
  CHECK_EQ_INT(s.corrupt, 0);
  CHECK_EQ_INT(s.write_errors, 0);
  CHECK_EQ_INT(s.bytes_written, test_len(1) + test_len(2) + 3);
  CHECK_EQ_INT(count_files(nested, ""), 3);
  CHECK_EQ_INT(count_files(nested, CACHE_DISK_TEMP_PREFIX), 0);
  CHECK_STR(cache_disk_dir(disk), nested);
  cache_disk_close(disk);
  /* a new handle on the same directory sees the entries */
  disk = open_dir(nested, 1 << 20);
  CHECK(get_matches(disk, 2, FP));
  cache_disk_close(disk);
  remove_tree(dir);
}

/* ---- damaged entries ---- */

typedef enum damage { TRUNCATE, TRUNCATE_TINY, EMPTY, ZERO, RANDOM, FLIP_PAYLOAD, FLIP_KEY, FLIP_FINGERPRINT,
                      APPEND, VERSION, DAMAGE_COUNT } damage;

static void damage_file(const char *path, damage kind) {
  long size = file_size(path);
  FILE *f = fopen(path, "r+b");
  if (!f || size < 0) return;
  unsigned char *bytes = malloc((size_t)size + 16);
  size_t got = fread(bytes, 1, (size_t)size, f);
  (void)got;
  uint64_t x = 0x853c49e6748fea9bu;
  switch (kind) {
  case TRUNCATE: size /= 2; break;
  case TRUNCATE_TINY: size = 10; break;
  case EMPTY: size = 0; break;
  case ZERO: memset(bytes, 0, (size_t)size); break;
  case RANDOM:
    for (long i = 0; i < size; i++) x ^= x << 13, x ^= x >> 7, x ^= x << 17, bytes[i] = (unsigned char)x;
    break;
  case FLIP_PAYLOAD: bytes[size - 3] ^= 0x10; break;
  case FLIP_KEY: bytes[20] ^= 1; break;
  case FLIP_FINGERPRINT: bytes[CACHE_DISK_HEADER_BYTES + 2] ^= 0x20; break;
  case APPEND: memcpy(bytes + size, "trailing", 8), size += 8; break;
  case VERSION: bytes[8] = 99; break;
  default: break;
  }
  fclose(f);
  f = fopen(path, "wb");
  fwrite(bytes, 1, (size_t)size, f);
  fclose(f);
  free(bytes);
}

static void damaged_entries(void) {
  static const struct {
    damage kind;
    cache_disk_problem problem;
  } cases[] = {
      {TRUNCATE, CACHE_DISK_SHORT},      {TRUNCATE_TINY, CACHE_DISK_SHORT}, {EMPTY, CACHE_DISK_SHORT},
      {ZERO, CACHE_DISK_MAGIC},          {RANDOM, CACHE_DISK_MAGIC},        {FLIP_PAYLOAD, CACHE_DISK_CHECKSUM},
      {FLIP_KEY, CACHE_DISK_HEADER},     {FLIP_FINGERPRINT, CACHE_DISK_HEADER}, {APPEND, CACHE_DISK_LENGTH},
      {VERSION, CACHE_DISK_VERSION},
  };
  char dir[64];
  make_temp_dir(dir);
  cache_disk *disk = open_dir(dir, 1 << 20);
  if (!disk) return;
  cache_disk_reset_warnings();
  capture_begin();
  int n = (int)(sizeof cases / sizeof cases[0]);
  for (int c = 0; c < n; c++) {
    /* two entries damaged the same way: still one warning for the kind */
    for (int twice = 0; twice < 2; twice++) {
      uint64_t i = 100 + (uint64_t)(2 * c + twice);
      char path[512];
      entry_file(dir, i, FP, path);
      put_payload(disk, i, FP);
      damage_file(path, cases[c].kind);
      cache_disk_stats before, after;
      cache_disk_get_stats(disk, &before);
      CHECK_MSG(!get_matches(disk, i, FP), "damage %d gave a hit", cases[c].kind);
      cache_disk_get_stats(disk, &after);
      CHECK_MSG(after.corrupt == before.corrupt + 1, "damage %d not counted", cases[c].kind);
      CHECK_MSG(!file_exists(path), "damaged entry %d was not removed", cases[c].kind);
      /* and the next put replaces it */
      CHECK(put_payload(disk, i, FP));
      CHECK(get_matches(disk, i, FP));
    }
  }
  /* an intact entry under another (key, fingerprint)'s name: a miss, never its payload */
  char from[512], to[512];
  put_payload(disk, 1, FP);
  entry_file(dir, 1, FP, from);
  entry_file(dir, 2, FP, to);
  CHECK(rename(from, to) == 0);
  CHECK(!get_matches(disk, 2, FP));
  void *bytes = NULL;
  size_t len;
  CHECK(!cache_disk_get(disk, test_key(2), FP, &bytes, &len));
  CHECK(!file_exists(to));
  const char *text = capture_end();
  for (int c = 0; c < n; c++) {
    /* several damage kinds map to one problem; each problem is named exactly once */
    const char *name = cache_disk_problem_name(cases[c].problem);
    CHECK_MSG(count_occurrences(text, name) == 1, "\"%s\" warned %d times in:\n%s", name,
              count_occurrences(text, name), text);
  }
  CHECK_EQ_INT(count_occurrences(text, cache_disk_problem_name(CACHE_DISK_MISMATCH)), 1);
  CHECK_EQ_INT(count_occurrences(text, "latch: warning: compile cache:"), 7); /* 7 distinct problems */
  CHECK_EQ_INT(count_files(dir, CACHE_DISK_TEMP_PREFIX), 0);

  cache_disk_close(disk);
  remove_tree(dir);
}

/* Every byte of an entry is covered by a check: flipping any one of them is a miss, never a
 * hit with other bytes; and so is cutting the file at any length. */
static void every_byte_checked(void) {
  char dir[64];
  make_temp_dir(dir);
  cache_disk *disk = open_dir(dir, 1 << 20);
  if (!disk) return;
  const size_t len = 100;
  void *payload = test_payload(3, len);
  CHECK(cache_disk_put(disk, test_key(3), FP, payload, len));
  char path[512];
  entry_file(dir, 3, FP, path);
  long size = file_size(path);
  unsigned char *original = malloc((size_t)size);
  FILE *f = fopen(path, "rb");
  CHECK(f && fread(original, 1, (size_t)size, f) == (size_t)size);
  if (f) fclose(f);
  cache_disk_reset_warnings();
  capture_begin(); /* the warnings are expected; keep them out of the test's output */
  int hits = 0, wrong = 0;
  for (long cut = -1; cut < size; cut++) {
    for (long at = cut < 0 ? 0 : size; at < size + (cut >= 0); at++) {
      /* cut < 0: flip byte `at`; cut >= 0: keep the first `cut` bytes */
      f = fopen(path, "wb");
      if (!f) break;
      if (cut < 0) {
        original[at] ^= 0x04;
        fwrite(original, 1, (size_t)size, f);
        original[at] ^= 0x04;
      } else {
        fwrite(original, 1, (size_t)cut, f);
      }
      fclose(f);
      void *bytes = NULL;
      size_t got = 0;
      if (cache_disk_get(disk, test_key(3), FP, &bytes, &got)) {
        hits++;
        wrong += got != len || memcmp(bytes, payload, len) != 0;
        free(bytes);
      }
    }
  }
  capture_end();
  CHECK_EQ_INT(hits, 0);
  CHECK_EQ_INT(wrong, 0);
  cache_disk_stats s;
  cache_disk_get_stats(disk, &s);
  CHECK_EQ_INT(s.corrupt, 2 * size); /* size flips, size cuts (0 .. size-1 bytes) */
  free(original);
  free(payload);
  cache_disk_close(disk);
  remove_tree(dir);
}

/* ---- fingerprints ---- */

/* What rt_cpu_libraries says where oneDNN is held to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2). */
static const char *held_to_avx2(void) {
  static char text[512];
  snprintf(text, sizeof text, "%s", rt_cpu_libraries());
  char *isa = strstr(text, "dnnl_isa=0x");
  if (isa) {
    char *end = strchr(isa, ' ');
    char rest[400];
    snprintf(rest, sizeof rest, "%s", end ? end : "");
    snprintf(isa, sizeof text - (size_t)(isa - text), "dnnl_isa=0x%x%s", (unsigned)dnnl_cpu_isa_avx2, rest);
  }
  return text;
}

static void fingerprints(void) {
  char dir[64];
  make_temp_dir(dir);
  cache_disk *disk = open_dir(dir, 1 << 20);
  if (!disk) return;
  rt_backend v1 = rt_backend_reference, v2 = rt_backend_reference, other = rt_backend_reference;
  v2.version = "2";
  other.name = "cpu";
  char fp1[RT_FINGERPRINT_MAX], fp2[RT_FINGERPRINT_MAX], fp_other[RT_FINGERPRINT_MAX], fp_opt[RT_FINGERPRINT_MAX];
  CHECK(rt_fingerprint(&v1, "", fp1, sizeof fp1) < sizeof fp1);
  rt_fingerprint(&v2, "", fp2, sizeof fp2);
  rt_fingerprint(&other, "", fp_other, sizeof fp_other);
  rt_fingerprint(&v1, "fast-math", fp_opt, sizeof fp_opt);
  CHECK(strstr(fp1, "backend=reference/1") != NULL);
  CHECK(strstr(fp1, "latch=" RT_LATCH_VERSION) != NULL);
  CHECK(strstr(fp1, rt_cpu_features()) != NULL);
  CHECK(strcmp(fp1, fp2) != 0 && strcmp(fp1, fp_other) != 0 && strcmp(fp1, fp_opt) != 0);
  char small[16];
  CHECK(rt_fingerprint(&v1, "", small, sizeof small) >= sizeof small); /* too small says so */
  /* the cpu backend's: oneDNN's version and the ISA it will use, OpenBLAS's core, as the
   * libraries themselves report them; another ISA (oneDNN held to AVX2) is another key */
  char fp_cpu[RT_FINGERPRINT_MAX], fp_held[RT_FINGERPRINT_MAX], want[128];
  CHECK(rt_fingerprint(&rt_backend_cpu, "", fp_cpu, sizeof fp_cpu) < sizeof fp_cpu);
  const dnnl_version_t *dv = dnnl_version();
  snprintf(want, sizeof want, " libs=dnnl=%d.%d.%d/", dv->major, dv->minor, dv->patch);
  CHECK_MSG(strstr(fp_cpu, want) != NULL, "%s", fp_cpu);
  snprintf(want, sizeof want, " dnnl_isa=0x%x blas=OpenBLAS", (unsigned)dnnl_get_effective_cpu_isa());
  CHECK_MSG(strstr(fp_cpu, want) != NULL, "%s", fp_cpu);
  snprintf(want, sizeof want, "/%s options=", openblas_get_corename());
  CHECK_MSG(strstr(fp_cpu, want) != NULL, "%s", fp_cpu);
  rt_backend held = rt_backend_cpu;
  held.libraries = held_to_avx2;
  rt_fingerprint(&held, "", fp_held, sizeof fp_held);
  CHECK(strcmp(fp_cpu, fp_held) != 0 || dnnl_get_effective_cpu_isa() == dnnl_cpu_isa_avx2);

  CHECK(put_payload(disk, 5, fp1));
  /* a newer backend version, another backend, other options: misses, and not damage */
  CHECK(!get_matches(disk, 5, fp2));
  CHECK(!get_matches(disk, 5, fp_other));
  CHECK(!get_matches(disk, 5, fp_opt));
  cache_disk_stats s;
  cache_disk_get_stats(disk, &s);
  CHECK_EQ_INT(s.corrupt, 0);
  CHECK_EQ_INT(s.misses, 3);
  /* both versions' entries live side by side, each read back as its own */
  void *other_payload = test_payload(77, 300);
  CHECK(cache_disk_put(disk, test_key(5), fp2, other_payload, 300));
  CHECK(get_matches(disk, 5, fp1));
  void *bytes = NULL;
  size_t len = 0;
  CHECK(cache_disk_get(disk, test_key(5), fp2, &bytes, &len));
  CHECK(len == 300 && memcmp(bytes, other_payload, 300) == 0);
  free(bytes);
  free(other_payload);
  cache_disk_close(disk);
  remove_tree(dir);
}

/* ---- eviction ---- */

static void set_mtime(const char *path, time_t when) {
  struct timespec times[2] = {{.tv_sec = when}, {.tv_sec = when}};
  CHECK(utimensat(AT_FDCWD, path, times, 0) == 0);
}

static void lru_eviction(void) {
  char dir[64];
  make_temp_dir(dir);
  /* room for all four entries but one byte: the fourth put evicts exactly one */
  uint64_t all = 0;
  for (uint64_t i = 0; i < 4; i++) all += CACHE_DISK_HEADER_BYTES + strlen(FP) + test_len(i);
  uint64_t entry = all / 4;
  cache_disk *disk = open_dir(dir, all - 1);
  if (!disk) return;
  char paths[4][512];
  for (int i = 0; i < 3; i++) {
    CHECK(put_payload(disk, (uint64_t)i, FP));
    entry_file(dir, (uint64_t)i, FP, paths[i]);
  }
  /* The clock's resolution is coarser than a few puts: set the order explicitly, 0 oldest. */
  time_t now = time(NULL);
  for (int i = 0; i < 3; i++) set_mtime(paths[i], now - 300 + 100 * i);
  CHECK(get_matches(disk, 0, FP)); /* a hit makes 0 the most recently used */
  CHECK(put_payload(disk, 3, FP)); /* so 1 goes */
  entry_file(dir, 3, FP, paths[3]);
  CHECK(file_exists(paths[0]));
  CHECK(!file_exists(paths[1]));
  CHECK(file_exists(paths[2]));
  CHECK(file_exists(paths[3]));
  cache_disk_stats s;
  cache_disk_get_stats(disk, &s);
  CHECK_EQ_INT(s.evictions, 1);
  /* an entry bigger than the whole limit is not written at all */
  void *big = test_payload(50, 4 * entry);
  CHECK(!cache_disk_put(disk, test_key(50), FP, big, 4 * entry));
  free(big);
  CHECK(file_exists(paths[0]) && file_exists(paths[2]) && file_exists(paths[3]));
  cache_disk_summary summary;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK(cache_disk_scan(dir, true, false, NULL, NULL, &summary, &diag) == HLO_OK);
  CHECK_EQ_INT(summary.entries, 3);
  CHECK(summary.entry_bytes <= all - 1);
  cache_disk_close(disk);

  /* stale temporary files go with eviction; fresh ones stay (their writer is alive) */
  char stale[512], fresh[512];
  snprintf(stale, sizeof stale, "%s/" CACHE_DISK_TEMP_PREFIX "stale", dir);
  snprintf(fresh, sizeof fresh, "%s/" CACHE_DISK_TEMP_PREFIX "fresh", dir);
  fclose(fopen(stale, "w"));
  fclose(fopen(fresh, "w"));
  set_mtime(stale, now - CACHE_DISK_STALE_TEMP_SECONDS - 60);
  CHECK_EQ_INT(cache_disk_evict(dir, UINT64_MAX, CACHE_DISK_STALE_TEMP_SECONDS, NULL), 0);
  CHECK(!file_exists(stale));
  CHECK(file_exists(fresh));
  /* the scans open the directory once, not through a symlink, and reach files relative to it:
   * a link to the cache is refused by verify, clear and eviction alike, its entries kept */
  char link[512];
  snprintf(link, sizeof link, "%s-link", dir);
  CHECK(symlink(dir, link) == 0);
  hlo_diag_clear(&diag);
  CHECK(cache_disk_scan(link, true, true, NULL, NULL, &summary, &diag) == HLO_ERR_INTERNAL);
  CHECK(strstr(diag.message, "cannot read compile cache directory") != NULL);
  hlo_diag_clear(&diag);
  CHECK(cache_disk_clear(link, &summary, &diag) == HLO_ERR_INTERNAL);
  CHECK_EQ_INT(cache_disk_evict(link, 0, -1, NULL), 0);
  CHECK(file_exists(paths[0]) && file_exists(fresh));
  unlink(link);
  /* clear removes entries and temporary files, and nothing else */
  char other[512];
  snprintf(other, sizeof other, "%s/README", dir);
  fclose(fopen(other, "w"));
  CHECK(cache_disk_clear(dir, &summary, &diag) == HLO_OK);
  CHECK_EQ_INT(summary.entries, 3);
  CHECK_EQ_INT(summary.temps, 1);
  CHECK(file_exists(other));
  CHECK_EQ_INT(count_files(dir, ""), 1);
  remove_tree(dir);
}

/* ---- scan and verify ---- */

static int visited;
static void count_visit(void *ctx, const cache_disk_entry_info *info) {
  (void)ctx;
  visited++;
  if (!info->is_temp && !info->problem) CHECK(strcmp(info->fingerprint, FP) == 0);
}

/* A stale temporary file in dir (a writer that died), which an eviction scan removes: it
 * shows when a scan ran. */
static void plant_stale_temp(const char *dir, char path[512]) {
  snprintf(path, 512, "%s/" CACHE_DISK_TEMP_PREFIX "dead-writer", dir);
  fclose(fopen(path, "w"));
  set_mtime(path, time(NULL) - CACHE_DISK_STALE_TEMP_SECONDS - 60);
}

/* The directory is listed (stat per entry) at a process's first write, then only once its
 * writes since could take the directory past the limit or come to a sixteenth of it, and once
 * more at close after writes; the limit still holds after each of those. */
static void scans_amortized(void) {
  char dir[64], stale[512];
  make_temp_dir(dir);
  uint64_t entry = CACHE_DISK_HEADER_BYTES + strlen(FP) + test_len(0), limit = 64 * entry;
  cache_disk *disk = open_dir(dir, limit);
  if (!disk) return;
  plant_stale_temp(dir, stale);
  CHECK(put_payload(disk, 0, FP)); /* the first write scans */
  CHECK(!file_exists(stale));
  plant_stale_temp(dir, stale);
  CHECK(put_payload(disk, 1, FP)); /* 2 entries written since: under a sixteenth of 64 */
  CHECK(put_payload(disk, 2, FP));
  CHECK(file_exists(stale));
  int i = 3;
  for (; i < 64 && file_exists(stale); i++) CHECK(put_payload(disk, (uint64_t)i, FP));
  /* the scan came when this process's writes since the first reached limit / 16 (4 entries,
   * give or take the payloads' lengths) */
  CHECK_MSG(i >= 5 && i <= 8, "the second scan came after %d writes", i);
  plant_stale_temp(dir, stale);
  CHECK(put_payload(disk, 100, FP));
  CHECK(file_exists(stale));
  cache_disk_close(disk); /* written since the last scan: close scans */
  CHECK(!file_exists(stale));
  /* a limit that the writes since the last scan would pass scans at once, and evicts */
  disk = open_dir(dir, 3 * entry);
  if (!disk) return;
  CHECK(put_payload(disk, 200, FP));
  cache_disk_summary summary;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK(cache_disk_scan(dir, false, false, NULL, NULL, &summary, &diag) == HLO_OK);
  CHECK(summary.entry_bytes <= 3 * entry);
  CHECK(put_payload(disk, 201, FP));
  CHECK(cache_disk_scan(dir, false, false, NULL, NULL, &summary, &diag) == HLO_OK);
  CHECK(summary.entry_bytes <= 3 * entry);
  cache_disk_close(disk);
  hlo_diag_clear(&diag);
  CHECK(cache_disk_clear(dir, &summary, &diag) == HLO_OK);
  rmdir(dir);
}

static void scan_and_verify(void) {
  char dir[64];
  make_temp_dir(dir);
  cache_disk *disk = open_dir(dir, 1 << 20);
  if (!disk) return;
  for (uint64_t i = 0; i < 4; i++) put_payload(disk, i, FP);
  char path[512];
  entry_file(dir, 2, FP, path);
  damage_file(path, FLIP_PAYLOAD);
  cache_disk_summary summary;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  visited = 0;
  /* the header-only scan cannot see payload damage; the full check can */
  CHECK(cache_disk_scan(dir, false, false, count_visit, NULL, &summary, &diag) == HLO_OK);
  CHECK_EQ_INT(visited, 4);
  CHECK_EQ_INT(summary.bad_entries, 0);
  CHECK(cache_disk_scan(dir, true, false, NULL, NULL, &summary, &diag) == HLO_OK);
  CHECK_EQ_INT(summary.bad_entries, 1);
  CHECK(file_exists(path));
  CHECK(cache_disk_scan(dir, true, true, NULL, NULL, &summary, &diag) == HLO_OK);
  CHECK_EQ_INT(summary.removed, 1);
  CHECK(!file_exists(path));
  CHECK(cache_disk_scan(dir, true, false, NULL, NULL, &summary, &diag) == HLO_OK);
  CHECK_EQ_INT(summary.entries, 3);
  CHECK_EQ_INT(summary.bad_entries, 0);
  cache_disk_close(disk);
  /* a directory that does not exist is an empty cache */
  char missing[128];
  snprintf(missing, sizeof missing, "%s/missing", dir);
  CHECK(cache_disk_scan(missing, true, false, NULL, NULL, &summary, &diag) == HLO_OK);
  CHECK_EQ_INT(summary.entries, 0);
  remove_tree(dir);
}

/* ---- get or compile ---- */

typedef struct fake {
  int compiles, loads, adopts;
  bool refuse_load;
} fake;

static void *fake_compile(void *ctx, hlo_diag *diag) {
  (void)diag;
  ((fake *)ctx)->compiles++;
  return strdup("compiled value");
}

static hlo_status fake_serialize(void *ctx, const void *value, void **bytes, size_t *len, hlo_diag *diag) {
  (void)ctx, (void)diag;
  *bytes = strdup(value);
  *len = strlen(value) + 1;
  return HLO_OK;
}

static void *fake_deserialize(void *ctx, const void *bytes, size_t len, hlo_diag *diag) {
  fake *f = ctx;
  if (f->refuse_load || len == 0 || ((const char *)bytes)[len - 1] != '\0') {
    hlo_diag_set(diag, HLO_ERR_INPUT, "bad bytes");
    return NULL;
  }
  f->loads++;
  return strdup(bytes);
}

/* Keeps the bytes as the value (refused: frees them), as the cpu backend keeps its text. */
static void *fake_adopt(void *ctx, void *bytes, size_t len, hlo_diag *diag) {
  fake *f = ctx;
  if (f->refuse_load || len == 0 || ((const char *)bytes)[len - 1] != '\0') {
    free(bytes);
    hlo_diag_set(diag, HLO_ERR_INPUT, "bad bytes");
    return NULL;
  }
  f->adopts++;
  return bytes;
}

static void get_or_compile(void) {
  char dir[64];
  make_temp_dir(dir);
  cache_disk *disk = open_dir(dir, 1 << 20);
  if (!disk) return;
  fake f = {0};
  cache_codec codec = {&f, fake_compile, fake_serialize, fake_deserialize, NULL};
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_origin origin;
  char *v = cache_disk_get_or_compile(disk, test_key(1), FP, &codec, &origin, NULL, &diag);
  CHECK(v && strcmp(v, "compiled value") == 0 && origin == CACHE_ORIGIN_COMPILED);
  free(v);
  v = cache_disk_get_or_compile(disk, test_key(1), FP, &codec, &origin, NULL, &diag);
  CHECK(v && strcmp(v, "compiled value") == 0 && origin == CACHE_ORIGIN_DISK);
  free(v);
  CHECK_EQ_INT(f.compiles, 1);
  CHECK_EQ_INT(f.loads, 1);
  /* an intact entry the backend cannot load: removed, compiled again, saved again */
  f.refuse_load = true;
  cache_disk_reset_warnings();
  capture_begin();
  v = cache_disk_get_or_compile(disk, test_key(1), FP, &codec, &origin, NULL, &diag);
  const char *text = capture_end();
  CHECK(v && origin == CACHE_ORIGIN_COMPILED);
  free(v);
  CHECK(strstr(text, cache_disk_problem_name(CACHE_DISK_UNLOADABLE)) != NULL);
  CHECK_EQ_INT(f.compiles, 2);
  f.refuse_load = false;
  v = cache_disk_get_or_compile(disk, test_key(1), FP, &codec, &origin, NULL, &diag);
  CHECK(v && origin == CACHE_ORIGIN_DISK);
  free(v);
  cache_disk_stats s;
  cache_disk_get_stats(disk, &s);
  CHECK_EQ_INT(s.corrupt, 1);
  CHECK_EQ_INT(s.writes, 2);
  /* no disk: compile every time */
  v = cache_disk_get_or_compile(NULL, test_key(1), FP, &codec, &origin, NULL, &diag);
  CHECK(v && origin == CACHE_ORIGIN_COMPILED);
  free(v);
  cache_disk_close(disk);
  remove_tree(dir);
}

/* A codec that adopts: a load hands it the bytes read (the value is that buffer; ASan says
 * whether each is freed once), deserialize is not called, and an adopt that refuses is a
 * rejected entry, compiled again, as with deserialize. */
static void get_or_compile_adopting(void) {
  char dir[64];
  make_temp_dir(dir);
  cache_disk *disk = open_dir(dir, 1 << 20);
  if (!disk) return;
  fake f = {0};
  cache_codec codec = {&f, fake_compile, fake_serialize, fake_deserialize, fake_adopt};
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_origin origin;
  char *v = cache_disk_get_or_compile(disk, test_key(2), FP, &codec, &origin, NULL, &diag);
  CHECK(v && strcmp(v, "compiled value") == 0 && origin == CACHE_ORIGIN_COMPILED);
  free(v);
  v = cache_disk_get_or_compile(disk, test_key(2), FP, &codec, &origin, NULL, &diag);
  CHECK(v && strcmp(v, "compiled value") == 0 && origin == CACHE_ORIGIN_DISK);
  free(v);
  CHECK_EQ_INT(f.adopts, 1);
  CHECK_EQ_INT(f.loads, 0);
  f.refuse_load = true;
  cache_disk_reset_warnings();
  capture_begin();
  v = cache_disk_get_or_compile(disk, test_key(2), FP, &codec, &origin, NULL, &diag);
  capture_end();
  CHECK(v && origin == CACHE_ORIGIN_COMPILED);
  free(v);
  CHECK_EQ_INT(f.compiles, 2);
  CHECK_EQ_INT(f.adopts, 1);
  cache_disk_stats s;
  cache_disk_get_stats(disk, &s);
  CHECK_EQ_INT(s.corrupt, 1);
  cache_disk_close(disk);
  remove_tree(dir);
}

/* ---- filesystem failures, injected ---- */

static void injected_faults(void) {
  static const char *const faults[] = {"open:EROFS", "open:EACCES", "write:ENOSPC", "write:EDQUOT",
                                       "fsync:EIO",  "rename:EACCES", "rename:EROFS"};
  for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++) {
    char dir[64];
    make_temp_dir(dir);
    cache_disk *good = open_dir(dir, 1 << 20);
    put_payload(good, 1, FP); /* written before the disk went bad */
    cache_disk_close(good);
    cache_disk *disk = open_faulty(dir, 1 << 20, faults[f]);
    if (!disk) continue;
    cache_disk_reset_warnings();
    capture_begin();
    bool put2 = put_payload(disk, 2, FP), put3 = put_payload(disk, 3, FP);
    const char *text = capture_end();
    CHECK_MSG(!put2 && !put3, "%s: a put succeeded", faults[f]);
    CHECK_MSG(count_occurrences(text, "cannot write") == 1, "%s: warnings:\n%s", faults[f], text);
    CHECK(get_matches(disk, 1, FP)); /* reads still work */
    CHECK(!get_matches(disk, 2, FP));
    cache_disk_stats s;
    cache_disk_get_stats(disk, &s);
    CHECK_EQ_INT(s.write_errors, 2);
    CHECK_EQ_INT(s.writes, 0);
    CHECK_EQ_INT(count_files(dir, CACHE_DISK_TEMP_PREFIX), 0); /* failed writers clean up */
    CHECK_EQ_INT(count_files(dir, ""), 1);
    cache_disk_close(disk);
    remove_tree(dir);
  }
  /* a directory that cannot be created: every get misses, every put is skipped */
  char dir[64];
  make_temp_dir(dir);
  cache_disk_reset_warnings();
  capture_begin();
  cache_disk *disk = open_faulty(dir, 1 << 20, "mkdir:EACCES");
  CHECK(disk && !put_payload(disk, 1, FP) && !get_matches(disk, 1, FP));
  const char *text = capture_end();
  CHECK_EQ_INT(count_occurrences(text, "cannot create"), 1);
  cache_disk_close(disk);
  /* unreadable entries: misses with a warning, not damage */
  disk = open_dir(dir, 1 << 20);
  put_payload(disk, 1, FP);
  cache_disk_close(disk);
  disk = open_faulty(dir, 1 << 20, "read:EACCES");
  capture_begin();
  CHECK(!get_matches(disk, 1, FP));
  text = capture_end();
  CHECK(strstr(text, "cannot read") != NULL);
  cache_disk_stats s;
  cache_disk_get_stats(disk, &s);
  CHECK_EQ_INT(s.corrupt, 0);
  cache_disk_close(disk);
  CHECK_EQ_INT(count_files(dir, ""), 1); /* the unreadable entry was not removed */
  remove_tree(dir);
  /* malformed hook values are errors, not silently ignored */
  hlo_diag diag;
  hlo_diag_clear(&diag);
  disk = cache_disk_open("/tmp", 1 << 20, &(cache_disk_test_hooks){.fault = "open:EPERM"}, &diag);
  CHECK(disk == NULL && diag.status == HLO_ERR_INPUT);
}

/* ---- filesystem failures, real: a 64 KiB tmpfs, then the same remounted read-only ----
 * Needs a private mount namespace (CAP_SYS_ADMIN, which CI's root has); skipped, with a note,
 * where unshare or mount is refused. Runs in a child so the mounts never leak. */

static int real_filesystem_child(const char *dir) {
  if (unshare(CLONE_NEWNS) != 0) return 77;
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return 77;
  /* mode: a fresh tmpfs is 1777, which the cache refuses as not private */
  if (mount("tmpfs", dir, "tmpfs", 0, "size=64k,mode=0700") != 0) return 77;
  int failures = 0;
#define EXPECT(cond) (failures += !(cond) ? (fprintf(stderr, "child: %s:%d: %s\n", __FILE__, __LINE__, #cond), 1) : 0)
  cache_disk_reset_warnings();
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_disk *disk = cache_disk_open(dir, 1 << 30, NULL, &diag);
  EXPECT(disk != NULL);
  if (!disk) return 1;
  EXPECT(put_payload(disk, 1, FP));
  void *big = test_payload(2, 200000); /* more than the filesystem holds: ENOSPC */
  EXPECT(!cache_disk_put(disk, test_key(2), FP, big, 200000));
  free(big);
  EXPECT(count_files(dir, CACHE_DISK_TEMP_PREFIX) == 0);
  EXPECT(get_matches(disk, 1, FP));
  EXPECT(put_payload(disk, 3, FP)); /* space came back with the failed write's file gone */
  if (mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY, "size=64k") != 0) return 77;
  EXPECT(!put_payload(disk, 4, FP)); /* EROFS */
  EXPECT(get_matches(disk, 1, FP));  /* and reads still hit */
  EXPECT(get_matches(disk, 3, FP));
  cache_disk_stats s;
  cache_disk_get_stats(disk, &s);
  EXPECT(s.write_errors == 2);
  cache_disk_close(disk);
  return failures ? 1 : 0;
#undef EXPECT
}

static void real_filesystem_failures(void) {
  char dir[64];
  make_temp_dir(dir);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) _exit(real_filesystem_child(dir));
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    printf("note: no private mount namespace here; the real full and read-only filesystem checks were skipped "
           "(the injected ones ran)\n");
  } else {
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  }
  remove_tree(dir);
}

/* ---- configuration ---- */

static void configuration(void) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_mode mode;
  unsetenv("LATCH_CACHE");
  CHECK(cap_env_cache_mode(CACHE_MODE_DISK, &mode, &diag) == HLO_OK && mode == CACHE_MODE_DISK);
  setenv("LATCH_CACHE", "memory", 1);
  CHECK(cap_env_cache_mode(CACHE_MODE_DISK, &mode, &diag) == HLO_OK && mode == CACHE_MODE_MEMORY);
  setenv("LATCH_CACHE", "off", 1);
  CHECK(cap_env_cache_mode(CACHE_MODE_DISK, &mode, &diag) == HLO_OK && mode == CACHE_MODE_OFF);
  setenv("LATCH_CACHE", "dsik", 1);
  CHECK(cap_env_cache_mode(CACHE_MODE_DISK, &mode, &diag) == HLO_ERR_INPUT);
  unsetenv("LATCH_CACHE");

  char saved_home[512] = "", saved_xdg[512] = "", saved_dir[512] = "";
  const char *h = getenv("HOME"), *x = getenv("XDG_CACHE_HOME"), *d = getenv("LATCH_CACHE_DIR");
  if (h) snprintf(saved_home, sizeof saved_home, "%s", h);
  if (x) snprintf(saved_xdg, sizeof saved_xdg, "%s", x);
  if (d) snprintf(saved_dir, sizeof saved_dir, "%s", d);
  char out[512];
  setenv("HOME", "/home/u", 1);
  unsetenv("XDG_CACHE_HOME");
  unsetenv("LATCH_CACHE_DIR");
  hlo_diag_clear(&diag);
  CHECK(cap_env_cache_dir(out, sizeof out, &diag) == HLO_OK);
  CHECK_STR(out, "/home/u/.cache/latch");
  setenv("XDG_CACHE_HOME", "relative", 1); /* ignored, as XDG says */
  CHECK(cap_env_cache_dir(out, sizeof out, &diag) == HLO_OK);
  CHECK_STR(out, "/home/u/.cache/latch");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  CHECK(cap_env_cache_dir(out, sizeof out, &diag) == HLO_OK);
  CHECK_STR(out, "/xdg/latch");
  setenv("LATCH_CACHE_DIR", "/explicit", 1);
  CHECK(cap_env_cache_dir(out, sizeof out, &diag) == HLO_OK);
  CHECK_STR(out, "/explicit");
  if (*saved_home) setenv("HOME", saved_home, 1);
  if (*saved_xdg) setenv("XDG_CACHE_HOME", saved_xdg, 1);
  else unsetenv("XDG_CACHE_HOME");
  if (*saved_dir) setenv("LATCH_CACHE_DIR", saved_dir, 1);
  else unsetenv("LATCH_CACHE_DIR");

  uint64_t max = 0;
  unsetenv("LATCH_CACHE_MAX_BYTES");
  CHECK(cap_env_cache_max_bytes(&max, &diag) == HLO_OK && max == CACHE_DISK_DEFAULT_MAX_BYTES);
  setenv("LATCH_CACHE_MAX_BYTES", "512M", 1);
  CHECK(cap_env_cache_max_bytes(&max, &diag) == HLO_OK && max == UINT64_C(512) << 20);
  setenv("LATCH_CACHE_MAX_BYTES", "12345", 1);
  CHECK(cap_env_cache_max_bytes(&max, &diag) == HLO_OK && max == 12345);
  static const char *const bad[] = {"0", "-5", "12X", "lots", "99999999999999999999", "20000000000T"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("LATCH_CACHE_MAX_BYTES", bad[i], 1);
    hlo_diag_clear(&diag);
    CHECK_MSG(cap_env_cache_max_bytes(&max, &diag) == HLO_ERR_INPUT, "%s accepted", bad[i]);
  }
  unsetenv("LATCH_CACHE_MAX_BYTES");
}

int main(void) {
  unsetenv("LATCH_CACHE_TEST_FAULT");
  unsetenv("LATCH_CACHE_TEST_WRITE_DELAY_MS");
  RUN(round_trip);
  RUN(damaged_entries);
  RUN(every_byte_checked);
  RUN(fingerprints);
  RUN(lru_eviction);
  RUN(scans_amortized);
  RUN(scan_and_verify);
  RUN(get_or_compile);
  RUN(get_or_compile_adopting);
  RUN(injected_faults);
  RUN(real_filesystem_failures);
  RUN(configuration);
  return TEST_REPORT();
}
