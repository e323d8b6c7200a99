/* Algebraic simplification, limited to rewrites that are exact in IEEE arithmetic:
 *   x * 1 -> x (exact for every float, -0 and NaN included, and every integer)
 *   x + 0, 0 + x, x - 0 -> x for integers only: for floats -0 + 0 is +0, not -0
 *   convert to the operand's own type, reshape/broadcast/transpose/slice that change
 *   nothing -> the operand
 *   reshape(reshape(x)) -> reshape(x); transpose(transpose(x)) -> one transpose (or x)
 *   a transpose that moves only size-1 dims -> reshape (split and merged attention heads
 *   of a one-token step: [B, 1, H, d] <-> [B, H, 1, d]), which backends run as a view
 *   dot(transpose(x), y) -> dot(x, y) with the transpose folded into the dimension numbers,
 *   when the free dims keep their order (so the result is laid out the same): the dot
 *   kernel reads either operand order, while a big transpose is a strided, cache-hostile
 *   copy (a Linear layer's weight, x @ W^T, was most of vgg16's step)
 *   convolution(transpose(x), w) or convolution(x, transpose(w)) -> the transpose folded into
 *   the dimension numbers (a weights gradient reads the forward's source with its batch and
 *   features swapped, and the result's gradient so too); transpose(convolution) read by
 *   nothing else -> the convolution with its output labels permuted
 *   pad with no padding -> the operand; reduce-window (maximum, minimum or add) of a pad
 *   whose value is the window's init -> the window's own padding (XLA pads a window with its
 *   init), so no padded copy is made: torchvision's ceil-mode max pools lower to both
 *   add, subtract, multiply, maximum, minimum of two scalar constants (f32, f64, s32, s64)
 *   -> a constant, computed in the element type as the kernels would (integers wrap; NaN
 *   and signed zeros are left alone, where maximum's and minimum's rules would matter)
 * Rewrites that would hand a user an operand with another layout are skipped: only shapes
 * with default layouts are merged. Instructions are visited operands-first; a replaced
 * instruction's users are redirected as they are reached, and it is left dead for DCE. */
#include <stdlib.h>
#include <string.h>

#include "hlo.h"

/* Every element of a constant (or a broadcast of one) equals value. */
static bool all_equal(const hlo_instr *instr, double value) {
  if (instr->opcode == HLO_OP_BROADCAST && instr->operand_count == 1) instr = instr->operands[0];
  if (instr->opcode != HLO_OP_CONSTANT || !instr->literal || !instr->literal->data) return false;
  const hlo_literal *lit = instr->literal;
  int64_t n = hlo_shape_elements(&lit->shape);
  if (n < 1 || n > 4096) return false;
  for (int64_t i = 0; i < n; i++) {
    double v;
    const void *p = (const char *)lit->data + i * (int64_t)hlo_dtype_size(lit->shape.dtype);
    switch (lit->shape.dtype) {
      case HLO_PRED: v = *(const uint8_t *)p; break;
      case HLO_S8: v = *(const int8_t *)p; break;
      case HLO_S16: v = *(const int16_t *)p; break;
      case HLO_S32: v = *(const int32_t *)p; break;
      case HLO_S64: v = (double)*(const int64_t *)p; break;
      case HLO_U8: v = *(const uint8_t *)p; break;
      case HLO_U16: v = *(const uint16_t *)p; break;
      case HLO_U32: v = *(const uint32_t *)p; break;
      case HLO_U64: v = (double)*(const uint64_t *)p; break;
      case HLO_F16: v = hlo_f16_to_f32(*(const uint16_t *)p); break;
      case HLO_BF16: v = hlo_bf16_to_f32(*(const uint16_t *)p); break;
      case HLO_F32: v = *(const float *)p; break;
      case HLO_F64: v = *(const double *)p; break;
      default: return false;
    }
    if (v != value) return false;
  }
  return true;
}

/* to may stand in for from: same element type and dims, both default layouts. */
static bool same_array(const hlo_instr *from, const hlo_instr *to) {
  return hlo_shape_is_array(&from->shape) && hlo_shape_equal(&from->shape, &to->shape) &&
         hlo_shape_is_default_layout(&from->shape) && hlo_shape_is_default_layout(&to->shape) &&
         !hlo_shape_is_dynamic(&from->shape) && !hlo_shape_is_dynamic(&to->shape);
}

static bool is_identity(const hlo_ints *perm) {
  for (int i = 0; i < perm->count; i++)
    if (perm->values[i] != i) return false;
  return true;
}

static const void *scalar_data(const hlo_instr *instr, hlo_dtype dtype) {
  if (instr->opcode != HLO_OP_CONSTANT || !instr->literal || !instr->literal->data) return NULL;
  const hlo_shape *s = &instr->literal->shape;
  return s->rank == 0 && s->dtype == dtype ? instr->literal->data : NULL;
}

#define FOLD(T, U, IS_FLOAT)                                                                \
  do {                                                                                      \
    T a, b, r;                                                                              \
    memcpy(&a, x, sizeof a);                                                                \
    memcpy(&b, y, sizeof b);                                                                \
    if (IS_FLOAT && (a != a || b != b || a == 0 || b == 0) &&                               \
        (op == HLO_OP_MAXIMUM || op == HLO_OP_MINIMUM))                                     \
      return false;                                                                         \
    switch (op) {                                                                           \
      case HLO_OP_ADD: r = IS_FLOAT ? (T)(a + b) : (T)((U)a + (U)b); break;                 \
      case HLO_OP_SUBTRACT: r = IS_FLOAT ? (T)(a - b) : (T)((U)a - (U)b); break;            \
      case HLO_OP_MULTIPLY: r = IS_FLOAT ? (T)(a * b) : (T)((U)a * (U)b); break;            \
      case HLO_OP_MAXIMUM: r = a > b ? a : b; break;                                        \
      default: r = a < b ? a : b; break;                                                    \
    }                                                                                       \
    memcpy(out, &r, sizeof r);                                                              \
  } while (0)

/* Folds a scalar binary op on two constants into instr itself, which becomes the constant:
 * no instruction is added, so ids and order stay as they are. */
static bool fold_constants(hlo_instr *instr) {
  hlo_opcode op = instr->opcode;
  if (op != HLO_OP_ADD && op != HLO_OP_SUBTRACT && op != HLO_OP_MULTIPLY && op != HLO_OP_MAXIMUM &&
      op != HLO_OP_MINIMUM)
    return false;
  hlo_dtype t = instr->shape.dtype;
  if (instr->shape.rank != 0 || (t != HLO_F32 && t != HLO_F64 && t != HLO_S32 && t != HLO_S64)) return false;
  const void *x = scalar_data(instr->operands[0], t), *y = scalar_data(instr->operands[1], t);
  if (!x || !y) return false;
  unsigned char out[8];
  switch (t) {
    case HLO_F32: FOLD(float, float, 1); break;
    case HLO_F64: FOLD(double, double, 1); break;
    case HLO_S32: FOLD(int32_t, uint32_t, 0); break;
    default: FOLD(int64_t, uint64_t, 0); break;
  }
  hlo_arena *arena = &instr->parent->module->arena;
  hlo_literal *literal = hlo_arena_alloc(arena, sizeof *literal);
  void *data = hlo_arena_memdup(arena, out, hlo_dtype_size(t));
  if (!literal || !data) return false; /* out of memory: not folding is still correct */
  literal->shape = hlo_shape_scalar(t);
  literal->data = data;
  instr->opcode = HLO_OP_CONSTANT;
  instr->operand_count = 0;
  instr->literal = literal;
  return true;
}

static bool listed(const hlo_ints *list, int64_t d) {
  for (int i = 0; i < list->count; i++)
    if (list->values[i] == d) return true;
  return false;
}

/* Folds a transposed operand k of a dot into its dims: dim d of transpose(x, perm) is dim
 * perm[d] of x. Refused when x's free dims would come out in another order. */
static bool fold_dot_transpose(hlo_instr *instr, int k) {
  hlo_instr *t = instr->operands[k];
  if (t->opcode != HLO_OP_TRANSPOSE || t->operand_count != 1 || !instr->dot) return false;
  const hlo_instr *x = t->operands[0];
  if (!hlo_shape_is_array(&x->shape) || !hlo_shape_is_default_layout(&x->shape) ||
      !hlo_shape_is_default_layout(&t->shape) || hlo_shape_is_dynamic(&x->shape) ||
      hlo_shape_is_dynamic(&t->shape) || t->dimensions.count != t->shape.rank)
    return false;
  const int64_t *perm = t->dimensions.values;
  const hlo_dot_dims *dd = instr->dot;
  const hlo_ints *batch = k == 0 ? &dd->lhs_batch : &dd->rhs_batch;
  const hlo_ints *contracting = k == 0 ? &dd->lhs_contracting : &dd->rhs_contracting;
  int64_t last = -1;
  for (int d = 0; d < t->shape.rank; d++) {
    if (listed(batch, d) || listed(contracting, d)) continue;
    if (perm[d] < last) return false;
    last = perm[d];
  }
  hlo_arena *arena = &instr->parent->module->arena;
  hlo_dot_dims *folded = hlo_arena_alloc(arena, sizeof *folded);
  if (!folded) return false;
  *folded = *dd;
  int64_t b[HLO_MAX_RANK], c[HLO_MAX_RANK];
  for (int i = 0; i < batch->count; i++) b[i] = perm[batch->values[i]];
  for (int i = 0; i < contracting->count; i++) c[i] = perm[contracting->values[i]];
  hlo_ints nb = hlo_ints_copy(arena, batch->count, b), nc = hlo_ints_copy(arena, contracting->count, c);
  if (!nb.values || !nc.values) return false; /* out of memory: not folding is still correct */
  if (k == 0) folded->lhs_batch = nb, folded->lhs_contracting = nc;
  else folded->rhs_batch = nb, folded->rhs_contracting = nc;
  instr->dot = folded;
  instr->operands[k] = t->operands[0];
  return true;
}

/* Folds a transposed operand k of a convolution into its dimension numbers: dim d of
 * transpose(x, perm) is dim perm[d] of x, so each of the operand's labels moves to perm of
 * it. The result is unchanged (its labels are the convolution's own); kernels read any
 * labels, by strides. */
static bool fold_conv_transpose(hlo_instr *instr, int k) {
  hlo_instr *t = instr->operands[k];
  if (t->opcode != HLO_OP_TRANSPOSE || t->operand_count != 1 || !instr->conv) return false;
  const hlo_instr *x = t->operands[0];
  if (!hlo_shape_is_array(&x->shape) || !hlo_shape_is_default_layout(&x->shape) ||
      !hlo_shape_is_default_layout(&t->shape) || hlo_shape_is_dynamic(&x->shape) ||
      hlo_shape_is_dynamic(&t->shape) || t->dimensions.count != t->shape.rank ||
      instr->conv->spatial_count + 2 != t->shape.rank)
    return false;
  const int64_t *perm = t->dimensions.values;
  hlo_conv_dims *folded = hlo_arena_memdup(&instr->parent->module->arena, instr->conv, sizeof *folded);
  if (!folded) return false; /* out of memory: not folding is still correct */
  if (k == 0) {
    folded->input_batch = perm[folded->input_batch];
    folded->input_feature = perm[folded->input_feature];
    for (int i = 0; i < folded->spatial_count; i++) folded->input_spatial[i] = perm[folded->input_spatial[i]];
  } else {
    folded->kernel_input_feature = perm[folded->kernel_input_feature];
    folded->kernel_output_feature = perm[folded->kernel_output_feature];
    for (int i = 0; i < folded->spatial_count; i++) folded->kernel_spatial[i] = perm[folded->kernel_spatial[i]];
  }
  instr->conv = folded;
  instr->operands[k] = t->operands[0];
  return true;
}

/* transpose(convolution) -> one convolution writing the transposed result (its output
 * labels permuted), when the transpose is the convolution's only reader: the transpose
 * becomes that convolution, in place, keeping its name, shape and origin; the convolution it
 * read is left dead for DCE. A weights gradient computed as [C, O, KH, KW] and transposed
 * to the weights' [O, C, KH, KW] is written so directly. */
static bool fold_transposed_conv(hlo_instr *t, const int *uses) {
  const hlo_instr *conv = t->operands[0];
  if (conv->opcode != HLO_OP_CONVOLUTION || !conv->conv || conv->operand_count != 2 || conv->parent != t->parent ||
      uses[conv->id] != 1 || !hlo_shape_is_default_layout(&conv->shape) || !hlo_shape_is_default_layout(&t->shape) ||
      hlo_shape_is_dynamic(&t->shape) || t->dimensions.count != t->shape.rank ||
      conv->conv->spatial_count + 2 != t->shape.rank)
    return false;
  hlo_arena *arena = &t->parent->module->arena;
  hlo_conv_dims *folded = hlo_arena_memdup(arena, conv->conv, sizeof *folded);
  hlo_instr **operands = hlo_arena_alloc(arena, 2 * sizeof *operands);
  if (!folded || !operands) return false; /* out of memory: not folding is still correct */
  int64_t at[HLO_MAX_RANK]; /* conv dim d is the transpose's dim at[d] */
  for (int i = 0; i < t->dimensions.count; i++) at[t->dimensions.values[i]] = i;
  folded->output_batch = at[folded->output_batch];
  folded->output_feature = at[folded->output_feature];
  for (int i = 0; i < folded->spatial_count; i++) folded->output_spatial[i] = at[folded->output_spatial[i]];
  operands[0] = conv->operands[0], operands[1] = conv->operands[1];
  hlo_instr kept = *t;
  *t = *conv;
  t->name = kept.name, t->shape = kept.shape, t->id = kept.id, t->parent = kept.parent, t->origin = kept.origin;
  t->line = kept.line, t->col = kept.col;
  t->operands = operands;
  t->conv = folded;
  return true;
}

bool hlo_transpose_is_bitcast(const hlo_instr *t) {
  if (t->opcode != HLO_OP_TRANSPOSE || t->operand_count != 1) return false;
  const hlo_shape *in = &t->operands[0]->shape;
  if (!hlo_shape_is_array(in) || !hlo_shape_is_default_layout(in) || !hlo_shape_is_default_layout(&t->shape) ||
      hlo_shape_is_dynamic(in) || t->dimensions.count != in->rank)
    return false;
  int64_t last = -1;
  for (int d = 0; d < t->dimensions.count; d++) {
    int64_t from = t->dimensions.values[d];
    if (from < 0 || from >= in->rank) return false;
    if (in->dims[from] == 1) continue;
    if (from < last) return false;
    last = from;
  }
  return true;
}

/* transpose -> reshape, in place: the same result, read as a view. */
static bool transpose_to_reshape(hlo_instr *instr) {
  if (!hlo_transpose_is_bitcast(instr) || is_identity(&instr->dimensions)) return false;
  instr->opcode = HLO_OP_RESHAPE;
  instr->dimensions = (hlo_ints){0};
  return true;
}

static bool no_padding(const hlo_padding *p) {
  for (int d = 0; d < p->rank; d++)
    if (p->low[d] || p->high[d] || p->interior[d]) return false;
  return true;
}

/* Two scalar constants of one type with the same bytes. */
static bool same_scalar(const hlo_instr *a, const hlo_instr *b) {
  const void *x = scalar_data(a, a->shape.dtype), *y = scalar_data(b, a->shape.dtype);
  return x && y && memcmp(x, y, hlo_dtype_size(a->shape.dtype)) == 0;
}

/* reduce-window(pad(x, v), v) -> reduce-window(x, v) with the pad's edges added to the
 * window's padding, which XLA fills with the init value. Only for the reducers whose init
 * is what a pool starts from, edges not negative, no interior padding or base dilation. */
static bool fold_window_pad(hlo_instr *instr) {
  if (instr->operand_count != 2 || !instr->window || instr->called_count != 1) return false;
  hlo_instr *pad = instr->operands[0];
  hlo_opcode op = hlo_simple_reducer(instr->called[0]);
  if (pad->opcode != HLO_OP_PAD || !pad->padding || !same_scalar(pad->operands[1], instr->operands[1]) ||
      (op != HLO_OP_MAXIMUM && op != HLO_OP_MINIMUM && op != HLO_OP_ADD) || pad->padding->rank != instr->window->rank ||
      !hlo_shape_is_default_layout(&pad->shape) || !hlo_shape_is_default_layout(&pad->operands[0]->shape))
    return false;
  hlo_window window = *instr->window;
  for (int d = 0; d < window.rank; d++) {
    const hlo_padding *p = pad->padding;
    if (p->low[d] < 0 || p->high[d] < 0 || p->interior[d] || window.dims[d].lhs_dilate != 1) return false;
    window.dims[d].pad_low += p->low[d];
    window.dims[d].pad_high += p->high[d];
  }
  hlo_window *copy = hlo_arena_memdup(&instr->parent->module->arena, &window, sizeof window);
  if (!copy) return false; /* out of memory: not folding is still correct */
  instr->window = copy;
  instr->operands[0] = pad->operands[0];
  return true;
}

/* What instr can be replaced by, or NULL; in-place rewrites set *changed. uses[id]: how many
 * instructions of the computation read each one (the root counted as one more). */
static hlo_instr *simplify(hlo_instr *instr, const int *uses, bool *changed) {
  hlo_instr **ops = instr->operands;
  hlo_dtype dtype = instr->shape.dtype;
  switch (instr->opcode) {
    case HLO_OP_MULTIPLY:
      if (all_equal(ops[1], 1) && same_array(instr, ops[0])) return ops[0];
      if (all_equal(ops[0], 1) && same_array(instr, ops[1])) return ops[1];
      return NULL;
    case HLO_OP_ADD:
      if (!hlo_dtype_is_integral(dtype)) return NULL;
      if (all_equal(ops[1], 0) && same_array(instr, ops[0])) return ops[0];
      if (all_equal(ops[0], 0) && same_array(instr, ops[1])) return ops[1];
      return NULL;
    case HLO_OP_SUBTRACT:
      if (hlo_dtype_is_integral(dtype) && all_equal(ops[1], 0) && same_array(instr, ops[0])) return ops[0];
      return NULL;
    case HLO_OP_CONVERT:
    case HLO_OP_RESHAPE:
      if (same_array(instr, ops[0])) return ops[0];
      if (instr->opcode == HLO_OP_RESHAPE && ops[0]->opcode == HLO_OP_RESHAPE &&
          hlo_shape_is_default_layout(&ops[0]->shape) && hlo_shape_is_default_layout(&instr->shape)) {
        instr->operands[0] = ops[0]->operands[0];
        *changed = true;
        if (same_array(instr, instr->operands[0])) return instr->operands[0];
      }
      return NULL;
    case HLO_OP_BROADCAST:
      if (is_identity(&instr->dimensions) && same_array(instr, ops[0])) return ops[0];
      return NULL;
    case HLO_OP_TRANSPOSE: {
      if (is_identity(&instr->dimensions) && same_array(instr, ops[0])) return ops[0];
      if (fold_transposed_conv(instr, uses)) {
        *changed = true;
        return NULL;
      }
      hlo_instr *inner = ops[0];
      if (inner->opcode != HLO_OP_TRANSPOSE || !hlo_shape_is_default_layout(&inner->shape)) {
        *changed = transpose_to_reshape(instr) || *changed;
        return NULL;
      }
      /* result dim i = inner dim outer[i] = x dim inner_perm[outer[i]] */
      int rank = instr->dimensions.count;
      int64_t composed[HLO_MAX_RANK];
      for (int i = 0; i < rank; i++) composed[i] = inner->dimensions.values[instr->dimensions.values[i]];
      hlo_ints dimensions = hlo_ints_copy(&instr->parent->module->arena, rank, composed);
      if (!dimensions.values) return NULL; /* out of memory: not merging is still correct */
      instr->dimensions = dimensions;
      instr->operands[0] = inner->operands[0];
      *changed = true;
      if (is_identity(&instr->dimensions) && same_array(instr, instr->operands[0])) return instr->operands[0];
      return NULL;
    }
    case HLO_OP_DOT:
      if (instr->operand_count == 2) {
        bool lhs = fold_dot_transpose(instr, 0), rhs = fold_dot_transpose(instr, 1);
        *changed = *changed || lhs || rhs;
      }
      return NULL;
    case HLO_OP_CONVOLUTION:
      if (instr->operand_count == 2) {
        bool lhs = fold_conv_transpose(instr, 0), rhs = fold_conv_transpose(instr, 1);
        *changed = *changed || lhs || rhs;
      }
      return NULL;
    case HLO_OP_PAD:
      return instr->padding && no_padding(instr->padding) && same_array(instr, ops[0]) ? ops[0] : NULL;
    case HLO_OP_REDUCE_WINDOW:
      *changed = fold_window_pad(instr) || *changed;
      return NULL;
    case HLO_OP_SLICE: {
      const hlo_shape *in = &ops[0]->shape;
      for (int d = 0; d < in->rank; d++)
        if (instr->slice_starts.values[d] != 0 || instr->slice_limits.values[d] != in->dims[d] ||
            instr->slice_strides.values[d] != 1)
          return NULL;
      return same_array(instr, ops[0]) ? ops[0] : NULL;
    }
    default:
      return NULL;
  }
}

/* uses[id] for simplify: distinct readers of each instruction of comp, the root one more. */
static void count_uses(const hlo_comp *comp, int *uses) {
  for (int i = 0; i < comp->instr_count; i++) {
    const hlo_instr *instr = comp->instrs[i];
    for (int k = 0; k < instr->operand_count; k++) {
      bool again = false;
      for (int e = 0; e < k; e++) again = again || instr->operands[e] == instr->operands[k];
      if (!again && instr->operands[k]->parent == comp) uses[instr->operands[k]->id]++;
    }
  }
  if (comp->root) uses[comp->root->id]++;
}

static int simplify_comp(hlo_comp *comp) {
  int count = comp->instr_count;
  hlo_instr **replacement = hlo_calloc((size_t)count + 1, sizeof *replacement);
  int *uses = hlo_calloc((size_t)count + 1, sizeof *uses);
  if (!replacement || !uses) {
    free(replacement);
    free(uses);
    return 0;
  }
  count_uses(comp, uses);
  int rewrites = 0;
  for (int i = 0; i < count; i++) {
    hlo_instr *instr = comp->instrs[i];
    for (int k = 0; k < instr->operand_count; k++) {
      hlo_instr *operand = instr->operands[k];
      if (operand && operand->parent == comp && replacement[operand->id])
        instr->operands[k] = replacement[operand->id];
    }
    bool changed = fold_constants(instr);
    hlo_instr *with = changed ? NULL : simplify(instr, uses, &changed);
    /* a replacement is the choice counted (rewrites in place are not) */
    if (with && with != instr && !hlo_choice("simplify", instr->name)) with = NULL;
    if (with && with != instr) {
      /* a chain: with may itself have been replaced already */
      while (with->parent == comp && replacement[with->id]) with = replacement[with->id];
      replacement[i] = with;
    }
    rewrites += (with != NULL) || changed;
  }
  if (comp->root && replacement[comp->root->id]) comp->root = replacement[comp->root->id];
  free(replacement);
  free(uses);
  return rewrites;
}

int hlo_pass_simplify(hlo_module *module) {
  int rewrites = 0;
  for (int c = 0; c < module->comp_count; c++) rewrites += simplify_comp(module->comps[c]);
  return rewrites;
}

int hlo_pass_run_all(hlo_module *module) {
  int total = hlo_pass_inline_calls(module);
  for (int round = 0; round < 8 && !module->arena.failed; round++) {
    int n = hlo_pass_simplify(module) + hlo_pass_cse(module);
    n += hlo_pass_dce(module);
    total += n;
    if (n == 0) break;
  }
  return total;
}
