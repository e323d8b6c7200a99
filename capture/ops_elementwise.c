/* Tracing elementwise ops: check operands, infer the result's type and broadcast shape,
 * record the node. Nothing runs here; lower.c says what each node becomes in HLO. */
#include <stdlib.h>
#include <string.h>

#include "capture.h"

static const char *const unary_names[] = {
    [LATCH_NEG] = "neg",         [LATCH_ABS] = "abs",     [LATCH_SIGN] = "sign",   [LATCH_FLOOR] = "floor",
    [LATCH_CEIL] = "ceil",       [LATCH_ROUND] = "round", [LATCH_NOT] = "not",     [LATCH_EXP] = "exp",
    [LATCH_LOG] = "log",         [LATCH_SQRT] = "sqrt",   [LATCH_RSQRT] = "rsqrt", [LATCH_TANH] = "tanh",
    [LATCH_SIGMOID] = "sigmoid", [LATCH_SIN] = "sin",     [LATCH_COS] = "cos",     [LATCH_ERF] = "erf",
    [LATCH_LOG1P] = "log1p",     [LATCH_EXPM1] = "expm1",
};

static const char *const binary_names[] = {
    [LATCH_ADD] = "add", [LATCH_SUB] = "sub", [LATCH_MUL] = "mul", [LATCH_DIV] = "div",
    [LATCH_REM] = "rem", [LATCH_POW] = "pow", [LATCH_MAX] = "max", [LATCH_MIN] = "min",
    [LATCH_AND] = "and", [LATCH_OR] = "or",   [LATCH_XOR] = "xor",
};

static const char *const compare_names[] = {
    [LATCH_EQ] = "eq", [LATCH_NE] = "ne", [LATCH_LT] = "lt", [LATCH_LE] = "le", [LATCH_GT] = "gt", [LATCH_GE] = "ge",
};

latch_tensor *cap_traced(latch_runtime *rt, cap_node *node) {
  if (node && !cap_node_finish(node)) {
    cap_node_release(node);
    node = NULL;
  }
  return cap_wrap(rt, node);
}

cap_node *cap_node_like(cap_op op, int sub, int count, latch_tensor *const *operands, int attrs, hlo_dtype dtype,
                        int rank, const int64_t *dims) {
  cap_node *nodes[8] = {NULL}, **list = nodes;
  cap_node *node;
  cap_ctx *ctx = cap_ctx_current();
  if (ctx->trace) cap_trace_operands(ctx->trace, count, operands);
  if (count > 8) {
    list = hlo_malloc(sizeof(cap_node *) * (size_t)count);
    if (!list) return NULL;
  }
  for (int i = 0; i < count; i++) list[i] = operands[i]->node;
  node = cap_node_new(op, sub, count, list, attrs);
  if (list != nodes) free(list);
  if (!node) return NULL;
  node->dtype = (uint8_t)dtype;
  node->rank = (uint8_t)rank;
  if (rank) memcpy(node->dims, dims, sizeof(int64_t) * (size_t)rank);
  return node;
}

const char *cap_shape_text(const latch_tensor *t, char *buffer, int size) {
  return cap_node_shape_str(t->node, buffer, size);
}

/* Type promotion with the op's message on failure. */
static bool promote(const char *op, latch_tensor *a, latch_tensor *b, hlo_dtype *out, latch_tensor **error) {
  *out = cap_promote((hlo_dtype)a->node->dtype, (hlo_dtype)b->node->dtype);
  if (*out != HLO_INVALID) return true;
  char sa[128], sb[128];
  *error = cap_error(a->rt, "%s: no type holds both %s and %s", op, cap_shape_text(a, sa, sizeof sa),
                     cap_shape_text(b, sb, sizeof sb));
  return false;
}

static bool broadcast(const char *op, latch_tensor *a, latch_tensor *b, int *rank, int64_t *dims,
                      latch_tensor **error) {
  if (cap_broadcast_dims(a->node->rank, a->node->dims, b->node->rank, b->node->dims, rank, dims)) return true;
  char sa[128], sb[128];
  *error = cap_error(a->rt, "%s: shapes %s and %s do not broadcast", op, cap_shape_text(a, sa, sizeof sa),
                     cap_shape_text(b, sb, sizeof sb));
  return false;
}

static bool float_unary(latch_unop op) { return op >= LATCH_EXP; }

latch_tensor *latch_unary(latch_unop op, latch_tensor *x) {
  if ((unsigned)op > LATCH_EXPM1) return cap_error(x ? x->rt : NULL, "unary: unknown op %d", (int)op);
  const char *name = unary_names[op];
  latch_tensor *bad = cap_poisoned(name, 1, &x);
  if (bad) return bad;
  hlo_dtype dtype = (hlo_dtype)x->node->dtype;
  if (float_unary(op) && !hlo_dtype_is_float(dtype)) dtype = HLO_F32;
  char s[128];
  if (op == LATCH_NOT && hlo_dtype_is_float(dtype))
    return cap_error(x->rt, "%s: needs a bool or integer tensor, got %s", name, cap_shape_text(x, s, sizeof s));
  if (op != LATCH_NOT && dtype == HLO_PRED)
    return cap_error(x->rt, "%s: needs a number tensor, got %s", name, cap_shape_text(x, s, sizeof s));
  return cap_traced(x->rt, cap_node_like(CAP_UNARY, op, 1, &x, 0, dtype, x->node->rank, x->node->dims));
}

latch_tensor *latch_binary(latch_binop op, latch_tensor *a, latch_tensor *b) {
  latch_tensor *in[2] = {a, b}, *bad;
  if ((unsigned)op > LATCH_XOR) return cap_error(a ? a->rt : NULL, "binary: unknown op %d", (int)op);
  const char *name = binary_names[op];
  if ((bad = cap_poisoned(name, 2, in))) return bad;
  hlo_dtype dtype;
  int rank;
  int64_t dims[HLO_MAX_RANK];
  if (!promote(name, a, b, &dtype, &bad) || !broadcast(name, a, b, &rank, dims, &bad)) return bad;
  bool logical = op == LATCH_AND || op == LATCH_OR || op == LATCH_XOR;
  bool minmax = op == LATCH_MAX || op == LATCH_MIN;
  if (logical ? hlo_dtype_is_float(dtype) : dtype == HLO_PRED && !minmax) {
    char sa[128], sb[128];
    return cap_error(a->rt, "%s: not defined for %s and %s", name, cap_shape_text(a, sa, sizeof sa),
                     cap_shape_text(b, sb, sizeof sb));
  }
  return cap_traced(a->rt, cap_node_like(CAP_BINARY, op, 2, in, 0, dtype, rank, dims));
}

latch_tensor *latch_compare(latch_cmp op, latch_tensor *a, latch_tensor *b) {
  latch_tensor *in[2] = {a, b}, *bad;
  if ((unsigned)op > LATCH_GE) return cap_error(a ? a->rt : NULL, "compare: unknown op %d", (int)op);
  const char *name = compare_names[op];
  if ((bad = cap_poisoned(name, 2, in))) return bad;
  hlo_dtype dtype;
  int rank;
  int64_t dims[HLO_MAX_RANK];
  if (!promote(name, a, b, &dtype, &bad) || !broadcast(name, a, b, &rank, dims, &bad)) return bad;
  return cap_traced(a->rt, cap_node_like(CAP_COMPARE, op, 2, in, 0, HLO_PRED, rank, dims));
}

latch_tensor *latch_where(latch_tensor *cond, latch_tensor *a, latch_tensor *b) {
  latch_tensor *in[3] = {cond, a, b}, *bad;
  if ((bad = cap_poisoned("where", 3, in))) return bad;
  char s[128];
  if (cond->node->dtype != HLO_PRED)
    return cap_error(cond->rt, "where: the condition must be bool, got %s", cap_shape_text(cond, s, sizeof s));
  hlo_dtype dtype;
  int rank, rank2;
  int64_t dims[HLO_MAX_RANK], dims2[HLO_MAX_RANK];
  if (!promote("where", a, b, &dtype, &bad) || !broadcast("where", a, b, &rank, dims, &bad)) return bad;
  if (!cap_broadcast_dims(cond->node->rank, cond->node->dims, rank, dims, &rank2, dims2)) {
    char sa[128], sb[128];
    return cap_error(cond->rt, "where: condition %s does not broadcast with %s and %s",
                     cap_shape_text(cond, s, sizeof s), cap_shape_text(a, sa, sizeof sa),
                     cap_shape_text(b, sb, sizeof sb));
  }
  return cap_traced(cond->rt, cap_node_like(CAP_WHERE, 0, 3, in, 0, dtype, rank2, dims2));
}

latch_tensor *latch_clamp(latch_tensor *x, double low, double high) {
  latch_tensor *bad = cap_poisoned("clamp", 1, &x);
  if (bad) return bad;
  char s[128];
  if (x->node->dtype == HLO_PRED)
    return cap_error(x->rt, "clamp: needs a number tensor, got %s", cap_shape_text(x, s, sizeof s));
  if (!(low <= high)) return cap_error(x->rt, "clamp: low %g is above high %g", low, high);
  cap_node *node = cap_node_like(CAP_CLAMP, 0, 1, &x, 0, (hlo_dtype)x->node->dtype, x->node->rank, x->node->dims);
  if (node) {
    node->scalar[0] = low;
    node->scalar[1] = high;
  }
  return cap_traced(x->rt, node);
}

latch_tensor *latch_cast(latch_tensor *x, latch_dtype dtype) {
  latch_tensor *bad = cap_poisoned("cast", 1, &x);
  if (bad) return bad;
  hlo_dtype to = cap_hlo_dtype(dtype);
  if (to == HLO_INVALID) return cap_error(x->rt, "cast: invalid dtype %d", (int)dtype);
  if (to == x->node->dtype)
    return cap_wrap(x->rt, cap_node_retain(x->node)); /* a new handle: assigning to it must not change x */
  return cap_traced(x->rt, cap_node_like(CAP_CAST, 0, 1, &x, 0, to, x->node->rank, x->node->dims));
}

latch_tensor *latch_relu(latch_tensor *x) {
  latch_tensor *bad = cap_poisoned("relu", 1, &x);
  if (bad) return bad;
  char s[128];
  if (x->node->dtype == HLO_PRED)
    return cap_error(x->rt, "relu: needs a number tensor, got %s", cap_shape_text(x, s, sizeof s));
  return cap_traced(x->rt,
                    cap_node_like(CAP_RELU, 0, 1, &x, 0, (hlo_dtype)x->node->dtype, x->node->rank, x->node->dims));
}

latch_tensor *latch_gelu(latch_tensor *x, bool tanh_approximation) {
  latch_tensor *bad = cap_poisoned("gelu", 1, &x);
  if (bad) return bad;
  char s[128];
  if (!hlo_dtype_is_float((hlo_dtype)x->node->dtype))
    return cap_error(x->rt, "gelu: needs a floating-point tensor, got %s", cap_shape_text(x, s, sizeof s));
  return cap_traced(x->rt, cap_node_like(CAP_GELU, tanh_approximation, 1, &x, 0, (hlo_dtype)x->node->dtype,
                                         x->node->rank, x->node->dims));
}
