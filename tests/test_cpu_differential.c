/* Differential test: seeded random HLO graphs, built with hlo/build.h, run on the cpu backend
 * and on the reference backend with the same seeded inputs; every output must agree.
 *
 * Tolerances: integers and pred exactly; f64 within 1e-9 and f32 within 1e-4 (relative, plus
 * the same absolute amount scaled by the magnitude of the operands' sums, see close()); f16
 * within 1e-2 and bf16 within 4e-2, a few units of their last place. Floats may differ only
 * in summation order (BLAS, blocked reductions), so values that went through a sum
 * ("inexact" below) are never fed to ops that would turn a last-bit difference into a large
 * one (compare, floor, convert to integers, ...).
 *
 * Each graph starts from 1-3 parameters and grows 3-9 random ops; the result is one node or
 * a tuple of two. Shapes are small (dims 0-4, rank 0-4; one graph in twenty has dims up to
 * 48, enough for the parallel loops) so 4,000 graphs take seconds. */
#include <stdlib.h>

#include "hlo/hlo.h"
#include "runtime/runtime.h"
#include "rng_util.h"
#include "test.h"
#include "runtime/cpu/cpu.h"
#include "runtime/reference/reference.h"

enum { GRAPHS = 4000, MAX_NODES = 64 };

typedef struct node {
  hlo_instr *instr;
  bool inexact; /* went through a float sum: only smooth ops may follow */
} node;

typedef struct graph {
  hlo_module *module;
  hlo_comp *comp;
  node nodes[MAX_NODES];
  int count;
  int params;
  hlo_dtype dtype; /* the graph's main element type */
  hlo_diag diag;
  const char *failed_op;
} graph;

static void add(graph *g, hlo_instr *instr, bool inexact, const char *op) {
  if (!instr) {
    if (!g->failed_op) g->failed_op = op;
    return;
  }
  if (g->count < MAX_NODES) g->nodes[g->count++] = (node){instr, inexact};
}

static hlo_instr *param(graph *g, hlo_dtype dtype, int rank, const int64_t *dims) {
  hlo_shape shape = hlo_shape_make(dtype, rank, dims);
  return hlo_build_parameter(g->comp, g->params++, &shape, NULL, &g->diag);
}

/* One graph in twenty is large (dims up to 48), so kernels take their parallel paths. */
static bool large_graph;

static void random_dims(rng *r, int rank, int64_t *dims) {
  for (int d = 0; d < rank; d++) dims[d] = chance(r, 4) ? 0 : 1 + pick(r, large_graph ? 48 : 4);
}

static node *random_node(rng *r, graph *g) { return &g->nodes[g->count - 1 - pick(r, g->count < 4 ? g->count : 4)]; }

static bool is_float(hlo_dtype t) { return hlo_dtype_is_float(t); }

/* A node of the same shape as x: another one if there is one, else a new parameter. */
static node *partner(rng *r, graph *g, const hlo_instr *x) {
  for (int tries = 0; tries < 8; tries++) {
    node *n = &g->nodes[pick(r, g->count)];
    if (hlo_shape_equal(&n->instr->shape, &x->shape) && n->instr != x) return n;
  }
  add(g, param(g, x->shape.dtype, x->shape.rank, x->shape.dims), false, "parameter");
  return &g->nodes[g->count - 1];
}

static hlo_instr *scalar(graph *g, hlo_dtype t, double v) { return hlo_build_constant_scalar(g->comp, t, v, &g->diag); }

static hlo_instr *broadcast_scalar(graph *g, hlo_dtype t, double v, const hlo_shape *like) {
  hlo_instr *c = scalar(g, t, v);
  return c ? hlo_build_broadcast(g->comp, c, like->rank, like->dims, NULL, &g->diag) : NULL;
}

static void op_unary(rng *r, graph *g) {
  node *x = random_node(r, g);
  hlo_dtype t = x->instr->shape.dtype;
  if (is_float(t)) {
    static const hlo_opcode smooth[] = {HLO_OP_NEGATE, HLO_OP_ABS, HLO_OP_TANH, HLO_OP_LOGISTIC,
                                        HLO_OP_SIN, HLO_OP_COS, HLO_OP_EXP};
    static const hlo_opcode steps[] = {HLO_OP_FLOOR, HLO_OP_CEIL, HLO_OP_SIGN, HLO_OP_ROUND_NEAREST_EVEN,
                                       HLO_OP_ROUND_NEAREST_AFZ};
    hlo_opcode op = !x->inexact && chance(r, 30) ? steps[pick(r, 5)] : smooth[pick(r, 7)];
    hlo_instr *in = x->instr;
    if (op == HLO_OP_EXP) in = hlo_build_unary(g->comp, HLO_OP_TANH, in, &g->diag); /* keeps exp finite */
    add(g, in ? hlo_build_unary(g->comp, op, in, &g->diag) : NULL, x->inexact, hlo_opcode_name(op));
    if (chance(r, 30)) { /* sqrt and log of 1 + |x| */
      hlo_instr *a = hlo_build_unary(g->comp, HLO_OP_ABS, x->instr, &g->diag);
      hlo_instr *one = broadcast_scalar(g, t, 1, &x->instr->shape);
      hlo_instr *s = a && one ? hlo_build_binary(g->comp, HLO_OP_ADD, a, one, &g->diag) : NULL;
      hlo_opcode f = chance(r, 50) ? HLO_OP_SQRT : chance(r, 50) ? HLO_OP_LOG : HLO_OP_RSQRT;
      add(g, s ? hlo_build_unary(g->comp, f, s, &g->diag) : NULL, x->inexact, "sqrt/log");
    }
  } else if (t == HLO_PRED) {
    add(g, hlo_build_unary(g->comp, HLO_OP_NOT, x->instr, &g->diag), false, "not");
  } else if (hlo_dtype_is_signed(t)) {
    static const hlo_opcode ops[] = {HLO_OP_NEGATE, HLO_OP_ABS, HLO_OP_NOT};
    add(g, hlo_build_unary(g->comp, ops[pick(r, 3)], x->instr, &g->diag), false, "int unary");
  } else {
    add(g, hlo_build_unary(g->comp, HLO_OP_NOT, x->instr, &g->diag), false, "not");
  }
}

static void op_binary(rng *r, graph *g) {
  node *a = random_node(r, g);
  node *b = partner(r, g, a->instr);
  hlo_dtype t = a->instr->shape.dtype;
  hlo_opcode op;
  if (is_float(t)) {
    static const hlo_opcode ops[] = {HLO_OP_ADD, HLO_OP_SUBTRACT, HLO_OP_MULTIPLY, HLO_OP_MAXIMUM, HLO_OP_MINIMUM,
                                     HLO_OP_DIVIDE};
    op = ops[pick(r, 6)];
    if (op == HLO_OP_DIVIDE) { /* by 2 + |b|: never near zero */
      hlo_instr *ab = hlo_build_unary(g->comp, HLO_OP_ABS, b->instr, &g->diag);
      hlo_instr *two = broadcast_scalar(g, t, 2, &b->instr->shape);
      hlo_instr *d = ab && two ? hlo_build_binary(g->comp, HLO_OP_ADD, ab, two, &g->diag) : NULL;
      add(g, d ? hlo_build_binary(g->comp, op, a->instr, d, &g->diag) : NULL, a->inexact || b->inexact, "divide");
      return;
    }
  } else if (t == HLO_PRED) {
    static const hlo_opcode ops[] = {HLO_OP_AND, HLO_OP_OR, HLO_OP_XOR, HLO_OP_ADD, HLO_OP_MULTIPLY,
                                     HLO_OP_MAXIMUM, HLO_OP_MINIMUM};
    op = ops[pick(r, 7)];
  } else {
    static const hlo_opcode ops[] = {HLO_OP_ADD, HLO_OP_SUBTRACT, HLO_OP_MULTIPLY, HLO_OP_MAXIMUM,
                                     HLO_OP_MINIMUM, HLO_OP_AND, HLO_OP_OR, HLO_OP_XOR, HLO_OP_DIVIDE,
                                     HLO_OP_REMAINDER, HLO_OP_SHIFT_LEFT};
    op = ops[pick(r, 11)];
  }
  add(g, hlo_build_binary(g->comp, op, a->instr, b->instr, &g->diag), a->inexact || b->inexact,
      hlo_opcode_name(op));
}

static void op_select(rng *r, graph *g) {
  node *a = random_node(r, g);
  if (a->inexact) return;
  node *b = partner(r, g, a->instr);
  if (b->inexact) return;
  hlo_direction dir = (hlo_direction)(HLO_DIR_EQ + pick(r, 6));
  hlo_instr *p = hlo_build_compare(g->comp, dir, a->instr, b->instr, &g->diag);
  add(g, p, false, "compare");
  if (!p) return;
  hlo_instr *sel = chance(r, 20) && a->instr->shape.rank > 0
                       ? hlo_build_select(g->comp, scalar(g, HLO_PRED, pick(r, 2)), a->instr, b->instr, &g->diag)
                       : hlo_build_select(g->comp, p, a->instr, b->instr, &g->diag);
  add(g, sel, false, "select");
  if (is_float(a->instr->shape.dtype) || hlo_dtype_is_signed(a->instr->shape.dtype)) { /* clamp(-0.5 or -1, a, b) */
    hlo_instr *lo = scalar(g, a->instr->shape.dtype, is_float(a->instr->shape.dtype) ? -0.5 : -1);
    add(g, lo ? hlo_build_clamp(g->comp, lo, a->instr, b->instr, &g->diag) : NULL, false, "clamp");
  }
}

static void op_broadcast(rng *r, graph *g) {
  node *x = random_node(r, g);
  const hlo_shape *s = &x->instr->shape;
  if (s->rank >= 4) return;
  int rank = s->rank + 1 + pick(r, s->rank >= 3 ? 1 : 2);
  /* operand dims go, in order, to a random increasing choice of result dims */
  int64_t dims[HLO_MAX_RANK], map[HLO_MAX_RANK];
  int placed = 0;
  for (int d = 0; d < rank; d++) {
    int left = rank - d, need = s->rank - placed;
    if (need > 0 && (need == left || chance(r, 50))) {
      map[placed] = d;
      dims[d] = s->dims[placed++];
    } else {
      dims[d] = 1 + pick(r, 3);
    }
  }
  add(g, hlo_build_broadcast(g->comp, x->instr, rank, dims, map, &g->diag), x->inexact, "broadcast");
}

static void op_reshape(rng *r, graph *g) {
  node *x = random_node(r, g);
  int64_t n = hlo_shape_elements(&x->instr->shape);
  int64_t dims[HLO_MAX_RANK];
  int rank = 0;
  if (n == 0) {
    dims[rank++] = 0;
    dims[rank++] = 1 + pick(r, 3);
  } else {
    int64_t left = n;
    while (left > 1 && rank < 3) { /* split off a small factor */
      int64_t f = 1;
      for (int64_t c = 2 + pick(r, 3); c >= 2; c--)
        if (left % c == 0) { f = c; break; }
      if (f == 1) break;
      dims[rank++] = f;
      left /= f;
    }
    dims[rank++] = left;
    if (chance(r, 30)) dims[rank++] = 1;
  }
  add(g, hlo_build_reshape(g->comp, x->instr, rank, dims, &g->diag), x->inexact, "reshape");
}

static void op_transpose(rng *r, graph *g) {
  node *x = random_node(r, g);
  int rank = x->instr->shape.rank;
  int64_t perm[HLO_MAX_RANK];
  for (int d = 0; d < rank; d++) perm[d] = d;
  for (int d = rank - 1; d > 0; d--) {
    int e = pick(r, d + 1);
    int64_t t = perm[d];
    perm[d] = perm[e];
    perm[e] = t;
  }
  add(g, hlo_build_transpose(g->comp, x->instr, perm, &g->diag), x->inexact, "transpose");
}

static void op_slice(rng *r, graph *g) {
  node *x = random_node(r, g);
  const hlo_shape *s = &x->instr->shape;
  int64_t starts[HLO_MAX_RANK], limits[HLO_MAX_RANK], strides[HLO_MAX_RANK];
  for (int d = 0; d < s->rank; d++) {
    starts[d] = pick(r, (int)s->dims[d] + 1);
    limits[d] = starts[d] + pick(r, (int)(s->dims[d] - starts[d]) + 1);
    strides[d] = 1 + pick(r, 2);
  }
  add(g, hlo_build_slice(g->comp, x->instr, starts, limits, strides, &g->diag), x->inexact, "slice");
}

static void op_concatenate(rng *r, graph *g) {
  node *a = random_node(r, g);
  if (a->instr->shape.rank == 0) return;
  node *b = partner(r, g, a->instr);
  hlo_instr *ops[3] = {a->instr, b->instr, a->instr};
  add(g, hlo_build_concatenate(g->comp, 2 + pick(r, 2), ops, pick(r, a->instr->shape.rank), &g->diag),
      a->inexact || b->inexact, "concatenate");
}

static void op_pad(rng *r, graph *g) {
  node *x = random_node(r, g);
  hlo_padding p = {.rank = x->instr->shape.rank};
  bool negative = chance(r, 15);
  for (int d = 0; d < p.rank; d++) {
    p.low[d] = pick(r, 3) - (negative && x->instr->shape.dims[d] > 1 ? 1 : 0);
    p.high[d] = pick(r, 3);
    p.interior[d] = pick(r, 2);
  }
  hlo_instr *v = scalar(g, x->instr->shape.dtype, is_float(x->instr->shape.dtype) ? -0.5 : 3);
  add(g, v ? hlo_build_pad(g->comp, x->instr, v, &p, &g->diag) : NULL, x->inexact, "pad");
}

static void op_reduce(rng *r, graph *g) {
  node *x = random_node(r, g);
  const hlo_shape *s = &x->instr->shape;
  hlo_dtype t = s->dtype;
  if (t == HLO_PRED || s->rank == 0) return;
  static const hlo_opcode ops[] = {HLO_OP_ADD, HLO_OP_MAXIMUM, HLO_OP_MINIMUM, HLO_OP_MULTIPLY};
  hlo_opcode op = ops[pick(r, 4)];
  int64_t dims[HLO_MAX_RANK];
  int count = 0;
  for (int d = 0; d < s->rank; d++)
    if (chance(r, 50)) dims[count++] = d;
  if (count == 0) dims[count++] = pick(r, s->rank);
  double init = op == HLO_OP_ADD ? 0 : op == HLO_OP_MULTIPLY ? 1 : op == HLO_OP_MAXIMUM ? -100 : 100;
  hlo_comp *reducer = hlo_build_scalar_reducer(g->module, op, t);
  hlo_instr *i0 = scalar(g, t, init);
  bool sum = is_float(t) && (op == HLO_OP_ADD || op == HLO_OP_MULTIPLY);
  add(g, reducer && i0 ? hlo_build_reduce(g->comp, x->instr, i0, count, dims, reducer, &g->diag) : NULL,
      x->inexact || sum, "reduce");
}

static void op_dot(rng *r, graph *g) {
  hlo_dtype t = g->dtype;
  int64_t b = 1 + pick(r, 3), m = pick(r, 5), k = pick(r, 6), n = 1 + pick(r, 4);
  bool batch = chance(r, 40), transposed = chance(r, 40);
  hlo_dot_dims dd = {0};
  int64_t lhs_dims[3], rhs_dims[3], zero = 0, one = 1, two = 2;
  int rank = batch ? 3 : 2;
  if (batch) {
    lhs_dims[0] = rhs_dims[0] = b;
    dd.lhs_batch = (hlo_ints){1, &zero};
    dd.rhs_batch = (hlo_ints){1, &zero};
  }
  int o = batch ? 1 : 0;
  lhs_dims[o] = m;
  lhs_dims[o + 1] = k;
  dd.lhs_contracting = (hlo_ints){1, batch ? &two : &one};
  if (transposed) { /* rhs [n, k]: contracting its last dim */
    rhs_dims[o] = n;
    rhs_dims[o + 1] = k;
    dd.rhs_contracting = (hlo_ints){1, batch ? &two : &one};
  } else {
    rhs_dims[o] = k;
    rhs_dims[o + 1] = n;
    dd.rhs_contracting = (hlo_ints){1, batch ? &one : &zero};
  }
  hlo_instr *lhs = param(g, t, rank, lhs_dims), *rhs = param(g, t, rank, rhs_dims);
  add(g, lhs && rhs ? hlo_build_dot(g->comp, lhs, rhs, &dd, &g->diag) : NULL, is_float(t), "dot");
}

static void window_dim(rng *r, hlo_window_dim *w, int64_t size, bool strided) {
  *w = (hlo_window_dim){.size = size, .stride = strided ? 1 + pick(r, 2) : 1, .pad_low = pick(r, 2),
                        .pad_high = pick(r, 2), .lhs_dilate = 1, .rhs_dilate = 1};
}

static void op_conv(rng *r, graph *g) {
  hlo_dtype t = g->dtype;
  int spatial = 1 + pick(r, 2);
  int64_t groups = 1 + pick(r, 2), batch = 1 + pick(r, 2);
  int64_t in_f = groups * (1 + pick(r, 2)), out_f = groups * (1 + pick(r, 2));
  bool nhwc = chance(r, 30);
  hlo_conv_dims cd = {.spatial_count = spatial};
  hlo_window w = {.rank = spatial};
  int64_t in_dims[HLO_MAX_RANK], k_dims[HLO_MAX_RANK];
  int rank = spatial + 2;
  /* NCHW / OIHW -> NCHW, or NHWC / HWIO -> NHWC */
  cd.input_batch = 0;
  cd.input_feature = nhwc ? rank - 1 : 1;
  cd.kernel_output_feature = nhwc ? rank - 1 : 0;
  cd.kernel_input_feature = nhwc ? rank - 2 : 1;
  cd.output_batch = 0;
  cd.output_feature = cd.input_feature;
  in_dims[0] = batch;
  in_dims[cd.input_feature] = in_f;
  k_dims[cd.kernel_output_feature] = out_f;
  k_dims[cd.kernel_input_feature] = in_f / groups;
  for (int d = 0; d < spatial; d++) {
    int64_t at = nhwc ? 1 + d : 2 + d, kat = nhwc ? d : 2 + d;
    cd.input_spatial[d] = cd.output_spatial[d] = at;
    cd.kernel_spatial[d] = kat;
    in_dims[at] = 2 + pick(r, 4);
    k_dims[kat] = 1 + pick(r, 3);
    window_dim(r, &w.dims[d], k_dims[kat], chance(r, 40));
    if (chance(r, 20)) w.dims[d].rhs_dilate = 2;
    if (chance(r, 10)) w.dims[d].lhs_dilate = 2;
    /* the window must fit the padded, dilated input */
    int64_t span = (k_dims[kat] - 1) * w.dims[d].rhs_dilate + 1;
    int64_t have = (in_dims[at] - 1) * w.dims[d].lhs_dilate + 1 + w.dims[d].pad_low + w.dims[d].pad_high;
    if (span > have) in_dims[at] += span - have;
  }
  hlo_instr *x = param(g, t, rank, in_dims), *k = param(g, t, rank, k_dims);
  add(g, x && k ? hlo_build_convolution(g->comp, x, k, &w, &cd, groups, 1, &g->diag) : NULL, is_float(t),
      "convolution");
}

static void op_reduce_window(rng *r, graph *g) {
  node *x = random_node(r, g);
  const hlo_shape *s = &x->instr->shape;
  hlo_dtype t = s->dtype;
  if (t == HLO_PRED || s->rank == 0) return;
  hlo_window w = {.rank = s->rank};
  for (int d = 0; d < s->rank; d++) {
    int64_t size = s->dims[d] == 0 ? 1 : 1 + pick(r, (int)(s->dims[d] < 3 ? s->dims[d] : 3));
    window_dim(r, &w.dims[d], size, chance(r, 50));
    if (s->dims[d] == 0) w.dims[d].pad_low = w.dims[d].pad_high = 0;
  }
  bool is_max = chance(r, 50);
  hlo_comp *reducer = hlo_build_scalar_reducer(g->module, is_max ? HLO_OP_MAXIMUM : HLO_OP_ADD, t);
  hlo_instr *i0 = scalar(g, t, is_max ? -100 : 0);
  add(g, reducer && i0 ? hlo_build_reduce_window(g->comp, x->instr, i0, &w, reducer, &g->diag) : NULL,
      x->inexact || (!is_max && is_float(t)), "reduce-window");
}

static void op_convert(rng *r, graph *g) {
  node *x = random_node(r, g);
  hlo_dtype from = x->instr->shape.dtype;
  static const hlo_dtype to_any[] = {HLO_F32, HLO_F64, HLO_S32, HLO_F16, HLO_BF16, HLO_U8, HLO_PRED, HLO_S64};
  hlo_dtype to = to_any[pick(r, 8)];
  /* an inexact value keeps its type: widened, it would be held to a tighter tolerance */
  if (x->inexact) to = from;
  if (is_float(from) && !is_float(to)) { /* scale to a useful integer range first */
    hlo_instr *ten = broadcast_scalar(g, from, 10, &x->instr->shape);
    hlo_instr *m = ten ? hlo_build_binary(g->comp, HLO_OP_MULTIPLY, x->instr, ten, &g->diag) : NULL;
    add(g, m ? hlo_build_convert(g->comp, m, to, &g->diag) : NULL, false, "convert");
    return;
  }
  add(g, hlo_build_convert(g->comp, x->instr, to, &g->diag), x->inexact, "convert");
}

static void op_leaf(rng *r, graph *g) {
  int64_t dims[HLO_MAX_RANK];
  int rank = pick(r, 4);
  random_dims(r, rank, dims);
  if (chance(r, 50) && rank > 0) {
    add(g, hlo_build_iota(g->comp, g->dtype, rank, dims, pick(r, rank), &g->diag), false, "iota");
  } else {
    hlo_instr *c = scalar(g, g->dtype, pick(r, 7) - 3);
    add(g, c ? hlo_build_broadcast(g->comp, c, rank, dims, NULL, &g->diag) : NULL, false, "constant");
  }
}

static hlo_dtype graph_dtype(rng *r) {
  static const hlo_dtype types[] = {HLO_F32, HLO_F32, HLO_F32, HLO_F64, HLO_S32, HLO_S32, HLO_F16, HLO_BF16,
                                    HLO_U8, HLO_PRED};
  return types[pick(r, 10)];
}

static bool build(rng *r, graph *g) {
  g->module = hlo_module_new("diff");
  g->comp = hlo_build_computation(g->module, "main", true);
  g->dtype = graph_dtype(r);
  large_graph = chance(r, 5);
  int starts = 1 + pick(r, 3);
  for (int i = 0; i < starts; i++) {
    int64_t dims[HLO_MAX_RANK];
    int rank = pick(r, 4);
    random_dims(r, rank, dims);
    add(g, param(g, g->dtype, rank, dims), false, "parameter");
  }
  int ops = 3 + pick(r, 7);
  bool numeric = g->dtype != HLO_PRED && g->dtype != HLO_U8;
  for (int i = 0; i < ops && !g->failed_op && g->count < MAX_NODES - 8; i++) {
    switch (pick(r, 15)) {
      case 0: op_unary(r, g); break;
      case 1: case 2: op_binary(r, g); break;
      case 3: op_select(r, g); break;
      case 4: op_broadcast(r, g); break;
      case 5: op_reshape(r, g); break;
      case 6: op_transpose(r, g); break;
      case 7: op_slice(r, g); break;
      case 8: op_concatenate(r, g); break;
      case 9: op_pad(r, g); break;
      case 10: op_reduce(r, g); break;
      case 11: if (numeric) chance(r, 50) ? op_dot(r, g) : op_conv(r, g); break;
      case 12: op_reduce_window(r, g); break;
      case 13: op_convert(r, g); break;
      default: op_leaf(r, g); break;
    }
  }
  if (g->failed_op) return false;
  hlo_instr *root = g->nodes[g->count - 1].instr;
  if (chance(r, 30) && g->count > 1) {
    hlo_instr *two[2] = {g->nodes[pick(r, g->count - 1)].instr, root};
    root = hlo_build_tuple(g->comp, 2, two, &g->diag);
  }
  return root && hlo_comp_set_root(g->comp, root, &g->diag) == HLO_OK && hlo_module_sort(g->module, &g->diag);
}

static double tolerance(hlo_dtype t) {
  switch (t) {
    case HLO_F64: return 1e-9;
    case HLO_F32: return 1e-4;
    case HLO_F16: return 1e-2;
    case HLO_BF16: return 4e-2;
    default: return 0;
  }
}

static bool close(double want, double got, double tol) {
  if (want == got || (isnan(want) && isnan(got))) return true;
  return fabs(want - got) <= tol * (1 + fabs(want));
}

/* First mismatch, described in text; false when all agree. */
static bool differs(const rt_value *want, const rt_value *got, char *why, size_t size) {
  if (want->shape.dtype == HLO_TUPLE) {
    if (got->shape.dtype != HLO_TUPLE || got->tuple_count != want->tuple_count) {
      snprintf(why, size, "tuple shapes differ");
      return true;
    }
    for (int i = 0; i < want->tuple_count; i++)
      if (differs(want->tuple[i], got->tuple[i], why, size)) return true;
    return false;
  }
  if (!hlo_shape_equal(&want->shape, &got->shape)) {
    snprintf(why, size, "shapes differ");
    return true;
  }
  double tol = tolerance(want->shape.dtype);
  for (int64_t i = 0; i < want->count; i++) {
    bool same = hlo_dtype_is_float(want->shape.dtype) ? close(rt_get_f64(want, i), rt_get_f64(got, i), tol)
                                                      : rt_get_i64(want, i) == rt_get_i64(got, i);
    if (!same) {
      snprintf(why, size, "element %lld: reference %.9g, cpu %.9g", (long long)i, rt_get_f64(want, i),
               rt_get_f64(got, i));
      return true;
    }
  }
  return false;
}

static int compared, skipped;

static void run_graph(uint64_t seed) {
  rng r = {seed * 0x2545f4914f6cdd1du + 1};
  graph g = {0};
  bool built = build(&r, &g);
  CHECK_MSG(built, "seed %llu: the generator made an invalid %s: %s", (unsigned long long)seed,
            g.failed_op ? g.failed_op : "graph", g.diag.message);
  if (!built) {
    hlo_module_free(g.module);
    return;
  }
  hlo_diag diag = {0};
  rt_executable *ref = rt_backend_reference.compile(g.module, NULL, &diag);
  rt_executable *cpu = rt_backend_cpu.compile(g.module, NULL, &diag);
  CHECK_MSG(ref && cpu, "seed %llu: compile failed: %s", (unsigned long long)seed, diag.message);
  rt_value *args[MAX_NODES] = {0};
  int n = g.comp->param_count;
  for (int i = 0; i < n; i++) args[i] = rt_random_value(&g.comp->params[i]->shape, seed, (uint64_t)i, &diag);
  rt_value *want = NULL, *got = NULL;
  hlo_status a = ref ? rt_backend_reference.execute(ref, args, n, &want, &diag) : HLO_ERR_INTERNAL;
  if (a != HLO_OK) {
    skipped++; /* a graph the reference refuses is no comparison */
  } else {
    hlo_status b = cpu ? rt_backend_cpu.execute(cpu, args, n, &got, &diag) : HLO_ERR_INTERNAL;
    CHECK_MSG(b == HLO_OK, "seed %llu: cpu failed: %s", (unsigned long long)seed, diag.message);
    char why[256] = "";
    bool bad = b == HLO_OK && differs(want, got, why, sizeof why);
    if (getenv("LATCH_DIFF_PRINT")) bad = bad || seed == (uint64_t)atoi(getenv("LATCH_DIFF_PRINT"));
    CHECK_MSG(!bad, "seed %llu: %s", (unsigned long long)seed, why);
    if (bad) {
      char *text = hlo_module_to_text(g.module);
      fprintf(stderr, "%s\n", text);
      free(text);
    }
    compared++;
  }
  rt_value_release(want);
  rt_value_release(got);
  for (int i = 0; i < n; i++) rt_value_release(args[i]);
  rt_backend_reference.destroy(ref);
  rt_backend_cpu.destroy(cpu);
  hlo_module_free(g.module);
}

static void test_random_graphs(void) {
  const char *env = getenv("LATCH_DIFF_GRAPHS");
  int graphs = env ? atoi(env) : GRAPHS;
  for (int i = 0; i < graphs; i++) run_graph((uint64_t)i);
  printf("%d graphs compared (%d refused by the reference)\n", compared, skipped);
  CHECK(compared >= (env ? 1 : 2000));
}

int main(void) {
  RUN(test_random_graphs);
  return TEST_REPORT();
}
