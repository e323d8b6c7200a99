/* A disk cache entry that passes every check at load and still fails its first run: the cpu
 * executable of relu(3x - 1) on f32[4] written (with valid checksums and header) under the key
 * of the same program on f32[8], as a writer of the cache directory could. The runtime that
 * loads it sees its first run fail, takes it out of the memory table, compiles afresh, says so
 * once, and returns the right values; the entry on disk is replaced, so the next process loads
 * a good one and compiles nothing. Every runtime that loads entries is tried: the lazy sync,
 * a traced function (latch_call) and latch run. Expected values are worked out here by hand
 * (latch run's: those of a fresh compile on the same inputs). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/disk_internal.h"
#include "capture/capture.h"
#include "cli_util.h"
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

/* ---- a traced function ---- */

static latch_status relu_fn(void *user, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                            int output_count) {
  (void)input_count, (void)output_count;
  latch_runtime *rt = *(latch_runtime **)user;
  latch_tensor *k = latch_scalar(rt, LATCH_F32, 3), *one = latch_scalar(rt, LATCH_F32, 1);
  latch_tensor *a = latch_binary(LATCH_MUL, inputs[0], k), *b = latch_binary(LATCH_SUB, a, one);
  outputs[0] = latch_relu(b);
  latch_release(k), latch_release(one), latch_release(a), latch_release(b);
  return outputs[0] ? LATCH_OK : LATCH_ERR_INTERNAL;
}

/* relu(3x - 1) through a traced function, once on each of count sizes, in a runtime on dir
 * (marked: the size symbolic from the first trace; else every size its own trace); the
 * wrong values (the size, for a call that failed). */
static int call_relu_sizes(const char *dir, const int *sizes, int count, bool marked, latch_stats *st) {
  int wrong = 0;
  for (int c = 0; c < count; c++) wrong += sizes[c];
  latch_runtime *rt = open_disk(dir);
  if (!rt) return wrong;
  latch_function_options options;
  latch_function_options_init(&options);
  latch_dim_mark mark = {0, 0, true, false};
  options.shapes = marked ? LATCH_SHAPES_MARKED : LATCH_SHAPES_STATIC;
  options.mark_count = marked;
  options.marks = &mark;
  latch_function *f = latch_function_new_step(rt, relu_fn, &rt, &options);
  wrong = 0;
  for (int c = 0; c < count; c++) {
    int n = sizes[c];
    float xs[8], out[8];
    for (int i = 0; i < n; i++) xs[i] = (float)i / 4;
    int64_t dims[1] = {n};
    latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, xs), *y = NULL;
    if (f && latch_call(f, &x, 1, NULL, 0, &y, 1) == LATCH_OK && latch_read(y, out, sizeof(float) * (size_t)n) == LATCH_OK) {
      for (int i = 0; i < n; i++) {
        double v = 3.0 * i / 4 - 1; /* exact in binary: quarters */
        wrong += out[i] != (float)(v > 0 ? v : 0);
      }
    } else {
      wrong += n;
    }
    latch_release(x);
    latch_release(y);
  }
  latch_function_free(f);
  latch_get_stats(rt, st);
  latch_close(rt);
  return wrong;
}

/* The same, calls times on n values, every size its own trace. */
static int call_relu(const char *dir, int n, int calls, latch_stats *st) {
  int sizes[4] = {n, n, n, n};
  return call_relu_sizes(dir, sizes, calls, false, st);
}

static void traced_failing_first_run_recompiles(void) {
  char small[64], large[64];
  make_temp_dir(small);
  make_temp_dir(large);
  latch_stats st = {0};
  CHECK_EQ_INT(call_relu(small, 4, 1, &st), 0);
  CHECK_EQ_INT(call_relu(large, 8, 1, &st), 0);
  CHECK(plant_entry(small, large));

  cap_first_run_reset_warning();
  capture_begin();
  int wrong = call_relu(large, 8, 2, &st);
  const char *text = capture_end();
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT((int)st.disk_loads, 1); /* the crafted entry loaded */
  CHECK_EQ_INT((int)st.compiles, 1);   /* and compiled afresh after its first run failed */
  CHECK_MSG(count_occurrences(text, "failed its first run") == 1, "stderr:\n%s", text);

  /* the entry on disk was replaced: the next process loads it and compiles nothing */
  CHECK_EQ_INT(call_relu(large, 8, 1, &st), 0);
  CHECK_EQ_INT((int)st.disk_loads, 1);
  CHECK_EQ_INT((int)st.compiles, 0);
  remove_tree(small);
  remove_tree(large);
}

/* ---- a binding loaded from disk ---- */

/* The payload of trace_dir's one entry written, with valid checksums and header, over the
 * one entry of dir that trace_dir lacks (the binding a symbolic entry saved). */
static bool plant_binding(const char *trace_dir, const char *dir) {
  cache_disk_entry_info *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  void *payload = NULL;
  char trace_name[CACHE_DISK_NAME_MAX], path[600];
  bool ok = a && b && sole_entry(trace_dir, a, &payload);
  if (ok) cache_disk_entry_name(a->key, a->fingerprint, trace_name);
  int others = 0;
  DIR *d = ok ? opendir(dir) : NULL;
  for (struct dirent *ent; d && (ent = readdir(d));) {
    if (!cache_disk_is_entry_name(ent->d_name) || strcmp(ent->d_name, trace_name) == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
    cache_disk_reading r = {.check_payload = true};
    others++;
    ok = ok && cache_disk_read_entry(AT_FDCWD, path, &r, b) == CACHE_DISK_OK;
  }
  if (d) closedir(d);
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_disk *disk = ok && others == 1 ? cache_disk_open(dir, 0, NULL, &diag) : NULL;
  ok = disk && cache_disk_put(disk, b->key, b->fingerprint, payload, (size_t)a->payload_bytes);
  cache_disk_close(disk);
  free(payload);
  free(a);
  free(b);
  return ok;
}

/* A symbolic entry traced on f32[4] and called on f32[8] binds its executable to the new size
 * and saves the binding; a writer of the cache puts the size-4 executable in its place. The
 * next process loads the trace's entry and that binding, whose first run fails: the binding
 * is made afresh, saved over the crafted one, said once, and the values are right. */
static void loaded_binding_failing_first_run_rebinds(void) {
  char trace_dir[64], dir[64];
  make_temp_dir(trace_dir);
  make_temp_dir(dir);
  latch_stats st = {0};
  int four[1] = {4}, sizes[3] = {4, 8, 8};
  CHECK_EQ_INT(call_relu_sizes(trace_dir, four, 1, true, &st), 0);
  CHECK_EQ_INT(call_relu_sizes(dir, sizes, 2, true, &st), 0);
  CHECK_EQ_INT((int)st.compiles, 1); /* the trace's; size 8 was bound */
  CHECK(plant_binding(trace_dir, dir));

  cap_first_run_reset_warning();
  capture_begin();
  int wrong = call_relu_sizes(dir, sizes, 3, true, &st);
  const char *text = capture_end();
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT((int)st.disk_loads, 2); /* the trace's entry and the crafted binding */
  CHECK_EQ_INT((int)st.compiles, 0);   /* bound afresh: nothing to compile */
  CHECK_MSG(count_occurrences(text, "failed its first run") == 1, "stderr:\n%s", text);

  /* the binding on disk was replaced: the next process loads both and says nothing */
  cap_first_run_reset_warning();
  capture_begin();
  wrong = call_relu_sizes(dir, sizes, 2, true, &st);
  text = capture_end();
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT((int)st.disk_loads, 2);
  CHECK_EQ_INT((int)st.compiles, 0);
  CHECK_MSG(count_occurrences(text, "failed its first run") == 0, "stderr:\n%s", text);
  remove_tree(trace_dir);
  remove_tree(dir);
}

/* ---- latch run ---- */

/* relu(3x - 1) on f32[n], as HLO text in the test's directory; its path (static, one per n). */
static const char *write_relu(int n) {
  static char paths[2][512];
  char text[512], name[32];
  snprintf(text, sizeof text,
           "HloModule relu%d\n\nENTRY main {\n  x = f32[%d] parameter(0)\n  k = f32[] constant(3)\n"
           "  kb = f32[%d] broadcast(k), dimensions={}\n  one = f32[] constant(1)\n"
           "  ob = f32[%d] broadcast(one), dimensions={}\n  a = f32[%d] multiply(x, kb)\n"
           "  b = f32[%d] subtract(a, ob)\n  z = f32[] constant(0)\n  zb = f32[%d] broadcast(z), dimensions={}\n"
           "  ROOT y = f32[%d] maximum(b, zb)\n}\n", n, n, n, n, n, n, n, n);
  snprintf(name, sizeof name, "relu%d.hlo", n);
  char *path = paths[n == 8];
  snprintf(path, sizeof paths[0], "%s", cli_path(name));
  cli_write_text(path, text);
  return path;
}

/* The lines of the last run's stdout that start with "output". */
static void outputs_of(char *out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  for (const char *line = cli_out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    size_t n = strcspn(line, "\n");
    if (strncmp(line, "output", 6) == 0 && len + n + 2 < size) {
      memcpy(out + len, line, n);
      len += n;
      out[len++] = '\n';
      out[len] = '\0';
    }
  }
}

static void run_failing_first_run_recompiles(void) {
  if (!cli_setup()) {
    CHECK_MSG(false, "no temporary directory");
    return;
  }
  char small[600], large[600], small_dir[512], large_dir[512], want[4096], got[4096];
  const char *m4 = write_relu(4), *m8 = write_relu(8);
  snprintf(small_dir, sizeof small_dir, "%s", cli_path("small"));
  snprintf(large_dir, sizeof large_dir, "%s", cli_path("large"));
  snprintf(small, sizeof small, "LATCH_CACHE_DIR='%s'", small_dir);
  snprintf(large, sizeof large, "LATCH_CACHE_DIR='%s'", large_dir);
  CLI_CHECK(0, small, "run '%s' --backend cpu", m4);
  CLI_CHECK(0, large, "run '%s' --backend cpu --seed 5", m8); /* a compile: the outputs expected */
  outputs_of(want, sizeof want);
  CHECK(want[0] != '\0');
  CHECK(plant_entry(small_dir, large_dir));

  CLI_CHECK(0, large, "run '%s' --backend cpu --seed 5", m8);
  CHECK_MSG(count_occurrences(cli_err, "failed its first run") == 1, "stderr:\n%s", cli_err);
  CLI_HAS(cli_out, "loaded compiled graph from cache");
  CLI_HAS(cli_out, "cache: 0 hits, 1 compile");
  outputs_of(got, sizeof got);
  CHECK_STR(got, want);
  /* the entry was replaced: a hit, the same outputs, nothing said */
  CLI_CHECK(0, large, "run '%s' --backend cpu --seed 5", m8);
  CLI_HAS(cli_out, "cache: 1 hit, 0 compiles");
  CLI_LACKS(cli_err, "failed its first run");
  outputs_of(got, sizeof got);
  CHECK_STR(got, want);
  cli_cleanup();
}

int main(void) {
  unsetenv("LATCH_CACHE");
  unsetenv("LATCH_CACHE_URL");
  RUN(failing_first_run_recompiles);
  RUN(traced_failing_first_run_recompiles);
  RUN(loaded_binding_failing_first_run_rebinds);
  RUN(run_failing_first_run_recompiles);
  return TEST_REPORT();
}
