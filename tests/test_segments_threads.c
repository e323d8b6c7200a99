/* A traced step whose caches grow by one position a call (capture/segments.c): its still
 * parts are compiled once, the moved part (the concatenations and the attention over the
 * caches) is compiled at the symbolic trace and bound to every later size. Checked: the
 * values against a host fp64 computation at every size; the compile counts (nothing compiled
 * after the symbolic trace, at new sizes or old ones); a second runtime on the same disk
 * cache compiling nothing; a disk cache whose every entry a writer replaced with another
 * program's executable (each fails its first run: compiled afresh, said once, the values
 * right, the next runtime compiling nothing); the LATCH_LOG=guards line; and threads calling
 * with different sizes at once (run under ThreadSanitizer by `make tsan`). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/capture.h"
#include "disk_test_util.h"
#include "function_util.h"

enum { D = 16, DEPTH = 10, POSITIONS = 64, LAYERS = 2, THREADS = 2, CALLS = 12 };

static float weights[D * D], positions[POSITIONS * D];

typedef struct model {
  latch_tensor *w, *p;
} model;

/* DEPTH times h = tanh(h @ w): still work on both sides of the attention. */
static latch_tensor *stack(latch_tensor *h, latch_tensor *w) {
  for (int i = 0; i < DEPTH; i++) {
    latch_tensor *m = latch_matmul(h, w);
    latch_release(h);
    h = latch_unary(LATCH_TANH, m);
    latch_release(m);
  }
  return h;
}

/* h [1, D] attends over cache [1, T, D] grown by h itself: h + sum_t softmax_t(k_t . h) k_t. */
static latch_tensor *attend(latch_tensor *h, latch_tensor *cache, latch_tensor **keys) {
  latch_tensor *k = latch_reshape(h, 3, FDIMS(1, 1, D)), *q = latch_reshape(h, 3, FDIMS(1, D, 1));
  latch_tensor *parts[2] = {cache, k};
  *keys = latch_concat(2, parts, 1);
  latch_tensor *scores = latch_matmul(*keys, q), *w = latch_softmax(scores, 1);
  latch_tensor *weighted = latch_binary(LATCH_MUL, w, *keys);
  int over = 1;
  latch_tensor *context = latch_reduce(LATCH_SUM, weighted, 1, &over, false);
  latch_tensor *out = latch_binary(LATCH_ADD, h, context);
  latch_release(k), latch_release(q), latch_release(scores), latch_release(w), latch_release(weighted);
  latch_release(context);
  return out;
}

/* in: x [1, D], then a cache [1, T, D] per layer; out: h, then each grown cache. */
static latch_status step(void *user, latch_tensor *const *in, int n, latch_tensor **out, int m) {
  (void)n, (void)m;
  const model *md = user;
  latch_size at = latch_size_of(in[1], 1);
  latch_tensor *pos = latch_slice_sized(md->p, 0, at, latch_size_add(at, latch_size_const(1)), 1);
  latch_tensor *h = stack(latch_binary(LATCH_ADD, in[0], pos), md->w);
  latch_release(pos);
  for (int l = 0; l < LAYERS; l++) {
    latch_tensor *next = attend(h, in[1 + l], &out[1 + l]);
    latch_release(h);
    h = stack(next, md->w);
  }
  out[0] = h;
  return LATCH_OK;
}

static float cache_value(int layer, int64_t t, int j) { return (float)(0.2 * sin((double)t + 0.3 * j + layer)); }
static float x_value(int j) { return (float)(0.1 * j - 0.5); }

static void host_stack(double *h) {
  for (int i = 0; i < DEPTH; i++) {
    double m[D] = {0};
    for (int j = 0; j < D; j++)
      for (int k = 0; k < D; k++) m[j] += h[k] * weights[k * D + j];
    for (int j = 0; j < D; j++) h[j] = tanh(m[j]);
  }
}

/* The step in fp64 at cache length t: out gets h, grown[l] the row layer l appends (h
 * before that layer). */
static void host_step(int64_t t, double *out, double grown[LAYERS][D]) {
  double h[D];
  for (int j = 0; j < D; j++) h[j] = (double)x_value(j) + positions[t * D + j];
  host_stack(h);
  for (int l = 0; l < LAYERS; l++) {
    memcpy(grown[l], h, sizeof h);
    double *scores = malloc(sizeof(double) * (size_t)(t + 1)), top = -INFINITY, sum = 0, context[D] = {0};
    for (int64_t s = 0; s <= t; s++) {
      scores[s] = 0;
      for (int j = 0; j < D; j++) scores[s] += (s < t ? cache_value(l, s, j) : h[j]) * h[j];
      top = fmax(top, scores[s]);
    }
    for (int64_t s = 0; s <= t; s++) sum += exp(scores[s] - top);
    for (int64_t s = 0; s <= t; s++)
      for (int j = 0; j < D; j++) context[j] += exp(scores[s] - top) / sum * (s < t ? cache_value(l, s, j) : h[j]);
    free(scores);
    for (int j = 0; j < D; j++) h[j] += context[j];
    host_stack(h);
  }
  for (int j = 0; j < D; j++) out[j] = h[j];
}

/* One call at cache length t; true when h and the grown caches are right. */
static bool call_at(latch_runtime *rt, latch_function *f, int64_t t) {
  float x[D], *cache = malloc(sizeof(float) * (size_t)(t * D));
  for (int j = 0; j < D; j++) x[j] = x_value(j);
  latch_tensor *in[1 + LAYERS], *out[1 + LAYERS] = {NULL};
  in[0] = latch_from_host(rt, LATCH_F32, 2, FDIMS(1, D), x);
  for (int l = 0; l < LAYERS; l++) {
    for (int64_t s = 0; s < t; s++)
      for (int j = 0; j < D; j++) cache[s * D + j] = cache_value(l, s, j);
    in[1 + l] = latch_from_host(rt, LATCH_F32, 3, FDIMS(1, t, D), cache);
  }
  free(cache);
  bool ok = latch_call(f, in, 1 + LAYERS, NULL, 0, out, 1 + LAYERS) == LATCH_OK;
  double want[D], grown[LAYERS][D], *got = ok ? fu_read(out[0]) : NULL;
  host_step(t, want, grown);
  ok = ok && got;
  for (int j = 0; ok && j < D; j++) ok = fabs(got[j] - want[j]) <= 1e-4 * (1 + fabs(want[j]));
  free(got);
  for (int l = 0; ok && l < LAYERS; l++) { /* the cache as passed, then the row the layer appends */
    ok = latch_dim(out[1 + l], 1) == t + 1;
    double *keys = ok ? fu_read(out[1 + l]) : NULL;
    ok = ok && keys;
    for (int64_t s = 0; ok && s < t; s++)
      for (int j = 0; j < D; j++) ok = ok && keys[s * D + j] == (double)cache_value(l, s, j);
    for (int j = 0; ok && j < D; j++) ok = fabs(keys[t * D + j] - grown[l][j]) <= 1e-4 * (1 + fabs(grown[l][j]));
    free(keys);
  }
  for (int k = 0; k < 1 + LAYERS; k++) latch_release(in[k]), latch_release(out[k]);
  return ok;
}

static latch_runtime *open_memory(const char *log) {
  latch_options options;
  latch_options_init(&options);
  options.log = log;
  options.backend = "cpu";
  options.eager = false;
  options.cache = "memory";
  options.check = "off";
  return latch_open(&options);
}

static void make_model(latch_runtime *rt, model *md) {
  md->w = latch_from_host(rt, LATCH_F32, 2, FDIMS(D, D), weights);
  md->p = latch_from_host(rt, LATCH_F32, 2, FDIMS(POSITIONS, D), positions);
}

static uint64_t compiles(latch_runtime *rt) {
  latch_stats s;
  latch_get_stats(rt, &s);
  return s.compiles;
}

/* Length 4 traces static, 5 symbolic: the still segments and the moved ones compile. Every
 * length after that, new or seen before, binds the moved ones and compiles nothing. */
static void still_part_compiles_once(void) {
  latch_runtime *rt = open_memory(NULL);
  model md;
  make_model(rt, &md);
  latch_function *f = latch_function_new_step(rt, step, &md, NULL);
  const int64_t lengths[] = {4, 5, 6, 7, 5, 30, 6};
  uint64_t made[8];
  made[0] = compiles(rt);
  for (int k = 0; k < 7; k++) {
    CHECK_MSG(call_at(rt, f, lengths[k]), "length %lld", (long long)lengths[k]);
    made[k + 1] = compiles(rt);
  }
  CHECK_MSG(made[2] - made[1] >= 2, "the symbolic trace compiled %llu graphs", (unsigned long long)(made[2] - made[1]));
  CHECK_EQ_INT(made[7] - made[2], 0); /* lengths 6, 7, 5, 30, 6 */
  latch_function_stats s;
  latch_function_get_stats(f, &s);
  CHECK_EQ_INT(s.traces, 2);
  CHECK_EQ_INT(s.specializations, 0);
  CHECK_EQ_INT(s.instantiations, 3); /* lengths 6, 7 and 30 bound */
  latch_function_free(f);
  latch_release(md.w), latch_release(md.p);
  latch_close(rt);
}

/* Under LATCH_CHECK every new executable is compiled so its first run is checked: each new
 * length compiles its moved segments again (the same number each time), and the values
 * stay right. */
static void check_mode_compiles_each_length(void) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "cpu";
  options.eager = false;
  options.cache = "memory";
  options.check = "compile";
  latch_runtime *rt = latch_open(&options);
  CHECK(rt != NULL);
  model md;
  make_model(rt, &md);
  latch_function *f = latch_function_new_step(rt, step, &md, NULL);
  uint64_t made[5];
  made[0] = compiles(rt);
  for (int k = 0; k < 4; k++) {
    CHECK_MSG(call_at(rt, f, 4 + k), "length %d", 4 + k);
    made[k + 1] = compiles(rt);
  }
  uint64_t moved = made[3] - made[2];
  CHECK_MSG(moved >= 1 && moved < made[2] - made[1], "a new length compiled %llu", (unsigned long long)moved);
  CHECK_EQ_INT(made[4] - made[3], moved);
  latch_function_free(f);
  latch_release(md.w), latch_release(md.p);
  latch_close(rt);
}

/* Every segment a first runtime compiled is on disk: a second one compiles nothing. */
static void disk_cache_keeps_segments(void) {
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/latch-segments-XXXXXX");
  CHECK(mkdtemp(dir) != NULL);
  for (int run = 0; run < 2; run++) {
    latch_runtime *rt = fu_open_disk(dir);
    model md;
    make_model(rt, &md);
    latch_function *f = latch_function_new_step(rt, step, &md, NULL);
    for (int64_t t = 4; t <= 9; t++) CHECK_MSG(call_at(rt, f, t), "run %d, length %lld", run, (long long)t);
    latch_stats s;
    latch_get_stats(rt, &s);
    latch_function_stats fs;
    latch_function_get_stats(f, &fs);
    /* lengths 6 to 9 bind their moved segments: instantiations, no compile */
    CHECK_EQ_INT(fs.specializations, 0);
    CHECK_EQ_INT(fs.instantiations, 4);
    if (run == 1) { /* the still and moved segments of the symbolic trace loaded */
      CHECK_EQ_INT(s.compiles, 0);
      CHECK(s.disk_loads >= 2);
    }
    latch_function_free(f);
    latch_release(md.w), latch_release(md.p);
    latch_close(rt);
  }
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  CHECK(system(command) == 0);
}

/* Lengths 4 to 7 (static, then symbolic: still and moved segments, moved ones per length)
 * in a runtime on the disk cache dir; false unless every value is right. */
static bool lengths_on_disk(const char *dir, latch_stats *s) {
  latch_runtime *rt = fu_open_disk(dir);
  if (!rt) return false;
  model md;
  make_model(rt, &md);
  latch_function *f = latch_function_new_step(rt, step, &md, NULL);
  bool right = true;
  for (int64_t t = 4; t <= 7; t++) right = call_at(rt, f, t) && right;
  latch_get_stats(rt, s);
  latch_function_free(f);
  latch_release(md.w), latch_release(md.p);
  latch_close(rt);
  return right;
}

/* relu on f32[4] in a runtime on dir: its one entry. */
static bool relu_entry(const char *dir) {
  latch_runtime *rt = fu_open_disk(dir);
  if (!rt) return false;
  float xs[4] = {-1, 0, 1, 2}, out[4] = {0};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, FDIMS(4), xs), *y = latch_relu(x);
  bool right = y && latch_read(y, out, sizeof out) == LATCH_OK && out[0] == 0 && out[1] == 0 && out[3] == 2;
  latch_release(x), latch_release(y);
  latch_close(rt);
  return right;
}

/* Every entry the decoder left on disk (its static graph, the still segments and the moved
 * ones of length 5; lengths 6 and 7 bind those) replaced by relu's executable, with valid
 * header and checksums: each loads, and its first run fails (other parameters). The next
 * runtime compiles each afresh as it meets it (lengths 6 and 7 then bind the fresh moved
 * ones), says so once, and gets the right values; the one after loads the replaced entries
 * and compiles nothing. */
static void planted_segments_compile_afresh(void) {
  char dir[64], relu[64];
  make_temp_dir(dir);
  make_temp_dir(relu);
  latch_stats st;
  CHECK(relu_entry(relu));
  CHECK(lengths_on_disk(dir, &st));
  int planted = plant_everywhere(relu, dir);
  /* the static graph and at least two still and two moved graphs (alike segments share one) */
  CHECK_MSG(planted >= 5, "%d entries planted", planted);

  cap_first_run_reset_warning();
  capture_begin();
  bool right = lengths_on_disk(dir, &st);
  const char *text = capture_end();
  CHECK(right);
  CHECK_EQ_INT((int)st.disk_loads, planted); /* every crafted entry loaded */
  CHECK_EQ_INT((int)st.compiles, planted);   /* and each compiled afresh after its first run failed */
  CHECK_MSG(count_occurrences(text, "failed its first run") == 1, "stderr:\n%s", text);

  cap_first_run_reset_warning();
  capture_begin();
  right = lengths_on_disk(dir, &st);
  text = capture_end();
  CHECK(right);
  CHECK_EQ_INT((int)st.compiles, 0);
  CHECK_EQ_INT((int)st.disk_loads, planted);
  CHECK_MSG(count_occurrences(text, "failed its first run") == 0, "stderr:\n%s", text);
  remove_tree(dir);
  remove_tree(relu);
}

typedef struct logged_calls {
  latch_runtime *rt;
  latch_function *f;
  bool right;
} logged_calls;

static void call_4_and_5(void *arg) {
  logged_calls *c = arg;
  c->right = call_at(c->rt, c->f, 4) && call_at(c->rt, c->f, 5);
}

/* options.log "guards" (LATCH_LOG) names the entry that runs in segments, with its counts. */
static void log_says_segments(void) {
  latch_runtime *rt = open_memory("guards");
  model md;
  make_model(rt, &md);
  latch_function_options o;
  latch_function_options_init(&o);
  o.name = "decoder";
  logged_calls calls = {rt, latch_function_new_step(rt, step, &md, &o), false};
  const char *text = fu_capture_stderr(call_4_and_5, &calls);
  CHECK(calls.right);
  CHECK(strstr(text, "'decoder' entry 1 runs in segments") == NULL); /* the static trace */
  CHECK_MSG(strstr(text, "'decoder' entry 2 runs in segments: 3 still, 3 moved; ") != NULL, "%s", text);
  latch_function_free(calls.f);
  latch_release(md.w), latch_release(md.p);
  latch_close(rt);
}

static latch_runtime *shared_rt;
static latch_function *shared_fn;

static void *caller(void *arg) {
  int id = (int)(intptr_t)arg, bad = 0;
  for (int c = 0; c < CALLS; c++) bad += !call_at(shared_rt, shared_fn, 6 + (c * 5 + id * 3) % 24);
  return (void *)(intptr_t)bad;
}

static void threads_bind_and_run(void) {
  shared_rt = open_memory(NULL);
  model md;
  make_model(shared_rt, &md);
  shared_fn = latch_function_new_step(shared_rt, step, &md, NULL);
  CHECK(call_at(shared_rt, shared_fn, 4) && call_at(shared_rt, shared_fn, 5));
  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, caller, (void *)(intptr_t)t);
  for (int t = 0; t < THREADS; t++) {
    void *bad;
    pthread_join(threads[t], &bad);
    CHECK_EQ_INT((intptr_t)bad, 0);
  }
  latch_function_stats s;
  latch_function_get_stats(shared_fn, &s);
  CHECK_EQ_INT(s.traces, 2);
  latch_function_free(shared_fn);
  latch_release(md.w), latch_release(md.p);
  latch_close(shared_rt);
}

int main(void) {
  for (int i = 0; i < D * D; i++) weights[i] = (float)(0.3 * sin(i * 7.0 + 1));
  for (int i = 0; i < POSITIONS * D; i++) positions[i] = (float)(0.5 * cos(i * 0.37));
  RUN(still_part_compiles_once);
  RUN(check_mode_compiles_each_length);
  RUN(disk_cache_keeps_segments);
  RUN(planted_segments_compile_afresh);
  RUN(log_says_segments);
  RUN(threads_bind_and_run);
  return TEST_REPORT();
}
