/* sort: N arrays sorted together along one dimension by a comparator computation that takes
 * 2N scalars (lhs0, rhs0, lhs1, rhs1, ...) and says whether lhs goes before rhs.
 *
 * Always a stable merge sort: that satisfies is_stable=true and is a valid unstable sort too,
 * and it keeps results independent of the flag. A comparator that is a single LT/GT compare of
 * one operand's pair is run directly, without a computation call per comparison. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

enum { MAX_SORT_OPERANDS = 64 };

typedef enum order_kind { ORDER_FLOAT, ORDER_TOTAL, ORDER_SIGNED, ORDER_UNSIGNED } order_kind;

typedef struct sorter {
  rt_eval *eval;
  const hlo_instr *instr;
  rt_value *const *operands;
  int n;
  int64_t base, stride; /* row position p is flat index base + p * stride */
  bool fast;            /* the comparator is one compare: less(i, j) is key[i] < key[j] */
  int key;              /* which operand the fast comparator looks at */
  bool reversed;        /* fast: the order is descending */
  order_kind order;
  hlo_status status;
} sorter;

static bool fast_less(const sorter *s, int64_t a, int64_t b) {
  const rt_value *v = s->operands[s->key];
  if (s->reversed) {
    int64_t t = a;
    a = b;
    b = t;
  }
  switch (s->order) {
    case ORDER_FLOAT: return rt_get_f64(v, a) < rt_get_f64(v, b);
    case ORDER_TOTAL: return rt_total_order_key(v, a) < rt_total_order_key(v, b);
    case ORDER_UNSIGNED: return rt_get_u64(v, a) < rt_get_u64(v, b);
    default: return rt_get_i64(v, a) < rt_get_i64(v, b);
  }
}

/* Calls the comparator on the elements at flat indices a (lhs) and b (rhs). */
static bool call_less(sorter *s, int64_t a, int64_t b) {
  rt_value *scalars[2 * MAX_SORT_OPERANDS];
  bool ok = true;
  for (int k = 0; k < s->n; k++) {
    for (int side = 0; side < 2; side++) {
      rt_value *scalar = rt_value_new_array(s->operands[k]->shape.dtype, 0, NULL);
      if (scalar) rt_copy_element(scalar, 0, s->operands[k], side ? b : a);
      ok = ok && scalar;
      scalars[2 * k + side] = scalar;
    }
  }
  rt_value *result = NULL;
  if (!ok) s->status = rt_kernel_fail(s->eval, s->instr, HLO_ERR_INTERNAL, "out of memory");
  else s->status = rt_eval_comp(s->eval, s->instr->called[0], scalars, 2 * s->n, &result);
  for (int i = 0; i < 2 * s->n; i++) rt_value_release(scalars[i]);
  if (s->status != HLO_OK) return false;
  bool less = false;
  if (result->shape.dtype == HLO_TUPLE || result->count != 1)
    s->status = rt_kernel_fail(s->eval, s->instr, HLO_ERR_INPUT, "the comparator must return a scalar pred");
  else
    less = rt_get_i64(result, 0) != 0;
  rt_value_release(result);
  return less;
}

/* Whether row position i goes strictly before row position j. */
static bool less(sorter *s, int64_t i, int64_t j) {
  int64_t a = s->base + i * s->stride, b = s->base + j * s->stride;
  if (s->status != HLO_OK) return false;
  return s->fast ? fast_less(s, a, b) : call_less(s, a, b);
}

/* Stable: on a tie (right not less than left) the left run's element goes first. */
static void merge(sorter *s, const int64_t *from, int64_t *to, int64_t lo, int64_t mid, int64_t hi) {
  int64_t i = lo, j = mid, k = lo;
  while (i < mid && j < hi) to[k++] = less(s, from[j], from[i]) ? from[j++] : from[i++];
  while (i < mid) to[k++] = from[i++];
  while (j < hi) to[k++] = from[j++];
}

/* Bottom-up merge sort of the positions 0..len-1; the sorted order ends up in perm. */
static void merge_sort(sorter *s, int64_t *perm, int64_t *scratch, int64_t len) {
  int64_t *from = perm, *to = scratch;
  for (int64_t width = 1; width < len && s->status == HLO_OK; width *= 2) {
    for (int64_t lo = 0; lo < len; lo += 2 * width) {
      int64_t mid = lo + width < len ? lo + width : len;
      int64_t hi = lo + 2 * width < len ? lo + 2 * width : len;
      merge(s, from, to, lo, mid, hi);
    }
    int64_t *swap = from;
    from = to;
    to = swap;
  }
  if (from != perm) memcpy(perm, from, sizeof(int64_t) * (size_t)len);
}

/* Recognises compare(param 2k, param 2k+1) with LT or GT (either operand order), whose
 * comparison type fits the operand's element type. */
static void classify_comparator(sorter *s, const hlo_comp *comp) {
  s->fast = false;
  const hlo_instr *root = comp->root;
  if (comp->param_count != 2 * s->n || !root || root->opcode != HLO_OP_COMPARE || root->operand_count != 2)
    return;
  const hlo_instr *lhs = root->operands[0], *rhs = root->operands[1];
  if (lhs->opcode != HLO_OP_PARAMETER || rhs->opcode != HLO_OP_PARAMETER) return;
  int64_t p = lhs->parameter_number, q = rhs->parameter_number;
  if (p / 2 != q / 2 || p == q) return;
  if (root->direction != HLO_DIR_LT && root->direction != HLO_DIR_GT) return;
  s->key = (int)(p / 2);
  hlo_dtype dtype = s->operands[s->key]->shape.dtype;
  hlo_compare_type type = root->compare_type;
  if (hlo_dtype_is_float(dtype)) {
    if (type == HLO_CMP_TOTALORDER) s->order = ORDER_TOTAL;
    else if (type == HLO_CMP_DEFAULT || type == HLO_CMP_FLOAT) s->order = ORDER_FLOAT;
    else return;
  } else if (hlo_dtype_is_unsigned(dtype) || dtype == HLO_PRED) {
    if (type == HLO_CMP_SIGNED || type == HLO_CMP_FLOAT) return;
    s->order = ORDER_UNSIGNED;
  } else {
    if (type == HLO_CMP_UNSIGNED || type == HLO_CMP_FLOAT) return;
    s->order = ORDER_SIGNED;
  }
  bool swapped = p > q; /* compare(rhs, lhs) */
  s->reversed = (root->direction == HLO_DIR_GT) != swapped;
  s->fast = true;
}

static const char *check_sort_args(const hlo_instr *instr, rt_value *const *args, int64_t *dimension) {
  int n = instr->operand_count;
  if (n < 1 || n > MAX_SORT_OPERANDS) return "needs 1 to 64 operands";
  if (instr->called_count < 1) return "has no comparator";
  if (n == 1 ? hlo_shape_is_tuple(&instr->shape) && instr->shape.tuple_count != 1
             : !hlo_shape_is_tuple(&instr->shape) || instr->shape.tuple_count != n)
    return "result shape does not match the number of operands";
  const hlo_shape *first = &args[0]->shape;
  for (int i = 0; i < n; i++) {
    if (args[i]->shape.dtype == HLO_TUPLE) return "operands must be arrays";
    if (args[i]->shape.rank != first->rank) return "operands differ in rank";
    for (int d = 0; d < first->rank; d++)
      if (args[i]->shape.dims[d] != first->dims[d]) return "operands differ in shape";
  }
  *dimension = instr->dimensions.count > 0 ? instr->dimensions.values[0] : first->rank - 1;
  if (first->rank > 0 && (*dimension < 0 || *dimension >= first->rank)) return "sort dimension out of range";
  return NULL;
}

/* Sorts every row along the dimension, writing the permuted elements into outputs. */
static hlo_status sort_rows(sorter *s, int64_t dimension, rt_value **outputs) {
  const hlo_shape *shape = &s->operands[0]->shape;
  int64_t len = shape->rank > 0 ? shape->dims[dimension] : 1, stride = 1;
  for (int d = (int)dimension + 1; d < shape->rank; d++) stride *= shape->dims[d];
  s->stride = stride;
  int64_t count = s->operands[0]->count;
  if (count == 0) return HLO_OK;
  int64_t *perm = hlo_malloc(sizeof(int64_t) * (size_t)len * 2);
  if (!perm) return rt_kernel_fail(s->eval, s->instr, HLO_ERR_INTERNAL, "out of memory");
  int64_t outer = count / (len * stride);
  for (int64_t o = 0; o < outer && s->status == HLO_OK; o++) {
    for (int64_t k = 0; k < stride && s->status == HLO_OK; k++) {
      s->base = o * len * stride + k;
      for (int64_t p = 0; p < len; p++) perm[p] = p;
      merge_sort(s, perm, perm + len, len);
      for (int i = 0; i < s->n; i++)
        for (int64_t p = 0; p < len; p++) {
          int64_t from = s->base + perm[p] * stride, to = s->base + p * stride;
          if (outputs[i]->shape.dtype == s->operands[i]->shape.dtype)
            rt_copy_element(outputs[i], to, s->operands[i], from);
          else if (hlo_dtype_is_float(outputs[i]->shape.dtype))
            rt_set_f64(outputs[i], to, rt_get_f64(s->operands[i], from));
          else
            rt_set_i64(outputs[i], to, rt_get_i64(s->operands[i], from));
        }
    }
  }
  free(perm);
  return s->status;
}

RT_KERNEL(rt_kernel_sort) {
  int64_t dimension = 0;
  const char *why = check_sort_args(instr, args, &dimension);
  if (why) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", why);
  int n = instr->operand_count;
  bool tuple = hlo_shape_is_tuple(&instr->shape);
  rt_value *outputs[MAX_SORT_OPERANDS] = {0};
  hlo_status status = HLO_OK;
  for (int i = 0; i < n && status == HLO_OK; i++) {
    outputs[i] = rt_new_output(eval, instr, tuple ? &instr->shape.tuple[i] : &instr->shape);
    if (!outputs[i]) status = eval->diag->status;
    else if (outputs[i]->count != args[i]->count)
      status = rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "result %d differs in size from its operand", i);
  }
  sorter s = {.eval = eval, .instr = instr, .operands = args, .n = n, .status = HLO_OK};
  if (status == HLO_OK) {
    classify_comparator(&s, instr->called[0]);
    status = sort_rows(&s, dimension, outputs);
  }
  if (status == HLO_OK && !tuple) {
    *out = outputs[0];
    return HLO_OK;
  }
  if (status == HLO_OK) {
    *out = rt_value_new_tuple(n, outputs);
    if (*out) return HLO_OK;
    status = rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
  }
  for (int i = 0; i < n; i++) rt_value_release(outputs[i]);
  return status;
}
