/* Sync, keys, the cache, errors and poisoning, in-place updates, eager mode, composite
 * text. Run with "--key" it prints one program's graph key and exits: the test runs itself
 * that way to check that two processes agree on keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "capture/capture.h"
#include "capture_util.h"
#include "hlo/hlo.h"

static latch_runtime *open_rt(bool eager) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.eager = eager;
  return latch_open(&options);
}

/* A small network touching most op kinds: conv, pool, matmul, softmax, layer_norm, gelu. */
static latch_tensor *program(latch_tensor *x, latch_tensor *w, latch_tensor *m) {
  latch_conv2d_params p = {{1, 1}, {1, 1}, {1, 1}, 1};
  int64_t k[2] = {2, 2};
  latch_tensor *c = keep(latch_conv2d(x, w, &p));
  latch_tensor *r = keep(latch_relu(c));
  latch_tensor *pool = keep(latch_max_pool2d(r, k, NULL, NULL));
  latch_tensor *flat = keep(latch_reshape(pool, 2, DIMS(2, -1)));
  latch_tensor *h = keep(latch_matmul(flat, m));
  latch_tensor *g = keep(latch_gelu(h, false));
  latch_tensor *n = keep(latch_layer_norm(g, 1, NULL, NULL, 1e-5));
  return latch_log_softmax(n, -1);
}

static cache_key key_of(int count, latch_tensor *const *t) {
  cache_key key = {0, 0};
  CHECK_EQ_INT(cap_graph_key(util_rt, count, t, &key), LATCH_OK);
  return key;
}

static void print_program_key(void) {
  latch_tensor *x = latch_rand_uniform(util_rt, LATCH_F32, 4, DIMS(2, 1, 4, 4), -1, 1, 1);
  latch_tensor *w = latch_rand_uniform(util_rt, LATCH_F32, 4, DIMS(3, 1, 3, 3), -1, 1, 2);
  latch_tensor *m = latch_rand_uniform(util_rt, LATCH_F32, 2, DIMS(12, 5), -1, 1, 3);
  latch_tensor *out = program(x, w, m);
  char hex[33];
  cache_key_hex(key_of(1, &out), hex);
  printf("%s\n", hex);
  latch_release(out), latch_release(x), latch_release(w), latch_release(m);
}

static void test_keys(const char *self) {
  latch_tensor *x = F32(1, (2), 1, 2), *y = F32(1, (2), 3, 4), *z = F32(1, (2), 5, 6);
  latch_tensor *xy = keep(latch_binary(LATCH_ADD, x, y)), *xx = keep(latch_binary(LATCH_ADD, x, x));
  latch_tensor *zy = keep(latch_binary(LATCH_ADD, z, y));
  /* Values are not in keys; which leaf is which is. */
  CHECK(cache_key_equal(key_of(1, &xy), key_of(1, &zy)));
  CHECK(!cache_key_equal(key_of(1, &xy), key_of(1, &xx)));
  latch_tensor *r1[2] = {xy, keep(latch_unary(LATCH_NEG, y))}, *r2[2] = {xy, keep(latch_unary(LATCH_NEG, x))};
  CHECK(!cache_key_equal(key_of(2, r1), key_of(2, r2))); /* (x+y, -y) versus (x+y, -x) */
  latch_tensor *r3[2] = {zy, keep(latch_unary(LATCH_NEG, y))};
  CHECK(cache_key_equal(key_of(2, r1), key_of(2, r3)));
  latch_tensor *c1 = keep(latch_binary(LATCH_MUL, x, keep(latch_scalar(util_rt, LATCH_F32, 2))));
  latch_tensor *c2 = keep(latch_binary(LATCH_MUL, x, keep(latch_scalar(util_rt, LATCH_F32, 3))));
  CHECK(!cache_key_equal(key_of(1, &c1), key_of(1, &c2))); /* constants are */
  latch_tensor *f64 = keep(latch_cast(x, LATCH_F64));
  latch_tensor *d1 = keep(latch_binary(LATCH_ADD, f64, f64)), *d2 = keep(latch_binary(LATCH_ADD, x, x));
  CHECK(!cache_key_equal(key_of(1, &d1), key_of(1, &d2)));
  /* The same program in another process: the same key. */
  char command[512], theirs[64] = "", mine[33];
  snprintf(command, sizeof command, "%s --key", self);
  FILE *child = popen(command, "r");
  CHECK(child != NULL);
  if (child) {
    if (!fgets(theirs, sizeof theirs, child)) theirs[0] = 0;
    pclose(child);
  }
  theirs[strcspn(theirs, "\n")] = 0;
  latch_tensor *a = latch_rand_uniform(util_rt, LATCH_F32, 4, DIMS(2, 1, 4, 4), -1, 1, 9);
  latch_tensor *w = latch_rand_uniform(util_rt, LATCH_F32, 4, DIMS(3, 1, 3, 3), -1, 1, 8);
  latch_tensor *m = latch_rand_uniform(util_rt, LATCH_F32, 2, DIMS(12, 5), -1, 1, 7);
  latch_tensor *out = program(a, w, m);
  cache_key_hex(key_of(1, &out), mine);
  CHECK_STR(theirs, mine);
  latch_release(out), latch_release(a), latch_release(w), latch_release(m);
}

static void test_sync_and_cache(void) {
  latch_stats before, after;
  latch_get_stats(util_rt, &before);
  latch_tensor *x = F32(2, (2, 2), 1, 2, 3, 4);
  latch_tensor *y = latch_binary(LATCH_MUL, x, x), *z = latch_reduce(LATCH_SUM, y, 0, NULL, false);
  latch_get_stats(util_rt, &after);
  CHECK_EQ_INT(after.syncs, before.syncs); /* lazy: nothing ran yet */
  CHECK_EQ_INT(latch_sync(util_rt), LATCH_OK);
  latch_get_stats(util_rt, &after);
  CHECK_EQ_INT(after.syncs, before.syncs + 1); /* one graph for both tensors */
  CHECK_EQ_INT(after.compiles, before.compiles + 1);
  CHECK(after.ops_traced >= before.ops_traced + 2);
  EXPECT(y, 0, 1, 4, 9, 16);
  EXPECT(z, 0, 30);
  /* The same program on other values: a cache hit, no compile. */
  latch_tensor *x2 = F32(2, (2, 2), 0, 1, 0, 1);
  y = latch_binary(LATCH_MUL, x2, x2), z = latch_reduce(LATCH_SUM, y, 0, NULL, false);
  CHECK_EQ_INT(latch_sync(util_rt), LATCH_OK);
  latch_stats hit;
  latch_get_stats(util_rt, &hit);
  CHECK_EQ_INT(hit.compiles, after.compiles);
  CHECK_EQ_INT(hit.cache_hits, after.cache_hits + 1);
  EXPECT(z, 0, 2);
  EXPECT(y, 0, 0, 1, 0, 1);
  /* A read syncs only what it needs. */
  latch_tensor *a = latch_unary(LATCH_NEG, x), *b = latch_unary(LATCH_EXP, x);
  EXPECT(a, 0, -1, -2, -3, -4);
  CHECK(b->node->state == CAP_PENDING);
  latch_release(b);
  CHECK_EQ_INT(latch_sync(util_rt), LATCH_OK);
}

static void test_errors(void) {
  latch_tensor *a = F32(2, (2, 3), 1, 2, 3, 4, 5, 6), *b = F32(1, (4), 1, 2, 3, 4);
  latch_tensor *bad = latch_binary(LATCH_ADD, a, b);
  const char *message = latch_tensor_error(bad);
  CHECK(message && strstr(message, "add") && strstr(message, "f32[2,3]") && strstr(message, "f32[4]"));
  CHECK(strstr(latch_last_error(), "add") != NULL);
  latch_tensor *user = latch_unary(LATCH_EXP, bad);
  latch_tensor *user2 = latch_softmax(user, 0);
  message = latch_tensor_error(user2);
  CHECK(message && strstr(message, "softmax") && strstr(message, "poisoned") && strstr(message, "f32[4]"));
  CHECK_EQ_INT(latch_tensor_dtype(user2), LATCH_INVALID);
  latch_tensor *fine = latch_binary(LATCH_ADD, a, a);
  CHECK_EQ_INT(latch_sync(util_rt), LATCH_ERR_INPUT); /* reported by the next sync */
  CHECK(strstr(latch_last_error(), "add") && strstr(latch_last_error(), "f32[4]"));
  EXPECT(fine, 0, 2, 4, 6, 8, 10, 12); /* the rest still ran */
  CHECK_EQ_INT(latch_sync(util_rt), LATCH_OK); /* once */
  latch_release(latch_reshape(a, 1, DIMS(5))); /* an error dropped at once is still reported */
  CHECK_EQ_INT(latch_sync(util_rt), LATCH_ERR_INPUT);
  CHECK(strstr(latch_last_error(), "reshape") != NULL);
  CHECK_EQ_INT(latch_sync(util_rt), LATCH_OK);
  double out[6];
  CHECK_EQ_INT(latch_read_f64(user2, out, 6), LATCH_ERR_INPUT);
  latch_release(bad), latch_release(user), latch_release(user2);
  bad = latch_matmul(a, NULL);
  CHECK(latch_tensor_error(bad) && strstr(latch_tensor_error(bad), "NULL"));
  latch_release(bad);
  CHECK(keep(latch_from_host(util_rt, LATCH_F32, 2, DIMS(-1, 2), NULL)) != NULL);
  CHECK(strstr(latch_last_error(), "negative") != NULL);
  CHECK_EQ_INT(latch_sync(util_rt), LATCH_ERR_INPUT);
  util_release_all();
  CHECK_EQ_INT(latch_sync(util_rt), LATCH_OK);
  setenv("LATCH_THREADS", "many", 1);
  latch_options options;
  CHECK_EQ_INT(latch_options_init(&options), LATCH_ERR_INPUT);
  CHECK(strstr(latch_last_error(), "LATCH_THREADS") != NULL);
  CHECK(latch_open(NULL) == NULL);
  unsetenv("LATCH_THREADS");
  setenv("LATCH_BACKEND", "nope", 1);
  CHECK(latch_open(NULL) == NULL);
  CHECK(strstr(latch_last_error(), "nope") && strstr(latch_last_error(), "reference"));
  unsetenv("LATCH_BACKEND");
  setenv("LATCH_CACHE_CAPACITY", "7", 1);
  setenv("LATCH_EAGER", "1", 1);
  CHECK_EQ_INT(latch_options_init(&options), LATCH_OK);
  CHECK(options.cache_capacity == 7 && options.eager);
  unsetenv("LATCH_CACHE_CAPACITY");
  unsetenv("LATCH_EAGER");
}

static void test_in_place(void) {
  latch_tensor *w = latch_rand_uniform(util_rt, LATCH_F32, 1, DIMS(3), 0, 1, 5);
  double start[3];
  latch_read_f64(w, start, 3);
  const void *buffer = latch_data(w);
  latch_stats s0, s1;
  latch_get_stats(util_rt, &s0);
  for (int step = 0; step < 3; step++) {
    /* w <- w - 0.5 * (2 w) + 1 = 1, keeping g = 2 w (of the old w) live. */
    latch_tensor *g = latch_binary(LATCH_MUL, w, keep(latch_scalar(util_rt, LATCH_F32, 2)));
    latch_tensor *half = latch_binary(LATCH_MUL, g, keep(latch_scalar(util_rt, LATCH_F32, 0.5)));
    latch_tensor *next = latch_binary(LATCH_ADD, keep(latch_binary(LATCH_SUB, w, half)), keep(latch_scalar(util_rt, LATCH_F32, 1)));
    latch_release(half);
    CHECK_EQ_INT(latch_assign(w, next), LATCH_OK);
    latch_release(next);
    if (step == 0) {
      char *text = cap_graph_text(util_rt, 1, &w);
      CHECK(text && strstr(text, "input_output_alias={ {0}: (0, {}, may-alias) }"));
      free(text);
    }
    CHECK_EQ_INT(latch_sync(util_rt), LATCH_OK);
    CHECK(latch_data(w) == buffer); /* written back into the same buffer */
    double gv[3];
    latch_read_f64(g, gv, 3);
    for (int i = 0; i < 3; i++) CHECK_NEAR(gv[i], step == 0 ? 2 * start[i] : 2, 1e-6); /* the old w */
    latch_release(g);
  }
  double v[3];
  latch_read_f64(w, v, 3);
  for (int i = 0; i < 3; i++) CHECK_NEAR(v[i], 1, 1e-6);
  latch_get_stats(util_rt, &s1);
  CHECK_EQ_INT(s1.compiles - s0.compiles, 1); /* steps 2 and 3 hit the cache */
  latch_tensor *alias = latch_cast(w, LATCH_F32); /* same type: a new handle on w's value */
  CHECK_EQ_INT(latch_assign(alias, F32(1, (3), 7, 7, 7)), LATCH_OK);
  EXPECT(alias, 0, 7, 7, 7);
  latch_read_f64(w, v, 3);
  CHECK_NEAR(v[0], 1, 0); /* w keeps its value */
  cap_graph g;
  latch_tensor *sum = latch_binary(LATCH_ADD, w, F32(1, (3), 1, 1, 1));
  CHECK_EQ_INT(cap_graph_collect(&g, util_rt->backend, 1, &sum->node, NULL), LATCH_OK);
  CHECK_EQ_INT(g.param_count, 2);
  CHECK_EQ_INT(cap_graph_param_of(&g, w->node), 0);
  CHECK_EQ_INT(cap_graph_param_of(&g, sum->node), -1);
  cap_graph_free(&g);
  latch_release(sum);
  CHECK_EQ_INT(latch_assign(w, F32(1, (2), 1, 2)), LATCH_ERR_INPUT); /* shapes differ */
  CHECK(strstr(latch_last_error(), "f32[3]") != NULL);
  latch_release(w);
}

static void test_eager_matches_lazy(void) {
  latch_runtime *eager = open_rt(true), *lazy = util_rt;
  double out[2][10];
  uint64_t compiles[2] = {0, 0};
  for (int mode = 0; mode < 2; mode++) {
    latch_runtime *rt = mode ? eager : lazy;
    for (int round = 0; round < 2; round++) {
      latch_stats s0, s1;
      latch_get_stats(rt, &s0);
      latch_tensor *x = latch_rand_uniform(rt, LATCH_F32, 4, DIMS(2, 1, 4, 4), -1, 1, 1);
      latch_tensor *w = latch_rand_uniform(rt, LATCH_F32, 4, DIMS(3, 1, 3, 3), -1, 1, 2);
      latch_tensor *m = latch_rand_uniform(rt, LATCH_F32, 2, DIMS(12, 5), -1, 1, 3);
      latch_tensor *r = program(x, w, m);
      CHECK_EQ_INT(latch_read_f64(r, out[mode], 10), LATCH_OK);
      latch_get_stats(rt, &s1);
      if (round == 0) compiles[mode] = s1.compiles - s0.compiles;
      else CHECK_EQ_INT(s1.compiles, s0.compiles); /* every op shape compiled once */
      latch_release(r), latch_release(x), latch_release(w), latch_release(m);
      util_release_all();
    }
  }
  CHECK_EQ_INT(compiles[0], 1);
  CHECK(compiles[1] >= 8); /* one per op in eager mode */
  for (int i = 0; i < 10; i++) CHECK_NEAR(out[0][i], out[1][i], 1e-6);
  double total = 0;
  for (int i = 0; i < 5; i++) total += exp(out[0][i]);
  CHECK_NEAR(total, 1, 1e-5); /* log_softmax rows */
  latch_close(eager);
}

static void test_composite_text(void) {
  latch_tensor *x = F32(2, (2, 3), 1, 2, 3, 4, 5, 6);
  latch_tensor *outs[4] = {keep(latch_softmax(x, 1)), keep(latch_log_softmax(x, 0)), keep(latch_gelu(x, true)),
                           keep(latch_layer_norm(x, 1, F32(1, (3), 1, 1, 2), F32(1, (3), 0, 0, 1), 1e-5))};
  char *text = cap_graph_text(util_rt, 4, outs);
  CHECK(text != NULL);
  if (!text) return;
  const char *names[] = {"latch.softmax", "latch.log_softmax", "latch.gelu", "latch.layer_norm"};
  for (int i = 0; i < 4; i++) {
    char want[128];
    snprintf(want, sizeof want, "composite.name=\"%s\",composite.version=\"1\"}", names[i]);
    CHECK_MSG(strstr(text, want) != NULL, "missing %s", want);
  }
  CHECK(strstr(text, "is_composite=true") && strstr(text, "composite.attributes={dim = 1 : i64}"));
  hlo_diag diag = {0};
  hlo_module *module = hlo_parse_module(text, strlen(text), "composite", &diag);
  CHECK_MSG(module != NULL, "%s", diag.message);
  if (module) {
    CHECK_EQ_INT(hlo_verify_module(module, &diag), HLO_OK);
    char *again = hlo_module_to_text(module);
    CHECK_STR(again, text);
    int composites = 0;
    for (int i = 0; i < module->entry->instr_count; i++) {
      const hlo_instr *in = module->entry->instrs[i];
      if (in->opcode == HLO_OP_CALL && in->is_composite && in->composite_name) composites++;
    }
    CHECK_EQ_INT(composites, 4);
    hlo_module *twice = hlo_parse_module(again, strlen(again), "again", &diag);
    cache_key a = {0, 0}, b = {1, 0};
    CHECK(twice && cache_hash_module(module, &a) && cache_hash_module(twice, &b) && cache_key_equal(a, b));
    hlo_module_free(twice);
    free(again);
    hlo_module_free(module);
  }
  free(text);
  util_release_all();
}

/* A cache of one graph: alternating programs evict each other and still compute right. */
static void test_eviction(void) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.cache_capacity = 1;
  latch_runtime *rt = latch_open(&options);
  latch_runtime *saved = util_rt;
  util_rt = rt;
  latch_tensor *x = F32(1, (2), 1, 2);
  for (int i = 0; i < 3; i++) {
    EXPECT(latch_binary(LATCH_ADD, x, x), 0, 2, 4);
    EXPECT(latch_binary(LATCH_MUL, x, x), 0, 1, 4);
  }
  latch_stats stats;
  latch_get_stats(rt, &stats);
  CHECK_EQ_INT(stats.compiles, 6);
  CHECK(stats.evictions >= 5);
  CHECK_EQ_INT(stats.cache_entries, 1);
  util_release_all();
  latch_close(rt);
  util_rt = saved;
}

/* latch bench --micro runs and prints a row per chain length. */
static void test_bench_command(void) {
  const char *bin = getenv("LATCH_BIN"), *build = getenv("BUILD");
  char command[512], line[256];
  if (bin) snprintf(command, sizeof command, "%s bench --micro --reps 1 2>&1", bin);
  else snprintf(command, sizeof command, "%s/latch bench --micro --reps 1 2>&1", build ? build : "build");
  FILE *out = popen(command, "r");
  CHECK(out != NULL);
  if (!out) return;
  int rows = 0, cache_line = 0;
  while (fgets(line, sizeof line, out)) {
    int ops;
    double trace, hash;
    if (sscanf(line, "%d %lf %lf", &ops, &trace, &hash) == 3 && (ops == 10 || ops == 100 || ops == 1000) && trace > 0 &&
        hash > 0)
      rows++;
    if (strncmp(line, "cache:", 6) == 0) cache_line = 1;
  }
  CHECK_EQ_INT(pclose(out), 0);
  CHECK_EQ_INT(rows, 3);
  CHECK(cache_line);
}

int main(int argc, char **argv) {
  util_rt = open_rt(false);
  if (!util_rt) {
    fprintf(stderr, "latch_open: %s\n", latch_last_error());
    return 1;
  }
  if (argc > 1 && strcmp(argv[1], "--key") == 0) {
    print_program_key();
    latch_close(util_rt);
    return 0;
  }
  RUN(test_sync_and_cache);
  RUN(test_errors);
  RUN(test_in_place);
  RUN(test_eager_matches_lazy);
  RUN(test_composite_text);
  RUN(test_bench_command);
  util_release_all();
  RUN(test_eviction);
  test_current = "test_keys";
  test_keys(argv[0]);
  util_release_all();
  latch_close(util_rt);
  return TEST_REPORT();
}
