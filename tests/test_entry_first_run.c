/* A disk cache entry that passes every check at load and still fails its first run: the cpu
 * executable of relu(3x - 1) on f32[4] written (with valid checksums and header) under the key
 * of the same program on f32[8], as a writer of the cache directory could. The runtime that
 * loads it sees its first run fail, takes it out of the memory table, compiles afresh, says so
 * once, and returns the right values; the entry on disk is replaced, so the next process loads
 * a good one and compiles nothing. Expected values are worked out here by hand. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/disk_internal.h"
#include "capture/capture.h"
#include "disk_test_util.h"
#include "latch.h"
#include "test.h"

static latch_runtime *open_disk(const char *dir) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "cpu";
  options.cache = "disk";
  options.cache_dir = dir;
  latch_runtime *rt = latch_open(&options);
  if (!rt) fprintf(stderr, "latch_open: %s\n", latch_last_error());
  return rt;
}

/* relu(3x - 1) on x = [0, 1, ..., n-1] / 4; the wrong values (n when it failed). With key
 * not NULL, the graph's key instead of a run. */
static int run_relu(latch_runtime *rt, int n, cache_key *key) {
  float xs[8], out[8];
  for (int i = 0; i < n; i++) xs[i] = (float)i / 4;
  int64_t dims[1] = {n};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, xs);
  latch_tensor *k = latch_scalar(rt, LATCH_F32, 3), *one = latch_scalar(rt, LATCH_F32, 1);
  latch_tensor *a = latch_binary(LATCH_MUL, x, k), *b = latch_binary(LATCH_SUB, a, one), *y = latch_relu(b);
  int wrong = n;
  if (key) {
    wrong = cap_graph_key(rt, 1, &y, key) == LATCH_OK ? 0 : n;
  } else if (latch_read(y, out, sizeof(float) * (size_t)n) == LATCH_OK) {
    wrong = 0;
    for (int i = 0; i < n; i++) {
      double v = 3.0 * i / 4 - 1; /* exact in binary: quarters */
      wrong += out[i] != (float)(v > 0 ? v : 0);
    }
  }
  latch_tensor *all[] = {x, k, one, a, b, y};
  for (int i = 0; i < 6; i++) latch_release(all[i]);
  return wrong;
}

/* The payload of the entry for key in dir (malloc'd), or NULL. */
static void *entry_payload(const char *dir, cache_key key, const char *fingerprint, size_t *len) {
  char name[CACHE_DISK_NAME_MAX], path[256];
  cache_disk_entry_name(key, fingerprint, name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  cache_disk_entry_info *info = malloc(sizeof *info);
  cache_disk_reading r = {.check_payload = true, .keep_payload = true};
  void *payload = NULL;
  if (info && cache_disk_read_entry(AT_FDCWD, path, &r, info) == CACHE_DISK_OK) {
    payload = r.payload;
    *len = (size_t)info->payload_bytes;
  }
  free(info);
  return payload;
}

static void failing_first_run_recompiles(void) {
  char dir[64];
  make_temp_dir(dir);
  latch_runtime *rt = open_disk(dir);
  if (!rt) return;
  cache_key small, large;
  CHECK_EQ_INT(run_relu(rt, 4, NULL), 0);
  CHECK_EQ_INT(run_relu(rt, 4, &small), 0);
  CHECK_EQ_INT(run_relu(rt, 8, &large), 0);
  CHECK(small.lo != large.lo || small.hi != large.hi);
  size_t len = 0;
  void *payload = entry_payload(dir, small, rt->fingerprint, &len);
  CHECK(payload != NULL);
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_disk *disk = cache_disk_open(dir, 0, NULL, &diag);
  CHECK(disk && payload && cache_disk_put(disk, large, rt->fingerprint, payload, len));
  cache_disk_close(disk);
  free(payload);
  latch_close(rt);

  capture_begin();
  rt = open_disk(dir);
  int wrong = rt ? run_relu(rt, 8, NULL) + run_relu(rt, 8, NULL) : 16;
  latch_stats st = {0};
  if (rt) latch_get_stats(rt, &st), latch_close(rt);
  const char *text = capture_end();
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT((int)st.disk_loads, 1); /* the crafted entry loaded */
  CHECK_EQ_INT((int)st.compiles, 1);   /* and compiled afresh after its first run failed */
  CHECK_MSG(count_occurrences(text, "failed its first run") == 1, "stderr:\n%s", text);

  /* the entry on disk was replaced: the next process loads it and compiles nothing */
  rt = open_disk(dir);
  CHECK(rt && run_relu(rt, 8, NULL) == 0);
  if (rt) latch_get_stats(rt, &st), latch_close(rt);
  CHECK_EQ_INT((int)st.disk_loads, 1);
  CHECK_EQ_INT((int)st.compiles, 0);
  remove_tree(dir);
}

int main(void) {
  RUN(failing_first_run_recompiles);
  return TEST_REPORT();
}
