/* A per-channel affine map after a convolution folded into the convolution's weights and
 * bias (batch norm in inference form, as the capture layer lowers it):
 *
 *   ((conv(x, W) - mean) * rsqrt(var + eps)) * gamma + beta
 *     -> conv(x, W * s) + t,  s = rsqrt(var + eps) * gamma,  t = (-mean * rsqrt(var + eps)) * gamma + beta
 *
 * with s broadcast along the kernel's output-feature dim and t along the result's feature
 * dim. The chain is walked from the convolution through adds, subtracts and multiplies (and
 * divides) by values that are constant along every dim but the feature dim: broadcasts of
 * [C] parameters or constants along it, scalars, and elementwise ops of those. Each step
 * keeps the running value a * conv + b, with a and b built on [C] shapes; every member but
 * the last must have the chain's next op as its only user.
 *
 * Only when the weight W is a parameter and some factor reaches it (a bias add alone is
 * already a cheap epilogue): s, t and W * s then depend on parameters alone, and a backend
 * that keeps parameter-only work from one call to the next (the cpu backend) computes them
 * once per weight version, and the per-element work after the product is one add.
 *
 * Not exact: the scale is applied to the weights before the products' sums and the shift
 * to the scaled mean, so results differ by rounding. Backends opt in; the reference
 * evaluator runs the graph as written. */
#include <stdlib.h>
#include <string.h>

#include "exec_internal.h"
#include "hlo/hlo.h"

enum { MAX_DEPTH = 16 };

static bool plain_f32(const hlo_instr *instr) {
  const hlo_shape *s = &instr->shape;
  return hlo_shape_is_array(s) && s->dtype == HLO_F32 && hlo_shape_is_default_layout(s) && !hlo_shape_is_dynamic(s);
}

/* A value that does not change from call to call unless a weight does. */
static bool weight_like(const hlo_instr *instr) {
  hlo_opcode op = hlo_under_views(instr)->opcode;
  return op == HLO_OP_PARAMETER || op == HLO_OP_CONSTANT;
}

/* The [C] values of p, a value of the convolution's result shape that is constant along
 * every dim but feature (C of them); NULL when p is not one this pass sees through. */
static hlo_instr *channel_values(hlo_comp *comp, hlo_instr *p, int64_t feature, int depth, hlo_diag *diag) {
  int64_t c = p->shape.dims[feature];
  if (depth > MAX_DEPTH || !plain_f32(p)) return NULL;
  if (p->opcode == HLO_OP_BROADCAST && p->operand_count == 1) {
    hlo_instr *q = p->operands[0];
    if (!plain_f32(q) || !weight_like(q)) return NULL;
    if (q->shape.rank == 0) return hlo_build_broadcast(comp, q, 1, &c, NULL, diag);
    bool along = q->shape.rank == 1 && p->dimensions.count == 1 && p->dimensions.values[0] == feature;
    return along ? q : NULL;
  }
  if (hlo_opcode_is_elementwise_unary(p->opcode) && p->operand_count == 1 && p->opcode != HLO_OP_CONVERT) {
    hlo_instr *a = channel_values(comp, p->operands[0], feature, depth + 1, diag);
    return a ? hlo_build_unary(comp, p->opcode, a, diag) : NULL;
  }
  switch (p->opcode) {
    case HLO_OP_ADD: case HLO_OP_SUBTRACT: case HLO_OP_MULTIPLY: case HLO_OP_DIVIDE:
    case HLO_OP_MAXIMUM: case HLO_OP_MINIMUM: {
      hlo_instr *a = channel_values(comp, p->operands[0], feature, depth + 1, diag);
      hlo_instr *b = a ? channel_values(comp, p->operands[1], feature, depth + 1, diag) : NULL;
      return b ? hlo_build_binary(comp, p->opcode, a, b, diag) : NULL;
    }
    default:
      return NULL;
  }
}

/* The running value scale * conv + shift; NULL scale is 1, NULL shift is 0. */
typedef struct affine {
  hlo_instr *scale, *shift;
  bool failed;
} affine;

static hlo_instr *combine(hlo_comp *comp, hlo_opcode op, hlo_instr *a, hlo_instr *b, affine *m, hlo_diag *diag) {
  hlo_instr *r = hlo_build_binary(comp, op, a, b, diag);
  if (!r) m->failed = true;
  return r;
}

/* Takes u = v op p (or p op v for add and multiply) into m; false when u is not affine in v. */
static bool absorb(hlo_comp *comp, const hlo_instr *v, hlo_instr *u, int64_t feature, affine *m, hlo_diag *diag) {
  hlo_opcode op = u->opcode;
  bool commutes = op == HLO_OP_ADD || op == HLO_OP_MULTIPLY;
  if (!commutes && op != HLO_OP_SUBTRACT && op != HLO_OP_DIVIDE) return false;
  if (u->operand_count != 2 || !hlo_shape_equal(&u->shape, &v->shape)) return false;
  int side = u->operands[0] == v ? 0 : 1;
  if (u->operands[1 - side] == v || (side == 1 && !commutes)) return false;
  hlo_instr *p = channel_values(comp, u->operands[1 - side], feature, 0, diag);
  if (!p) return false;
  switch (op) {
    case HLO_OP_ADD:
      m->shift = m->shift ? combine(comp, HLO_OP_ADD, m->shift, p, m, diag) : p;
      break;
    case HLO_OP_SUBTRACT:
      m->shift = m->shift ? combine(comp, HLO_OP_SUBTRACT, m->shift, p, m, diag) : hlo_build_unary(comp, HLO_OP_NEGATE, p, diag);
      break;
    default: { /* multiply, divide: both parts */
      if (m->shift) m->shift = combine(comp, op, m->shift, p, m, diag);
      if (m->scale) {
        m->scale = combine(comp, op, m->scale, p, m, diag);
      } else if (op == HLO_OP_MULTIPLY) {
        m->scale = p;
      } else {
        hlo_instr *one = hlo_build_constant_scalar(comp, HLO_F32, 1, diag);
        int64_t c = p->shape.dims[0];
        hlo_instr *ones = one ? hlo_build_broadcast(comp, one, 1, &c, NULL, diag) : NULL;
        m->scale = ones ? combine(comp, HLO_OP_DIVIDE, ones, p, m, diag) : NULL;
      }
      break;
    }
  }
  if (!m->shift && (op == HLO_OP_ADD || op == HLO_OP_SUBTRACT)) m->failed = true;
  if ((op == HLO_OP_MULTIPLY || op == HLO_OP_DIVIDE) && !m->scale) m->failed = true;
  return !m->failed;
}

/* Uses of each instruction of comp (the root counts as one) and, for those with one, who. */
typedef struct users {
  int n; /* instructions counted: those the pass makes come after */
  int *count;
  hlo_instr **only;
} users;

static bool count_users(const hlo_comp *comp, users *u) {
  u->n = comp->instr_count;
  u->count = hlo_calloc((size_t)comp->instr_count + 1, sizeof(int));
  u->only = hlo_calloc((size_t)comp->instr_count + 1, sizeof(hlo_instr *));
  if (!u->count || !u->only) return false;
  for (int i = 0; i < comp->instr_count; i++) {
    hlo_instr *instr = comp->instrs[i];
    for (int k = 0; k < instr->operand_count; k++) {
      u->count[instr->operands[k]->id]++;
      u->only[instr->operands[k]->id] = instr;
    }
  }
  if (comp->root) u->count[comp->root->id]++;
  return true;
}

/* Whether conv is one to fold into: f32, its weight a parameter, no batch groups. */
static bool foldable(const hlo_instr *conv) {
  return conv->opcode == HLO_OP_CONVOLUTION && conv->operand_count == 2 && conv->conv && conv->window &&
         conv->batch_group_count == 1 && plain_f32(conv) && plain_f32(conv->operands[0]) &&
         plain_f32(conv->operands[1]) && hlo_under_views(conv->operands[1])->opcode == HLO_OP_PARAMETER;
}

/* The folded value replacing the chain's last member, or NULL when there is nothing to fold. */
static hlo_instr *fold(hlo_comp *comp, hlo_instr *conv, const users *u, hlo_instr **end, hlo_diag *diag) {
  const hlo_conv_dims *dims = conv->conv;
  int64_t feature = dims->output_feature;
  affine m = {0};
  hlo_instr *v = conv;
  *end = NULL;
  while (v->id < u->n && u->count[v->id] == 1 && v != comp->root && u->only[v->id]) {
    hlo_instr *next = u->only[v->id];
    affine tried = m;
    if (!absorb(comp, v, next, feature, &tried, diag)) break;
    m = tried;
    v = next;
  }
  if (!m.scale) return NULL;
  *end = v;
  hlo_instr *w = conv->operands[1];
  int64_t out_feature = dims->kernel_output_feature;
  hlo_instr *spread = hlo_build_broadcast(comp, m.scale, w->shape.rank, w->shape.dims, &out_feature, diag);
  hlo_instr *scaled = spread ? hlo_build_binary(comp, HLO_OP_MULTIPLY, w, spread, diag) : NULL;
  hlo_instr *product = scaled ? hlo_build_convolution(comp, conv->operands[0], scaled, conv->window, dims,
                                                      conv->feature_group_count, conv->batch_group_count, diag)
                              : NULL;
  if (!product || !hlo_shape_equal(&product->shape, &conv->shape)) return NULL;
  /* the same results as instructions the source has: binding takes their shapes from them */
  product->origin = conv->origin;
  if (!m.shift) return product;
  hlo_instr *bias = hlo_build_broadcast(comp, m.shift, v->shape.rank, v->shape.dims, &feature, diag);
  hlo_instr *sum = bias ? hlo_build_binary(comp, HLO_OP_ADD, product, bias, diag) : NULL;
  if (!sum) return NULL;
  bias->origin = v->origin;
  sum->origin = v->origin;
  return sum;
}

static int fold_comp(hlo_comp *comp) {
  users u;
  int count = comp->instr_count, rewrites = 0;
  if (!count_users(comp, &u)) {
    free(u.count);
    free(u.only);
    return 0; /* out of memory: folding nothing is still correct */
  }
  for (int i = 0; i < count; i++) {
    hlo_instr *conv = comp->instrs[i], *end;
    if (!foldable(conv) || !hlo_choice("fold_affine", conv->name)) continue;
    hlo_diag diag;
    hlo_instr *folded = fold(comp, conv, &u, &end, &diag);
    if (!folded) continue;
    hlo_replace_uses(comp, end, folded);
    rewrites++;
  }
  free(u.count);
  free(u.only);
  hlo_diag diag;
  /* new instructions were appended after their users' old operands: sort them in; the
   * rewrite makes no cycle, so this cannot fail */
  if (rewrites) hlo_comp_sort(comp, &diag);
  return rewrites;
}

int rt_cpu_pass_fold_affine(hlo_module *module) {
  int rewrites = 0;
  for (int c = 0; c < module->comp_count; c++) rewrites += fold_comp(module->comps[c]);
  if (rewrites) hlo_pass_cse(module);
  hlo_pass_dce(module); /* also what chains that could not be folded left behind */
  return rewrites;
}
