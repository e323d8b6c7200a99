/* The cpu backend's attention step (runtime/cpu/attention_plan.c, attention.c).
 *
 * Differential: softmax(Q K^T / sqrt(d) + masks) V in the forms frontends emit (Q, K and V
 * as a projection leaves them, [B, S, H, D], read with batch dims {0, 2}; heads merged,
 * [B*H, S, D] against [S, B*H, D]; scores regrouped by a reshape; Q stored transposed) at
 * sequence lengths 1, 7, 128, 512 and 4096 and head sizes 32, 64, 80 and 128, without masks
 * and with a causal mask (an iota comparison selecting -inf, and triu(ones, 1) as
 * latch.torch lowers it), a padding mask added ([B, S] of 0 and -inf, whole rows masked
 * included), a random pred mask selecting a finite fill, and NaN among the inputs. The
 * reference evaluator runs the graph as written; the step must agree within rounding (the
 * sums run in another order), NaN where it has NaN.
 *
 * Recognition: the plan of each graph after hlo/'s passes has one ATTENTION step and no
 * buffer of the scores' size, and executing runs the step; near misses (a softmax over
 * another dim, probabilities that are also a result, Q with neither its head features nor
 * its positions contiguous, a maximum with a finite init) keep the graph's own steps and
 * still give the reference's values. A softmax that no product reads is a step of its own
 * (rows of -inf, NaN and +inf among them). A loaded executable finds the step again.
 *
 * bf16 products (f32 operands converted to bf16 as the bf16 precision lowers a block, or bf16
 * operands, the probabilities converted for the last product): one step at sequence lengths
 * 1, 7, 128 and 512, head sizes 32 to 128, with and without masks, within bf16's rounding of
 * the probabilities of the reference evaluator, which runs the converts as written. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "diff_util.h"
#include "hlo/hlo.h"
#include "runtime/cpu/exec_internal.h"

enum { MASK_NONE, MASK_CAUSAL, MASK_PADDING, MASK_BOTH, MASK_RANDOM, MASK_TRIU };

static const char *reducers =
    "HloModule attention\n"
    "max_f32 {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] maximum(a, b)\n}\n"
    "add_f32 {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n";

/* The softmax of `in` (f32[dims]) over dim `over`, into p; keep: the dims a row's value is
 * broadcast along; max_init the maximum's init. */
static void softmax(graph_text *t, const char *in, const char *dims, const char *rows, const char *keep, int over,
                    const char *max_init) {
  emit(t, " init = f32[] constant(%s)\n mx = f32[%s] reduce(%s, init), dimensions={%d}, to_apply=max_f32\n", max_init,
       rows, in, over);
  emit(t, " mxb = f32[%s] broadcast(mx), dimensions={%s}\n sh = f32[%s] subtract(%s, mxb)\n", dims, keep, dims, in);
  emit(t, " e = f32[%s] exponential(sh)\n zero = f32[] constant(0)\n", dims);
  emit(t, " sm = f32[%s] reduce(e, zero), dimensions={%d}, to_apply=add_f32\n", rows, over);
  emit(t, " smb = f32[%s] broadcast(sm), dimensions={%s}\n p = f32[%s] divide(e, smb)\n", dims, keep, dims);
}

/* How a projection graph deviates from the pattern (near misses). */
enum { AS_WRITTEN, OTHER_DIM, PROBS_OUT, FINITE_INIT };

/* Attention over a projection's layout: q, k, v f32[B, S, H, D]; parameter 3 the padding
 * mask f32[B, S] (MASK_PADDING, MASK_BOTH) or the pred mask [S, S] (MASK_RANDOM). */
static graph_text projection_graph(int b, int s, int h, int d, int mask, bool multiply, int variant) {
  graph_text t = {.len = 0};
  char scores[64], rows[64];
  snprintf(scores, sizeof scores, "%d,%d,%d,%d", b, h, s, s);
  snprintf(rows, sizeof rows, "%d,%d,%d", b, h, s);
  emit(&t, "%sENTRY e {\n", reducers);
  for (int i = 0; i < 3; i++) emit(&t, " %c = f32[%d,%d,%d,%d] parameter(%d)\n", "qkv"[i], b, s, h, d, i);
  if (mask == MASK_PADDING || mask == MASK_BOTH) emit(&t, " pad = f32[%d,%d] parameter(3)\n", b, s);
  if (mask == MASK_RANDOM) emit(&t, " keep = pred[%d,%d] parameter(3)\n", s, s);
  emit(&t,
       " s = f32[%s] dot(q, k), lhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
       "rhs_contracting_dims={3}\n",
       scores);
  emit(&t, " c = f32[] constant(%.9g)\n cb = f32[%s] broadcast(c), dimensions={}\n", multiply ? 1 / sqrt(d) : sqrt(d),
       scores);
  emit(&t, multiply ? " x0 = f32[%s] multiply(cb, s)\n" : " x0 = f32[%s] divide(s, cb)\n", scores);
  const char *x = "x0";
  if (mask == MASK_CAUSAL || mask == MASK_BOTH) {
    emit(&t, " i0 = s32[%d,%d] iota(), iota_dimension=0\n i1 = s32[%d,%d] iota(), iota_dimension=1\n", s, s, s, s);
    emit(&t, " above = pred[%d,%d] compare(i1, i0), direction=GT\n", s, s);
    emit(&t, " ab = pred[%s] broadcast(above), dimensions={2,3}\n ninf = f32[] constant(-inf)\n", scores);
    emit(&t, " nb = f32[%s] broadcast(ninf), dimensions={}\n x1 = f32[%s] select(ab, nb, %s)\n", scores, scores, x);
    x = "x1";
  }
  if (mask == MASK_PADDING || mask == MASK_BOTH) {
    emit(&t, " pb = f32[%s] broadcast(pad), dimensions={0,3}\n x2 = f32[%s] add(%s, pb)\n", scores, scores, x);
    x = "x2";
  }
  if (mask == MASK_TRIU) { /* masked_fill(triu(ones, 1).bool(), -inf) as latch.torch lowers it */
    emit(&t, " j1 = s64[%d,%d] iota(), iota_dimension=1\n j0 = s64[%d,%d] iota(), iota_dimension=0\n", s, s, s, s);
    emit(&t, " dj = s64[%d,%d] subtract(j1, j0)\n one = s64[] constant(1)\n", s, s);
    emit(&t, " oneb = s64[%d,%d] broadcast(one), dimensions={}\n ge = pred[%d,%d] compare(dj, oneb), direction=GE\n",
         s, s, s, s);
    emit(&t, " yes = pred[] constant(true)\n no = pred[] constant(false)\n");
    emit(&t, " yb = pred[%d,%d] broadcast(yes), dimensions={}\n nob = pred[%d,%d] broadcast(no), dimensions={}\n", s,
         s, s, s);
    emit(&t, " tri = pred[%d,%d] select(ge, yb, nob)\n tb = pred[%s] broadcast(tri), dimensions={2,3}\n", s, s,
         scores);
    emit(&t, " minf = f32[] constant(-inf)\n mb = f32[%s] broadcast(minf), dimensions={}\n", scores);
    emit(&t, " x4 = f32[%s] select(tb, mb, %s)\n", scores, x);
    x = "x4";
  }
  if (mask == MASK_RANDOM) {
    emit(&t, " kb = pred[%s] broadcast(keep), dimensions={2,3}\n fill = f32[] constant(-1e9)\n", scores);
    emit(&t, " fb = f32[%s] broadcast(fill), dimensions={}\n x3 = f32[%s] select(kb, %s, fb)\n", scores, scores, x);
    x = "x3";
  }
  if (variant == OTHER_DIM) { /* over the queries: rows [B, H, Sk] */
    char cols[64];
    snprintf(cols, sizeof cols, "%d,%d,%d", b, h, s);
    softmax(&t, x, scores, cols, "0,1,3", 2, "-inf");
  } else {
    softmax(&t, x, scores, rows, "0,1,2", 3, variant == FINITE_INIT ? "-1e30" : "-inf");
  }
  emit(&t,
       " o = f32[%d,%d,%d,%d] dot(p, v), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
       "rhs_contracting_dims={1}\n",
       b, h, s, d);
  if (variant == PROBS_OUT) emit(&t, " ROOT r = (f32[%d,%d,%d,%d], f32[%s]) tuple(o, p)\n}\n", b, h, s, d, scores);
  else emit(&t, " ROOT r = (f32[%d,%d,%d,%d]) tuple(o)\n}\n", b, h, s, d);
  return t;
}

/* Heads merged, as F.multi_head_attention_forward lowers them: q [BH, S, D] against k and v
 * [S, BH, D], a float mask [S, S] added. */
static graph_text merged_graph(int bh, int s, int d) {
  graph_text t = {.len = 0};
  char scores[64], rows[64];
  snprintf(scores, sizeof scores, "%d,%d,%d", bh, s, s);
  snprintf(rows, sizeof rows, "%d,%d", bh, s);
  emit(&t, "%sENTRY e {\n q = f32[%d,%d,%d] parameter(0)\n", reducers, bh, s, d);
  emit(&t, " k = f32[%d,%d,%d] parameter(1)\n v = f32[%d,%d,%d] parameter(2)\n m = f32[%d,%d] parameter(3)\n", s, bh,
       d, s, bh, d, s, s);
  emit(&t,
       " s = f32[%s] dot(q, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={1}, "
       "rhs_contracting_dims={2}\n",
       scores);
  emit(&t, " mb = f32[%s] broadcast(m), dimensions={1,2}\n x = f32[%s] add(s, mb)\n", scores, scores);
  softmax(&t, "x", scores, rows, "0,1", 2, "-inf");
  emit(&t,
       " o = f32[%d,%d,%d] dot(p, v), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={1}, "
       "rhs_contracting_dims={0}\n ROOT r = (f32[%d,%d,%d]) tuple(o)\n}\n",
       bh, s, d, bh, s, d);
  return t;
}

/* Scores [B*H, S, S] regrouped as [B, H, S, S] for the scale and softmax, and back for the
 * product with v, as a hand-written block's view() calls leave them. q is [B*H, S, D]
 * (Q_ROWS), [B*H, D, S] (Q_TRANSPOSED: its positions contiguous) or [S, D, B*H] (Q_STRIDED:
 * neither). */
enum { Q_ROWS, Q_TRANSPOSED, Q_STRIDED };
static graph_text regrouped_graph(int b, int h, int s, int d, int q_layout) {
  graph_text t = {.len = 0};
  char scores[64], rows[64], flat[64];
  snprintf(scores, sizeof scores, "%d,%d,%d,%d", b, h, s, s);
  snprintf(rows, sizeof rows, "%d,%d,%d", b, h, s);
  snprintf(flat, sizeof flat, "%d,%d,%d", b * h, s, s);
  emit(&t, "%sENTRY e {\n", reducers);
  if (q_layout == Q_ROWS) emit(&t, " q = f32[%d,%d,%d] parameter(0)\n", b * h, s, d);
  else if (q_layout == Q_TRANSPOSED) emit(&t, " q = f32[%d,%d,%d] parameter(0)\n", b * h, d, s);
  else emit(&t, " q = f32[%d,%d,%d] parameter(0)\n", s, d, b * h);
  emit(&t, " k = f32[%d,%d,%d] parameter(1)\n v = f32[%d,%d,%d] parameter(2)\n", b * h, s, d, b * h, s, d);
  emit(&t,
       " s = f32[%s] dot(q, k), lhs_batch_dims={%d}, lhs_contracting_dims={%d}, rhs_batch_dims={0}, "
       "rhs_contracting_dims={2}\n",
       flat, q_layout == Q_STRIDED ? 2 : 0, q_layout == Q_ROWS ? 2 : 1);
  emit(&t, " sr = f32[%s] reshape(s)\n c = f32[] constant(0.125)\n cb = f32[%s] broadcast(c), dimensions={}\n",
       scores, scores);
  emit(&t, " x = f32[%s] multiply(sr, cb)\n", scores);
  softmax(&t, "x", scores, rows, "0,1,2", 3, "-inf");
  emit(&t, " pr = f32[%s] reshape(p)\n", flat);
  emit(&t,
       " ROOT o = f32[%d,%d,%d] dot(pr, v), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
       "rhs_contracting_dims={1}\n}\n",
       b * h, s, d);
  return t;
}

/* bf16 products over a projection's layout [B, S, H, D]: q, k and v f32 converted to bf16 as
 * the bf16 precision lowers a block (converted), or bf16 parameters; the scores f32, the
 * probabilities converted to bf16 for the last product, its result f32. */
static graph_text bf16_graph(int b, int s, int h, int d, int mask, bool converted) {
  graph_text t = {.len = 0};
  char scores[64], rows[64], qkv[64];
  snprintf(scores, sizeof scores, "%d,%d,%d,%d", b, h, s, s);
  snprintf(rows, sizeof rows, "%d,%d,%d", b, h, s);
  snprintf(qkv, sizeof qkv, "%d,%d,%d,%d", b, s, h, d);
  emit(&t, "%sENTRY e {\n", reducers);
  for (int i = 0; i < 3; i++) {
    char c = "qkv"[i];
    if (converted) emit(&t, " %c0 = f32[%s] parameter(%d)\n %c = bf16[%s] convert(%c0)\n", c, qkv, i, c, qkv, c);
    else emit(&t, " %c = bf16[%s] parameter(%d)\n", c, qkv, i);
  }
  if (mask == MASK_PADDING) emit(&t, " pad = f32[%d,%d] parameter(3)\n", b, s);
  emit(&t,
       " s = f32[%s] dot(q, k), lhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
       "rhs_contracting_dims={3}\n",
       scores);
  emit(&t, " c = f32[] constant(%.9g)\n cb = f32[%s] broadcast(c), dimensions={}\n x0 = f32[%s] multiply(s, cb)\n",
       1 / sqrt(d), scores, scores);
  const char *x = "x0";
  if (mask == MASK_CAUSAL) {
    emit(&t, " i0 = s32[%d,%d] iota(), iota_dimension=0\n i1 = s32[%d,%d] iota(), iota_dimension=1\n", s, s, s, s);
    emit(&t, " above = pred[%d,%d] compare(i1, i0), direction=GT\n", s, s);
    emit(&t, " ab = pred[%s] broadcast(above), dimensions={2,3}\n ninf = f32[] constant(-inf)\n", scores);
    emit(&t, " nb = f32[%s] broadcast(ninf), dimensions={}\n x1 = f32[%s] select(ab, nb, %s)\n", scores, scores, x);
    x = "x1";
  }
  if (mask == MASK_PADDING) {
    emit(&t, " pb = f32[%s] broadcast(pad), dimensions={0,3}\n x2 = f32[%s] add(%s, pb)\n", scores, scores, x);
    x = "x2";
  }
  softmax(&t, x, scores, rows, "0,1,2", 3, "-inf");
  emit(&t, " pc = bf16[%s] convert(p)\n", scores);
  emit(&t,
       " o = f32[%d,%d,%d,%d] dot(pc, v), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
       "rhs_contracting_dims={1}\n ROOT r = (f32[%d,%d,%d,%d]) tuple(o)\n}\n",
       b, h, s, d, b, h, s, d);
  return t;
}

/* ---- running and checking ---- */

/* A padding mask f32[b, s] of 0 and -inf: batch 0 keeps its first two thirds of keys (at
 * least one), batch 1 masks every key (its rows are NaN in the graph), the others random. */
static rt_value *padding_mask(int b, int s, uint64_t seed) {
  int64_t dims[2] = {b, s};
  rt_value *mask = rt_value_new_array(HLO_F32, 2, dims);
  uint64_t x = seed * 2654435761u + 1;
  for (int i = 0; i < b; i++)
    for (int j = 0; j < s; j++) {
      x = x * 6364136223846793005u + 1442695040888963407u;
      bool masked = i == 0 ? j > 0 && 3 * j >= 2 * s : i == 1 ? true : (x >> 60) < 5;
      ((float *)mask->data)[i * s + j] = masked ? -INFINITY : 0.0f;
    }
  return mask;
}

/* The plan of text after hlo/'s passes: its ATTENTION steps that are attentions (*softmaxes:
 * those that are a softmax alone), and whether every exponential left is inside one (the
 * scores never stored). */
static int attention_steps_and(const char *text, bool *exp_inside, int64_t *arena_bytes, int *softmaxes) {
  hlo_module *module = parse_checked(text);
  if (!module) return -1;
  hlo_pass_run_all(module);
  hlo_diag diag = {0};
  rt_cpu_plan *plan = rt_cpu_plan_build(module, NULL, &diag);
  CHECK_MSG(plan != NULL, "plan: %s", diag.message);
  int count = 0;
  *exp_inside = true;
  *softmaxes = 0;
  for (int i = 0; plan && i < plan->step_count; i++) {
    bool step = plan->steps[i].kind == RT_STEP_ATTENTION;
    count += step && !plan->steps[i].attention->softmax_only;
    *softmaxes += step && plan->steps[i].attention->softmax_only;
    if (plan->steps[i].instr->opcode == HLO_OP_EXP) *exp_inside = *exp_inside && plan->steps[i].kind == RT_STEP_INSIDE;
  }
  *arena_bytes = plan ? plan->arena_bytes : -1;
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
  return count;
}

static int attention_steps(const char *text, bool *exp_inside, int64_t *arena_bytes) {
  int softmaxes;
  return attention_steps_and(text, exp_inside, arena_bytes, &softmaxes);
}

/* text on the cpu backend against the reference evaluator, with want_steps attention steps
 * and want_softmaxes softmaxes alone planned and run; args released. */
static void check_steps(int line, const char *text, rt_value **args, int n, int want_steps, int want_softmaxes) {
  bool exp_inside;
  int64_t arena;
  int softmaxes, steps = attention_steps_and(text, &exp_inside, &arena, &softmaxes);
  CHECK_MSG(steps == want_steps, "line %d: %d attention steps, want %d", line, steps, want_steps);
  CHECK_MSG(softmaxes == want_softmaxes, "line %d: %d softmax steps, want %d", line, softmaxes, want_softmaxes);
  if (want_steps + want_softmaxes) CHECK_MSG(exp_inside, "line %d: an exponential is computed outside the step", line);
  want_steps += want_softmaxes;
  hlo_diag diag = {0};
  rt_value *want = run_on(&rt_backend_reference, text, args, n, &diag);
  CHECK_MSG(want != NULL, "line %d: reference: %s", line, diag.message);
  int64_t runs = rt_cpu_attention_run_count();
  rt_value *got = run_on(&rt_backend_cpu, text, args, n, &diag);
  CHECK_MSG(got != NULL, "line %d: cpu: %s", line, diag.message);
  CHECK_MSG(rt_cpu_attention_run_count() - runs == want_steps, "line %d: %lld attention runs, want %d", line,
            (long long)(rt_cpu_attention_run_count() - runs), want_steps);
  CHECK_MSG(cpu_agree(want, got), "line %d: the cpu backend differs from the reference", line);
  rt_value_release(want);
  rt_value_release(got);
  for (int i = 0; i < n; i++) rt_value_release(args[i]);
}

/* Whether got is want within bf16's rounding of the probabilities (the step rounds them
 * before dividing by the row's sum, the graph after): 2^-7 relative to 1 + |want|, NaN
 * matching NaN. */
static bool bf16_agree(const rt_value *want, const rt_value *got) {
  if (!want || !got || want->shape.dtype != HLO_TUPLE || got->shape.dtype != HLO_TUPLE) return false;
  int64_t first;
  return elements_off(want->tuple[0], got->tuple[0], (diff_bound){.rel = 0x1p-7, .abs = 0x1p-7}, &first) == 0;
}

/* A bf16 graph: one attention step planned and run, within bf16_agree of the reference. */
static void check_bf16(int line, int b, int s, int h, int d, int mask, bool converted, uint64_t seed) {
  graph_text t = bf16_graph(b, s, h, d, mask, converted);
  rt_value *args[4] = {NULL};
  int n = random_args(t.s, seed, args);
  if (mask == MASK_PADDING) {
    rt_value_release(args[3]);
    args[3] = padding_mask(b, s, seed);
  }
  bool exp_inside;
  int64_t arena;
  CHECK_MSG(attention_steps(t.s, &exp_inside, &arena) == 1 && exp_inside, "line %d: no attention step\n%s", line,
            t.s);
  hlo_diag diag = {0};
  rt_value *want = run_on(&rt_backend_reference, t.s, args, n, &diag);
  CHECK_MSG(want != NULL, "line %d: reference: %s", line, diag.message);
  int64_t runs = rt_cpu_attention_run_count();
  rt_value *got = run_on(&rt_backend_cpu, t.s, args, n, &diag);
  CHECK_MSG(got != NULL, "line %d: cpu: %s", line, diag.message);
  CHECK_EQ_INT(rt_cpu_attention_run_count() - runs, 1);
  CHECK_MSG(bf16_agree(want, got), "line %d: s %d d %d mask %d: the cpu backend differs from the reference", line, s,
            d, mask);
  rt_value_release(want);
  rt_value_release(got);
  for (int i = 0; i < n; i++) rt_value_release(args[i]);
}

/* bf16 products at every length and head size, masks on and off, both kinds of operand. */
static void test_bf16(void) {
  static const int heads[] = {32, 64, 80, 128};
  static const int lengths[] = {1, 7, 128, 512};
  static const int masks[] = {MASK_NONE, MASK_CAUSAL, MASK_PADDING};
  for (int li = 0; li < 4; li++)
    for (int hi = 0; hi < 4; hi++)
      for (int mi = 0; mi < 3; mi++) {
        int s = lengths[li], d = heads[hi], mask = masks[mi];
        if (s == 512 && (hi + mi) % 3 != 0) continue; /* a third of the long ones keeps the test short */
        int b = mask == MASK_PADDING ? 3 : 1 + (hi & 1);
        check_bf16(__LINE__, b, s, s >= 512 ? 1 : 2, d, mask, (li + hi + mi) % 2 == 0,
                   (uint64_t)(li * 100 + hi * 10 + mi));
      }
}

static void check_graph(int line, const char *text, rt_value **args, int n, int want_steps) {
  check_steps(line, text, args, n, want_steps, 0);
}

static void check_projection(int line, int b, int s, int h, int d, int mask, bool multiply, uint64_t seed) {
  graph_text t = projection_graph(b, s, h, d, mask, multiply, AS_WRITTEN);
  rt_value *args[4] = {NULL};
  int n = random_args(t.s, seed, args);
  if (mask == MASK_PADDING || mask == MASK_BOTH) {
    rt_value_release(args[3]);
    args[3] = padding_mask(b, s, seed);
  }
  check_graph(line, t.s, args, n, 1);
}

static void test_projection(void) {
  static const int heads[] = {32, 64, 80, 128};
  static const int lengths[] = {1, 7, 128, 512};
  for (int li = 0; li < 4; li++)
    for (int hi = 0; hi < 4; hi++)
      for (int mask = MASK_NONE; mask <= MASK_TRIU; mask++) {
        int s = lengths[li], d = heads[hi];
        if (s == 512 && (hi + mask) % 3 != 0) continue; /* a third of the long ones keeps the test short */
        int b = mask == MASK_PADDING || mask == MASK_BOTH ? 3 : 1 + (hi & 1);
        check_projection(__LINE__, b, s, s >= 512 ? 1 : 2 + hi % 2, d, mask, (li + hi) % 2 == 1,
                         (uint64_t)(li * 100 + hi * 10 + mask));
      }
}

/* 4,096 tokens, one head, a padding mask: the arena holds nothing of the scores' size (the
 * graph as written would hold [S, S] f32 three times). */
static void test_long(void) {
  int s = 4096;
  graph_text t = projection_graph(1, s, 1, 32, MASK_PADDING, false, AS_WRITTEN);
  bool exp_inside;
  int64_t arena;
  CHECK_EQ_INT(attention_steps(t.s, &exp_inside, &arena), 1);
  CHECK_MSG(arena < (int64_t)s * s, "arena %lld bytes at %d tokens", (long long)arena, s);
  rt_value *args[4];
  int n = random_args(t.s, 4096, args);
  rt_value_release(args[3]);
  args[3] = padding_mask(1, s, 4096);
  check_graph(__LINE__, t.s, args, n, 1);
  /* causal, of iotas: the step computes the mask from positions and skips the blocks above
   * the diagonal */
  t = projection_graph(1, s, 1, 32, MASK_TRIU, true, AS_WRITTEN);
  CHECK_EQ_INT(attention_steps(t.s, &exp_inside, &arena), 1);
  CHECK_MSG(arena < (int64_t)s * s, "arena %lld bytes at %d tokens, causal", (long long)arena, s);
  n = random_args(t.s, 4097, args);
  check_graph(__LINE__, t.s, args, n, 1);
}

static void test_other_forms(void) {
  for (int s = 1; s <= 130; s += 43) {
    graph_text merged = merged_graph(6, s, 64);
    rt_value *args[4];
    int n = random_args(merged.s, (uint64_t)s, args);
    check_graph(__LINE__, merged.s, args, n, 1);
    graph_text regrouped = regrouped_graph(2, 3, s, 32, Q_ROWS);
    n = random_args(regrouped.s, (uint64_t)s + 1, args);
    check_graph(__LINE__, regrouped.s, args, n, 1);
    graph_text transposed = regrouped_graph(2, 3, s, 80, Q_TRANSPOSED);
    n = random_args(transposed.s, (uint64_t)s + 2, args);
    check_graph(__LINE__, transposed.s, args, n, 1);
  }
}

/* A NaN in k makes its head's rows NaN in the graph and in the step. */
static void test_nan(void) {
  graph_text t = projection_graph(2, 9, 2, 32, MASK_NONE, false, AS_WRITTEN);
  rt_value *args[3];
  int n = random_args(t.s, 77, args);
  ((float *)args[1]->data)[5 * 2 * 32 + 32 + 3] = NAN; /* batch 0, key 5, head 1 */
  check_graph(__LINE__, t.s, args, n, 1);
}

/* Near misses keep the graph's steps and its values. */
static void test_near_misses(void) {
  /* (the softmax alone is still a step where it is over the last dim with a -inf init) */
  int variants[] = {OTHER_DIM, PROBS_OUT, FINITE_INIT}, softmaxes[] = {0, 1, 0};
  for (int i = 0; i < 3; i++) {
    graph_text t = projection_graph(2, 7, 2, 32, MASK_CAUSAL, false, variants[i]);
    rt_value *args[3];
    int n = random_args(t.s, (uint64_t)i, args);
    check_steps(__LINE__, t.s, args, n, 0, softmaxes[i]);
  }
  graph_text strided = regrouped_graph(2, 2, 9, 32, Q_STRIDED);
  rt_value *args[3];
  int n = random_args(strided.s, 5, args);
  check_steps(__LINE__, strided.s, args, n, 0, 1);
}

/* A softmax alone over the last dim of x [a, b, c] (over dim 1 for the near miss), its
 * result also scaled: one step of its own reading x. */
static graph_text softmax_graph(int a, int b, int c, bool last_dim) {
  graph_text t = {.len = 0};
  char dims[64], rows[64];
  snprintf(dims, sizeof dims, "%d,%d,%d", a, b, c);
  if (last_dim) snprintf(rows, sizeof rows, "%d,%d", a, b);
  else snprintf(rows, sizeof rows, "%d,%d", a, c);
  emit(&t, "%sENTRY e {\n x = f32[%s] parameter(0)\n", reducers, dims);
  softmax(&t, "x", dims, rows, last_dim ? "0,1" : "0,2", last_dim ? 2 : 1, "-inf");
  emit(&t, " two = f32[] constant(2)\n twob = f32[%s] broadcast(two), dimensions={}\n", dims);
  emit(&t, " ROOT y = f32[%s] multiply(p, twob)\n}\n", dims);
  return t;
}

/* Softmax rows alone: one pass per row, the reference's values; rows of -inf, with a NaN or
 * +inf among them; widths below, at and past the 16 lanes. */
static void test_softmax_alone(void) {
  static const int widths[] = {1, 7, 16, 33, 768, 1000};
  for (int w = 0; w < 6; w++) {
    graph_text t = softmax_graph(2, 5, widths[w], true);
    rt_value *args[1];
    int n = random_args(t.s, (uint64_t)w, args);
    float *x = args[0]->data;
    int c = widths[w];
    for (int j = 0; j < c; j++) x[j] = -INFINITY;         /* row 0: every value -inf */
    x[c + c / 2] = NAN;                                    /* row 1: a NaN */
    x[2 * c] = INFINITY;                                   /* row 2: +inf */
    for (int j = 0; j < c; j += 2) x[3 * c + j] = -INFINITY; /* row 3: half masked */
    check_steps(__LINE__, t.s, args, n, 0, 1);
  }
  graph_text other = softmax_graph(2, 5, 9, false);
  rt_value *args[1];
  int n = random_args(other.s, 3, args);
  check_steps(__LINE__, other.s, args, n, 0, 0);
}

/* Serialized and loaded, the executable finds its attention step again and runs it. */
static void test_loaded(void) {
  graph_text t = projection_graph(3, 20, 2, 64, MASK_BOTH, true, AS_WRITTEN);
  rt_value *args[4];
  int n = random_args(t.s, 9, args);
  rt_value_release(args[3]);
  args[3] = padding_mask(3, 20, 9);
  check_loaded(t.s, args, n, rt_cpu_attention_run_count);
  for (int i = 0; i < n; i++) rt_value_release(args[i]);
}

int main(void) {
  RUN(test_projection);
  RUN(test_other_forms);
  RUN(test_nan);
  RUN(test_near_misses);
  RUN(test_softmax_alone);
  RUN(test_loaded);
  RUN(test_bf16);
  RUN(test_long);
  return TEST_REPORT();
}
