/* Layer norm in the cpu plan: finds the decomposition frontends lower layer norm to and makes
 * it one step (layer_norm.c runs it) that reads each row of its input once from memory,
 * where the graph as written sweeps the input three times (the mean, the variance, the
 * normalization) and stores what it centred.
 *
 * The pattern, read back from its last instruction, over the last k dims of x (n elements
 * each, the rows the leading dims):
 *
 *   mean = reduce-add(x) * c          c a scalar constant 1/n; or reduce-add(x) / n
 *   d    = x - broadcast(mean)        broadcast along the row
 *   var  = mean of d * d              as mean is of x (the centred form, latch's lowering
 *                                     and PyTorch's decomposition), or
 *          mean of x * x - mean * mean (the form of flax and hand-written blocks)
 *   y    = d * broadcast(rsqrt(var + eps))       or d / broadcast(sqrt(var + eps))
 *   y    = y * broadcast(w)           optional, w of the row's dims (the weight)
 *   y    = y + broadcast(b)           optional (the bias)
 *
 * A mean broadcast back may keep the reduced dims as size 1 (a reshape to [..., 1], then a
 * broadcast). Every value from the reductions to the last instruction must be read only
 * inside the pattern and be no result, of one type throughout: f32, or bf16 (a bf16 graph's
 * layer norm, its constants bf16 too, 1/n within bf16's rounding). In f32 arithmetic, x may
 * be a convert of bf16 values that only the pattern reads, and the last instruction a
 * convert of the result to bf16: the step then reads and writes bf16 itself. The step
 * computes the statistics in f64 from one sweep of the row (layer_norm.c), the rest in f32:
 * within rounding of the graph's f32 sums and closer to the exact values (and far closer
 * than bf16 arithmetic); decided from the module's shapes alone, so a loaded plan finds the
 * same description (deserialize.c, through rt_cpu_attention_match). */
#include <math.h>
#include <string.h>

#include "plan_internal.h"

enum { MAX_MEMBERS = 32, MAX_READS = 16 };

typedef struct ln_matcher {
  const int *use_count;
  const bool *result;
  hlo_dtype type; /* the arithmetic's: f32, or bf16 (a bf16 graph's layer norm) */
  const hlo_instr *x;
  int rank, k;    /* x's rank; the row's dims, the last k */
  int64_t n, rows;
  int member_count, read_count;
  const hlo_instr *members[MAX_MEMBERS]; /* members[0] is the last instruction, the step */
  const hlo_instr *reads[MAX_READS];     /* broadcasts of constants, w and b: inside when only members read them */
} ln_matcher;

static bool plain_of(const hlo_instr *instr, hlo_dtype type) {
  const hlo_shape *s = &instr->shape;
  return hlo_shape_is_array(s) && s->dtype == type && hlo_shape_is_default_layout(s) && !hlo_shape_is_dynamic(s);
}

/* An array of the arithmetic's type. */
static bool plain(const ln_matcher *m, const hlo_instr *instr) { return plain_of(instr, m->type); }

static bool add_to(const hlo_instr **list, int *count, int most, const hlo_instr *instr) {
  for (int i = 0; i < *count; i++)
    if (list[i] == instr) return true;
  if (*count == most) return false;
  list[(*count)++] = instr;
  return true;
}

static bool member(ln_matcher *m, const hlo_instr *instr) {
  return add_to(m->members, &m->member_count, MAX_MEMBERS, instr);
}

static bool add_read(ln_matcher *m, const hlo_instr *instr) { return add_to(m->reads, &m->read_count, MAX_READS, instr); }

/* The value of a scalar constant of the arithmetic's type, or of a broadcast of one (then
 * read through). */
static bool scalar_of(ln_matcher *m, const hlo_instr *instr, double *value) {
  const hlo_instr *c = instr;
  if (c->opcode == HLO_OP_BROADCAST && c->operand_count == 1 && c->dimensions.count == 0) c = c->operands[0];
  if (c->opcode != HLO_OP_CONSTANT || !plain(m, c) || hlo_shape_elements(&c->shape) != 1 || !c->literal ||
      !c->literal->data)
    return false;
  *value = m->type == HLO_BF16 ? hlo_bf16_to_f32(*(const uint16_t *)c->literal->data) : *(const float *)c->literal->data;
  return c == instr || add_read(m, instr);
}

/* Whether c is 1 (a constant 1/n times n): exactly enough for f32, within bf16's rounding
 * of 1/n for bf16. */
static bool near_one(const ln_matcher *m, double c) { return fabs(c - 1.0) < (m->type == HLO_BF16 ? 0x1p-8 : 1e-6); }

/* Whether a and b are the two operands of instr, in either order. */
static bool operands_are(const hlo_instr *instr, const hlo_instr *a, const hlo_instr *b) {
  return instr->operand_count == 2 &&
         ((instr->operands[0] == a && instr->operands[1] == b) || (instr->operands[0] == b && instr->operands[1] == a));
}

/* What bcast spreads along the row: a broadcast of x's shape whose operand holds one value per
 * row (the leading dims in order, any other dim of size 1), through a reshape that only drops
 * or adds such dims; the value under them, a member; or NULL. */
static const hlo_instr *per_row(ln_matcher *m, const hlo_instr *bcast) {
  if (bcast->opcode != HLO_OP_BROADCAST || bcast->operand_count != 1 || !hlo_shape_equal(&bcast->shape, &m->x->shape))
    return NULL;
  const hlo_instr *o = bcast->operands[0];
  int lead = m->rank - m->k, next = 0;
  if (o->shape.rank != bcast->dimensions.count) return NULL;
  for (int j = 0; j < o->shape.rank; j++) {
    int64_t to = bcast->dimensions.values[j];
    if (to < lead && to == next && o->shape.dims[j] == m->x->shape.dims[to]) next++;
    else if (o->shape.dims[j] != 1) return NULL;
  }
  if (next != lead || !member(m, bcast)) return NULL;
  if (o->opcode == HLO_OP_RESHAPE && o->operand_count == 1 && hlo_shape_elements(&o->operands[0]->shape) == m->rows) {
    if (!member(m, o)) return NULL;
    o = o->operands[0];
  }
  return plain(m, o) && hlo_shape_elements(&o->shape) == m->rows ? o : NULL;
}

/* The array w under a broadcast of it along the rows (one value per position of the row, its
 * dims the last k in order), read through; or NULL. */
static const hlo_instr *per_column(ln_matcher *m, const hlo_instr *bcast) {
  if (bcast->opcode != HLO_OP_BROADCAST || bcast->operand_count != 1 || !hlo_shape_equal(&bcast->shape, &m->x->shape))
    return NULL;
  const hlo_instr *w = bcast->operands[0];
  int lead = m->rank - m->k;
  if (w->shape.rank != m->k || bcast->dimensions.count != m->k || !plain(m, w)) return NULL;
  for (int j = 0; j < m->k; j++)
    if (bcast->dimensions.values[j] != lead + j) return NULL;
  return add_read(m, bcast) ? w : NULL;
}

/* Whether r is reduce-add(v) over the row's dims with a zero init (k taken from the first one
 * seen), or a reshape of one that keeps its elements (the reduced dims kept as size 1): a
 * member. */
static bool row_sum(ln_matcher *m, const hlo_instr *r, const hlo_instr *v) {
  if (r->opcode == HLO_OP_RESHAPE && r->operand_count == 1 && plain(m, r) &&
      hlo_shape_elements(&r->shape) == hlo_shape_elements(&r->operands[0]->shape)) {
    if (!member(m, r)) return false;
    r = r->operands[0];
  }
  if (r->opcode != HLO_OP_REDUCE || r->operand_count != 2 || r->operands[0] != v || r->called_count != 1 ||
      hlo_simple_reducer(r->called[0]) != HLO_OP_ADD || !plain(m, r) || !plain(m, v))
    return false;
  int k = r->dimensions.count, rank = v->shape.rank;
  if (k < 1 || (m->k && k != m->k)) return false;
  for (int j = 0; j < k; j++)
    if (r->dimensions.values[j] != rank - k + j) return false;
  double init;
  if (!scalar_of(m, r->operands[1], &init) || init != 0.0) return false;
  if (!m->k) {
    m->k = k;
    m->n = 1;
    for (int j = rank - k; j < rank; j++) m->n *= v->shape.dims[j];
    m->rows = m->n ? hlo_shape_elements(&v->shape) / m->n : 0;
  }
  return member(m, r);
}

/* A reduce, under a reshape or not. */
static const hlo_instr *under_reshape(const hlo_instr *r) {
  return r->opcode == HLO_OP_RESHAPE && r->operand_count == 1 ? r->operands[0] : r;
}

/* The value whose row sum mean is made of (the reduce among its operands), or NULL. */
static const hlo_instr *summed(const hlo_instr *mean) {
  if ((mean->opcode != HLO_OP_MULTIPLY && mean->opcode != HLO_OP_DIVIDE) || mean->operand_count != 2) return NULL;
  for (int s = 0; s < 2; s++) {
    const hlo_instr *r = under_reshape(mean->operands[s]);
    if (r->opcode == HLO_OP_REDUCE && r->operand_count == 2) return r->operands[0];
    if (mean->opcode == HLO_OP_DIVIDE) break; /* the sum is the dividend */
  }
  return NULL;
}

/* Whether mean is the mean of v over the row: its sum times 1/n, or over n. */
static bool row_mean(ln_matcher *m, const hlo_instr *mean, const hlo_instr *v) {
  if (summed(mean) != v || !plain(m, mean)) return false;
  double c;
  bool ok = false;
  if (mean->opcode == HLO_OP_DIVIDE)
    ok = row_sum(m, mean->operands[0], v) && scalar_of(m, mean->operands[1], &c) &&
         (m->type == HLO_F32 ? c == (double)m->n : c > 0 && near_one(m, (double)m->n / c));
  else
    for (int s = 0; s < 2 && !ok; s++)
      ok = under_reshape(mean->operands[s])->opcode == HLO_OP_REDUCE && row_sum(m, mean->operands[s], v) &&
           scalar_of(m, mean->operands[1 - s], &c) && near_one(m, c * (double)m->n);
  return ok && member(m, mean);
}

/* var over d = x - mean (the centred form), or over x: the mean of squares less the
 * squared mean. */
static bool row_variance(ln_matcher *m, const hlo_instr *var, const hlo_instr *d, const hlo_instr *mean) {
  if (var->opcode == HLO_OP_SUBTRACT && var->operand_count == 2) {
    const hlo_instr *squares = var->operands[0], *sq = var->operands[1];
    const hlo_instr *xx = summed(squares);
    return xx && xx->opcode == HLO_OP_MULTIPLY && operands_are(xx, m->x, m->x) && member(m, xx) &&
           row_mean(m, squares, xx) && sq->opcode == HLO_OP_MULTIPLY && operands_are(sq, mean, mean) &&
           member(m, sq) && member(m, var);
  }
  const hlo_instr *dd = summed(var);
  return dd && dd->opcode == HLO_OP_MULTIPLY && operands_are(dd, d, d) && member(m, dd) && row_mean(m, var, dd);
}

/* inv = rsqrt(var + eps) (or, sqrt_form, the deviation sqrt(var + eps)), var d's variance;
 * eps into *eps. */
static bool deviation(ln_matcher *m, const hlo_instr *inv, bool sqrt_form, const hlo_instr *d, const hlo_instr *mean,
                      float *eps) {
  hlo_opcode root = sqrt_form ? HLO_OP_SQRT : HLO_OP_RSQRT;
  if (inv->opcode != root || inv->operand_count != 1 || !plain(m, inv) || !member(m, inv)) return false;
  const hlo_instr *sum = inv->operands[0];
  if (sum->opcode != HLO_OP_ADD || sum->operand_count != 2 || !plain(m, sum) || !member(m, sum)) return false;
  for (int s = 0; s < 2; s++) {
    ln_matcher t = *m;
    double e;
    if (scalar_of(&t, sum->operands[1 - s], &e) && e >= 0 && row_variance(&t, sum->operands[s], d, mean)) {
      *m = t;
      *eps = (float)e;
      return true;
    }
  }
  return false;
}

/* The value a broadcast spreads, under a reshape that only moves size-1 dims. */
static const hlo_instr *spread_value(const hlo_instr *bcast) {
  if (bcast->opcode != HLO_OP_BROADCAST || bcast->operand_count != 1) return NULL;
  const hlo_instr *o = bcast->operands[0];
  return o->opcode == HLO_OP_RESHAPE && o->operand_count == 1 ? o->operands[0] : o;
}

/* y = d * broadcast(inv) (either order) or d / broadcast(sqrt(var + eps)), with
 * d = x - broadcast(mean). */
static bool normalized(ln_matcher *m, const hlo_instr *y, float *eps) {
  if ((y->opcode != HLO_OP_MULTIPLY && y->opcode != HLO_OP_DIVIDE) || y->operand_count != 2 || !plain(m, y))
    return false;
  bool divide = y->opcode == HLO_OP_DIVIDE;
  for (int s = 0; s < (divide ? 1 : 2); s++) {
    ln_matcher t = *m;
    const hlo_instr *d = y->operands[s], *spread = y->operands[1 - s];
    if (d->opcode != HLO_OP_SUBTRACT || d->operand_count != 2 || !plain(m, d->operands[0])) continue;
    t.x = d->operands[0];
    t.rank = t.x->shape.rank;
    const hlo_instr *mean = spread_value(d->operands[1]), *inv = spread_value(spread);
    if (!mean || !inv || t.rank < 1 || !hlo_shape_equal(&d->shape, &t.x->shape) || !row_mean(&t, mean, t.x) ||
        per_row(&t, d->operands[1]) != mean || per_row(&t, spread) != inv || !member(&t, d) || !member(&t, y) ||
        !deviation(&t, inv, divide, d, mean, eps))
      continue;
    *m = t;
    return true;
  }
  return false;
}

/* last = core, core * broadcast(w), core + broadcast(b) or core * broadcast(w) + broadcast(b),
 * either order of operands, core a normalization: into *m, w and b (NULL when absent). */
static bool match_tail(ln_matcher *m, const hlo_instr *last, float *eps, const hlo_instr **w, const hlo_instr **b) {
  for (int form = 0; form < 4; form++) {
    bool has_b = form < 2, has_w = form == 0 || form == 2;
    for (int s = 0; s < (has_b ? 2 : 1); s++)
      for (int u = 0; u < (has_w ? 2 : 1); u++) {
        ln_matcher t = *m;
        const hlo_instr *top = last, *wb = NULL, *bb = NULL;
        if (has_b) {
          if (top->opcode != HLO_OP_ADD || top->operand_count != 2) continue;
          bb = top->operands[1 - s];
          top = top->operands[s];
        }
        if (has_w) {
          if (top->opcode != HLO_OP_MULTIPLY || top->operand_count != 2 || !plain(&t, top) || !member(&t, top))
            continue;
          wb = top->operands[1 - u];
          top = top->operands[u];
        }
        if (!normalized(&t, top, eps)) continue;
        *w = wb ? per_column(&t, wb) : NULL;
        *b = bb ? per_column(&t, bb) : NULL;
        if ((wb && !*w) || (bb && !*b)) continue;
        *m = t;
        return true;
      }
  }
  return false;
}

int rt_cpu_readers_among(const hlo_instr *const *list, int count, const hlo_instr *instr) {
  int n = 0;
  for (int i = 0; i < count; i++) {
    const hlo_instr *u = list[i];
    bool reads = false;
    for (int k = 0; k < u->operand_count; k++) reads = reads || u->operands[k] == instr;
    n += reads;
  }
  return n;
}

static int member_uses(const ln_matcher *m, const hlo_instr *instr) {
  return rt_cpu_readers_among(m->members, m->member_count, instr);
}

/* The normalized value under the step's instruction last, its arithmetic's type set: last
 * itself (f32 or bf16 arithmetic), or, where last converts an f32 value that nothing else
 * reads to bf16, that value (f32 arithmetic, a bf16 result: *out_bf16); or NULL. */
static const hlo_instr *normalized_value(ln_matcher *m, const hlo_instr *last, bool *out_bf16) {
  *out_bf16 = last->shape.dtype == HLO_BF16;
  if (!member(m, last)) return NULL;
  if (last->opcode == HLO_OP_CONVERT && last->operand_count == 1 && plain_of(last, HLO_BF16)) {
    const hlo_instr *y = last->operands[0];
    m->type = HLO_F32;
    return plain(m, y) && m->use_count[y->id] == 1 && !m->result[y->id] && member(m, y) ? y : NULL;
  }
  m->type = last->shape.dtype;
  return plain_of(last, HLO_F32) || plain_of(last, HLO_BF16) ? last : NULL;
}

/* x as the step reads it: a convert of bf16 values to f32 that only the layer norm reads is
 * computed by the step, which reads the bf16 values (*bf16 set, the convert inside). */
static const hlo_instr *input_of(const ln_matcher *m, bool *inside, bool *bf16) {
  const hlo_instr *x = m->x;
  *bf16 = m->type == HLO_BF16;
  if (m->type != HLO_F32 || x->opcode != HLO_OP_CONVERT || x->operand_count != 1 ||
      !plain_of(x->operands[0], HLO_BF16) || m->result[x->id] || member_uses(m, x) != m->use_count[x->id])
    return x;
  inside[x->id] = true;
  *bf16 = true;
  return x->operands[0];
}

bool rt_cpu_layer_norm_match(const hlo_instr *last, const int *use_count, const bool *result, bool *inside,
                             rt_cpu_attention *a) {
  ln_matcher m = {.use_count = use_count, .result = result};
  const hlo_instr *w = NULL, *b = NULL;
  float eps = 0;
  bool out_bf16;
  const hlo_instr *y = normalized_value(&m, last, &out_bf16);
  if (!y || !match_tail(&m, y, &eps, &w, &b) || m.n == 0) return false;
  for (int i = 1; i < m.member_count; i++) {
    const hlo_instr *x = m.members[i];
    if (x == m.x || x == w || x == b || result[x->id] || member_uses(&m, x) != use_count[x->id]) return false;
  }
  *a = (rt_cpu_attention){.layer_norm = true, .batch = 1, .sq = m.rows, .sk = m.n, .eps = eps, .input_count = 1,
                          .weight_input = -1, .bias_input = -1, .wb_bf16 = m.type == HLO_BF16, .out_bf16 = out_bf16};
  a->inputs[0] = input_of(&m, inside, &a->x_bf16)->id;
  if (w) a->weight_input = a->input_count, a->inputs[a->input_count++] = w->id;
  if (b) a->bias_input = a->input_count, a->inputs[a->input_count++] = b->id;
  for (int i = 1; i < m.member_count; i++) inside[m.members[i]->id] = true;
  for (int i = 0; i < m.read_count; i++) {
    const hlo_instr *r = m.reads[i];
    if (!result[r->id] && member_uses(&m, r) == use_count[r->id]) inside[r->id] = true;
  }
  return true;
}
