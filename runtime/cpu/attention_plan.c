/* Attention in the cpu plan: finds softmax(Q K^T, scaled and masked) V in the entry and makes
 * it one ATTENTION step (attention.c runs it), so the [batch, heads, S, S] scores and
 * probabilities are never stored.
 *
 * The pattern, read back from the last product (dot2), as frontends lower it and hlo/'s
 * passes leave it (transposes folded into the products' dimension numbers):
 *
 *   s  = dot(Q, K)           batch dims, one contracting dim each: [batch..., Sq, Sk]
 *   x  = ops(s)              reshapes that keep the last two dims; x * c, x / c, x + c,
 *                            x - c (c a scalar constant); x + m, x - m, x * m, x / m (m an
 *                            f32 array, or one broadcast to x's dims: a padding or causal
 *                            mask added); select(p, fill, x) or select(p, x, fill) (p a
 *                            pred array or broadcast, fill a scalar constant: masked_fill;
 *                            a p of positions alone, compare of iotas and constants, is
 *                            computed from the indices instead: a causal mask)
 *   e  = exp(x - broadcast(reduce-max(x, -inf, last dim)))
 *   p  = e / broadcast(reduce-add(e, 0, last dim))
 *   out = dot(p, V)          p's batch dims leading, in order, contracting its last
 *
 * with every value from s to p read only inside the pattern and no result of the entry,
 * f32 throughout, and Q's, K's and V's head features or positions contiguous (a matrix
 * or its transpose), so the kernel reads them where the projection left them. Or bf16
 * products: Q and K bf16 (or converts of f32 values to bf16, which the step then rounds
 * itself, reading the f32 values), s f32; p converted to bf16 and V bf16 (or a convert) in
 * the last product, its result f32: what the bf16 precision makes of an f32 block, and
 * XLA's bf16 graphs with f32 softmax. The flat batch (the batch dims'
 * elements in row-major order) must have the same count at s, x, p and out; a reshape may
 * regroup it ([B*H, S, S] as [B, H, S, S]), never the last two dims. A broadcast read through
 * (a mask, a scalar) becomes INSIDE when nothing else reads it.
 *
 * The step computes the softmax in another order (a running max and sum over blocks of
 * keys, the division at the end): within rounding of the graph, as the other rewrites are.
 * Decided from the module's shapes alone, so a plan built again for other sizes decides
 * again, and a loaded plan finds the same description (deserialize.c).
 *
 * A softmax (p from x as above, over the last dim) that is no attention's becomes a step of
 * its own too, at its division: one pass over its rows where the graph makes four. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

enum { MAX_MEMBERS = 24, MAX_READS = 8 * RT_ATTENTION_MAX_OPS };

typedef struct matcher {
  const int *use_count;
  const bool *result;
  rt_cpu_attention *a;
  const hlo_shape *x_shape; /* the scores as the ops see them: [batch..., Sq, Sk] */
  int member_count, read_count;
  const hlo_instr *members[MAX_MEMBERS]; /* members[0] is dot2, the step itself */
  /* what the step reads through or computes itself (broadcasts, an index condition's
   * compare and iotas), users before operands: INSIDE when nothing else reads them */
  const hlo_instr *reads[MAX_READS];
} matcher;

static bool plain(const hlo_instr *instr, hlo_dtype dtype) {
  const hlo_shape *s = &instr->shape;
  return hlo_shape_is_array(s) && s->dtype == dtype && hlo_shape_is_default_layout(s) && !hlo_shape_is_dynamic(s);
}

static bool add_read(matcher *m, const hlo_instr *instr) {
  for (int k = 0; k < m->read_count; k++)
    if (m->reads[k] == instr) return true;
  if (m->read_count == MAX_READS) return false;
  m->reads[m->read_count++] = instr;
  return true;
}

static bool add_member(matcher *m, const hlo_instr *instr) {
  if (m->member_count == MAX_MEMBERS) return false;
  m->members[m->member_count++] = instr;
  return true;
}

static int64_t batch_elements(const hlo_shape *s) {
  int64_t n = 1;
  for (int d = 0; d < s->rank - 2; d++) n *= s->dims[d];
  return n;
}

static bool same_last_two(const hlo_shape *a, const hlo_shape *b) {
  return a->rank >= 2 && b->rank >= 2 && a->dims[a->rank - 1] == b->dims[b->rank - 1] &&
         a->dims[a->rank - 2] == b->dims[b->rank - 2] && batch_elements(a) == batch_elements(b);
}

/* instr's operand when instr is a reshape that keeps the last two dims (and the flat
 * batch), taken as a member; else instr. */
static const hlo_instr *under_reshape(matcher *m, const hlo_instr *instr) {
  if (instr->opcode != HLO_OP_RESHAPE || instr->operand_count != 1) return instr;
  const hlo_instr *under = instr->operands[0];
  if (!plain(under, HLO_F32) || !same_last_two(&under->shape, &instr->shape) || !add_member(m, instr)) return instr;
  return under;
}

/* The value of an f32 scalar constant, or of a broadcast of one (kept as a spread). */
static bool scalar_of(matcher *m, const hlo_instr *instr, float *value) {
  const hlo_instr *c = instr;
  if (c->opcode == HLO_OP_BROADCAST && c->operand_count == 1 && c->dimensions.count == 0) c = c->operands[0];
  if (c->opcode != HLO_OP_CONSTANT || !plain(c, HLO_F32) || hlo_shape_elements(&c->shape) != 1 || !c->literal ||
      !c->literal->data)
    return false;
  *value = *(const float *)c->literal->data;
  return c == instr || add_read(m, instr);
}

/* A mask of x's dims: an array of them, or a broadcast of one to them (read through, its
 * broadcast dims at stride 0); the mask's index in a->masks, or -1. */
static int mask_of(matcher *m, const hlo_instr *instr, hlo_dtype dtype) {
  rt_cpu_attention *a = m->a;
  const hlo_shape *x = m->x_shape;
  if (a->mask_count == RT_ATTENTION_MAX_MASKS || !plain(instr, dtype) || instr->shape.rank != x->rank ||
      memcmp(instr->shape.dims, x->dims, sizeof(int64_t) * (size_t)x->rank) != 0)
    return -1;
  const hlo_instr *source = instr;
  int64_t strides[HLO_MAX_RANK] = {0}, own[HLO_MAX_RANK];
  if (instr->opcode == HLO_OP_BROADCAST && instr->operand_count == 1) {
    source = instr->operands[0];
    if (!plain(source, dtype) || instr->dimensions.count != source->shape.rank || !add_read(m, instr)) return -1;
    hlo_shape_strides(&source->shape, own);
    for (int j = 0; j < source->shape.rank; j++) strides[instr->dimensions.values[j]] = own[j];
  } else {
    hlo_shape_strides(x, strides);
  }
  int r = x->rank, k = a->mask_count++;
  rt_cpu_attention_view *v = &a->masks[k];
  v->batch_rank = r - 2;
  for (int d = 0; d < r - 2; d++) {
    v->batch_size[d] = x->dims[d];
    v->batch_stride[d] = strides[d];
  }
  v->row_stride = strides[r - 2];
  v->col_stride = strides[r - 1];
  a->mask_pred[k] = dtype == HLO_PRED;
  a->inputs[a->input_count++] = source->id;
  return k;
}

/* ---- a pred mask computed from positions (a causal mask of iotas) ---- */

static bool signed_index(const hlo_instr *instr) {
  const hlo_shape *s = &instr->shape;
  return hlo_shape_is_array(s) && (s->dtype == HLO_S32 || s->dtype == HLO_S64) && !hlo_shape_is_dynamic(s);
}

/* e as row * f[0] + col * f[1] + f[2], e of the condition's shape whose dim d is the scores'
 * dim map[d]: an iota along the query or key dim, a scalar constant (or its broadcast), sums
 * and differences of those. */
static bool affine_of(matcher *m, const hlo_instr *e, const int64_t *map, int depth, int64_t *f) {
  int r = m->x_shape->rank;
  f[0] = f[1] = f[2] = 0;
  if (depth > 4 || !signed_index(e)) return false;
  const hlo_instr *c = e;
  if (c->opcode == HLO_OP_BROADCAST && c->operand_count == 1 && c->dimensions.count == 0) c = c->operands[0];
  if (c->opcode == HLO_OP_CONSTANT && c->shape.rank == 0 && c->literal && c->literal->data) {
    f[2] = c->shape.dtype == HLO_S32 ? *(const int32_t *)c->literal->data : *(const int64_t *)c->literal->data;
    return (c == e || add_read(m, e)) && f[2] > -(1 << 30) && f[2] < (1 << 30);
  }
  if (e->opcode == HLO_OP_IOTA) {
    int64_t dim = map[e->index];
    if (dim != r - 2 && dim != r - 1) return false;
    f[dim == r - 2 ? 0 : 1] = 1;
    return add_read(m, e);
  }
  if ((e->opcode != HLO_OP_ADD && e->opcode != HLO_OP_SUBTRACT) || e->operand_count != 2) return false;
  int64_t a[3], b[3];
  if (!add_read(m, e) || !affine_of(m, e->operands[0], map, depth + 1, a) ||
      !affine_of(m, e->operands[1], map, depth + 1, b))
    return false;
  int sign = e->opcode == HLO_OP_ADD ? 1 : -1;
  for (int i = 0; i < 3; i++) f[i] = a[i] + sign * b[i];
  return f[0] > -8 && f[0] < 8 && f[1] > -8 && f[1] < 8 && f[2] > -(1 << 30) && f[2] < (1 << 30);
}

static bool pred_constant(const hlo_instr *e, bool *value) {
  const hlo_instr *c = e;
  if (c->opcode == HLO_OP_BROADCAST && c->operand_count == 1 && c->dimensions.count == 0) c = c->operands[0];
  if (c->opcode != HLO_OP_CONSTANT || c->shape.dtype != HLO_PRED || c->shape.rank != 0 || !c->literal ||
      !c->literal->data)
    return false;
  *value = *(const unsigned char *)c->literal->data != 0;
  return true;
}

static hlo_direction negated(hlo_direction d) {
  static const hlo_direction opposite[] = {[HLO_DIR_EQ] = HLO_DIR_NE, [HLO_DIR_NE] = HLO_DIR_EQ,
                                           [HLO_DIR_LT] = HLO_DIR_GE, [HLO_DIR_LE] = HLO_DIR_GT,
                                           [HLO_DIR_GT] = HLO_DIR_LE, [HLO_DIR_GE] = HLO_DIR_LT};
  return opposite[d];
}

/* The pred e (dims mapped as in affine_of) as an index condition into op: a comparison of two
 * affine positions, through select(e, true, false), select(e, false, true) and not. */
static bool condition_of(matcher *m, const hlo_instr *e, const int64_t *map, int depth, rt_cpu_attention_op *op) {
  bool t, f;
  if (depth > 3 || !add_read(m, e)) return false;
  if (e->opcode == HLO_OP_NOT && e->operand_count == 1) {
    if (!condition_of(m, e->operands[0], map, depth + 1, op)) return false;
    op->direction = negated((hlo_direction)op->direction);
    return true;
  }
  if (e->opcode == HLO_OP_SELECT && e->operand_count == 3 && pred_constant(e->operands[1], &t) &&
      pred_constant(e->operands[2], &f) && t != f) {
    if (!condition_of(m, e->operands[0], map, depth + 1, op) || !add_read(m, e->operands[1]) ||
        !add_read(m, e->operands[2]))
      return false;
    if (!t) op->direction = negated((hlo_direction)op->direction);
    return true;
  }
  int64_t a[3], b[3];
  bool signed_compare = e->compare_type == HLO_CMP_DEFAULT || e->compare_type == HLO_CMP_SIGNED;
  if (e->opcode != HLO_OP_COMPARE || e->operand_count != 2 || !signed_compare || e->direction == HLO_DIR_NONE ||
      !affine_of(m, e->operands[0], map, 0, a) || !affine_of(m, e->operands[1], map, 0, b))
    return false;
  for (int i = 0; i < 3; i++) op->index[i] = a[i] - b[i];
  op->direction = e->direction;
  return true;
}

/* A pred of the scores' dims (or a broadcast of one) that depends on positions alone, as
 * op's condition (op->mask stays -1); false, with no read kept, when it is anything else. */
static bool index_condition(matcher *m, const hlo_instr *pred, rt_cpu_attention_op *op) {
  int reads = m->read_count, r = m->x_shape->rank;
  int64_t map[HLO_MAX_RANK];
  const hlo_instr *e = pred;
  if (pred->opcode == HLO_OP_BROADCAST && pred->operand_count == 1 &&
      pred->dimensions.count == pred->operands[0]->shape.rank) {
    e = pred->operands[0];
    for (int j = 0; j < e->shape.rank; j++) map[j] = pred->dimensions.values[j];
    if (!add_read(m, pred)) return false;
  } else {
    for (int j = 0; j < r; j++) map[j] = j;
  }
  if (e->shape.dtype == HLO_PRED && condition_of(m, e, map, 0, op)) return true;
  m->read_count = reads;
  return false;
}

static bool commutes(hlo_opcode op) { return op == HLO_OP_ADD || op == HLO_OP_MULTIPLY; }

static rt_attention_op_code op_code(hlo_opcode op) {
  switch (op) {
    case HLO_OP_ADD: return RT_ATT_ADD;
    case HLO_OP_SUBTRACT: return RT_ATT_SUBTRACT;
    case HLO_OP_MULTIPLY: return RT_ATT_MULTIPLY;
    default: return RT_ATT_DIVIDE;
  }
}

/* One op of the chain from the scores to x: which operand carries the scores (*chain) and
 * the op, its mask still to be read (*mask_operand, *mask_type) when it has one. */
static bool classify_op(matcher *m, const hlo_instr *x, const hlo_instr **chain, rt_cpu_attention_op *op,
                        const hlo_instr **mask_operand, hlo_dtype *mask_type) {
  hlo_opcode code = x->opcode;
  *mask_operand = NULL;
  op->mask = -1;
  if (code == HLO_OP_SELECT && x->operand_count == 3) {
    op->code = RT_ATT_SELECT;
    *mask_operand = x->operands[0];
    *mask_type = HLO_PRED;
    if (scalar_of(m, x->operands[2], &op->imm)) *chain = x->operands[1];
    else if (scalar_of(m, x->operands[1], &op->imm)) *chain = x->operands[2], op->fill_on_true = true;
    else return false;
    return true;
  }
  bool arithmetic = code == HLO_OP_ADD || code == HLO_OP_SUBTRACT || code == HLO_OP_MULTIPLY || code == HLO_OP_DIVIDE;
  if (!arithmetic || x->operand_count != 2) return false;
  op->code = op_code(code);
  const hlo_instr *a0 = x->operands[0], *a1 = x->operands[1];
  if (scalar_of(m, a1, &op->imm)) *chain = a0;
  else if (commutes(code) && scalar_of(m, a0, &op->imm)) *chain = a1;
  else if (commutes(code) && a1->opcode != HLO_OP_BROADCAST && a0->opcode == HLO_OP_BROADCAST) *chain = a1, *mask_operand = a0;
  else *chain = a0, *mask_operand = a1;
  *mask_type = HLO_F32;
  return true;
}

/* The scores product under x (through the ops, which are appended to a->ops in the order
 * the graph applies them), or NULL. */
static const hlo_instr *scores_of(matcher *m, const hlo_instr *x, int depth) {
  if (x->opcode == HLO_OP_DOT) return x;
  const hlo_instr *under = under_reshape(m, x);
  if (under != x) return under->opcode == HLO_OP_DOT ? under : NULL;
  if (depth == RT_ATTENTION_MAX_OPS || !hlo_shape_equal(&x->shape, m->x_shape)) return NULL;
  const hlo_instr *chain, *mask_operand;
  rt_cpu_attention_op op = {0};
  hlo_dtype mask_type;
  if (!classify_op(m, x, &chain, &op, &mask_operand, &mask_type) || !plain(chain, HLO_F32)) return NULL;
  const hlo_instr *dot = scores_of(m, chain, depth + 1);
  if (!dot || !add_member(m, x)) return NULL;
  bool by_index = mask_operand && op.code == RT_ATT_SELECT && index_condition(m, mask_operand, &op);
  if (mask_operand && !by_index && (op.mask = mask_of(m, mask_operand, mask_type)) < 0) return NULL;
  m->a->ops[m->a->op_count++] = op;
  return dot;
}

/* reduce(over, init) along the last dim with the reducer op and an init of that value,
 * broadcast back along it: the broadcast's reduce, or NULL. */
static const hlo_instr *row_reduce(const hlo_instr *bcast, const hlo_instr *over, hlo_opcode op, float init) {
  int r = over->shape.rank;
  if (bcast->opcode != HLO_OP_BROADCAST || bcast->operand_count != 1 || bcast->dimensions.count != r - 1) return NULL;
  for (int d = 0; d < r - 1; d++)
    if (bcast->dimensions.values[d] != d) return NULL;
  const hlo_instr *reduce = bcast->operands[0];
  if (reduce->opcode != HLO_OP_REDUCE || reduce->operand_count != 2 || reduce->operands[0] != over ||
      reduce->dimensions.count != 1 || reduce->dimensions.values[0] != r - 1 || reduce->called_count != 1 ||
      hlo_simple_reducer(reduce->called[0]) != op || !plain(reduce, HLO_F32))
    return NULL;
  const hlo_instr *c = reduce->operands[1];
  float value;
  bool is_init = c->opcode == HLO_OP_CONSTANT && plain(c, HLO_F32) && c->shape.rank == 0 && c->literal &&
                 c->literal->data && (value = *(const float *)c->literal->data, value == init);
  return is_init ? reduce : NULL;
}

/* x under the softmax of p (p = e / sum e, e = exp(x - max x)), the softmax's instructions
 * taken as members; or NULL. */
static const hlo_instr *softmax_input(matcher *m, const hlo_instr *p) {
  if (p->opcode != HLO_OP_DIVIDE || p->operand_count != 2 || !plain(p, HLO_F32)) return NULL;
  const hlo_instr *e = p->operands[0], *sums = p->operands[1];
  const hlo_instr *sum = row_reduce(sums, e, HLO_OP_ADD, 0.0f);
  if (!sum || e->opcode != HLO_OP_EXP || e->operand_count != 1) return NULL;
  const hlo_instr *shifted = e->operands[0];
  if (shifted->opcode != HLO_OP_SUBTRACT || shifted->operand_count != 2) return NULL;
  const hlo_instr *x = shifted->operands[0];
  const hlo_instr *max = row_reduce(shifted->operands[1], x, HLO_OP_MAXIMUM, -INFINITY);
  if (!max || !plain(x, HLO_F32)) return NULL;
  const hlo_instr *parts[] = {p, sums, sum, e, shifted, shifted->operands[1], max};
  for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++)
    if (!add_member(m, parts[k])) return NULL;
  return x;
}

/* Where operand's [batch..., rows, cols] lie: batch dims batch[], the row dim and the
 * column dim; false unless the columns are contiguous, or the rows (a matrix stored
 * transposed, which BLAS takes by its flag), with a leading dim BLAS accepts. batch_size[]
 * is the product's batch shape. */
static bool view_of(const hlo_instr *operand, const hlo_ints *batch, int64_t row_dim, int64_t col_dim,
                    const int64_t *batch_size, rt_cpu_attention_view *v) {
  int64_t strides[HLO_MAX_RANK];
  hlo_shape_strides(&operand->shape, strides);
  v->batch_rank = batch->count;
  for (int i = 0; i < batch->count; i++) {
    v->batch_size[i] = batch_size[i];
    v->batch_stride[i] = strides[batch->values[i]];
  }
  v->row_stride = strides[row_dim];
  v->col_stride = strides[col_dim];
  int64_t rows = operand->shape.dims[row_dim], cols = operand->shape.dims[col_dim];
  /* a dim of size 1 is never stepped along: any stride serves, so the one BLAS wants */
  if (cols == 1) v->col_stride = 1;
  if (rows == 1 && v->col_stride == 1) v->row_stride = cols;
  if (v->col_stride == 1) return v->row_stride >= cols;
  return v->row_stride == 1 && v->col_stride >= rows;
}

/* The dim of a rank-(batch + 2) operand that is neither batch nor contracting. */
static int64_t free_dim(const hlo_instr *operand, const hlo_ints *batch, const hlo_ints *contracting) {
  int rank = operand->shape.rank;
  if (rank != batch->count + 2 || contracting->count != 1) return -1;
  for (int64_t d = 0; d < rank; d++) {
    bool used = d == contracting->values[0];
    for (int i = 0; i < batch->count; i++) used = used || batch->values[i] == d;
    if (!used) return d;
  }
  return -1;
}

/* A product's operand as the step reads it: an f32 value; a bf16 one; or, for a convert of an
 * f32 value to bf16 that only this product reads, the f32 value under it, rounded by the
 * step (the convert a member). NULL for anything else. */
static const hlo_instr *operand_source(matcher *m, const hlo_instr *operand, rt_attention_type *type) {
  *type = RT_ATT_F32;
  if (plain(operand, HLO_F32)) return operand;
  if (!plain(operand, HLO_BF16)) return NULL;
  *type = RT_ATT_BF16;
  const hlo_instr *under = operand->opcode == HLO_OP_CONVERT && operand->operand_count == 1 ? operand->operands[0] : NULL;
  if (!under || !plain(under, HLO_F32) || m->use_count[operand->id] != 1 || m->result[operand->id] ||
      !add_member(m, operand))
    return operand;
  *type = RT_ATT_F32_ROUNDED;
  return under;
}

/* Q and K from the scores product s: sizes and views. */
static bool take_scores(matcher *m, const hlo_instr *s) {
  rt_cpu_attention *a = m->a;
  const hlo_dot_dims *dd = s->dot;
  if (!dd || s->operand_count != 2 || !plain(s, HLO_F32) || !add_member(m, s)) return false;
  const hlo_instr *q = operand_source(m, s->operands[0], &a->q_type), *k = operand_source(m, s->operands[1], &a->k_type);
  if (!q || !k || (a->q_type == RT_ATT_F32) != (a->k_type == RT_ATT_F32) || dd->lhs_batch.count != dd->rhs_batch.count)
    return false;
  int64_t q_row = free_dim(q, &dd->lhs_batch, &dd->lhs_contracting);
  int64_t k_row = free_dim(k, &dd->rhs_batch, &dd->rhs_contracting);
  if (q_row < 0 || k_row < 0 || s->shape.rank != dd->lhs_batch.count + 2) return false;
  const int64_t *dims = s->shape.dims;
  int n = dd->lhs_batch.count;
  if (batch_elements(&s->shape) != a->batch || dims[n] != a->sq || dims[n + 1] != a->sk) return false;
  a->d = q->shape.dims[dd->lhs_contracting.values[0]];
  if (a->d == 0 || a->sk == 0) return false; /* no products to block */
  bool bf16 = a->q_type != RT_ATT_F32 || a->v_type != RT_ATT_F32 || a->p_rounded;
  if (bf16 && (a->d > RT_ATTENTION_BF16_MAX_D || a->dv > RT_ATTENTION_BF16_MAX_D)) return false;
  a->inputs[0] = q->id;
  a->inputs[1] = k->id;
  return view_of(q, &dd->lhs_batch, q_row, dd->lhs_contracting.values[0], dims, &a->q) &&
         view_of(k, &dd->rhs_batch, k_row, dd->rhs_contracting.values[0], dims, &a->k);
}

/* p and V from the last product dot2: sizes and V's view; p's producer, or NULL. */
static const hlo_instr *take_output(matcher *m, const hlo_instr *dot2) {
  rt_cpu_attention *a = m->a;
  const hlo_dot_dims *dd = dot2->dot;
  if (dot2->opcode != HLO_OP_DOT || !dd || dot2->operand_count != 2 || !plain(dot2, HLO_F32) || !add_member(m, dot2))
    return NULL;
  const hlo_instr *p = dot2->operands[0], *v = operand_source(m, dot2->operands[1], &a->v_type);
  int n = dd->lhs_batch.count, r = n + 2;
  rt_attention_type p_type;
  const hlo_instr *p_source = operand_source(m, p, &p_type);
  if (p_type == RT_ATT_BF16) return NULL; /* the probabilities must be the softmax's f32 */
  a->p_rounded = p_type == RT_ATT_F32_ROUNDED;
  if (!p_source || !v || (a->v_type == RT_ATT_F32) != !a->p_rounded || p->shape.rank != r || dot2->shape.rank != r ||
      dd->lhs_contracting.count != 1 || dd->lhs_contracting.values[0] != r - 1 || dd->rhs_batch.count != n)
    return NULL;
  for (int d = 0; d < n; d++)
    if (dd->lhs_batch.values[d] != d) return NULL;
  int64_t v_col = free_dim(v, &dd->rhs_batch, &dd->rhs_contracting);
  if (v_col < 0) return NULL;
  a->batch = batch_elements(&dot2->shape);
  a->sq = dot2->shape.dims[n];
  a->sk = p->shape.dims[r - 1];
  a->dv = dot2->shape.dims[n + 1];
  a->on_blas = hlo_instr_raw_attr(dot2, RT_CPU_ON_BLAS) != NULL;
  a->inputs[2] = v->id;
  a->input_count = 3;
  if (!view_of(v, &dd->rhs_batch, dd->rhs_contracting.values[0], v_col, dot2->shape.dims, &a->v)) return NULL;
  return under_reshape(m, p_source);
}

/* Users of instr among the members (each user once). */
static int member_uses(const matcher *m, const hlo_instr *instr) {
  return rt_cpu_readers_among(m->members, m->member_count, instr);
}

/* Users of instr among the reads marked inside (each user once). */
static int read_uses(const matcher *m, const hlo_instr *instr, const bool *inside) {
  int n = 0;
  for (int i = 0; i < m->read_count; i++) {
    const hlo_instr *u = m->reads[i];
    bool reads = false;
    for (int k = 0; inside[u->id] && k < u->operand_count; k++) reads = reads || u->operands[k] == instr;
    n += reads;
  }
  return n;
}

/* Every member but dot2 is read by members alone and no result; no input is a member. */
static bool closed(const matcher *m) {
  for (int i = 1; i < m->member_count; i++) {
    const hlo_instr *x = m->members[i];
    if (m->result[x->id] || member_uses(m, x) != m->use_count[x->id]) return false;
  }
  for (int k = 0; k < m->a->input_count; k++)
    for (int i = 0; i < m->member_count; i++)
      if (m->members[i]->id == m->a->inputs[k]) return false;
  return true;
}

static const hlo_instr *match(matcher *m, const hlo_instr *dot2) {
  const hlo_instr *p = take_output(m, dot2);
  const hlo_instr *x = p && p->shape.rank >= 2 ? softmax_input(m, p) : NULL;
  if (!x || !same_last_two(&x->shape, &dot2->operands[0]->shape)) return NULL;
  m->x_shape = &x->shape;
  const hlo_instr *s = scores_of(m, x, 0);
  rt_cpu_attention *a = m->a;
  const rt_cpu_attention_op *last = a->op_count ? &a->ops[a->op_count - 1] : NULL;
  a->skip_masked_blocks = last && last->code == RT_ATT_SELECT && last->mask < 0 && last->imm == -INFINITY &&
                          last->direction >= HLO_DIR_LT;
  return s && take_scores(m, s) && closed(m) ? s : NULL;
}

/* A softmax alone at its division p: x f32, rows along the last dim, every other value
 * read inside; x is a value of its own, so its rows are contiguous. */
static bool match_softmax(matcher *m, const hlo_instr *p) {
  rt_cpu_attention *a = m->a;
  if (!plain(p, HLO_F32) || p->shape.rank < 1) return false;
  const hlo_instr *x = softmax_input(m, p); /* members[0] is p: the step itself */
  if (!x || x->shape.rank != p->shape.rank) return false;
  a->softmax_only = true;
  a->sk = p->shape.dims[p->shape.rank - 1];
  a->sq = a->sk ? hlo_shape_elements(&p->shape) / a->sk : 0;
  a->batch = 1;
  a->input_count = 1;
  a->inputs[0] = x->id;
  return a->sk > 0 && closed(m);
}

rt_cpu_attention *rt_cpu_attention_match(const hlo_comp *entry, const hlo_instr *dot, const int *use_count,
                                         const bool *result, bool *inside, bool *oom) {
  (void)entry;
  *oom = false;
  hlo_opcode op = dot->opcode;
  if (op != HLO_OP_DOT && op != HLO_OP_DIVIDE && op != HLO_OP_MULTIPLY && op != HLO_OP_ADD && op != HLO_OP_CONVERT)
    return NULL;
  rt_cpu_attention *a = hlo_calloc(1, sizeof *a);
  if (!a) {
    *oom = true;
    return NULL;
  }
  matcher m = {.use_count = use_count, .result = result, .a = a};
  bool found = op == HLO_OP_DOT ? match(&m, dot) != NULL : op == HLO_OP_DIVIDE && match_softmax(&m, dot);
  /* a layer norm ends in an add, a multiply or a division, or a convert of its result */
  if (!found && op != HLO_OP_DOT) {
    found = rt_cpu_layer_norm_match(dot, use_count, result, inside, a);
    if (found) return a;
  }
  if (!found) {
    free(a);
    return NULL;
  }
  for (int i = 1; i < m.member_count; i++) inside[m.members[i]->id] = true;
  for (int i = 0; i < m.read_count; i++) { /* users come first: their marks are known */
    const hlo_instr *b = m.reads[i];
    bool input = false;
    for (int k = 0; k < a->input_count; k++) input = input || a->inputs[k] == b->id;
    if (!input && !result[b->id] && member_uses(&m, b) + read_uses(&m, b, inside) == use_count[b->id])
      inside[b->id] = true;
  }
  return a;
}

bool rt_cpu_attention_uses(const hlo_comp *entry, int **use_count, bool **result) {
  int n = entry->instr_count;
  *use_count = hlo_calloc((size_t)n + 1, sizeof(int));
  *result = hlo_calloc((size_t)n + 1, sizeof(bool));
  if (!*use_count || !*result) {
    free(*use_count);
    free(*result);
    *use_count = NULL;
    *result = NULL;
    return false;
  }
  for (int i = 0; i < n; i++) {
    const hlo_instr *instr = entry->instrs[i];
    for (int k = 0; k < instr->operand_count; k++) {
      bool again = false;
      for (int e = 0; e < k; e++) again = again || instr->operands[e] == instr->operands[k];
      if (!again) (*use_count)[instr->operands[k]->id]++;
    }
  }
  const hlo_instr *root = entry->root;
  (*result)[root->id] = true;
  for (int k = 0; root->opcode == HLO_OP_TUPLE && k < root->operand_count; k++) (*result)[root->operands[k]->id] = true;
  return true;
}

hlo_status rt_cpu_attention_plan(rt_cpu_plan *plan, const hlo_comp *entry, hlo_diag *diag) {
  int n = plan->step_count, *use_count;
  bool *result, oom = false;
  if (!rt_cpu_attention_uses(entry, &use_count, &result))
    return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning attention");
  bool *inside = hlo_calloc((size_t)n + 1, sizeof(bool)), *mine = hlo_calloc((size_t)n + 1, sizeof(bool));
  oom = !inside || !mine;
  /* attentions first (their softmax's division comes before their last product), then
   * the softmaxes left, then layer norms from the last instruction back (the bias's add
   * before the normalization's multiply it reads) */
  for (int pass = 0, k = 0; pass < 3 && !oom; k = 0, pass++)
  for (; k < n && !oom; k++) {
    int i = pass == 2 ? n - 1 - k : k;
    rt_cpu_step *step = &plan->steps[i];
    hlo_opcode op = step->instr->opcode;
    bool candidate = pass == 0 ? op == HLO_OP_DOT
                     : pass == 1 ? op == HLO_OP_DIVIDE
                                 : op == HLO_OP_ADD || op == HLO_OP_MULTIPLY || op == HLO_OP_DIVIDE ||
                                       op == HLO_OP_CONVERT;
    if (step->kind != RT_STEP_FAST || !candidate || inside[i]) continue;
    memset(mine, 0, (size_t)n * sizeof(bool));
    rt_cpu_attention *a = rt_cpu_attention_match(entry, step->instr, use_count, result, mine, &oom);
    if (!a) continue;
    if ((pass == 1 && a->layer_norm) || (pass == 2 && !a->layer_norm)) { /* each in its own pass */
      free(a);
      continue;
    }
    static const char *const kinds[] = {"attention", "softmax", "layer_norm"};
    if (!hlo_choice(kinds[pass], step->instr->name)) { /* refused: as written */
      free(a);
      continue;
    }
    for (int j = 0; j < n; j++) inside[j] = inside[j] || mine[j];
    step->kind = RT_STEP_ATTENTION;
    step->attention = a;
    step->fast_scratch = NULL;
    step->scratch_bytes = 0;
    if (a->input_count > plan->max_operands) plan->max_operands = a->input_count;
  }
  for (int i = 0; i < n && !oom; i++)
    if (inside[i]) {
      plan->steps[i].kind = RT_STEP_INSIDE;
      plan->steps[i].fast = NULL;
      plan->steps[i].fast_scratch = NULL;
      plan->steps[i].scratch_bytes = 0;
    }
  free(inside);
  free(mine);
  free(use_count);
  free(result);
  return oom ? hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning attention") : HLO_OK;
}
