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
 * inside the pattern and be no result, f32 throughout. The step computes the statistics in
 * f64 from one sweep of the row (layer_norm.c): within rounding of the graph's f32 sums,
 * and closer to the exact values; decided from the module's shapes alone, so a loaded plan
 * finds the same description (deserialize.c, through rt_cpu_attention_match). */
#include <math.h>
#include <string.h>

#include "plan_internal.h"

enum { MAX_MEMBERS = 32, MAX_READS = 16 };

typedef struct ln_matcher {
  const int *use_count;
  const bool *result;
  const hlo_instr *x;
  int rank, k;    /* x's rank; the row's dims, the last k */
  int64_t n, rows;
  int member_count, read_count;
  const hlo_instr *members[MAX_MEMBERS]; /* members[0] is the last instruction, the step */
  const hlo_instr *reads[MAX_READS];     /* broadcasts of constants, w and b: inside when only members read them */
} ln_matcher;

static bool plain_f32(const hlo_instr *instr) {
  const hlo_shape *s = &instr->shape;
  return hlo_shape_is_array(s) && s->dtype == HLO_F32 && hlo_shape_is_default_layout(s) && !hlo_shape_is_dynamic(s);
}

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

/* The value of an f32 scalar constant, or of a broadcast of one (then read through). */
static bool scalar_of(ln_matcher *m, const hlo_instr *instr, double *value) {
  const hlo_instr *c = instr;
  if (c->opcode == HLO_OP_BROADCAST && c->operand_count == 1 && c->dimensions.count == 0) c = c->operands[0];
  if (c->opcode != HLO_OP_CONSTANT || !plain_f32(c) || hlo_shape_elements(&c->shape) != 1 || !c->literal ||
      !c->literal->data)
    return false;
  *value = *(const float *)c->literal->data;
  return c == instr || add_read(m, instr);
}

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
  return plain_f32(o) && hlo_shape_elements(&o->shape) == m->rows ? o : NULL;
}

/* The array w under a broadcast of it along the rows (one value per position of the row, its
 * dims the last k in order), read through; or NULL. */
static const hlo_instr *per_column(ln_matcher *m, const hlo_instr *bcast) {
  if (bcast->opcode != HLO_OP_BROADCAST || bcast->operand_count != 1 || !hlo_shape_equal(&bcast->shape, &m->x->shape))
    return NULL;
  const hlo_instr *w = bcast->operands[0];
  int lead = m->rank - m->k;
  if (w->shape.rank != m->k || bcast->dimensions.count != m->k || !plain_f32(w)) return NULL;
  for (int j = 0; j < m->k; j++)
    if (bcast->dimensions.values[j] != lead + j) return NULL;
  return add_read(m, bcast) ? w : NULL;
}

/* Whether r is reduce-add(v) over the row's dims with a zero init (k taken from the first one
 * seen), or a reshape of one that keeps its elements (the reduced dims kept as size 1): a
 * member. */
static bool row_sum(ln_matcher *m, const hlo_instr *r, const hlo_instr *v) {
  if (r->opcode == HLO_OP_RESHAPE && r->operand_count == 1 && plain_f32(r) &&
      hlo_shape_elements(&r->shape) == hlo_shape_elements(&r->operands[0]->shape)) {
    if (!member(m, r)) return false;
    r = r->operands[0];
  }
  if (r->opcode != HLO_OP_REDUCE || r->operand_count != 2 || r->operands[0] != v || r->called_count != 1 ||
      hlo_simple_reducer(r->called[0]) != HLO_OP_ADD || !plain_f32(r) || !plain_f32(v))
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
  if (summed(mean) != v || !plain_f32(mean)) return false;
  double c;
  bool ok = false;
  if (mean->opcode == HLO_OP_DIVIDE)
    ok = row_sum(m, mean->operands[0], v) && scalar_of(m, mean->operands[1], &c) && c == (double)m->n;
  else
    for (int s = 0; s < 2 && !ok; s++)
      ok = under_reshape(mean->operands[s])->opcode == HLO_OP_REDUCE && row_sum(m, mean->operands[s], v) &&
           scalar_of(m, mean->operands[1 - s], &c) && fabs(c * (double)m->n - 1.0) < 1e-6;
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
  if (inv->opcode != root || inv->operand_count != 1 || !plain_f32(inv) || !member(m, inv)) return false;
  const hlo_instr *sum = inv->operands[0];
  if (sum->opcode != HLO_OP_ADD || sum->operand_count != 2 || !plain_f32(sum) || !member(m, sum)) return false;
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
  if ((y->opcode != HLO_OP_MULTIPLY && y->opcode != HLO_OP_DIVIDE) || y->operand_count != 2 || !plain_f32(y))
    return false;
  bool divide = y->opcode == HLO_OP_DIVIDE;
  for (int s = 0; s < (divide ? 1 : 2); s++) {
    ln_matcher t = *m;
    const hlo_instr *d = y->operands[s], *spread = y->operands[1 - s];
    if (d->opcode != HLO_OP_SUBTRACT || d->operand_count != 2 || !plain_f32(d->operands[0])) continue;
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
          if (top->opcode != HLO_OP_MULTIPLY || top->operand_count != 2 || !plain_f32(top) || !member(&t, top))
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

/* Users of instr among the members (each user once). */
static int member_uses(const ln_matcher *m, const hlo_instr *instr) {
  int n = 0;
  for (int i = 0; i < m->member_count; i++) {
    const hlo_instr *u = m->members[i];
    bool reads = false;
    for (int k = 0; k < u->operand_count; k++) reads = reads || u->operands[k] == instr;
    n += reads;
  }
  return n;
}

bool rt_cpu_layer_norm_match(const hlo_instr *last, const int *use_count, const bool *result, bool *inside,
                             rt_cpu_attention *a) {
  ln_matcher m = {.use_count = use_count, .result = result};
  const hlo_instr *w = NULL, *b = NULL;
  float eps = 0;
  if (!plain_f32(last) || !member(&m, last) || !match_tail(&m, last, &eps, &w, &b) || m.n == 0) return false;
  for (int i = 1; i < m.member_count; i++) {
    const hlo_instr *x = m.members[i];
    if (x == m.x || x == w || x == b || result[x->id] || member_uses(&m, x) != use_count[x->id]) return false;
  }
  *a = (rt_cpu_attention){.layer_norm = true, .batch = 1, .sq = m.rows, .sk = m.n, .eps = eps, .input_count = 1,
                          .weight_input = -1, .bias_input = -1};
  a->inputs[0] = m.x->id;
  if (w) a->weight_input = a->input_count, a->inputs[a->input_count++] = w->id;
  if (b) a->bias_input = a->input_count, a->inputs[a->input_count++] = b->id;
  for (int i = 1; i < m.member_count; i++) inside[m.members[i]->id] = true;
  for (int i = 0; i < m.read_count; i++) {
    const hlo_instr *r = m.reads[i];
    if (!result[r->id] && member_uses(&m, r) == use_count[r->id]) inside[r->id] = true;
  }
  return true;
}
