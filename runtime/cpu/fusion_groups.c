/* Elementwise fusion in the cpu plan: which steps form a group, and each group's program.
 *
 * A group is a maximal set of f32 elementwise steps (and reshapes between them, and a last
 * convert to bf16 or pred) in which
 * every member but the last has all its users inside the group, and is no result of the
 * entry: so no one else needs a member's value and it never has to exist in memory. A member
 * read twice (GELU reads its input twice: x / 2 and erf(x / sqrt 2)) is computed once per
 * tile and its tile kept until its last reader; so a product whose result GELU reads takes
 * GELU as its epilogue. The
 * last member (the root) becomes a FUSED step that reads the group's inputs and runs the
 * program per tile; the others become INSIDE steps that do nothing and take no buffer.
 * Operands from outside are loads: linear, or through a broadcast folded into the load's
 * index ((i / inner) % period covers scalars, rows and columns: broadcasts whose operand
 * dims are one run of the result's), or scalar constants as immediates. A broadcast whose
 * every user folded it becomes INSIDE as well.
 *
 * Groups are found walking the entry backwards, so a member joins its user's group, which
 * already exists. Everything here depends on the module's shapes only. */
#include <stdlib.h>
#include <string.h>

#include "fusion_internal.h"
#include "runtime/reference/reference.h"

enum { MAX_REGS = FUSION_MAX_REGS };

static bool plain_array(const hlo_shape *shape, hlo_dtype dtype) {
  return hlo_shape_is_array(shape) && shape->dtype == dtype && hlo_shape_is_default_layout(shape);
}

bool rt_cpu_fusion_binary(hlo_opcode op) {
  switch (op) {
    case HLO_OP_ADD: case HLO_OP_SUBTRACT: case HLO_OP_MULTIPLY: case HLO_OP_DIVIDE:
    case HLO_OP_MAXIMUM: case HLO_OP_MINIMUM:
      return true;
    default:
      return false;
  }
}

static bool is_view_op(hlo_opcode op) { return op == HLO_OP_RESHAPE || op == HLO_OP_BITCAST || op == HLO_OP_COPY; }

static hlo_dtype operand_type(const hlo_instr *instr, int k) { return instr->operands[k]->shape.dtype; }

/* Whether the step may be a group member. Fast elementwise steps were picked only with
 * operands in the result's dims (or scalars), so only element types are checked here. */
static bool fusible(const rt_cpu_step *step) {
  const hlo_instr *instr = step->instr;
  hlo_opcode op = instr->opcode;
  if (step->kind == RT_STEP_ALIAS)
    return is_view_op(op) && (plain_array(&instr->shape, HLO_F32) || plain_array(&instr->shape, HLO_PRED));
  if (step->kind != RT_STEP_FAST) return false;
  bool f32_out = plain_array(&instr->shape, HLO_F32);
  if (rt_cpu_float_unary(op)) return f32_out && operand_type(instr, 0) == HLO_F32;
  if (rt_cpu_fusion_binary(op)) return f32_out && operand_type(instr, 0) == HLO_F32 && operand_type(instr, 1) == HLO_F32;
  switch (op) {
    case HLO_OP_COMPARE:
      return plain_array(&instr->shape, HLO_PRED) && operand_type(instr, 0) == HLO_F32 &&
             operand_type(instr, 1) == HLO_F32 &&
             (instr->compare_type == HLO_CMP_DEFAULT || instr->compare_type == HLO_CMP_FLOAT);
    case HLO_OP_SELECT:
      return f32_out && operand_type(instr, 0) == HLO_PRED;
    case HLO_OP_CLAMP:
      return f32_out;
    case HLO_OP_CONVERT: {
      hlo_dtype from = operand_type(instr, 0);
      if (f32_out) return from == HLO_F32 || from == HLO_PRED || from == HLO_S32;
      /* to bf16: rounded as the group's result is stored (no f32 op reads bf16, so it is the
       * root), an activation made ready for a bf16 product in the pass that computes it */
      return (plain_array(&instr->shape, HLO_PRED) || plain_array(&instr->shape, HLO_BF16)) && from == HLO_F32;
    }
    default:
      return false;
  }
}

/* The users of each step, counted once per using instruction, and the entry's results. */
typedef struct uses {
  int *count;
  int *last_user;
  int *folded; /* broadcasts: users that folded them into a load */
  bool *result;
} uses;

static bool count_uses(const rt_cpu_plan *plan, const hlo_comp *entry, uses *u) {
  int n = plan->step_count;
  u->count = hlo_calloc((size_t)n + 1, sizeof(int));
  u->last_user = hlo_calloc((size_t)n + 1, sizeof(int));
  u->folded = hlo_calloc((size_t)n + 1, sizeof(int));
  u->result = hlo_calloc((size_t)n + 1, sizeof(bool));
  if (!u->count || !u->last_user || !u->folded || !u->result) return false;
  for (int i = 0; i < n; i++) {
    const hlo_instr *instr = plan->steps[i].instr;
    for (int k = 0; k < instr->operand_count; k++) {
      bool again = false;
      for (int e = 0; e < k; e++) again = again || instr->operands[e] == instr->operands[k];
      if (again) continue;
      u->count[instr->operands[k]->id]++;
      u->last_user[instr->operands[k]->id] = i;
    }
  }
  u->result[entry->root->id] = true;
  if (entry->root->opcode == HLO_OP_TUPLE)
    for (int k = 0; k < entry->root->operand_count; k++) u->result[entry->root->operands[k]->id] = true;
  return true;
}

static void free_uses(uses *u) {
  free(u->count);
  free(u->last_user);
  free(u->folded);
  free(u->result);
}

/* group[i]: the id of the root of step i's group, or -1. users_group[i] (scratch): the group
 * every user of step i is in, -1 when they are in different ones or one is in none, -2
 * before any user is seen; users come after i, so all are seen when i is. */
static void find_groups(const rt_cpu_plan *plan, const uses *u, int *group, int *size, int *users_group) {
  for (int i = 0; i < plan->step_count; i++) users_group[i] = -2;
  for (int i = plan->step_count - 1; i >= 0; i--) {
    group[i] = -1;
    const rt_cpu_step *step = &plan->steps[i];
    int joined = users_group[i];
    if (fusible(step)) {
      bool joins = joined >= 0 && !u->result[i] && size[joined] < FUSION_MAX_MEMBERS;
      if (joins) {
        group[i] = joined;
        size[joined]++;
      } else if (step->kind != RT_STEP_ALIAS) { /* a view alone computes nothing */
        group[i] = i;
        size[i] = 1;
      }
    }
    const hlo_instr *instr = step->instr;
    for (int k = 0; k < instr->operand_count; k++) {
      int o = instr->operands[k]->id;
      users_group[o] = users_group[o] == -2 || users_group[o] == group[i] ? group[i] : -1;
    }
  }
}

/* ---- one group's program ---- */

typedef struct builder {
  const rt_cpu_plan *plan;
  const int *group;
  int root;
  rt_cpu_fusion *f;
  int *reg_of;    /* per instruction id: its register in this group, valid where stamp == root */
  int *stamp;
  int folds_of[MAX_REGS]; /* the broadcasts this group folded into loads, counted when it is applied */
  int fold_count;
  const uses *uses;
  bool folds;     /* some load goes through a broadcast or is an immediate */
  bool failed;
  /* where programs are built, in room for the largest; a program that is kept gets copies
   * of its own size (most groups tried are not kept, and allocating the room for each was
   * a fifth of planning a small graph) */
  fusion_instr instr_room[MAX_REGS];
  int input_room[MAX_REGS];
} builder;

static int add_instr(builder *b, fusion_instr instr) {
  rt_cpu_fusion *f = b->f;
  if (f->instr_count >= MAX_REGS || f->reg_count >= MAX_REGS) {
    b->failed = true;
    return 0;
  }
  instr.dst = f->reg_count++;
  f->instrs[f->instr_count++] = instr;
  return instr.dst;
}

static int input_index(builder *b, int id) {
  rt_cpu_fusion *f = b->f;
  for (int k = 0; k < f->input_count; k++)
    if (f->inputs[k] == id) return k;
  f->inputs[f->input_count] = id;
  return f->input_count++;
}

static bool loadable_type(hlo_dtype t) { return t == HLO_F32 || t == HLO_PRED || t == HLO_S32; }

static bool scalar_f32_constant(const rt_cpu_step *step) {
  const hlo_instr *instr = step->instr;
  return step->kind == RT_STEP_CONST && plain_array(&instr->shape, HLO_F32) && hlo_shape_elements(&instr->shape) == 1;
}

/* A broadcast folds into a load when its operand's dims are one run of its result's dims,
 * in order: then element i of the result reads element (i / inner) % period. */
static bool broadcast_mapping(const hlo_instr *bcast, int64_t *inner, int64_t *period) {
  const hlo_shape *out = &bcast->shape, *in = &bcast->operands[0]->shape;
  if (!hlo_shape_is_array(in) || !hlo_shape_is_default_layout(in) || bcast->dimensions.count != in->rank) return false;
  int first = in->rank ? (int)bcast->dimensions.values[0] : out->rank;
  *period = 1;
  for (int d = 0; d < in->rank; d++) {
    if (bcast->dimensions.values[d] != first + d || in->dims[d] != out->dims[first + d]) return false;
    *period *= in->dims[d];
  }
  *inner = 1;
  for (int d = first + in->rank; d < out->rank; d++) *inner *= out->dims[d];
  if (*period == 0 || *inner == 0) *period = *inner = 1; /* an empty result reads nothing */
  return true;
}

static int load_constant(builder *b, const hlo_instr *constant) {
  b->folds = true;
  return add_instr(b, (fusion_instr){.code = FU_IMM, .imm = *(const float *)constant->literal->data});
}

static bool leading(const hlo_ints *dims, int count) {
  if (dims->count != count) return false;
  for (int d = 0; d < count; d++)
    if (dims->values[d] != d) return false;
  return true;
}

const hlo_instr *rt_cpu_fusion_weight_broadcast(const hlo_instr *dot) {
  if (dot->opcode != HLO_OP_DOT || !dot->dot || dot->operand_count != 2 || !plain_array(&dot->shape, HLO_F32))
    return NULL;
  const hlo_dot_dims *dd = dot->dot;
  const hlo_instr *lhs = dot->operands[0], *rhs = dot->operands[1];
  int nb = dd->lhs_batch.count;
  if (nb < 1 || !leading(&dd->lhs_batch, nb) || !leading(&dd->rhs_batch, nb) || dd->lhs_contracting.count != 1 ||
      dd->rhs_contracting.count != 1 || !plain_array(&lhs->shape, HLO_F32) || lhs->shape.rank != nb + 2 ||
      dd->lhs_contracting.values[0] != nb + 1 || lhs->shape.dims[nb + 1] == 0)
    return NULL;
  if (rhs->opcode != HLO_OP_BROADCAST || rhs->operand_count != 1 ||
      rhs->shape.rank != nb + 2 || rhs->dimensions.count != 2 || rhs->dimensions.values[0] != nb ||
      rhs->dimensions.values[1] != nb + 1 || !plain_array(&rhs->operands[0]->shape, HLO_F32) ||
      !hlo_shape_is_default_layout(&rhs->shape))
    return NULL;
  return rhs;
}

/* The batched matmul of [batch..., m, k] by a [k, n] (or [n, k]) weight broadcast along the
 * batch dims, the broadcast a step of its own: the broadcast operand when dot is one, else
 * NULL. Row-major, that product is the plain [batch * m, k] x weight one, so the weight need
 * not be copied batch times. */
static const hlo_instr *shared_weight(const rt_cpu_plan *plan, const hlo_instr *dot) {
  const hlo_instr *rhs = rt_cpu_fusion_weight_broadcast(dot);
  return rhs && plan->steps[rhs->id].kind == RT_STEP_FAST ? rhs : NULL;
}

void rt_cpu_fusion_flat_head(rt_cpu_fusion *f, const hlo_instr *weight) {
  const hlo_instr *dot = f->head;
  int nb = dot->dot->lhs_batch.count;
  f->flat = true;
  f->flat_rows = hlo_shape_elements(&dot->operands[0]->shape) / dot->operands[0]->shape.dims[nb + 1]; /* k > 0 */
  f->flat_contracting[0] = 1;
  f->flat_contracting[1] = dot->dot->rhs_contracting.values[0] - nb;
  f->flat_dims = (hlo_dot_dims){.lhs_contracting = {1, &f->flat_contracting[0]}, .rhs_contracting = {1, &f->flat_contracting[1]}};
  /* the dot kernel sizes its work from the operand instructions: flat ones to match */
  int64_t lhs_flat[2] = {f->flat_rows, dot->operands[0]->shape.dims[nb + 1]};
  int64_t out_flat[2] = {f->flat_rows, dot->shape.dims[dot->shape.rank - 1]};
  f->flat_operands[0] = *dot->operands[0];
  f->flat_operands[0].shape = hlo_shape_make(HLO_F32, 2, lhs_flat);
  f->flat_operands[1] = *weight;
  f->flat_operand_list[0] = &f->flat_operands[0];
  f->flat_operand_list[1] = &f->flat_operands[1];
  f->flat_instr = *dot;
  f->flat_instr.dot = &f->flat_dims;
  f->flat_instr.operands = f->flat_operand_list;
  f->flat_instr.operand_count = 2;
  f->flat_instr.shape = hlo_shape_make(HLO_F32, 2, out_flat);
}

/* Makes f's dot head read the weight under its broadcast: one plain matmul. */
static void flatten_head(builder *b, rt_cpu_fusion *f, const hlo_instr *bcast) {
  f->head_args[1] = input_index(b, bcast->operands[0]->id);
  rt_cpu_fusion_flat_head(f, bcast->operands[0]);
  f->head_scratch_bytes = 0;
  if (!rt_cpu_pick_dot_scratch(&f->flat_instr, &f->head_scratch_bytes)) b->failed = true;
  if (b->fold_count < MAX_REGS) b->folds_of[b->fold_count++] = bcast->id;
}

/* A dot or convolution the group may run itself, as its head: an f32 result in its own
 * buffer that only this group reads. */
static bool can_be_head(const builder *b, const rt_cpu_step *step) {
  if (b->f->tail) return false; /* the output is the reduce's, too small to hold a product */
  const hlo_instr *instr = step->instr;
  bool product = instr->opcode == HLO_OP_DOT || instr->opcode == HLO_OP_CONVOLUTION;
  return product && step->kind == RT_STEP_FAST && step->fast_scratch && !b->f->head && b->f->out_dtype == HLO_F32 &&
         instr->operand_count == 2 && plain_array(&instr->shape, HLO_F32) &&
         hlo_shape_elements(&instr->shape) == b->f->count && b->uses->count[instr->id] == 1 &&
         !b->uses->result[instr->id];
}

/* The register of operand o of a member, which is no member of this group. */
static int load(builder *b, const hlo_instr *o) {
  if (b->stamp[o->id] == b->root) return b->reg_of[o->id];
  const rt_cpu_step *step = &b->plan->steps[o->id];
  int reg;
  int64_t inner, period;
  if (can_be_head(b, step)) {
    rt_cpu_fusion *f = b->f;
    f->head = o;
    f->head_kernel = step->fast_scratch;
    f->head_scratch_bytes = step->scratch_bytes;
    f->head_args[0] = input_index(b, o->operands[0]->id);
    const hlo_instr *weight = shared_weight(b->plan, o);
    if (weight) flatten_head(b, f, weight);
    else f->head_args[1] = input_index(b, o->operands[1]->id);
    b->folds = true;
    reg = add_instr(b, (fusion_instr){.code = FU_LOAD, .input = -1, .dtype = HLO_F32, .linear = true});
  } else if (scalar_f32_constant(step)) {
    reg = load_constant(b, o);
  } else if (o->opcode == HLO_OP_BROADCAST && o->operand_count == 1 && loadable_type(o->shape.dtype) &&
             broadcast_mapping(o, &inner, &period)) {
    const hlo_instr *x = o->operands[0];
    if (scalar_f32_constant(&b->plan->steps[x->id])) {
      reg = load_constant(b, x);
    } else {
      b->folds = true;
      reg = add_instr(b, (fusion_instr){.code = FU_LOAD, .input = input_index(b, x->id), .dtype = x->shape.dtype,
                                        .inner = inner, .period = period});
    }
    if (b->fold_count < MAX_REGS) b->folds_of[b->fold_count++] = o->id;
  } else {
    int64_t count = hlo_shape_elements(&o->shape);
    if (!hlo_shape_is_array(&o->shape) || !loadable_type(o->shape.dtype) || (count != b->f->count && count != 1)) {
      b->failed = true;
      return 0;
    }
    bool linear = count == b->f->count;
    reg = add_instr(b, (fusion_instr){.code = FU_LOAD, .input = input_index(b, o->id), .dtype = o->shape.dtype,
                                      .linear = linear, .inner = 1, .period = 1});
  }
  b->stamp[o->id] = b->root;
  b->reg_of[o->id] = reg;
  return reg;
}

/* Emits member m after its operands (post-order), returning its register. */
static int emit(builder *b, const hlo_instr *m) {
  if (b->stamp[m->id] == b->root) return b->reg_of[m->id];
  int r[3] = {0, 0, 0};
  for (int k = 0; k < m->operand_count && k < 3 && !b->failed; k++) {
    const hlo_instr *o = m->operands[k];
    r[k] = b->group[o->id] == b->root ? emit(b, o) : load(b, o);
  }
  hlo_opcode op = m->opcode;
  int reg;
  if (is_view_op(op)) {
    reg = r[0]; /* same elements in the same order */
  } else if (op == HLO_OP_CONVERT) {
    /* to pred tests; from pred (0/1), s32 (converted by its load) or f32 it is the value (to
     * bf16 too: the store rounds it) */
    reg = m->shape.dtype == HLO_PRED ? add_instr(b, (fusion_instr){.code = FU_NONZERO, .a = r[0]}) : r[0];
  } else if (op == HLO_OP_COMPARE) {
    reg = add_instr(b, (fusion_instr){.code = FU_COMPARE, .dir = m->direction, .a = r[0], .b = r[1]});
  } else if (op == HLO_OP_SELECT) {
    reg = add_instr(b, (fusion_instr){.code = FU_SELECT, .a = r[0], .b = r[1], .c = r[2]});
  } else if (op == HLO_OP_CLAMP) {
    reg = add_instr(b, (fusion_instr){.code = FU_CLAMP, .a = r[0], .b = r[1], .c = r[2]});
  } else if (rt_cpu_fusion_binary(op)) {
    reg = add_instr(b, (fusion_instr){.code = FU_BINARY, .op = op, .a = r[0], .b = r[1]});
  } else {
    reg = add_instr(b, (fusion_instr){.code = FU_UNARY, .op = op, .a = r[0]});
  }
  b->stamp[m->id] = b->root;
  b->reg_of[m->id] = reg;
  b->f->members++;
  return reg;
}

static int operand_regs(const fusion_instr *in, int *regs) {
  switch (in->code) {
    case FU_LOAD: case FU_IMM: return 0;
    case FU_UNARY: case FU_NONZERO: regs[0] = in->a; return 1;
    case FU_BINARY: case FU_COMPARE: regs[0] = in->a; regs[1] = in->b; return 2;
    default: regs[0] = in->a; regs[1] = in->b; regs[2] = in->c; return 3;
  }
}

/* Stack tiles by liveness: a register's tile is free after its last reader, which may
 * write into it (elementwise: element j is read before it is written). false when the
 * program needs more tiles than a worker's stack holds. */
static bool assign_tiles(rt_cpu_fusion *f) {
  int last[MAX_REGS], tile_of[MAX_REGS];
  bool busy[FUSION_MAX_TILES] = {false};
  for (int r = 0; r < f->reg_count; r++) last[r] = -1, tile_of[r] = -1;
  for (int k = 0; k < f->instr_count; k++) {
    int regs[3], n = operand_regs(&f->instrs[k], regs);
    for (int i = 0; i < n; i++) last[regs[i]] = k;
  }
  last[f->result] = f->instr_count;
  f->tiles = 0;
  for (int k = 0; k < f->instr_count; k++) {
    fusion_instr *in = &f->instrs[k];
    int regs[3], n = operand_regs(in, regs);
    for (int i = 0; i < n; i++)
      if (last[regs[i]] == k && tile_of[regs[i]] >= 0) busy[tile_of[regs[i]]] = false;
    in->tile = -1;
    if (in->code == FU_LOAD && in->linear && in->dtype == HLO_F32) continue; /* a view of the input */
    int t = 0;
    while (t < FUSION_MAX_TILES && busy[t]) t++;
    if (t == FUSION_MAX_TILES) return false;
    busy[t] = true;
    in->tile = tile_of[in->dst] = t;
    if (t + 1 > f->tiles) f->tiles = t + 1;
  }
  return true;
}

const hlo_instr *rt_cpu_fusion_dot_head(const rt_cpu_fusion *fusion) {
  if (!fusion || !fusion->head || fusion->flat || !rt_cpu_is_dot_kernel(fusion->head_kernel)) return NULL;
  return fusion->head;
}

void rt_cpu_fusion_free(rt_cpu_fusion *fusion) {
  if (!fusion) return;
  free(fusion->inputs);
  free(fusion->instrs);
  free(fusion);
}

/* The reduce that may absorb the group rooted at root: its one user, an f32 reduce with a
 * simple reducer over the innermost dims (each output one contiguous run), or a sum whose
 * kept dims sit between reduced ones (rt_cpu_reduce_middle: the group's values are then
 * [outer, kept, inner], which fusion_run.c reads from the sizes), or NULL. */
static const hlo_instr *reduce_tail(const rt_cpu_plan *plan, const uses *u, int root, hlo_opcode *reducer,
                                    int64_t *inner) {
  const hlo_instr *x = plan->steps[root].instr;
  if (u->count[root] != 1 || u->result[root] || !plain_array(&x->shape, HLO_F32)) return NULL;
  const rt_cpu_step *step = &plan->steps[u->last_user[root]];
  const hlo_instr *r = step->instr;
  if (r->opcode != HLO_OP_REDUCE || step->kind != RT_STEP_FAST || r->operand_count != 2 || r->operands[0] != x ||
      r->operands[1] == x || !plain_array(&r->shape, HLO_F32) || r->called_count != 1)
    return NULL;
  *reducer = hlo_simple_reducer(r->called[0]);
  if (*reducer != HLO_OP_ADD && *reducer != HLO_OP_MULTIPLY && *reducer != HLO_OP_MAXIMUM &&
      *reducer != HLO_OP_MINIMUM)
    return NULL;
  bool reduced[HLO_MAX_RANK] = {false}, seen_kept = false;
  for (int k = 0; k < r->dimensions.count; k++) reduced[r->dimensions.values[k]] = true;
  int64_t outer, kept, run = 1;
  for (int d = x->shape.rank - 1; d >= 0; d--) {
    if (reduced[d] && seen_kept && x->shape.dims[d] != 1) { /* not innermost */
      bool middle = *reducer == HLO_OP_ADD && hlo_shape_elements(&x->shape) > 0 &&
                    rt_cpu_reduce_middle(&x->shape, reduced, &outer, &kept, inner);
      return middle ? r : NULL; /* else the kernel walks it */
    }
    if (reduced[d]) run *= x->shape.dims[d];
    else seen_kept = true;
  }
  *inner = run;
  return r;
}

/* The program of the group rooted at step root, or NULL when it cannot be one or would gain
 * nothing over the plain kernel (one op without folded loads). *oom on allocation failure. */
static rt_cpu_fusion *build_program(builder *b, int root, int size, bool *oom) {
  const hlo_instr *instr = b->plan->steps[root].instr;
  rt_cpu_fusion *f = hlo_calloc(1, sizeof *f);
  if (!f) {
    *oom = true;
    return NULL;
  }
  f->inputs = b->input_room;
  f->instrs = b->instr_room;
  f->count = hlo_shape_elements(&instr->shape);
  f->out_dtype = instr->shape.dtype;
  b->root = root;
  b->f = f;
  b->folds = false;
  b->failed = false;
  b->fold_count = 0;
  f->tail = reduce_tail(b->plan, b->uses, root, &f->reducer, &f->inner);
  if (f->tail) f->tail_init = input_index(b, f->tail->operands[1]->id);
  f->result = emit(b, instr);
  bool worth = size >= 2 || b->folds || f->tail;
  bool kept = !b->failed && worth && assign_tiles(f);
  fusion_instr *instrs = kept ? hlo_malloc(sizeof(fusion_instr) * (size_t)(f->instr_count + 1)) : NULL;
  int *inputs = kept ? hlo_malloc(sizeof(int) * (size_t)(f->input_count + 1)) : NULL;
  if (kept && instrs && inputs) {
    memcpy(instrs, f->instrs, sizeof(fusion_instr) * (size_t)f->instr_count);
    memcpy(inputs, f->inputs, sizeof(int) * (size_t)f->input_count);
  }
  f->instrs = instrs;
  f->inputs = inputs;
  if (kept && (!instrs || !inputs)) *oom = true;
  if (!kept || *oom) {
    rt_cpu_fusion_free(f);
    return NULL;
  }
  return f;
}

/* A group of a dot alone, run flat on its shared weight: its program only names the result. */
static rt_cpu_fusion *head_only(builder *b, int id, const hlo_instr *weight, bool *oom) {
  const hlo_instr *dot = b->plan->steps[id].instr;
  rt_cpu_fusion *f = hlo_calloc(1, sizeof *f);
  if (f) {
    f->inputs = hlo_malloc(sizeof(int) * 4);
    f->instrs = hlo_malloc(sizeof(fusion_instr) * 2);
  }
  if (!f || !f->inputs || !f->instrs) {
    rt_cpu_fusion_free(f);
    *oom = true;
    return NULL;
  }
  f->count = hlo_shape_elements(&dot->shape);
  f->out_dtype = HLO_F32;
  f->head = dot;
  f->head_kernel = b->plan->steps[id].fast_scratch;
  b->f = f;
  b->fold_count = 0;
  f->head_args[0] = input_index(b, dot->operands[0]->id);
  b->failed = false;
  flatten_head(b, f, weight);
  if (b->failed) { /* the flat product is no dot the kernel takes: the dot stays as it was */
    rt_cpu_fusion_free(f);
    return NULL;
  }
  f->instrs[0] = (fusion_instr){.code = FU_LOAD, .input = -1, .dtype = HLO_F32, .linear = true, .tile = -1};
  f->instr_count = f->reg_count = 1;
  f->members = 1;
  return f;
}

/* Turns the group rooted at root into one FUSED step and counts the broadcasts it folded;
 * its other members are made INSIDE by the caller, all groups' in one pass. */
static void apply(rt_cpu_plan *plan, int root, rt_cpu_fusion *f, const builder *b, int *folded) {
  for (int k = 0; k < b->fold_count; k++) folded[b->folds_of[k]]++;
  if (f->head && f->head->id != root) plan->steps[f->head->id].kind = RT_STEP_INSIDE;
  if (f->tail) { /* the group's value is never stored: the reduce's step runs the group */
    plan->steps[root].kind = RT_STEP_INSIDE;
    root = f->tail->id;
  }
  rt_cpu_step *step = &plan->steps[root];
  step->kind = RT_STEP_FUSED;
  step->fusion = f;
  step->fast_scratch = NULL;
  step->scratch_bytes = f->head ? f->head_scratch_bytes : 0;
  if (f->input_count > plan->max_operands) plan->max_operands = f->input_count;
}

/* A broadcast that only adds dims of size 1 (a weight seen as [1, k, n] for a batched
 * matmul) keeps its operand's bytes in order: a view serves, where a copy would cross the
 * whole tensor on every execute. */
static bool bitcast_broadcast(const rt_cpu_step *step) {
  const hlo_instr *instr = step->instr;
  if (instr->opcode != HLO_OP_BROADCAST || step->kind != RT_STEP_FAST || instr->operand_count != 1) return false;
  const hlo_shape *in = &instr->operands[0]->shape, *out = &instr->shape;
  if (!hlo_shape_is_array(in) || in->dtype != out->dtype || !hlo_shape_is_default_layout(in) ||
      !hlo_shape_is_default_layout(out) || hlo_shape_elements(in) != hlo_shape_elements(out) ||
      instr->dimensions.count != in->rank)
    return false;
  for (int d = 1; d < in->rank; d++)
    if (instr->dimensions.values[d] <= instr->dimensions.values[d - 1]) return false;
  return true;
}

hlo_status rt_cpu_fuse(rt_cpu_plan *plan, const hlo_comp *entry, hlo_diag *diag) {
  int n = plan->step_count;
  for (int i = 0; i < n; i++)
    if (bitcast_broadcast(&plan->steps[i])) plan->steps[i].kind = RT_STEP_ALIAS;
  uses u;
  int *group = hlo_malloc(sizeof(int) * ((size_t)n + 1)), *size = hlo_calloc((size_t)n + 1, sizeof(int));
  int *reg_of = hlo_malloc(sizeof(int) * ((size_t)n + 1)), *stamp = hlo_malloc(sizeof(int) * ((size_t)n + 1));
  bool oom = !count_uses(plan, entry, &u) || !group || !size || !reg_of || !stamp;
  if (!oom) {
    for (int i = 0; i < n; i++) stamp[i] = -1;
    find_groups(plan, &u, group, size, stamp); /* stamp serves as its scratch until here */
    for (int i = 0; i < n; i++) stamp[i] = -1;
    builder *b = hlo_calloc(1, sizeof *b);
    oom = !b;
    if (b) *b = (builder){.plan = plan, .group = group, .reg_of = reg_of, .stamp = stamp, .uses = &u};
    for (int root = 0; root < n && !oom; root++) {
      if (group[root] != root) continue;
      if (size[root] > 1 && !hlo_choice("fusion", plan->steps[root].instr->name)) {
        size[root] = 0; /* refused: its members stay steps of their own */
        continue;
      }
      rt_cpu_fusion *f = build_program(b, root, size[root], &oom);
      if (f) apply(plan, root, f, b, u.folded);
      else size[root] = 0; /* its members stay steps of their own */
    }
    /* members become INSIDE only now: a member's users are all in its own group, so no
     * other group's build looked at its step */
    for (int i = 0; i < n && !oom; i++)
      if (group[i] >= 0 && group[i] != i && size[group[i]] > 0) plan->steps[i].kind = RT_STEP_INSIDE;
    /* dots with a shared weight that no group took as its head: a group of their own */
    for (int i = 0; i < n && !oom && b; i++) {
      const rt_cpu_step *step = &plan->steps[i];
      const hlo_instr *weight = step->kind == RT_STEP_FAST && step->fast_scratch ? shared_weight(plan, step->instr) : NULL;
      if (!weight || !hlo_choice("fusion", step->instr->name)) continue;
      rt_cpu_fusion *f = head_only(b, i, weight, &oom);
      if (f) apply(plan, i, f, b, u.folded);
    }
    free(b);
    /* a broadcast every user folded is never read */
    for (int i = 0; i < n && !oom; i++)
      if (u.folded[i] > 0 && u.folded[i] == u.count[i] && !u.result[i]) plan->steps[i].kind = RT_STEP_INSIDE;
  }
  free_uses(&u);
  free(group);
  free(size);
  free(reg_of);
  free(stamp);
  if (oom) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory fusing");
  return HLO_OK;
}

int rt_cpu_step_input_count(const rt_cpu_step *step) {
  if (step->kind == RT_STEP_INSIDE) return 0;
  if (step->kind == RT_STEP_FUSED) return step->fusion->input_count;
  if (step->kind == RT_STEP_DNNL) return rt_cpu_dnnl_input_count(step->dnnl);
  if (step->kind == RT_STEP_ATTENTION) return step->attention->input_count;
  return step->instr->operand_count;
}

int rt_cpu_step_input(const rt_cpu_step *step, int k) {
  if (step->kind == RT_STEP_DNNL) return rt_cpu_dnnl_input(step->dnnl, k);
  if (step->kind == RT_STEP_ATTENTION) return step->attention->inputs[k];
  return step->kind == RT_STEP_FUSED ? step->fusion->inputs[k] : step->instr->operands[k]->id;
}
