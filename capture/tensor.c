/* Tensor handles: creation from host data, files and constants; reference counting; the
 * per-thread list of handles a sync looks at; shape queries; reading values back. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "runtime/runtime.h"

/* ---- the per-thread list ---- */

static void list_append(cap_ctx *ctx, latch_tensor *t) {
  t->owner = ctx;
  t->next = NULL;
  t->prev = ctx->tail;
  if (ctx->tail)
    ctx->tail->next = t;
  else
    ctx->head = t;
  ctx->tail = t;
}

void cap_list_remove(latch_tensor *t) {
  cap_ctx *ctx = t->owner;
  if (!ctx) return;
  if (t->prev)
    t->prev->next = t->next;
  else
    ctx->head = t->next;
  if (t->next)
    t->next->prev = t->prev;
  else
    ctx->tail = t->prev;
  t->prev = t->next = NULL;
  t->owner = NULL;
}

/* ---- handles ---- */

latch_tensor *cap_wrap(latch_runtime *rt, cap_node *node) {
  if (!node) {
    cap_set_error("out of memory");
    return NULL;
  }
  latch_tensor *t = cap_pool_handle();
  if (!t) {
    cap_node_release(node);
    cap_set_error("out of memory");
    return NULL;
  }
  atomic_init(&t->refs, 1);
  t->rt = rt;
  t->node = node;
  t->alias_of = NULL;
  t->owner = NULL;
  t->prev = t->next = NULL;
  cap_ctx *ctx = cap_ctx_current();
  t->made_in_trace = ctx->trace ? ctx->trace->id : 0;
  if (node->state == CAP_PENDING) {
    ctx->ops_traced++;
    if (ctx->trace) cap_trace_new_node(ctx->trace, node);
    if (rt && (rt->options.eager || ctx->eager)) cap_sync_nodes(rt, 1, &node, &t);
  }
  if (node->state != CAP_READY) list_append(ctx, t);
  return t;
}

latch_tensor *cap_error(latch_runtime *rt, const char *format, ...) {
  char message[1024];
  va_list ap;
  va_start(ap, format);
  vsnprintf(message, sizeof message, format, ap);
  va_end(ap);
  cap_set_error("%s", message);
  cap_ctx *ctx = cap_ctx_current();
  if (rt && !ctx->error[0]) {
    snprintf(ctx->error, sizeof ctx->error, "%s", message);
    ctx->error_rt = rt;
  }
  return cap_wrap(rt, cap_node_error("%s", message));
}

/* Poisoned results name the op and carry the first error's message, not a chain of them. */
latch_tensor *cap_poisoned(const char *op, int count, latch_tensor *const *operands) {
  latch_runtime *rt = NULL;
  for (int i = 0; i < count && !rt; i++)
    if (operands[i]) rt = operands[i]->rt;
  for (int i = 0; i < count; i++) {
    if (!operands[i]) return cap_error(rt, "%s: operand %d is NULL", op, i);
    /* Two runtimes share no graph, cache or thread state: a mix is the caller's mistake. */
    if (operands[i]->rt != rt) return cap_error(rt, "%s: operand %d belongs to another runtime than operand 0", op, i);
    const cap_node *node = operands[i]->node;
    if (node->state != CAP_ERROR) continue;
    const char *cause = strstr(node->error, "poisoned by: ");
    cause = cause ? cause + strlen("poisoned by: ") : node->error;
    return cap_error(rt, "%s: operand %d poisoned by: %s", op, i, cause);
  }
  return NULL;
}

latch_tensor *latch_retain(latch_tensor *t) {
  if (t) atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
  return t;
}

void latch_release(latch_tensor *t) {
  if (!t || atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
  cap_list_remove(t);
  cap_node_release(t->node);
  cap_node_release(t->alias_of);
  cap_pool_free_handle(t);
}

/* ---- creation ---- */

bool cap_dims_fit(const char *op, int rank, const int64_t *dims) {
  int64_t elements = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] == 0) return true; /* empty: no element, whatever the other dims */
    if (elements > HLO_MAX_ELEMENTS / dims[i]) {
      cap_set_error("%s: dims whose product is more than 2^58 elements (at dim %d, %lld)", op, i, (long long)dims[i]);
      return false;
    }
    elements *= dims[i];
  }
  return true;
}

static bool check_dims(const char *op, hlo_dtype dtype, int rank, const int64_t *dims) {
  if (dtype == HLO_INVALID) {
    cap_set_error("%s: invalid dtype", op);
    return false;
  }
  if (rank < 0 || rank > HLO_MAX_RANK || (rank > 0 && !dims)) {
    cap_set_error("%s: rank %d is out of range (0..%d) or dims is NULL", op, rank, HLO_MAX_RANK);
    return false;
  }
  for (int i = 0; i < rank; i++)
    if (dims[i] < 0) {
      cap_set_error("%s: dim %d is negative (%lld)", op, i, (long long)dims[i]);
      return false;
    }
  return cap_dims_fit(op, rank, dims);
}

static latch_tensor *bad(latch_runtime *rt) { return cap_error(rt, "%s", latch_last_error()); }

latch_tensor *latch_from_host(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims, const void *data) {
  hlo_dtype d = cap_hlo_dtype(dtype);
  if (!check_dims("from_host", d, rank, dims)) return bad(rt);
  rt_value *value = rt_value_new_array(d, rank, dims);
  if (!value) return cap_wrap(rt, NULL); /* out of memory: NULL, as latch.h says */
  size_t bytes = (size_t)hlo_shape_bytes(&value->shape);
  if (bytes && !data) {
    rt_value_release(value);
    return cap_error(rt, "from_host: data is NULL");
  }
  if (bytes) memcpy(value->data, data, bytes);
  return cap_wrap(rt, cap_node_data(value));
}

latch_tensor *latch_from_npy(latch_runtime *rt, const char *path) {
  hlo_diag diag = {0};
  rt_value *value = rt_npy_read(path, &diag);
  if (!value) return cap_error(rt, "from_npy: %s", diag.message);
  if (cap_latch_dtype(value->shape.dtype) == LATCH_INVALID) {
    rt_value_release(value);
    return cap_error(rt, "from_npy: %s: element type not supported", path);
  }
  return cap_wrap(rt, cap_node_data(value));
}

/* value as the dtype stores it, so the graph key sees the constant actually used. */
/* node with its hash, or NULL (node released) when memory runs out. */
static cap_node *finished(cap_node *node) {
  if (cap_node_finish(node)) return node;
  cap_node_release(node);
  return NULL;
}

static double round_to(hlo_dtype dtype, double value) {
  rt_value *scalar = rt_value_new_array(dtype, 0, NULL);
  if (!scalar) return value;
  rt_set_f64(scalar, 0, value);
  double stored = rt_get_f64(scalar, 0);
  rt_value_release(scalar);
  return stored;
}

latch_tensor *latch_full(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims, double value) {
  hlo_dtype d = cap_hlo_dtype(dtype);
  if (!check_dims("full", d, rank, dims)) return bad(rt);
  cap_node *node = cap_node_new(CAP_CONST, 0, 0, NULL, 0);
  if (!node) return cap_wrap(rt, NULL);
  node->dtype = (uint8_t)d;
  node->rank = (uint8_t)rank;
  if (rank) memcpy(node->dims, dims, sizeof(int64_t) * (size_t)rank);
  node->scalar[0] = round_to(d, value);
  return cap_wrap(rt, finished(node));
}

latch_tensor *latch_zeros(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims) {
  return latch_full(rt, dtype, rank, dims, 0);
}

latch_tensor *latch_ones(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims) {
  return latch_full(rt, dtype, rank, dims, 1);
}

latch_tensor *latch_scalar(latch_runtime *rt, latch_dtype dtype, double value) {
  return latch_full(rt, dtype, 0, NULL, value);
}

latch_tensor *latch_iota(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims, int dim) {
  hlo_dtype d = cap_hlo_dtype(dtype);
  if (!check_dims("iota", d, rank, dims)) return bad(rt);
  int axis = cap_norm_dim(dim, rank);
  if (axis < 0 || d == HLO_PRED)
    return cap_error(rt, "iota: dim %d is out of range for rank %d, or dtype is bool", dim, rank);
  cap_node *node = cap_node_new(CAP_IOTA, 0, 0, NULL, 1);
  if (!node) return cap_wrap(rt, NULL);
  node->dtype = (uint8_t)d;
  node->rank = (uint8_t)rank;
  memcpy(node->dims, dims, sizeof(int64_t) * (size_t)rank);
  node->attrs[0] = axis;
  return cap_wrap(rt, finished(node));
}

/* Uniform [0, 1) from the seed and the element index: splitmix64, exact on every host. */
static double unit(uint64_t seed, int64_t index) {
  return (double)(rt_mix64(seed ^ rt_mix64((uint64_t)index + 0x632BE59BD9B4E019u)) >> 11) * 0x1p-53;
}

typedef struct random_job {
  rt_value *value;
  uint64_t seed;
  double a, b;
  bool normal, integral;
} random_job;

/* Element i's draw: a function of the seed and i alone. */
static double draw(const random_job *j, int64_t i) {
  if (!j->normal) return j->a + (j->b - j->a) * unit(j->seed, i);
  double u1 = unit(j->seed, 2 * i), u2 = unit(j->seed, 2 * i + 1);
  return j->a + j->b * sqrt(-2.0 * log1p(-u1)) * cos(6.283185307179586 * u2);
}

/* Elements [begin, end), so any split of the elements between threads gives the same
 * values. f32 (the zoo's weights) is stored as rt_set_f64 would store it, without its switch
 * per element. */
static void random_items(void *ctx, int64_t begin, int64_t end) {
  const random_job *j = ctx;
  if (j->value->shape.dtype == HLO_F32) {
    float *out = j->value->data;
    for (int64_t i = begin; i < end; i++) out[i] = (float)draw(j, i);
    return;
  }
  for (int64_t i = begin; i < end; i++) {
    double x = draw(j, i);
    rt_set_f64(j->value, i, j->integral ? floor(x) : x);
  }
}

/* Split over the threads: the zoo's seeded weights (vgg16's 138 million) were a third of
 * `latch bench`'s own time, drawn one element at a time on one thread. */
static latch_tensor *random_tensor(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims, double a,
                                   double b, uint64_t seed, bool normal) {
  hlo_dtype d = cap_hlo_dtype(dtype);
  if (!check_dims("random", d, rank, dims)) return bad(rt);
  hlo_shape shape = hlo_shape_make(d, rank, dims);
  rt_value *value = rt_value_new_unfilled(&shape); /* every element is written below */
  if (!value) return cap_wrap(rt, NULL); /* out of memory: NULL, as latch.h says */
  random_job job = {.value = value, .seed = seed, .a = a, .b = b, .normal = normal, .integral = !hlo_dtype_is_float(d)};
  rt_parallel_for(value->count, 1 << 14, random_items, &job);
  return cap_wrap(rt, cap_node_data(value));
}

latch_tensor *latch_rand_uniform(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims, double low,
                                 double high, uint64_t seed) {
  return random_tensor(rt, dtype, rank, dims, low, high, seed, false);
}

latch_tensor *latch_rand_normal(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims, double mean,
                                double std, uint64_t seed) {
  return random_tensor(rt, dtype, rank, dims, mean, std, seed, true);
}

/* ---- queries ---- */

latch_dtype latch_tensor_dtype(const latch_tensor *t) {
  return t ? cap_latch_dtype((hlo_dtype)t->node->dtype) : LATCH_INVALID;
}

int latch_rank(const latch_tensor *t) { return t ? t->node->rank : 0; }

/* Inside a trace, a size read as a plain number may steer the function (a loop bound, a
 * reshape), so the trace guards it. */
int64_t latch_dim(const latch_tensor *t, int dim) {
  if (!t) return -1;
  int d = cap_norm_dim(dim, t->node->rank);
  if (d < 0) return -1;
  cap_trace *trace = cap_ctx_current()->trace;
  if (trace) cap_trace_dim_read(trace, t->node, d);
  return t->node->dims[d];
}

int64_t latch_numel(const latch_tensor *t) {
  if (!t) return 0;
  int64_t n = 1;
  cap_trace *trace = cap_ctx_current()->trace;
  for (int i = 0; i < t->node->rank; i++) {
    if (trace) cap_trace_dim_read(trace, t->node, i);
    n *= t->node->dims[i];
  }
  return n;
}

const char *latch_tensor_error(const latch_tensor *t) {
  if (!t) return "NULL tensor";
  return t->node->state == CAP_ERROR ? t->node->error : NULL;
}

/* ---- reading ---- */

/* Syncs t alone when pending; the error status with the message set otherwise. */
static latch_status ensure_ready(latch_tensor *t) {
  if (!t) {
    cap_set_error("NULL tensor");
    return LATCH_ERR_INPUT;
  }
  cap_trace *trace = cap_ctx_current()->trace;
  if (trace) cap_trace_value_read(trace, "a tensor's value was read (latch_read, latch_data or latch_save_npy)");
  cap_node *node = t->node;
  if (node->state == CAP_PENDING) {
    latch_status status = cap_sync_nodes(t->rt, 1, &node, &t);
    if (status != LATCH_OK) return status;
  }
  if (t->alias_of && t->node->state == CAP_READY) cap_write_back(t);
  if (t->node->state == CAP_ERROR) {
    t->node->reported = 1;
    cap_set_error("%s", t->node->error);
    return LATCH_ERR_INPUT;
  }
  cap_list_remove(t);
  return LATCH_OK;
}

latch_status latch_read(latch_tensor *t, void *dst, size_t bytes) {
  latch_status status = ensure_ready(t);
  if (status != LATCH_OK) return status;
  const rt_value *value = t->node->value;
  size_t size = (size_t)hlo_shape_bytes(&value->shape);
  if (bytes != size) {
    cap_set_error("read: the tensor has %zu bytes, the buffer %zu", size, bytes);
    return LATCH_ERR_INPUT;
  }
  if (size) memcpy(dst, value->data, size);
  return LATCH_OK;
}

latch_status latch_read_f64(latch_tensor *t, double *dst, int64_t count) {
  latch_status status = ensure_ready(t);
  if (status != LATCH_OK) return status;
  const rt_value *value = t->node->value;
  if (count != value->count) {
    cap_set_error("read_f64: the tensor has %lld elements, the buffer %lld", (long long)value->count,
                  (long long)count);
    return LATCH_ERR_INPUT;
  }
  for (int64_t i = 0; i < count; i++) dst[i] = rt_get_f64(value, i);
  return LATCH_OK;
}

latch_status latch_save_npy(latch_tensor *t, const char *path) {
  latch_status status = ensure_ready(t);
  if (status != LATCH_OK) return status;
  hlo_diag diag = {0};
  if (rt_npy_write(path, t->node->value, &diag) != HLO_OK) {
    cap_set_error("save_npy: %s", diag.message);
    return cap_status(diag.status);
  }
  return LATCH_OK;
}

const void *latch_data(latch_tensor *t) { return ensure_ready(t) == LATCH_OK ? t->node->value->data : NULL; }

/* ---- in-place update ---- */

static latch_status assign(latch_tensor *dst, latch_tensor *src) {
  if (!dst || !src) {
    cap_set_error("assign: NULL tensor");
    return LATCH_ERR_INPUT;
  }
  if (dst->rt != src->rt) {
    cap_set_error("assign: the destination and the source belong to different runtimes");
    return LATCH_ERR_INPUT;
  }
  cap_node *old = dst->node, *node = src->node;
  if (node->state == CAP_ERROR || old->state == CAP_ERROR) {
    cap_set_error("assign: %s", node->state == CAP_ERROR ? node->error : old->error);
    return LATCH_ERR_INPUT;
  }
  hlo_shape a = cap_node_shape(old), b = cap_node_shape(node);
  if (!hlo_shape_equal(&a, &b)) {
    char sa[128], sb[128];
    cap_set_error("assign: destination %s and source %s differ", hlo_shape_str(&a, sa, sizeof sa),
                  hlo_shape_str(&b, sb, sizeof sb));
    return LATCH_ERR_INPUT;
  }
  if (old == node) return LATCH_OK;
  cap_trace *trace = cap_ctx_current()->trace;
  if (trace && node->state == CAP_READY)
    cap_trace_value_read(trace, "latch_assign copied a materialized value, which a cached graph cannot replay");
  if (trace) cap_trace_operands(trace, 1, &dst); /* a weight only written is still replayed */
  if (node->state == CAP_READY && old->state == CAP_READY && !dst->alias_of) {
    /* Both values exist: copy into dst's buffer when nothing else can see it. */
    if (atomic_load(&old->refs) == 1 && old->value->refcount == 1 && old->value != node->value) {
      memcpy(old->value->data, node->value->data, (size_t)hlo_shape_bytes(&old->value->shape));
      rt_value_touch(old->value);
      return LATCH_OK;
    }
  }
  dst->node = cap_node_retain(node);
  if (old->state == CAP_READY && !dst->alias_of)
    dst->alias_of = old;
  else
    cap_node_release(old);
  if (node->state == CAP_READY) {
    /* Nothing to run: the write-back happens here. */
    cap_node *target = dst->alias_of;
    if (target && atomic_load(&target->refs) == 1 && target->value->refcount == 1) {
      memcpy(target->value->data, node->value->data, (size_t)hlo_shape_bytes(&target->value->shape));
      rt_value_touch(target->value);
      cap_node_release(dst->node);
      dst->node = target;
      dst->alias_of = NULL;
    } else if (target) {
      dst->alias_of = NULL;
      cap_node_release(target);
    }
    return LATCH_OK;
  }
  if (dst->owner != cap_ctx_current()) {
    cap_list_remove(dst);
    list_append(cap_ctx_current(), dst);
  }
  return LATCH_OK;
}

latch_status latch_assign(latch_tensor *dst, latch_tensor *src) {
  latch_status status = assign(dst, src);
  cap_trace *trace = cap_ctx_current()->trace;
  if (status == LATCH_OK && trace) cap_trace_assigned(trace, dst);
  return status;
}

void cap_handle_follow(latch_tensor *t, const latch_tensor *from) {
  cap_node *old = t->node, *node = from->node;
  if (old == node) return;
  t->node = cap_node_retain(node);
  if (node->state == CAP_PENDING && old->state == CAP_READY && !t->alias_of)
    t->alias_of = old; /* t's own buffer receives the value when it is computed */
  else
    cap_node_release(old);
  if (node->state != CAP_PENDING) { /* nothing left to compute or write back */
    cap_node_release(t->alias_of);
    t->alias_of = NULL;
    cap_list_remove(t);
  } else if (t->owner != cap_ctx_current()) {
    cap_list_remove(t);
    list_append(cap_ctx_current(), t);
  }
}
