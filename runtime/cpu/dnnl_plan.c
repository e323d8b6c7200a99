/* Which convolutions of a plan run on oneDNN, which elementwise ops each absorbs as post-ops,
 * and the layout each result is kept in: decided over the whole entry, between classifying
 * the steps and fusion (rt_cpu_plan_build), so fusion groups only what is left.
 *
 * Epilogue: from a convolution, while the value so far has one user (and is no result of
 * the entry), that user is absorbed when it is an add of a per-feature operand (a broadcast
 * of a [C] array along the feature dim: the bias when it comes first, else a binary post-op),
 * a subtract or multiply of one, an add of a full-shape operand (the residual), a maximum with
 * zero (relu) or a clamp between scalar constants (relu6). oneDNN is asked for the longest such
 * chain it runs with a real kernel (not its reference one); a shorter one otherwise.
 *
 * Layout: a result stays in the convolution's preferred (blocked) layout when every reader is
 * another DNNL step reading it as its source or as its residual, or a max or min pool
 * (dnnl_pool.c), which reads it blocked and keeps its own result blocked on the same terms,
 * or a concatenation along the channels (dnnl_concat.c), which reads each operand as it
 * arrives and keeps its result blocked on the same terms when some operand arrives blocked;
 * anything else reads row-major, so reorders happen only where the graph leaves oneDNN. A
 * primitive that refuses the layouts planned (oneDNN has only an im2col kernel for alexnet's
 * 11x11 stride-4 stem, which writes row-major) gets row-major where it asked for a blocked
 * result, else its blocked operands arrive row-major, and the plan is built again; only if
 * that leaves nothing to change is every result planned row-major (which each probe
 * accepted). */
#include <stdlib.h>
#include <string.h>

#include "dnnl_internal.h"

typedef struct users {
  int *count;         /* [instr]: distinct users */
  const hlo_instr **only; /* [instr]: the last user seen (the only one when count is 1) */
  bool *result;       /* [instr]: a result of the entry */
} users;

static void free_users(users *u) {
  free(u->count);
  free(u->only);
  free(u->result);
}

static bool find_users(const hlo_comp *entry, users *u) {
  size_t n = (size_t)entry->instr_count + 1;
  u->count = hlo_calloc(n, sizeof(int));
  u->only = hlo_calloc(n, sizeof(const hlo_instr *));
  u->result = hlo_calloc(n, sizeof(bool));
  if (!u->count || !u->only || !u->result) return false;
  for (int i = 0; i < entry->instr_count; i++) {
    const hlo_instr *instr = entry->instrs[i];
    for (int k = 0; k < instr->operand_count; k++) {
      bool again = false;
      for (int e = 0; e < k; e++) again = again || instr->operands[e] == instr->operands[k];
      if (again) continue;
      u->count[instr->operands[k]->id]++;
      u->only[instr->operands[k]->id] = instr;
    }
  }
  const hlo_instr *root = entry->root;
  u->result[root->id] = true;
  for (int k = 0; root->opcode == HLO_OP_TUPLE && k < root->operand_count; k++) u->result[root->operands[k]->id] = true;
  return true;
}

/* The array of C values b broadcasts along the convolution's feature dim, or NULL: a [C]
 * array, or one whose other dims are all 1 (a [1, C] bias at batch 1: a frontend's
 * [1, C, 1, 1] with its spatial dims dropped), which holds the same C floats in order. */
static const hlo_instr *per_feature(const hlo_instr *b, const hlo_instr *conv) {
  if (b->opcode != HLO_OP_BROADCAST || b->operand_count != 1) return NULL;
  const hlo_shape *p = &b->operands[0]->shape;
  int64_t features = conv->shape.dims[conv->conv->output_feature];
  if (!hlo_shape_is_array(p) || p->dtype != HLO_F32 || !hlo_shape_is_default_layout(p) || p->rank < 1 ||
      b->dimensions.count != p->rank || hlo_shape_elements(p) != features)
    return NULL;
  for (int i = 0; i < p->rank; i++)
    if (p->dims[i] != 1 && b->dimensions.values[i] != conv->conv->output_feature) return NULL;
  return b->operands[0];
}

/* Whether x is an f32 scalar constant, or a broadcast of one, with value *v. */
static bool scalar_constant(const hlo_instr *x, float *v) {
  if (x->opcode == HLO_OP_BROADCAST && x->operand_count == 1) x = x->operands[0];
  if (x->opcode != HLO_OP_CONSTANT || !x->literal || !x->literal->data || !hlo_shape_is_array(&x->shape) ||
      x->shape.dtype != HLO_F32 || hlo_shape_elements(&x->shape) != 1)
    return false;
  *v = *(const float *)x->literal->data;
  return true;
}

static bool same_array(const hlo_shape *a, const hlo_shape *b) {
  if (!hlo_shape_is_array(a) || !hlo_shape_is_array(b) || a->dtype != b->dtype || a->rank != b->rank ||
      !hlo_shape_is_default_layout(a) || !hlo_shape_is_default_layout(b))
    return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

/* x's index among d's inputs, added when new; -1 when they are full. */
static int input_of(rt_cpu_dnnl *d, const hlo_instr *x) {
  for (int k = 0; k < d->input_count; k++)
    if (d->inputs[k] == x) return k;
  if (d->input_count == RT_DNNL_MAX_INPUTS) return -1;
  d->inputs[d->input_count] = x;
  return d->input_count++;
}

/* Records x as part of a per-feature value; false when the list is full. */
static bool add_member(rt_cpu_dnnl *d, const hlo_instr *x) {
  for (int k = 0; k < d->member_count; k++)
    if (d->members[k] == x) return true;
  if (d->member_count == RT_DNNL_MAX_MEMBERS) return false;
  d->members[d->member_count++] = x;
  return true;
}

static bool term_unary(hlo_opcode op) { return op == HLO_OP_RSQRT || op == HLO_OP_SQRT || op == HLO_OP_NEGATE; }

static bool term_binary(hlo_opcode op) {
  return op == HLO_OP_ADD || op == HLO_OP_SUBTRACT || op == HLO_OP_MULTIPLY || op == HLO_OP_DIVIDE ||
         op == HLO_OP_MAXIMUM || op == HLO_OP_MINIMUM;
}

/* The term computing v, a value of the result's shape constant along every dim but the
 * feature dim; -1 when v is not one of the forms taken (or the lists are full). */
static int feature_term(rt_cpu_dnnl *d, const hlo_instr *v, int depth) {
  if (depth > 8 || d->term_count == RT_DNNL_MAX_TERMS || !same_array(&v->shape, &d->conv->shape)) return -1;
  rt_dnnl_term t = {.op = v->opcode, .a = -1, .b = -1, .input = -1};
  const hlo_instr *array = per_feature(v, d->conv);
  if (scalar_constant(v, &t.value)) {
    t.op = HLO_OP_CONSTANT;
  } else if (array) {
    t.op = HLO_OP_PARAMETER;
    if ((t.input = input_of(d, array)) < 0) return -1;
  } else if (term_unary(v->opcode) && v->operand_count == 1) {
    if ((t.a = feature_term(d, v->operands[0], depth + 1)) < 0) return -1;
  } else if (term_binary(v->opcode) && v->operand_count == 2) {
    if ((t.a = feature_term(d, v->operands[0], depth + 1)) < 0) return -1;
    if ((t.b = feature_term(d, v->operands[1], depth + 1)) < 0) return -1;
  } else {
    return -1;
  }
  if (d->term_count == RT_DNNL_MAX_TERMS || !add_member(d, v)) return -1;
  d->terms[d->term_count] = t;
  return d->term_count++;
}

/* A per-feature post-op of kind over y. */
static bool feature_post(rt_cpu_dnnl *d, const hlo_instr *y, rt_dnnl_post_kind kind, rt_dnnl_post *p) {
  p->kind = kind;
  if ((p->term = feature_term(d, y, 0)) < 0) return false;
  const rt_dnnl_term *t = &d->terms[p->term];
  p->input = t->op == HLO_OP_PARAMETER ? t->input : -1;
  return true;
}

/* The post-op u applies to x (the value so far), or false when u is none of the absorbed
 * forms. */
static bool match_post(rt_cpu_dnnl *d, const hlo_instr *u, const hlo_instr *x, rt_dnnl_post *p) {
  if (!same_array(&u->shape, &d->conv->shape) || u->operand_count < 2) return false;
  *p = (rt_dnnl_post){.instr = u, .term = -1, .input = -1};
  int other_k = u->operands[0] == x ? 1 : 0;
  const hlo_instr *other = u->operands[other_k];
  if (u->operand_count == 2 && other == x) return false;
  float v, hi;
  switch (u->opcode) {
    case HLO_OP_ADD:
      if (feature_post(d, other, d->post_count == 0 ? RT_DNNL_BIAS : RT_DNNL_ADD_C, p)) return true;
      p->kind = RT_DNNL_ADD_FULL;
      return (p->input = input_of(d, other)) >= 0;
    case HLO_OP_SUBTRACT:
      return other_k == 1 && feature_post(d, other, RT_DNNL_SUB_C, p);
    case HLO_OP_MULTIPLY:
      return feature_post(d, other, RT_DNNL_MUL_C, p);
    case HLO_OP_MAXIMUM:
      p->kind = RT_DNNL_RELU;
      return scalar_constant(other, &v) && v == 0 && add_member(d, other);
    case HLO_OP_CLAMP:
      p->kind = RT_DNNL_CLIP;
      if (u->operand_count != 3 || u->operands[1] != x || !scalar_constant(u->operands[0], &v) ||
          !scalar_constant(u->operands[2], &hi) || !(v <= 0 && 0 <= hi) || !add_member(d, u->operands[0]) ||
          !add_member(d, u->operands[2]))
        return false;
      p->lo = v;
      p->hi = hi;
      return true;
    default:
      return false;
  }
}

/* Whether d reads a value another candidate keeps inside (not its root). */
static bool reads_inside(const rt_cpu_dnnl *d, rt_cpu_dnnl *const *owner) {
  for (int k = 0; k < d->input_count; k++) {
    const rt_cpu_dnnl *o = owner[d->inputs[k]->id];
    if (o && o->root != d->inputs[k]) return true;
  }
  return false;
}

/* Counts of terms, inputs and members before post k, to take it back. */
typedef struct marks {
  int terms, inputs, members;
} marks;

static marks mark(const rt_cpu_dnnl *d) { return (marks){d->term_count, d->input_count, d->member_count}; }

static void take_back(rt_cpu_dnnl *d, marks m) {
  d->term_count = m.terms;
  d->input_count = m.inputs;
  d->member_count = m.members;
}

/* A new candidate for conv with the longest chain of absorbable users, or NULL. A chain
 * stops before an instruction another one took, and reads no value another one keeps
 * inside (both may end at one residual add: the first takes it). */
static rt_cpu_dnnl *candidate(const hlo_instr *conv, const users *u, rt_cpu_dnnl *const *owner, marks *before) {
  rt_cpu_dnnl *d = hlo_calloc(1, sizeof *d);
  if (!d) return NULL;
  d->conv = conv;
  d->weight_param = -1;
  const hlo_instr *x = conv;
  while (d->post_count < RT_DNNL_MAX_POSTS && u->count[x->id] == 1 && !u->result[x->id] && !owner[u->only[x->id]->id]) {
    before[d->post_count] = mark(d);
    if (!match_post(d, u->only[x->id], x, &d->posts[d->post_count]) || reads_inside(d, owner)) {
      take_back(d, before[d->post_count]);
      break;
    }
    x = u->only[x->id];
    d->post_count++;
  }
  d->root = x;
  return d;
}

/* Builds d row-major, shortening its chain until oneDNN takes it; false when it takes not
 * even the convolution alone. The probe's primitives are released. */
static bool probe(rt_cpu_dnnl *d, const marks *before) {
  for (;;) {
    d->blocked_out = false;
    if (rt_cpu_dnnl_build(d, NULL, NULL)) {
      rt_cpu_dnnl_release(d);
      return true;
    }
    if (d->post_count == 0) return false;
    d->post_count--;
    take_back(d, before[d->post_count]);
    d->root = d->post_count ? d->posts[d->post_count - 1].instr : d->conv;
  }
}

/* The dims of a [N, C, H, W] value as batch, feature and spatial: a convolution's input
 * (lhs) or output labels, or 0, 1, 2, 3 for a pool's or a concatenation's. */
static void labels(const hlo_instr *conv, bool input, int64_t *l) {
  const hlo_conv_dims *c = conv ? conv->conv : NULL;
  for (int j = 0; j < 4; j++) l[j] = j;
  if (!c) return;
  l[0] = input ? c->input_batch : c->output_batch;
  l[1] = input ? c->input_feature : c->output_feature;
  l[2] = input ? c->input_spatial[0] : c->output_spatial[0];
  l[3] = input ? c->input_spatial[1] : c->output_spatial[1];
}

/* Whether the reader takes d's blocked result with the dims d wrote it in: the same batch,
 * feature and spatial dims (a convolution whose lhs labels were folded from a transpose reads
 * the value with other dims). */
static bool same_labels(const rt_cpu_dnnl *d, const hlo_instr *conv, bool input) {
  int64_t wrote[4], read[4];
  labels(d->conv, false, wrote);
  labels(conv, input, read);
  return memcmp(wrote, read, sizeof wrote) == 0;
}

/* Whether user reads value r of d's as a DNNL step's source or residual. */
static bool reads_blocked(const rt_cpu_dnnl *d, rt_cpu_dnnl *const *owner, const hlo_instr *user, const hlo_instr *r) {
  const rt_cpu_dnnl *o = owner[user->id];
  if (!o) return false;
  if (o->pool) return user == o->pool && user->operands[0] == r && user->operands[1] != r && same_labels(d, NULL, true);
  if (o->concat) return user == o->concat && same_labels(d, NULL, true);
  if (user == o->conv) return user->operands[0] == r && user->operands[1] != r && same_labels(d, o->conv, true);
  for (int k = 0; k < o->post_count; k++)
    if (o->posts[k].instr == user)
      return o->posts[k].kind == RT_DNNL_ADD_FULL && o->inputs[o->posts[k].input] == r && same_labels(d, o->conv, false);
  return false;
}

/* How value x arrives: in its producer's layout when that is a DNNL step's blocked result. */
static const dnnl_memory_desc_t *arriving(rt_cpu_dnnl *const *at_root, const hlo_instr *x) {
  const rt_cpu_dnnl *p = at_root[x->id];
  return p && p->blocked_out ? &p->out_md : NULL;
}

/* Whether some operand of a concatenation arrives blocked. */
static bool some_arriving(rt_cpu_dnnl *const *at_root, const hlo_instr *concat) {
  for (int k = 0; k < concat->operand_count; k++)
    if (arriving(at_root, concat->operands[k])) return true;
  return false;
}

/* row_major[i]: result i was refused blocked (see demote). */
static void plan_layouts(rt_cpu_dnnl **at_root, rt_cpu_dnnl *const *owner, const hlo_comp *entry, const users *u,
                         const bool *row_major) {
  for (int i = 0; i < entry->instr_count; i++) {
    rt_cpu_dnnl *d = at_root[i];
    if (!d) continue;
    d->blocked_out = !row_major[i] && !u->result[i] && u->count[i] > 0 && (!d->pool || arriving(at_root, d->pool->operands[0])) &&
                     (!d->concat || some_arriving(at_root, d->concat));
    for (int j = i + 1; j < entry->instr_count && d->blocked_out; j++) {
      const hlo_instr *user = entry->instrs[j];
      for (int k = 0; k < user->operand_count && d->blocked_out; k++)
        if (user->operands[k] == d->root && !reads_blocked(d, owner, user, d->root)) d->blocked_out = false;
    }
    if (d->blocked_out && !hlo_choice("blocked_layout", d->root->name)) d->blocked_out = false;
  }
}

/* Builds every candidate in step order (a producer's layout is known before its readers');
 * -1 when all are built, else the index of the one that refused, all released. */
static int build_all(rt_cpu_dnnl **at_root, int n) {
  for (int i = 0; i < n; i++) {
    rt_cpu_dnnl *d = at_root[i];
    if (!d) continue;
    if (d->pool) { /* one reading a row-major value is left to the plain kernel (apply) */
      const dnnl_memory_desc_t *src = arriving(at_root, d->pool->operands[0]);
      d->block = 0;
      if (!src || rt_cpu_dnnl_build_pool(d, src)) continue;
      for (int j = 0; j < i; j++) rt_cpu_dnnl_release(at_root[j]);
      return i;
    }
    if (d->concat) { /* likewise one with no blocked operand */
      const dnnl_memory_desc_t *arrive[RT_DNNL_MAX_INPUTS] = {0};
      for (int k = 0; k < d->concat->operand_count; k++) arrive[k] = arriving(at_root, d->concat->operands[k]);
      d->block = 0;
      if (!some_arriving(at_root, d->concat) || rt_cpu_dnnl_build_concat(d, arrive)) continue;
      for (int j = 0; j < i; j++) rt_cpu_dnnl_release(at_root[j]);
      return i;
    }
    const dnnl_memory_desc_t *post_in[RT_DNNL_MAX_POSTS] = {0};
    for (int k = 0; k < d->post_count; k++)
      if (d->posts[k].kind == RT_DNNL_ADD_FULL) post_in[k] = arriving(at_root, d->inputs[d->posts[k].input]);
    if (!rt_cpu_dnnl_build(d, arriving(at_root, d->conv->operands[0]), post_in)) {
      for (int j = 0; j < i; j++) rt_cpu_dnnl_release(at_root[j]);
      return i;
    }
  }
  return -1;
}


/* After step i refused its layouts: its result is planned row-major if it was to be
 * blocked, else every operand it read blocked arrives row-major. False when neither
 * changes anything. */
static bool demote(rt_cpu_dnnl *const *at_root, int i, bool *row_major) {
  const rt_cpu_dnnl *d = at_root[i];
  if (d->blocked_out) return row_major[i] = true;
  bool changed = false;
  for (int k = 0; k < rt_cpu_dnnl_input_count(d); k++) {
    int from = rt_cpu_dnnl_input(d, k);
    if (at_root[from] && at_root[from]->blocked_out) changed = row_major[from] = true;
  }
  return changed;
}

/* Whether instruction j is absorbed into a DNNL step: an epilogue op, or a member of a
 * per-feature value already found unread elsewhere. */
static bool absorbed(const rt_cpu_plan *plan, rt_cpu_dnnl *const *owner, const bool *member, int j) {
  const hlo_instr *instr = plan->steps[j].instr;
  if (owner[j]) return owner[j]->conv && owner[j]->conv != instr; /* a pool or concatenation reads its operands */
  return member[j] && plan->steps[j].kind == RT_STEP_INSIDE;
}

/* Whether every user of x is absorbed (x is no result of the entry). */
static bool only_absorbed_users(const rt_cpu_plan *plan, rt_cpu_dnnl *const *owner, const bool *member,
                                const users *u, const hlo_instr *x) {
  if (u->result[x->id]) return false;
  for (int j = x->id + 1; j < plan->step_count; j++) {
    const hlo_instr *user = plan->steps[j].instr;
    for (int k = 0; k < user->operand_count; k++)
      if (user->operands[k] == x && !absorbed(plan, owner, member, j)) return false;
  }
  return true;
}

/* The DNNL step at each root; the convolution and the other epilogue ops become INSIDE, and
 * so do the members of per-feature values that nothing else reads (users last, so a member
 * read only by other such members follows them). */
static bool apply(rt_cpu_plan *plan, rt_cpu_dnnl **at_root, rt_cpu_dnnl *const *owner, const users *u) {
  int n = plan->step_count;
  bool *member = hlo_calloc((size_t)n + 1, sizeof(bool));
  if (!member) return false;
  for (int i = 0; i < n; i++) {
    rt_cpu_dnnl *d = at_root[i];
    if (!d || ((d->pool || d->concat) && !d->block)) continue; /* those stay the plain kernels' */
    if (d->conv) plan->steps[d->conv->id].kind = RT_STEP_INSIDE;
    for (int k = 0; k < d->post_count; k++) plan->steps[d->posts[k].instr->id].kind = RT_STEP_INSIDE;
    for (int k = 0; k < d->member_count; k++) member[d->members[k]->id] = true;
    rt_cpu_step *step = &plan->steps[i];
    *step = (rt_cpu_step){.instr = step->instr, .kind = RT_STEP_DNNL, .dnnl = d, .scratch_bytes = d->scratch_bytes,
                          .weight_param = -1, .weight_kept = -1};
    at_root[i] = NULL; /* the step owns it now */
    if (rt_cpu_dnnl_input_count(d) > plan->max_operands) plan->max_operands = rt_cpu_dnnl_input_count(d);
  }
  for (int j = n - 1; j >= 0; j--) {
    rt_cpu_step *step = &plan->steps[j];
    if (member[j] && step->kind == RT_STEP_FAST && only_absorbed_users(plan, owner, member, u, step->instr))
      step->kind = RT_STEP_INSIDE;
  }
  free(member);
  return true;
}

/* Whether some step is a convolution oneDNN takes: pools and concatenations go to oneDNN
 * only after one. */
static bool has_dnnl_conv(const rt_cpu_plan *plan) {
  for (int i = 0; i < plan->step_count; i++)
    if (plan->steps[i].kind == RT_STEP_FAST && rt_cpu_dnnl_conv_supported(plan->steps[i].instr)) return true;
  return false;
}

hlo_status rt_cpu_dnnl_plan(rt_cpu_plan *plan, const hlo_comp *entry, hlo_diag *diag) {
  if (!has_dnnl_conv(plan)) return HLO_OK;
  int n = plan->step_count;
  users u = {0};
  rt_cpu_dnnl **at_root = hlo_calloc((size_t)n + 1, sizeof *at_root), **owner = hlo_calloc((size_t)n + 1, sizeof *owner);
  bool ok = at_root && owner && find_users(entry, &u);
  for (int i = 0; i < n && ok; i++) {
    const hlo_instr *instr = plan->steps[i].instr;
    if (plan->steps[i].kind != RT_STEP_FAST) continue;
    if (rt_cpu_dnnl_pool_supported(instr)) { /* a pool of a DNNL step's result */
      if (!at_root[instr->operands[0]->id]) continue;
      rt_cpu_dnnl *d = hlo_calloc(1, sizeof *d);
      if (!(ok = d != NULL)) break;
      *d = (rt_cpu_dnnl){.pool = instr, .root = instr, .weight_param = -1};
      at_root[i] = owner[i] = d;
      continue;
    }
    if (rt_cpu_dnnl_concat_supported(instr)) { /* a concatenation of a DNNL step's result */
      bool fed = false;
      for (int k = 0; k < instr->operand_count; k++) fed = fed || at_root[instr->operands[k]->id];
      if (!fed) continue;
      rt_cpu_dnnl *d = hlo_calloc(1, sizeof *d);
      if (!(ok = d != NULL)) break;
      *d = (rt_cpu_dnnl){.concat = instr, .root = instr, .weight_param = -1};
      at_root[i] = owner[i] = d;
      continue;
    }
    if (!rt_cpu_dnnl_conv_supported(instr)) continue;
    marks before[RT_DNNL_MAX_POSTS];
    rt_cpu_dnnl *d = candidate(instr, &u, owner, before);
    ok = d != NULL;
    if (!ok || !probe(d, before)) {
      free(d);
      continue;
    }
    at_root[d->root->id] = owner[instr->id] = d;
    for (int k = 0; k < d->post_count; k++) owner[d->posts[k].instr->id] = d;
  }
  bool *row_major = ok ? hlo_calloc((size_t)n + 1, sizeof(bool)) : NULL;
  if ((ok = ok && row_major)) {
    int refused;
    do plan_layouts(at_root, owner, entry, &u, row_major);
    while ((refused = build_all(at_root, n)) >= 0 && demote(at_root, refused, row_major));
    if (refused >= 0) { /* nothing left to demote: row-major everywhere, as probed */
      for (int i = 0; i < n; i++)
        if (at_root[i]) at_root[i]->blocked_out = false;
      refused = build_all(at_root, n);
    }
    bool built = refused < 0;
    if (built) ok = apply(plan, at_root, owner, &u); /* else the existing kernels run them all */
  }
  for (int i = 0; i < n && at_root; i++) free(at_root[i]); /* none left when applied */
  free(at_root);
  free(owner);
  free(row_major);
  free_users(&u);
  return ok ? HLO_OK : hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory (or oneDNN failed) planning convolutions");
}

int rt_cpu_dnnl_input_count(const rt_cpu_dnnl *d) { return d->concat ? d->concat->operand_count : 2 + d->input_count; }

int rt_cpu_dnnl_input(const rt_cpu_dnnl *d, int k) {
  if (d->concat) return d->concat->operands[k]->id;
  const hlo_instr *first = d->conv ? d->conv : d->pool; /* a pool: its source and init value */
  return k < 2 ? first->operands[k]->id : d->inputs[k - 2]->id;
}

void rt_cpu_dnnl_free(rt_cpu_dnnl *d) {
  rt_cpu_dnnl_release(d);
  free(d);
}

int64_t rt_cpu_dnnl_out_bytes(const rt_cpu_dnnl *d) { return d->out_bytes; }

int64_t rt_cpu_dnnl_weights_bytes(const rt_cpu_dnnl *d) { return d->prims & RT_DNNL_HAS_WEIGHTS_REORDER ? d->weights_bytes : 0; }

int rt_cpu_dnnl_weights_operand(const rt_cpu_dnnl *d) { return d->conv->operands[1]->id; }
