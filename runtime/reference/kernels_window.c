/* reduce-window and select-and-scatter: reductions over sliding windows.
 *
 * Both see the operand through a window with size, stride, low/high padding (negative
 * crops), base dilation (lhs_dilate) and window dilation (rhs_dilate). Each dimension gets a
 * table saying which operand coordinate tap k of the window at output position p reads, or
 * -1 when it falls into padding or a dilation hole; such taps are skipped, which is what
 * reducing with padding filled by the init value amounts to, and how XLA's evaluator does it.
 *
 * Windows are visited in row-major order of the outputs (the source, for select-and-scatter)
 * and each window in row-major order of its taps, folding into values that start from the
 * init value: the order of XLA's evaluator. Simple reducers and a select that is one
 * comparison of its parameters run inline (kernels_reduce.c); other computations are called
 * per element on scalars. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "reference.h"

enum { MAX_WINDOW_INPUTS = 64 };

/* ---------------------------------------------------------------------------------------
 * Windows */

typedef struct window_dim {
  int64_t in, size, out; /* operand size, window size, number of windows */
  int64_t in_stride;     /* of this dimension in the operand */
  int64_t *source;       /* [out * size]: operand coordinate read by tap k at position p, or -1 */
} window_dim;

typedef struct window_plan {
  int rank;
  window_dim dims[HLO_MAX_RANK];
  int64_t outputs, taps; /* windows in all, taps per window */
} window_plan;

static void free_window(window_plan *p) {
  for (int d = 0; d < p->rank; d++) free(p->dims[d].source);
}

/* Sizes as XLA's shape inference gives them, and the tap table of one dimension. */
static const char *plan_window_dim(const hlo_window_dim *w, int64_t in, window_dim *d) {
  if (w->size < 0 || w->stride < 1 || w->lhs_dilate < 1 || w->rhs_dilate < 1)
    return "window sizes must not be negative, strides and dilations must be positive";
  int64_t dilated_in = in == 0 ? 0 : (in - 1) * w->lhs_dilate + 1;
  int64_t padded = w->pad_low + dilated_in + w->pad_high;
  int64_t dilated_window = w->size == 0 ? 0 : (w->size - 1) * w->rhs_dilate + 1;
  *d = (window_dim){.in = in, .size = w->size};
  d->out = padded < dilated_window || padded < 0 ? 0 : (padded - dilated_window) / w->stride + 1;
  d->source = hlo_malloc((size_t)(d->out * d->size + 1) * sizeof(int64_t));
  if (!d->source) return "out of memory";
  for (int64_t p = 0; p < d->out; p++)
    for (int64_t k = 0; k < d->size; k++) {
      int64_t at = p * w->stride + k * w->rhs_dilate - w->pad_low;
      bool real = at >= 0 && at < dilated_in && at % w->lhs_dilate == 0;
      d->source[p * d->size + k] = real ? at / w->lhs_dilate : -1;
    }
  return NULL;
}

static const char *plan_window(const hlo_window *window, const hlo_shape *in, window_plan *p) {
  *p = (window_plan){.rank = in->rank, .outputs = 1, .taps = 1};
  if (!window || window->rank != in->rank) {
    p->rank = 0;
    return "the window rank must be the operand rank";
  }
  int64_t stride = 1;
  for (int d = in->rank - 1; d >= 0; d--) {
    const char *error = plan_window_dim(&window->dims[d], in->dims[d], &p->dims[d]);
    if (error) {
      for (int e = d + 1; e < in->rank; e++) free(p->dims[e].source);
      p->rank = 0;
      return error;
    }
    p->dims[d].in_stride = stride;
    stride *= in->dims[d];
    p->outputs *= p->dims[d].out;
    p->taps *= p->dims[d].size;
  }
  return NULL;
}

static bool window_shape_matches(const window_plan *p, const hlo_shape *shape) {
  if (shape->dtype == HLO_TUPLE || shape->rank != p->rank) return false;
  for (int d = 0; d < p->rank; d++)
    if (shape->dims[d] != p->dims[d].out) return false;
  return true;
}

/* The operand flat indices the window at `pos` reads, in row-major tap order, skipping
 * padding and holes; returns how many. */
static int64_t window_offsets(const window_plan *p, const int64_t *pos, int64_t *offsets) {
  if (p->taps == 0) return 0;
  int64_t tap[HLO_MAX_RANK] = {0}, count = 0;
  for (;;) {
    int64_t offset = 0;
    for (int d = 0; d < p->rank && offset >= 0; d++) {
      int64_t at = p->dims[d].source[pos[d] * p->dims[d].size + tap[d]];
      offset = at < 0 ? -1 : offset + at * p->dims[d].in_stride;
    }
    if (offset >= 0) offsets[count++] = offset;
    int d = p->rank - 1;
    for (; d >= 0; d--) {
      if (++tap[d] < p->dims[d].size) break;
      tap[d] = 0;
    }
    if (d < 0) return count;
  }
}

static void next_position(const window_plan *p, int64_t *pos) {
  for (int d = p->rank - 1; d >= 0; d--) {
    if (++pos[d] < p->dims[d].out) return;
    pos[d] = 0;
  }
}

/* ---------------------------------------------------------------------------------------
 * reduce-window */

typedef struct fold_job {
  rt_eval *eval;
  const hlo_instr *instr;
  int n;
  rt_value *const *inputs;
  rt_value **outputs;
  rt_value **scratch; /* 2n reusable scalars */
} fold_job;

/* outputs[k][o] = to_apply(outputs[..][o], inputs[..][at]) for one operand element. */
static hlo_status fold_call(fold_job *job, int64_t o, int64_t at) {
  const rt_value *values[2 * MAX_WINDOW_INPUTS];
  int64_t indices[2 * MAX_WINDOW_INPUTS];
  int n = job->n;
  for (int k = 0; k < n; k++) {
    values[k] = job->outputs[k];
    values[n + k] = job->inputs[k];
    indices[k] = o;
    indices[n + k] = at;
  }
  rt_value *result = NULL;
  hlo_status status = rt_call_on_scalars(job->eval, job->instr->called[0], job->scratch, values,
                                         indices, 2 * n, &result);
  if (status != HLO_OK) return status;
  bool is_tuple = result->shape.dtype == HLO_TUPLE;
  if ((is_tuple ? result->tuple_count : 1) != n)
    status = rt_kernel_fail(job->eval, job->instr, HLO_ERR_INPUT, "to_apply must return %d values", n);
  for (int k = 0; status == HLO_OK && k < n; k++) {
    const rt_value *element = is_tuple ? result->tuple[k] : result;
    if (element->shape.dtype != job->outputs[k]->shape.dtype || element->count != 1)
      status = rt_kernel_fail(job->eval, job->instr, HLO_ERR_INPUT,
                    "to_apply must return scalars of the inputs' element types");
    else
      rt_copy_element(job->outputs[k], o, element, 0);
  }
  rt_value_release(result);
  return status;
}

static void release_all(rt_value **values, int count) {
  for (int k = 0; k < count; k++) rt_value_release(values[k]);
}

static hlo_status reduce_windows(fold_job *job, const window_plan *plan, hlo_opcode op) {
  int64_t *offsets = hlo_malloc((size_t)(plan->taps + 1) * sizeof(int64_t));
  if (!offsets) return rt_kernel_fail(job->eval, job->instr, HLO_ERR_INTERNAL, "out of memory");
  hlo_status status = HLO_OK;
  int64_t pos[HLO_MAX_RANK] = {0};
  for (int64_t o = 0; o < plan->outputs && status == HLO_OK; o++, next_position(plan, pos)) {
    int64_t count = window_offsets(plan, pos, offsets);
    for (int64_t t = 0; t < count && status == HLO_OK; t++) {
      if (op != HLO_OP_COUNT) rt_reduce_step(op, job->outputs[0], o, job->inputs[0], offsets[t]);
      else status = fold_call(job, o, offsets[t]);
    }
  }
  free(offsets);
  return status;
}

RT_KERNEL(rt_kernel_reduce_window) {
  int n = instr->operand_count / 2;
  if (instr->operand_count < 2 || instr->operand_count % 2 || n > MAX_WINDOW_INPUTS)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "needs N inputs and N init values (N <= %d)", MAX_WINDOW_INPUTS);
  const char *error = rt_reduce_check_operands(instr, args, n);
  if (error) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", error);
  window_plan plan;
  error = plan_window(instr->window, &args[0]->shape, &plan);
  if (error) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", error);
  rt_value *outputs[MAX_WINDOW_INPUTS] = {0};
  rt_value *scratch[2 * MAX_WINDOW_INPUTS] = {0};
  hlo_status status = HLO_OK;
  for (int k = 0; k < n && status == HLO_OK; k++) {
    if (!window_shape_matches(&plan, rt_reduce_declared(instr, k)))
      status = rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "the result dimensions do not match the window");
    else if (!(outputs[k] = rt_reduce_output(eval, instr, args, n, k)))
      status = eval->diag->status;
  }
  if (status == HLO_OK) {
    hlo_opcode op = rt_fast_reducer(eval, instr, n, outputs[0]);
    fold_job job = {eval, instr, n, args, outputs, scratch};
    status = reduce_windows(&job, &plan, op);
  }
  free_window(&plan);
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

/* ---------------------------------------------------------------------------------------
 * select-and-scatter */

/* A select that is one compare of its two parameters: keep the current choice when
 * current `direction` candidate holds. HLO_DIR_NONE when the select is anything else. */
static hlo_direction simple_select(const hlo_comp *comp) {
  if (!comp || comp->param_count != 2 || !comp->root) return HLO_DIR_NONE;
  const hlo_instr *root = comp->root, *p0 = comp->params[0], *p1 = comp->params[1];
  if (root->opcode != HLO_OP_COMPARE || root->operand_count != 2 || !p0 || !p1) return HLO_DIR_NONE;
  if (p0->shape.rank != 0 || p1->shape.rank != 0 || p0->shape.dtype != p1->shape.dtype) return HLO_DIR_NONE;
  hlo_dtype declared = p0->shape.dtype;
  /* Only the natural order of the type: TOTALORDER and forced signedness take the call. */
  hlo_compare_type natural = hlo_dtype_is_float(declared)  ? HLO_CMP_FLOAT
                             : hlo_dtype_is_signed(declared) ? HLO_CMP_SIGNED
                                                             : HLO_CMP_UNSIGNED;
  if (root->compare_type != HLO_CMP_DEFAULT && root->compare_type != natural) return HLO_DIR_NONE;
  hlo_direction dir = root->direction;
  if (dir != HLO_DIR_GE && dir != HLO_DIR_GT && dir != HLO_DIR_LE && dir != HLO_DIR_LT) return HLO_DIR_NONE;
  if (root->operands[0] == p0 && root->operands[1] == p1) return dir;
  if (root->operands[0] == p1 && root->operands[1] == p0) { /* candidate OP current */
    switch (dir) {
      case HLO_DIR_GE: return HLO_DIR_LE;
      case HLO_DIR_GT: return HLO_DIR_LT;
      case HLO_DIR_LE: return HLO_DIR_GE;
      default: return HLO_DIR_GT;
    }
  }
  return HLO_DIR_NONE;
}

static bool compare_elements(hlo_direction dir, const rt_value *v, int64_t a, int64_t b) {
  hlo_dtype dtype = v->shape.dtype;
  int order; /* -1, 0, 1; 2 when unordered (NaN) */
  if (hlo_dtype_is_float(dtype)) {
    double x = rt_get_f64(v, a), y = rt_get_f64(v, b);
    order = x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
  } else if (hlo_dtype_is_signed(dtype)) {
    int64_t x = rt_get_i64(v, a), y = rt_get_i64(v, b);
    order = x < y ? -1 : x > y ? 1 : 0;
  } else {
    uint64_t x = rt_get_u64(v, a), y = rt_get_u64(v, b);
    order = x < y ? -1 : x > y ? 1 : 0;
  }
  switch (dir) {
    case HLO_DIR_GE: return order == 1 || order == 0;
    case HLO_DIR_GT: return order == 1;
    case HLO_DIR_LE: return order == -1 || order == 0;
    default: return order == -1;
  }
}

typedef struct scatter_job {
  rt_eval *eval;
  const hlo_instr *instr;
  const rt_value *operand, *source;
  rt_value *output;
  hlo_direction select_dir; /* HLO_DIR_NONE: call the select computation */
  hlo_opcode scatter_op;    /* HLO_OP_COUNT: call the scatter computation */
  rt_value *scratch[2];
} scatter_job;

/* Whether select keeps the current choice (operand element `current`) over `candidate`. */
static hlo_status keeps(scatter_job *job, int64_t current, int64_t candidate, bool *keep) {
  if (job->select_dir != HLO_DIR_NONE) {
    *keep = compare_elements(job->select_dir, job->operand, current, candidate);
    return HLO_OK;
  }
  const rt_value *values[2] = {job->operand, job->operand};
  int64_t indices[2] = {current, candidate};
  rt_value *result = NULL;
  hlo_status status =
      rt_call_on_scalars(job->eval, job->instr->called[0], job->scratch, values, indices, 2, &result);
  if (status != HLO_OK) return status;
  if (result->shape.dtype != HLO_PRED || result->count != 1)
    status = rt_kernel_fail(job->eval, job->instr, HLO_ERR_INPUT, "select must return a pred scalar");
  else
    *keep = rt_get_i64(result, 0) != 0;
  rt_value_release(result);
  return status;
}

/* output[at] = scatter(output[at], source[s]) */
static hlo_status scatter_into(scatter_job *job, int64_t at, int64_t s) {
  if (job->scatter_op != HLO_OP_COUNT) {
    rt_reduce_step(job->scatter_op, job->output, at, job->source, s);
    return HLO_OK;
  }
  const rt_value *values[2] = {job->output, job->source};
  int64_t indices[2] = {at, s};
  rt_value *result = NULL;
  hlo_status status =
      rt_call_on_scalars(job->eval, job->instr->called[1], job->scratch, values, indices, 2, &result);
  if (status != HLO_OK) return status;
  if (result->shape.dtype != job->output->shape.dtype || result->count != 1)
    status = rt_kernel_fail(job->eval, job->instr, HLO_ERR_INPUT, "scatter must return a scalar of the output's type");
  else
    rt_copy_element(job->output, at, result, 0);
  rt_value_release(result);
  return status;
}

static hlo_status select_and_scatter(scatter_job *job, const window_plan *plan) {
  int64_t *offsets = hlo_malloc((size_t)(plan->taps + 1) * sizeof(int64_t));
  if (!offsets) return rt_kernel_fail(job->eval, job->instr, HLO_ERR_INTERNAL, "out of memory");
  hlo_status status = HLO_OK;
  int64_t pos[HLO_MAX_RANK] = {0};
  for (int64_t s = 0; s < plan->outputs && status == HLO_OK; s++, next_position(plan, pos)) {
    int64_t count = window_offsets(plan, pos, offsets);
    if (count == 0) continue; /* a window entirely in padding selects nothing */
    int64_t selected = offsets[0];
    for (int64_t t = 1; t < count && status == HLO_OK; t++) {
      bool keep = true;
      status = keeps(job, selected, offsets[t], &keep);
      if (!keep) selected = offsets[t];
    }
    if (status == HLO_OK) status = scatter_into(job, selected, s);
  }
  free(offsets);
  return status;
}

RT_KERNEL(rt_kernel_select_and_scatter) {
  if (instr->operand_count != 3)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "needs operand, source and init value");
  if (instr->called_count != 2)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "needs select and scatter computations");
  const rt_value *operand = args[0], *source = args[1], *init = args[2];
  if (operand->shape.dtype == HLO_TUPLE || source->shape.dtype == HLO_TUPLE || init->shape.dtype == HLO_TUPLE)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "operands must be arrays");
  if (init->shape.rank != 0) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "the init value must be a scalar");
  if (source->shape.dtype != init->shape.dtype)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "source and init value must have the same type");
  window_plan plan;
  const char *error = plan_window(instr->window, &operand->shape, &plan);
  if (error) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", error);
  if (!window_shape_matches(&plan, &source->shape)) {
    free_window(&plan);
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "the source dimensions do not match the windows");
  }
  bool same = instr->shape.rank == operand->shape.rank && instr->shape.dtype != HLO_TUPLE;
  for (int d = 0; same && d < operand->shape.rank; d++) same = instr->shape.dims[d] == operand->shape.dims[d];
  rt_value *output = same ? rt_new_output(eval, instr, &instr->shape) : NULL;
  hlo_status status = HLO_OK;
  if (!same) status = rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "the result must have the operand's dimensions");
  else if (!output) status = eval->diag->status;
  else if (output->shape.dtype != init->shape.dtype)
    status = rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "the result's type differs from the init value's");
  if (status == HLO_OK) {
    for (int64_t i = 0; i < output->count; i++) rt_copy_element(output, i, init, 0);
    scatter_job job = {.eval = eval, .instr = instr, .operand = operand, .source = source, .output = output};
    job.select_dir = simple_select(instr->called[0]);
    job.scatter_op = hlo_simple_reducer(instr->called[1]);
    if (job.scatter_op != HLO_OP_COUNT &&
        rt_storage_dtype(eval, instr->called[1]->root->shape.dtype) != output->shape.dtype)
      job.scatter_op = HLO_OP_COUNT;
    status = select_and_scatter(&job, &plan);
    release_all(job.scratch, 2);
  }
  free_window(&plan);
  if (status != HLO_OK) {
    rt_value_release(output);
    return status;
  }
  *out = output;
  return HLO_OK;
}
