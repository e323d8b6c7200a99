/* Greedy generation on the zoo's gpt2 decoder step (bench/models/gpt2.c: 4 layers, a KV
 * cache growing by one position a step, the step `latch bench` and the comparisons time)
 * through a traced function. Checked: the tokens it picks and its logits at every step
 * against the same step run op by op on the reference evaluator (eager), and the compile
 * count: the first call traces the context's length, the second traces it symbolic and
 * compiles, and no later step compiles anything, so a generation of 24 tokens compiles
 * what one of 6 does, and computes no kept step again (rt_cpu_kept_made_count). With bf16
 * products (latch_options.precision), no step after those two converts a weight again:
 * each layer's part of the step keeps its own weights prepared. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "function_util.h"
#include "runtime/cpu/exec_internal.h"

enum { BATCH = 2, CONTEXT = 8, LAYERS = 4, VOCAB = 2048, CARRIED = 2 * LAYERS, IO = 1 + CARRIED };

typedef struct generator {
  latch_runtime *rt;
  bench_instance in;
  latch_function *f; /* NULL: the step runs op by op */
} generator;

/* traced: the cpu backend through a traced function; else the reference backend, eager.
 * precision: latch_options.precision. */
static bool gen_open(generator *g, bool traced, const char *precision) {
  memset(g, 0, sizeof *g);
  latch_options options;
  latch_options_init(&options);
  options.backend = traced ? "cpu" : "reference";
  options.eager = !traced;
  options.cache = "memory";
  options.check = "off";
  options.precision = precision;
  if (!(g->rt = latch_open(&options))) return false;
  const bench_model *model = bench_find_model("gpt2");
  bench_config config = {.batch = BATCH, .size = CONTEXT, .seed = 7};
  if (!model || model->create(g->rt, &config, &g->in) != LATCH_OK || g->in.input_count != IO) return false;
  if (traced && !(g->f = latch_function_new_step(g->rt, g->in.step, g->in.model, NULL))) return false;
  return true;
}

static void gen_close(generator *g) {
  latch_function_free(g->f);
  if (g->in.model) bench_instance_free(&g->in);
  latch_close(g->rt);
}

static uint64_t compiles(latch_runtime *rt) {
  latch_stats s;
  latch_get_stats(rt, &s);
  return s.compiles;
}

/* One step on tokens [BATCH]: *logits gets the logits [BATCH][VOCAB] (malloc'd), next[b]
 * the largest one's index (the first of equals), and the caches grow by this step. */
static bool gen_step(generator *g, const int64_t *tokens, double **logits, int64_t *next) {
  latch_tensor *in[IO], *out[IO] = {NULL};
  in[0] = latch_from_host(g->rt, LATCH_I64, 2, FDIMS(BATCH, 1), tokens);
  for (int k = 1; k < IO; k++) in[k] = g->in.inputs[k];
  latch_status s = g->f ? latch_call(g->f, in, IO, NULL, 0, out, IO) : g->in.step(g->in.model, in, IO, out, IO);
  latch_release(in[0]);
  *logits = s == LATCH_OK && latch_numel(out[0]) == BATCH * VOCAB ? fu_read(out[0]) : NULL;
  for (int b = 0; *logits && b < BATCH; b++) {
    const double *row = *logits + b * VOCAB;
    next[b] = 0;
    for (int v = 1; v < VOCAB; v++)
      if (row[v] > row[next[b]]) next[b] = v;
  }
  latch_release(out[0]);
  for (int k = 1; k < IO; k++) { /* the grown caches are the next step's */
    latch_release(g->in.inputs[k]);
    g->in.inputs[k] = out[k];
  }
  return *logits != NULL;
}

/* Generates n tokens both ways, checking each step's tokens and logits (within tolerance
 * of the largest); the traced side's compiles in total, and after its second step, go to
 * *total and *later, and the kept steps it computed after its second step to *kept_made. */
static void generate(int n, const char *precision, double tolerance, uint64_t *total, uint64_t *later,
                     int64_t *kept_made) {
  generator traced, eager;
  memset(&eager, 0, sizeof eager);
  bool opened = gen_open(&traced, true, precision) && gen_open(&eager, false, precision);
  CHECK_MSG(opened, "opening: %s %s", latch_last_error(), bench_error());
  int64_t tokens[BATCH] = {5, 1000}, want[BATCH], got[BATCH];
  uint64_t at_second = 0;
  int64_t made_at_second = 0;
  for (int t = 0; opened && t < n; t++) {
    double *x = NULL, *y = NULL;
    bool ran = gen_step(&traced, tokens, &x, got) && gen_step(&eager, tokens, &y, want);
    CHECK_MSG(ran, "step %d: %s", t, latch_last_error());
    double worst = 0, top = 0;
    for (int i = 0; ran && i < BATCH * VOCAB; i++) {
      worst = fmax(worst, fabs(x[i] - y[i]));
      top = fmax(top, fabs(y[i]));
    }
    CHECK_MSG(ran && worst <= tolerance * top, "step %d: logits differ by %g (largest %g)", t, worst, top);
    for (int b = 0; ran && b < BATCH; b++) {
      CHECK_MSG(got[b] == want[b], "step %d row %d: token %lld, eager's %lld", t, b, (long long)got[b],
                (long long)want[b]);
      tokens[b] = want[b];
    }
    free(x), free(y);
    if (t == 1) at_second = compiles(traced.rt), made_at_second = rt_cpu_kept_made_count();
    if (!ran) break;
  }
  *total = compiles(traced.rt);
  *later = *total - at_second;
  *kept_made = rt_cpu_kept_made_count() - made_at_second;
  if (opened) {
    latch_function_stats s;
    latch_function_get_stats(traced.f, &s);
    CHECK_EQ_INT(s.traces, 2);
    CHECK_EQ_INT(s.specializations, 0);
  }
  gen_close(&traced);
  gen_close(&eager);
}

static void steady_state_compiles_nothing(void) {
  uint64_t short_total, short_later, long_total, long_later;
  int64_t short_made = -1, long_made = -1;
  generate(6, "f32", 1e-4, &short_total, &short_later, &short_made);
  generate(24, "f32", 1e-4, &long_total, &long_later, &long_made);
  CHECK(short_total > 0);
  CHECK_EQ_INT(short_later, 0);
  CHECK_EQ_INT(long_later, 0);
  CHECK_EQ_INT(long_total, short_total);
  CHECK_EQ_INT(short_made, 0);
  CHECK_EQ_INT(long_made, 0);
}

/* bf16 products: the same tokens as the reference's (which rounds the same operands to
 * bf16; the sums' order differs, so a product's rounding may too), nothing compiled after
 * the second step, and no weight converted again: a step computes at most one kept step a
 * layer (the cache the attention reads, converted to bf16: new at every step, and read as
 * a parameter by the moving segment), where the weights' conversions are four a layer. */
static void bf16_steps_keep_their_weights(void) {
  enum { TOKENS = 8 };
  uint64_t total, later;
  int64_t made = -1;
  generate(TOKENS, "bf16", 2e-2, &total, &later, &made);
  CHECK_EQ_INT(later, 0);
  CHECK_MSG(made >= 0 && made <= LAYERS * (TOKENS - 2), "%lld kept steps computed in %d steps", (long long)made,
            TOKENS - 2);
}

int main(void) {
  RUN(steady_state_compiles_nothing);
  RUN(bf16_steps_keep_their_weights);
  return TEST_REPORT();
}
