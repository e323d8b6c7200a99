/* reduce: N inputs reduced together along some dimensions by a computation taking 2N scalars
 * (N accumulators, then N input elements) and returning N of them (a scalar when N = 1).
 *
 * Order, as in XLA's evaluator: every output starts from the init values and takes its
 * input elements in row-major order of the reduced dimensions. Walking the whole input once
 * in row-major order and folding each element into its output gives exactly that order,
 * and reads memory sequentially.
 *
 * A reducer that is one add, multiply, maximum, minimum, and or or of its two parameters is
 * run inline (plain loops for f32 and f64); any other computation is called per element on
 * scalar values. This file also holds those two pieces for reduce-window and
 * select-and-scatter (kernels_window.c). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

/* maximum and minimum as every backend computes them (runtime.h): NaN wins, -0 < +0. */
#define DEFINE_FLOAT_OPS(T, S)                                                             \
  static inline T op_##S(hlo_opcode op, T a, T b) {                                        \
    switch (op) {                                                                          \
      case HLO_OP_ADD: return a + b;                                                       \
      case HLO_OP_MULTIPLY: return a * b;                                                  \
      case HLO_OP_MAXIMUM: return rt_max_##S(a, b);                                        \
      default: return rt_min_##S(a, b);                                                    \
    }                                                                                      \
  }

DEFINE_FLOAT_OPS(float, f32)
DEFINE_FLOAT_OPS(double, f64)

/* Integers as rt_get_i64 reads them (sign- or zero-extended); add and multiply wrap when
 * stored back. pred's 0/1 values make add and maximum an or, multiply and minimum an and. */
static int64_t op_int(hlo_opcode op, int64_t a, int64_t b, bool is_signed) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
    case HLO_OP_ADD: return (int64_t)(ua + ub);
    case HLO_OP_MULTIPLY: return (int64_t)(ua * ub);
    case HLO_OP_MAXIMUM: return is_signed ? (a >= b ? a : b) : (ua >= ub ? a : b);
    case HLO_OP_MINIMUM: return is_signed ? (a <= b ? a : b) : (ua <= ub ? a : b);
    case HLO_OP_AND: return (int64_t)(ua & ub);
    default: return (int64_t)(ua | ub);
  }
}

void rt_reduce_step(hlo_opcode op, rt_value *acc, int64_t a, const rt_value *x, int64_t b) {
  hlo_dtype dtype = acc->shape.dtype;
  if (dtype == HLO_F32) {
    float *d = acc->data;
    d[a] = op_f32(op, d[a], ((const float *)x->data)[b]);
  } else if (dtype == HLO_F64) {
    double *d = acc->data;
    d[a] = op_f64(op, d[a], ((const double *)x->data)[b]);
  } else if (hlo_dtype_is_float(dtype)) {
    /* f16 and bf16: exact in double, one rounding back, as the elementwise kernels get by
     * way of float (float and double both hold these sums and products exactly enough) */
    rt_set_f64(acc, a, op_f64(op, rt_get_f64(acc, a), rt_get_f64(x, b)));
  } else {
    rt_set_i64(acc, a, op_int(op, rt_get_i64(acc, a), rt_get_i64(x, b), hlo_dtype_is_signed(dtype)));
  }
}

hlo_status rt_call_on_scalars(rt_eval *eval, const hlo_comp *comp, rt_value **scratch,
                              const rt_value *const *values, const int64_t *indices, int count,
                              rt_value **result) {
  *result = NULL;
  for (int k = 0; k < count; k++) {
    rt_value *s = scratch[k];
    hlo_dtype dtype = values[k]->shape.dtype;
    /* a scalar still held by someone (a result that returned a parameter) is not reused */
    if (!s || s->refcount > 1 || s->shape.dtype != dtype) {
      rt_value_release(s);
      s = scratch[k] = rt_value_new_array(dtype, 0, NULL);
      if (!s) return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory calling %s", comp->name);
    }
    rt_copy_element(s, 0, values[k], indices[k]);
  }
  return rt_eval_comp(eval, comp, scratch, count, result);
}

/* ---------------------------------------------------------------------------------------
 * reduce */

enum { MAX_REDUCE_INPUTS = 64 };

/* The input seen as few dimensions as possible: neighbours that are both reduced or both
 * kept merge. out_strides[d] is the dimension's stride in the output, 0 when reduced. */
typedef struct reduce_walk {
  int rank;
  int64_t dims[HLO_MAX_RANK], out_strides[HLO_MAX_RANK];
} reduce_walk;

static reduce_walk plan_walk(const hlo_shape *in, const bool *reduced) {
  int64_t out_strides[HLO_MAX_RANK], stride = 1;
  for (int d = in->rank - 1; d >= 0; d--) {
    out_strides[d] = reduced[d] ? 0 : stride;
    if (!reduced[d]) stride *= in->dims[d];
  }
  reduce_walk w = {0};
  for (int d = 0; d < in->rank; d++) {
    if (in->dims[d] == 1) continue;
    if (w.rank > 0 && (out_strides[d] == 0) == (w.out_strides[w.rank - 1] == 0)) {
      w.dims[w.rank - 1] *= in->dims[d];
      w.out_strides[w.rank - 1] = out_strides[d];
      continue;
    }
    w.dims[w.rank] = in->dims[d];
    w.out_strides[w.rank] = out_strides[d];
    w.rank++;
  }
  return w;
}

/* What a row visitor needs: the reduce's values and how to combine. */
typedef struct reduce_job {
  rt_eval *eval;
  const hlo_instr *instr;
  int n;                 /* inputs */
  rt_value *const *inputs;
  rt_value **outputs;
  hlo_opcode op;         /* simple reducer, or HLO_OP_COUNT to call to_apply */
  rt_value **scratch;    /* 2n reusable scalars for the calls */
} reduce_job;

/* One row of the input: n elements from flat index `at`, folding into the outputs at out_at,
 * out_at + step, ... (step 0: all into one). */
#define DEFINE_ROW(T, S)                                                                   \
  static void row_##S(hlo_opcode op, T *out, const T *x, int64_t out_at, int64_t n, int64_t step) { \
    if (step == 0) {                                                                       \
      T acc = out[out_at];                                                                 \
      switch (op) {                                                                        \
        case HLO_OP_ADD: for (int64_t j = 0; j < n; j++) acc = acc + x[j]; break;          \
        case HLO_OP_MULTIPLY: for (int64_t j = 0; j < n; j++) acc = acc * x[j]; break;     \
        case HLO_OP_MAXIMUM: for (int64_t j = 0; j < n; j++) acc = rt_max_##S(acc, x[j]); break; \
        default: for (int64_t j = 0; j < n; j++) acc = rt_min_##S(acc, x[j]); break;          \
      }                                                                                    \
      out[out_at] = acc;                                                                   \
      return;                                                                              \
    }                                                                                      \
    for (int64_t j = 0; j < n; j++) out[out_at + j * step] = op_##S(op, out[out_at + j * step], x[j]); \
  }

DEFINE_ROW(float, f32)
DEFINE_ROW(double, f64)

static hlo_status call_row(reduce_job *job, int64_t at, int64_t out_at, int64_t n, int64_t step) {
  const rt_value *values[2 * MAX_REDUCE_INPUTS];
  int64_t indices[2 * MAX_REDUCE_INPUTS];
  for (int k = 0; k < job->n; k++) {
    values[k] = job->outputs[k];
    values[job->n + k] = job->inputs[k];
  }
  for (int64_t j = 0; j < n; j++) {
    for (int k = 0; k < job->n; k++) {
      indices[k] = out_at + j * step;
      indices[job->n + k] = at + j;
    }
    rt_value *result = NULL;
    hlo_status status = rt_call_on_scalars(job->eval, job->instr->called[0], job->scratch, values,
                                           indices, 2 * job->n, &result);
    if (status != HLO_OK) return status;
    bool is_tuple = result->shape.dtype == HLO_TUPLE;
    if ((is_tuple ? result->tuple_count : 1) != job->n) {
      rt_value_release(result);
      return rt_kernel_fail(job->eval, job->instr, HLO_ERR_INPUT, "to_apply must return %d values", job->n);
    }
    for (int k = 0; k < job->n; k++) {
      const rt_value *element = is_tuple ? result->tuple[k] : result;
      if (element->shape.dtype != job->outputs[k]->shape.dtype || element->count != 1) {
        rt_value_release(result);
        return rt_kernel_fail(job->eval, job->instr, HLO_ERR_INPUT,
                    "to_apply must return scalars of the inputs' element types");
      }
      rt_copy_element(job->outputs[k], out_at + j * step, element, 0);
    }
    rt_value_release(result);
  }
  return HLO_OK;
}

static hlo_status fold_row(reduce_job *job, int64_t at, int64_t out_at, int64_t n, int64_t step) {
  if (job->op == HLO_OP_COUNT) return call_row(job, at, out_at, n, step);
  rt_value *out = job->outputs[0];
  const rt_value *in = job->inputs[0];
  if (out->shape.dtype == HLO_F32)
    row_f32(job->op, out->data, (const float *)in->data + at, out_at, n, step);
  else if (out->shape.dtype == HLO_F64)
    row_f64(job->op, out->data, (const double *)in->data + at, out_at, n, step);
  else
    for (int64_t j = 0; j < n; j++) rt_reduce_step(job->op, out, out_at + j * step, in, at + j);
  return HLO_OK;
}

/* Rows of the last merged dimension, in row-major order. */
static hlo_status walk(const reduce_walk *w, int64_t count, reduce_job *job) {
  if (count == 0) return HLO_OK;
  if (w->rank == 0) return fold_row(job, 0, 0, 1, 0);
  int last = w->rank - 1;
  int64_t n = w->dims[last], step = w->out_strides[last];
  int64_t coords[HLO_MAX_RANK] = {0}, out_at = 0;
  for (int64_t at = 0; at < count; at += n) {
    hlo_status status = fold_row(job, at, out_at, n, step);
    if (status != HLO_OK) return status;
    for (int d = last - 1; d >= 0; d--) {
      out_at += w->out_strides[d];
      if (++coords[d] < w->dims[d]) break;
      out_at -= w->out_strides[d] * w->dims[d];
      coords[d] = 0;
    }
  }
  return HLO_OK;
}

const char *rt_reduce_check_operands(const hlo_instr *instr, rt_value *const *args, int n) {
  if (instr->called_count < 1) return "no to_apply computation";
  const hlo_shape *in = &args[0]->shape;
  for (int k = 0; k < 2 * n; k++)
    if (args[k]->shape.dtype == HLO_TUPLE) return "operands must be arrays";
  for (int k = 0; k < n; k++) {
    const hlo_shape *other = &args[k]->shape;
    bool same = other->rank == in->rank;
    for (int d = 0; same && d < in->rank; d++) same = other->dims[d] == in->dims[d];
    if (!same) return "inputs have different dimensions";
    if (args[n + k]->shape.rank != 0) return "init values must be scalars";
    if (args[n + k]->shape.dtype != other->dtype) return "an init value's type differs from its input's";
  }
  bool window = instr->opcode == HLO_OP_REDUCE_WINDOW;
  if (n > 1 && (instr->shape.dtype != HLO_TUPLE || instr->shape.tuple_count != n))
    return window ? "a reduce-window of several inputs returns a tuple of as many arrays"
                  : "a reduce of several inputs returns a tuple of as many arrays";
  if (n == 1 && instr->shape.dtype == HLO_TUPLE && instr->shape.tuple_count != 1)
    return window ? "a reduce-window of one input returns one array" : "a reduce of one input returns one array";
  return NULL;
}

static const char *check_reduce(const hlo_instr *instr, rt_value *const *args, int n, bool *reduced) {
  const char *error = rt_reduce_check_operands(instr, args, n);
  if (error) return error;
  const hlo_shape *in = &args[0]->shape;
  for (int d = 0; d < in->rank; d++) reduced[d] = false;
  for (int i = 0; i < instr->dimensions.count; i++) {
    int64_t d = instr->dimensions.values[i];
    if (d < 0 || d >= in->rank || reduced[d]) return "bad dimensions";
    reduced[d] = true;
  }
  for (int k = 0; k < n; k++) {
    const hlo_shape *out = instr->shape.dtype == HLO_TUPLE ? &instr->shape.tuple[k] : &instr->shape;
    int rank = 0;
    bool same = true;
    for (int d = 0; d < in->rank; d++)
      if (!reduced[d]) same = same && rank < out->rank && out->dims[rank++] == in->dims[d];
    if (!same || rank != out->rank) return "the result dimensions are not the kept input dimensions";
  }
  return NULL;
}

const hlo_shape *rt_reduce_declared(const hlo_instr *instr, int k) {
  return instr->shape.dtype == HLO_TUPLE ? &instr->shape.tuple[k] : &instr->shape;
}

rt_value *rt_reduce_output(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, int n, int k) {
  rt_value *output = rt_new_output(eval, instr, rt_reduce_declared(instr, k));
  if (!output) return NULL;
  if (output->shape.dtype != args[k]->shape.dtype) {
    rt_value_release(output);
    rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "result %d's type differs from its input's", k);
    return NULL;
  }
  for (int64_t i = 0; i < output->count; i++) rt_copy_element(output, i, args[n + k], 0);
  return output;
}

hlo_opcode rt_fast_reducer(rt_eval *eval, const hlo_instr *instr, int n, const rt_value *output) {
  hlo_opcode op = n == 1 ? hlo_simple_reducer(instr->called[0]) : HLO_OP_COUNT;
  if (op != HLO_OP_COUNT && rt_storage_dtype(eval, instr->called[0]->root->shape.dtype) != output->shape.dtype)
    op = HLO_OP_COUNT; /* a mistyped reducer: let the call report it */
  return op;
}

static void release_all(rt_value **values, int count) {
  for (int k = 0; k < count; k++) rt_value_release(values[k]);
}

RT_KERNEL(rt_kernel_reduce) {
  int n = instr->operand_count / 2;
  if (instr->operand_count < 2 || instr->operand_count % 2 || n > MAX_REDUCE_INPUTS)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "needs N inputs and N init values (N <= %d)", MAX_REDUCE_INPUTS);
  bool reduced[HLO_MAX_RANK];
  const char *error = check_reduce(instr, args, n, reduced);
  if (error) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", error);
  rt_value *outputs[MAX_REDUCE_INPUTS] = {0};
  rt_value *scratch[2 * MAX_REDUCE_INPUTS] = {0};
  hlo_status status = HLO_OK;
  for (int k = 0; k < n && status == HLO_OK; k++)
    if (!(outputs[k] = rt_reduce_output(eval, instr, args, n, k))) status = eval->diag->status;
  if (status == HLO_OK) {
    hlo_opcode op = rt_fast_reducer(eval, instr, n, outputs[0]);
    reduce_job job = {eval, instr, n, args, outputs, op, scratch};
    reduce_walk w = plan_walk(&args[0]->shape, reduced);
    status = walk(&w, args[0]->count, &job);
  }
  release_all(scratch, 2 * n);
  if (status != HLO_OK) {
    release_all(outputs, n);
    return status;
  }
  *out = n == 1 && instr->shape.dtype != HLO_TUPLE ? outputs[0] : rt_value_new_tuple(n, outputs);
  if (!*out) {
    release_all(outputs, n);
    return rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
  }
  return HLO_OK;
}
