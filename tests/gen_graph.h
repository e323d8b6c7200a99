/* Random graphs for minifier tests: a DAG of elementwise ops, transposes, reductions and
 * broadcasts over two shapes, with exactly one instruction of a culprit opcode (that no
 * other instruction uses) at a random place, or two of two culprit opcodes (gen_graph_pair:
 * at two random places, or the second fed by the first); every value nothing uses, and the
 * culprits', make up the output tuple. */
#ifndef LATCH_GEN_GRAPH_H
#define LATCH_GEN_GRAPH_H
#include <stdint.h>
#include <stdlib.h>

#include "hlo/hlo.h"
#include "rng_util.h"

typedef struct gen_pool {
  hlo_instr **items;
  int count;
} gen_pool;

/* A recent value: graphs get deep rather than wide, as real ones are. */
static inline hlo_instr *gen_pick(rng *r, const gen_pool *pool) {
  int window = pool->count < 24 ? pool->count : 24;
  return pool->items[pool->count - 1 - pick(r, window)];
}

/* Whether the op made at position made is a culprit's. */
static inline bool gen_slot(const int *positions, int made) {
  return made == positions[0] || made == positions[1];
}

/* The output tuple's elements: every value nothing uses, and (culprits_out) each culprit's. */
static inline int gen_outputs(hlo_comp *e, hlo_instr **all, int all_count, const hlo_opcode *culprits,
                              bool culprits_out) {
  int outputs = 0;
  for (int i = 0; i < all_count; i++) {
    bool used = false;
    for (int j = i + 1; j < all_count && !used; j++)
      for (int k = 0; k < all[j]->operand_count; k++) used |= all[j]->operands[k] == all[i];
    if (!used) all[outputs++] = all[i];
  }
  /* A culprit's own value is an output too: an accuracy fault that later ops happen to hide
   * (a minimum, a saturated tanh) would leave nothing to minify. */
  for (int c = 0; c < 2 && culprits_out; c++) {
    hlo_instr *culprit_instr = NULL;
    for (int i = 0; i < e->instr_count; i++)
      if (e->instrs[i]->opcode == culprits[c]) culprit_instr = e->instrs[i];
    bool listed = false;
    for (int i = 0; i < outputs; i++) listed |= all[i] == culprit_instr;
    if (culprit_instr && !listed) all[outputs++] = culprit_instr;
  }
  return outputs;
}

/* The general form: culprits[1] is HLO_OP_COUNT for one culprit; chained puts the second
 * right after the first, fed by it; culprits_out makes each culprit's value an output, else
 * it is one only when nothing uses it (a culprit that feeds other ops, which may hide its
 * error). positions[] gets the culprits' positions. */
static inline hlo_module *gen_graph_culprits(uint64_t seed, int ops, const hlo_opcode *culprits, bool chained,
                                             bool culprits_out, int *positions) {
  rng r = {seed * 7919 + 1};
  hlo_diag d = {HLO_OK, ""};
  hlo_module *m = hlo_module_new("generated");
  hlo_comp *sum = hlo_build_scalar_reducer(m, HLO_OP_ADD, HLO_F32);
  hlo_comp *e = hlo_build_computation(m, "main", true);
  int64_t da[2] = {4, 8}, db[2] = {8, 4}, dr[1] = {4}, perm[2] = {1, 0}, keep0[1] = {0}, reduce1[1] = {1};
  hlo_shape sa = hlo_shape_make(HLO_F32, 2, da), sb = hlo_shape_make(HLO_F32, 2, db);
  hlo_instr **items = calloc((size_t)(2 * ops + 64), sizeof *items);
  hlo_instr **all = calloc((size_t)(4 * ops + 64), sizeof *all);
  gen_pool a = {items, 0}, b = {items + ops + 32, 0};
  int all_count = 0, made = 0;
  for (int i = 0; i < 6; i++) {
    hlo_instr *p = hlo_build_parameter(e, i, i < 4 ? &sa : &sb, NULL, &d);
    (i < 4 ? &a : &b)->items[(i < 4 ? &a : &b)->count++] = p;
  }
  hlo_instr *zero = hlo_build_constant_scalar(e, HLO_F32, 0, &d);
  positions[0] = 1 + pick(&r, ops - 2);
  positions[1] = -1;
  if (culprits[1] != HLO_OP_COUNT) {
    if (chained) {
      if (positions[0] > ops - 3) positions[0] = ops - 3;
      positions[1] = positions[0] + 1;
    } else {
      do positions[1] = 1 + pick(&r, ops - 2);
      while (positions[1] == positions[0]);
    }
  }
  hlo_instr *first_culprit = NULL;
  gen_pool *first_pool = NULL;
  static const hlo_opcode unary[] = {HLO_OP_TANH, HLO_OP_NEGATE, HLO_OP_ABS, HLO_OP_LOGISTIC};
  static const hlo_opcode binary[] = {HLO_OP_ADD, HLO_OP_MULTIPLY, HLO_OP_SUBTRACT, HLO_OP_MAXIMUM, HLO_OP_MINIMUM};
  while (made < ops) {
    bool in_a = b.count == 0 || pick(&r, 3) != 0;
    gen_pool *pool = in_a ? &a : &b, *other = in_a ? &b : &a;
    if (made == positions[1] && chained) pool = first_pool; /* same shape as its operand */
    hlo_instr *x = gen_pick(&r, pool), *y = NULL;
    /* A chained pair reads a parameter: values deep in the graph may have overflowed to inf
     * and NaN, where an accuracy error cannot be seen. */
    if (made == positions[0] && chained) x = pool->items[0];
    int kind = pick(&r, 10);
    if (made == positions[0]) {
      y = first_culprit = hlo_build_unary(e, culprits[0], x, &d);
      first_pool = pool;
    } else if (made == positions[1]) {
      y = hlo_build_unary(e, culprits[1], chained ? first_culprit : x, &d);
    } else if (kind < 3) {
      y = hlo_build_unary(e, unary[pick(&r, 4)], x, &d);
    } else if (kind < 8) {
      y = hlo_build_binary(e, binary[pick(&r, 5)], x, gen_pick(&r, pool), &d);
      /* Squash half of them: products and sums of products would otherwise grow until f32
       * and f64 disagree wildly and no accuracy check can see anything. */
      if (y && made + 1 < ops && !gen_slot(positions, made + 1) && pick(&r, 2) == 0) {
        all[all_count++] = y;
        made++;
        y = hlo_build_unary(e, HLO_OP_TANH, y, &d);
      }
    } else if (kind == 8) {
      y = hlo_build_transpose(e, x, perm, &d);
      pool = other;
    } else if (in_a && made + 2 < ops && !gen_slot(positions, made + 2) && !gen_slot(positions, made + 1)) {
      /* reduce over the minor dim and broadcast back: a called computation and two ops */
      hlo_instr *reduced = hlo_build_reduce(e, x, zero, 1, reduce1, sum, &d);
      all[all_count++] = reduced;
      made++;
      y = hlo_build_broadcast(e, reduced, 2, da, keep0, &d);
      (void)dr;
    } else {
      y = hlo_build_unary(e, HLO_OP_TANH, x, &d);
    }
    if (!y) break;
    pool->items[pool->count++] = y;
    all[all_count++] = y;
    made++;
  }
  /* Every value nothing uses becomes an output, so nothing is dead. */
  int outputs = gen_outputs(e, all, all_count, culprits, culprits_out);
  hlo_instr *root = hlo_build_tuple(e, outputs, all, &d);
  if (root) hlo_comp_set_root(e, root, &d);
  free(items);
  free(all);
  if (!root || d.status != HLO_OK) {
    hlo_module_free(m);
    return NULL;
  }
  return m;
}

/* A module with ops instructions besides parameters and constants, the culprit at a random
 * position among them; *culprit_position gets that position. */
static inline hlo_module *gen_graph(uint64_t seed, int ops, hlo_opcode culprit, int *culprit_position) {
  hlo_opcode culprits[2] = {culprit, HLO_OP_COUNT};
  int positions[2];
  hlo_module *m = gen_graph_culprits(seed, ops, culprits, false, true, positions);
  *culprit_position = positions[0];
  return m;
}

/* Two culprits: first and second at random places, or (chained) the second fed by the first;
 * with culprits_out their values are outputs, else they feed other ops. */
static inline hlo_module *gen_graph_pair(uint64_t seed, int ops, hlo_opcode first, hlo_opcode second, bool chained,
                                         bool culprits_out) {
  hlo_opcode culprits[2] = {first, second};
  int positions[2];
  return gen_graph_culprits(seed, ops, culprits, chained, culprits_out, positions);
}

/* Seeded inputs for every parameter of the entry. */
static inline rt_value **gen_inputs(const hlo_module *m, uint64_t seed) {
  const hlo_comp *e = m->entry;
  rt_value **inputs = calloc((size_t)e->param_count + 1, sizeof *inputs);
  hlo_diag d = {HLO_OK, ""};
  for (int i = 0; i < e->param_count; i++) inputs[i] = rt_random_value(&e->params[i]->shape, seed, (uint64_t)i, &d);
  return inputs;
}

static inline void gen_free_inputs(rt_value **inputs, int count) {
  for (int i = 0; i < count; i++) rt_value_release(inputs[i]);
  free(inputs);
}

#endif
