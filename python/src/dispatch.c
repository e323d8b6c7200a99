/* The aten op table and latch lazy's __torch_dispatch__, in C.
 *
 * Both latch.torch modes lower aten ops through one table keyed by the aten overload object
 * (a pointer-keyed open-addressing table: OpOverload hashes in Python, which cost more than
 * the op). Each entry holds the Python lowering (python/latch/torch/lowering.py) and, for the
 * ops models spend their time in, a fast kind: the latch op made here, straight from the
 * arguments, when the call is the plain case (tensor operands, no alpha, static reshape,
 * ...); anything else returns NotImplemented from the fast kind and goes to the Python
 * lowering, which is the reference for every op. In-place overloads (a name ending in '_')
 * reuse their functional kind and assign the value to the first argument.
 *
 * lazy_dispatch is LazyTensor.__torch_dispatch__: it looks the overload up, unwraps the
 * LazyTensors to latch Tensors, lowers, and wraps each latch result as a new LazyTensor
 * (torch.Tensor._make_wrapper_subclass, then its `lt` slot). An overload without an entry,
 * or one the lowering raises Unsupported for, goes to the Python `slow` function (eager
 * fallback, .item()). lower() is the same lowering without the wrapping, for compile's
 * graph walk. */
#include <math.h>
#include <string.h>

#include "latchpy.h"

enum kind {
  K_PY = 0, K_UNARY, K_BINARY, K_DIV, K_RELU, K_GELU, K_HARDTANH, K_CLAMP, K_IDENTITY, K_CONV, K_BATCH_NORM,
  K_MATMUL, K_ADDMM, K_RESHAPE, K_PERMUTE, K_T, K_TRANSPOSE, K_REDUCE, K_MAX_POOL, K_ADAPTIVE_POOL, K_SOFTMAX,
};

/* The fast kinds, by functional overload name ("aten::NAME.OVERLOAD"). */
static const struct {
  const char *name;
  enum kind kind;
  int code;
} fast_ops[] = {
    {"aten::neg.default", K_UNARY, LATCH_NEG},         {"aten::abs.default", K_UNARY, LATCH_ABS},
    {"aten::exp.default", K_UNARY, LATCH_EXP},         {"aten::log.default", K_UNARY, LATCH_LOG},
    {"aten::sqrt.default", K_UNARY, LATCH_SQRT},       {"aten::rsqrt.default", K_UNARY, LATCH_RSQRT},
    {"aten::tanh.default", K_UNARY, LATCH_TANH},       {"aten::sigmoid.default", K_UNARY, LATCH_SIGMOID},
    {"aten::sin.default", K_UNARY, LATCH_SIN},         {"aten::cos.default", K_UNARY, LATCH_COS},
    {"aten::erf.default", K_UNARY, LATCH_ERF},         {"aten::add.Tensor", K_BINARY, LATCH_ADD},
    {"aten::sub.Tensor", K_BINARY, LATCH_SUB},         {"aten::mul.Tensor", K_BINARY, LATCH_MUL},
    {"aten::maximum.default", K_BINARY, LATCH_MAX},    {"aten::minimum.default", K_BINARY, LATCH_MIN},
    {"aten::div.Tensor", K_DIV, LATCH_DIV},            {"aten::relu.default", K_RELU, 0},
    {"aten::gelu.default", K_GELU, 0},                 {"aten::hardtanh.default", K_HARDTANH, 0},
    {"aten::clamp.default", K_CLAMP, 0},               {"aten::clone.default", K_IDENTITY, 0},
    {"aten::detach.default", K_IDENTITY, 0},           {"aten::alias.default", K_IDENTITY, 0},
    {"aten::convolution.default", K_CONV, 0},          {"aten::native_batch_norm.default", K_BATCH_NORM, 0},
    {"aten::mm.default", K_MATMUL, 0},                 {"aten::bmm.default", K_MATMUL, 0},
    {"aten::matmul.default", K_MATMUL, 0},             {"aten::addmm.default", K_ADDMM, 0},
    {"aten::view.default", K_RESHAPE, 0},              {"aten::_unsafe_view.default", K_RESHAPE, 0},
    {"aten::reshape.default", K_RESHAPE, 0},           {"aten::_reshape_alias.default", K_RESHAPE, 0},
    {"aten::permute.default", K_PERMUTE, 0},           {"aten::t.default", K_T, 0},
    {"aten::transpose.int", K_TRANSPOSE, 0},           {"aten::mean.dim", K_REDUCE, LATCH_MEAN},
    {"aten::sum.dim_IntList", K_REDUCE, LATCH_SUM},    {"aten::max_pool2d.default", K_MAX_POOL, 0},
    {"aten::_softmax.default", K_SOFTMAX, 0},          {"aten::_log_softmax.default", K_SOFTMAX, 1},
    {"aten::_adaptive_avg_pool2d.default", K_ADAPTIVE_POOL, 0},
};

typedef struct {
  PyObject *op;    /* the OpOverload (a reference); NULL: a free slot */
  PyObject *lower; /* the Python lowering */
  enum kind kind;
  int code;
  bool in_place;
} op_entry;

static op_entry *table;
static size_t table_mask; /* capacity - 1, a power of two */
static size_t table_count;

/* set by lazy_setup */
static PyObject *lazy_type, *tensor_type, *make_wrapper, *slow_fn, *unwrap_fn, *cpu_device;
static PyObject *s_lt, *wrapper_kwnames;

/* ---- the table ---- */

static size_t slot_of(PyObject *op) { return (size_t)(((uintptr_t)op >> 4) * 0x9E3779B97F4A7C15ull) & table_mask; }

static op_entry *lookup(PyObject *op) {
  if (!table) return NULL;
  for (size_t i = slot_of(op);; i = (i + 1) & table_mask) {
    if (table[i].op == op) return &table[i];
    if (!table[i].op) return NULL;
  }
}

static bool grow(void) {
  size_t cap = table ? (table_mask + 1) * 2 : 256;
  op_entry *old = table;
  size_t old_cap = table ? table_mask + 1 : 0;
  table = PyMem_Calloc(cap, sizeof *table);
  if (!table) {
    table = old;
    PyErr_NoMemory();
    return false;
  }
  table_mask = cap - 1;
  for (size_t i = 0; i < old_cap; i++) {
    if (!old[i].op) continue;
    size_t j = slot_of(old[i].op);
    while (table[j].op) j = (j + 1) & table_mask;
    table[j] = old[i];
  }
  PyMem_Free(old);
  return true;
}

/* The fast kind of an overload named "aten::NAME.OVERLOAD"; an in-place name (NAME ends in
 * '_') takes its functional twin's. */
static void fast_kind(const char *name, const char *overload, op_entry *e) {
  char full[160];
  size_t n = strlen(name);
  e->in_place = n > 1 && name[n - 1] == '_';
  if (snprintf(full, sizeof full, "%.*s.%s", (int)(e->in_place ? n - 1 : n), name, overload) >= (int)sizeof full)
    return;
  for (size_t i = 0; i < sizeof fast_ops / sizeof fast_ops[0]; i++)
    if (!strcmp(fast_ops[i].name, full)) {
      e->kind = fast_ops[i].kind;
      e->code = fast_ops[i].code;
    }
}

/* lower_table([(overload, schema name, overload name, lowering), ...]): the table, replaced. */
static PyObject *py_lower_table(PyObject *self, PyObject *list) {
  (void)self;
  PyObject *fast = PySequence_Fast(list, "lower_table: a sequence of (overload, name, overload name, lowering)");
  if (!fast) return NULL;
  for (size_t i = 0; table && i <= table_mask; i++) Py_XDECREF(table[i].op), Py_XDECREF(table[i].lower);
  PyMem_Free(table);
  table = NULL, table_count = 0;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
    PyObject *op, *lower;
    const char *name, *overload;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "OssO", &op, &name, &overload, &lower) ||
        ((table_count + 1) * 2 > (table ? table_mask + 1 : 0) && !grow())) {
      Py_DECREF(fast);
      return NULL;
    }
    op_entry *e = lookup(op);
    if (!e) {
      size_t j = slot_of(op);
      while (table[j].op) j = (j + 1) & table_mask;
      e = &table[j];
      e->op = Py_NewRef(op);
      table_count++;
    } else {
      Py_DECREF(e->lower);
    }
    e->lower = Py_NewRef(lower);
    e->kind = K_PY, e->code = 0;
    fast_kind(name, overload, e);
  }
  Py_DECREF(fast);
  Py_RETURN_NONE;
}

/* ---- arguments ---- */

/* Argument i (positional) or name (keyword), borrowed; NULL when absent (no error set). */
static PyObject *arg(PyObject *args, PyObject *kwargs, Py_ssize_t i, const char *name) {
  if (i < PyTuple_GET_SIZE(args)) return PyTuple_GET_ITEM(args, i);
  return kwargs && name ? PyDict_GetItemString(kwargs, name) : NULL;
}

static latch_tensor *tensor_of(PyObject *obj) {
  return obj && Py_TYPE(obj) == &LatchTensor_Type ? ((LatchTensor *)obj)->t : NULL;
}

static bool no_kwargs(PyObject *kwargs) { return !kwargs || !PyDict_GET_SIZE(kwargs); }

static bool int_of(PyObject *obj, int64_t dflt, int64_t *out) {
  if (!obj) return *out = dflt, true;
  if (!PyLong_CheckExact(obj)) return false;
  *out = PyLong_AsLongLong(obj);
  return !(*out == -1 && PyErr_Occurred());
}

static bool bool_of(PyObject *obj, bool dflt, bool *out) {
  if (!obj) return *out = dflt, true;
  if (obj != Py_True && obj != Py_False) return false;
  return *out = obj == Py_True, true;
}

/* A Python number (int or float, not bool) as a double; false for anything else. */
static bool number_of(PyObject *obj, double dflt, double *out) {
  if (!obj || obj == Py_None) return *out = dflt, true;
  if (PyFloat_CheckExact(obj)) return *out = PyFloat_AS_DOUBLE(obj), true;
  if (!PyLong_CheckExact(obj)) return false;
  *out = PyLong_AsDouble(obj);
  return !PyErr_Occurred();
}

/* A list or tuple of ints into out[0..*count); false (no error) for anything else. */
static bool ints_of(PyObject *obj, int64_t *out, int max, int *count) {
  if (!obj || !(PyList_Check(obj) || PyTuple_Check(obj))) return false; /* fx's immutable_list too */
  Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  if (n > max) return false;
  for (Py_ssize_t i = 0; i < n; i++)
    if (!int_of(PySequence_Fast_GET_ITEM(obj, i), 0, &out[i])) return false;
  *count = (int)n;
  return true;
}

/* A 2-d window argument: an int for both, one value for both, two values; absent or empty
 * takes dflt (torch's max_pool2d stride). */
static bool pair_of(PyObject *obj, const int64_t dflt[2], int64_t out[2]) {
  int n = 0;
  if (obj && PyLong_CheckExact(obj)) return int_of(obj, 0, &out[0]) && (out[1] = out[0], true);
  if (obj && !ints_of(obj, out, 2, &n)) return false;
  if (n == 0) return memcpy(out, dflt, 2 * sizeof *out), true;
  if (n == 1) out[1] = out[0];
  return true;
}

static int norm_dim(int64_t dim, int rank) { return (int)(dim < 0 ? dim + rank : dim); }

static bool is_float(latch_tensor *t) {
  latch_dtype d = latch_tensor_dtype(t);
  return d == LATCH_F16 || d == LATCH_BF16 || d == LATCH_F32 || d == LATCH_F64;
}

/* ---- the fast kinds: a new latch Tensor (or tuple), NotImplemented for the Python lowering ---- */

#define PLAIN() Py_NewRef(Py_NotImplemented)

/* op(a, b) (a binary op) as a new Tensor, a and b released; a NULL a or b (out of memory)
 * raises MemoryError. */
static PyObject *binary_released(latch_binop op, latch_tensor *a, latch_tensor *b) {
  latch_tensor *result = a && b ? latch_binary(op, a, b) : NULL;
  latch_release(a);
  latch_release(b);
  return lp_wrap(result);
}

static PyObject *fast_conv(PyObject *args, PyObject *kwargs) {
  latch_tensor *x = tensor_of(arg(args, kwargs, 0, "input")), *w = tensor_of(arg(args, kwargs, 1, "weight"));
  PyObject *bias = arg(args, kwargs, 2, "bias");
  latch_tensor *b = tensor_of(bias);
  latch_conv2d_params p = {{1, 1}, {0, 0}, {1, 1}, 1};
  static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
  bool transposed;
  if (!x || !w || (!b && bias != Py_None) || latch_rank(x) != 4 || !pair_of(arg(args, kwargs, 3, "stride"), ones, p.stride) ||
      !pair_of(arg(args, kwargs, 4, "padding"), zeros, p.padding) ||
      !pair_of(arg(args, kwargs, 5, "dilation"), ones, p.dilation) ||
      !bool_of(arg(args, kwargs, 6, "transposed"), false, &transposed) || transposed ||
      !int_of(arg(args, kwargs, 8, "groups"), 1, &p.groups))
    return PyErr_Occurred() ? NULL : PLAIN();
  latch_tensor *y = latch_conv2d(x, w, &p);
  if (!b) return lp_wrap(y);
  /* [C, 1, 1], as bench/layers.c: the add broadcasts a [C] array along the feature dim,
   * which the cpu backend takes into the convolution as its bias (runtime/cpu/dnnl_plan.c);
   * [1, C, 1, 1] became a full-shape binary post-op that only oneDNN's gemm kernel runs */
  static const int64_t column[3] = {-1, 1, 1};
  return binary_released(LATCH_ADD, y, latch_reshape(b, 3, column));
}

static PyObject *fast_batch_norm(PyObject *args, PyObject *kwargs) {
  latch_tensor *x = tensor_of(arg(args, kwargs, 0, "input"));
  PyObject *wo = arg(args, kwargs, 1, "weight"), *bo = arg(args, kwargs, 2, "bias");
  latch_tensor *w = tensor_of(wo), *b = tensor_of(bo);
  latch_tensor *mean = tensor_of(arg(args, kwargs, 3, "running_mean")), *var = tensor_of(arg(args, kwargs, 4, "running_var"));
  bool training;
  double eps;
  if (!x || !mean || !var || (!w && wo != Py_None) || (!b && bo != Py_None) ||
      !bool_of(arg(args, kwargs, 5, "training"), false, &training) || training ||
      !number_of(arg(args, kwargs, 7, "eps"), 1e-5, &eps))
    return PyErr_Occurred() ? NULL : PLAIN();
  PyObject *y = lp_wrap(latch_batch_norm(x, mean, var, w, b, eps));
  /* The saved statistics: None (an undefined tensor to torch), since
   * inference never reads them; each LazyTensor made costs more than the op. */
  PyObject *out = y ? PyTuple_Pack(3, y, Py_None, Py_None) : NULL;
  Py_XDECREF(y);
  return out;
}

static PyObject *fast_reshape(PyObject *args, PyObject *kwargs) {
  latch_tensor *x = tensor_of(arg(args, kwargs, 0, "self"));
  int64_t dims[LATCH_MAX_RANK];
  int rank;
  if (!x || !ints_of(arg(args, kwargs, 1, "size"), dims, LATCH_MAX_RANK, &rank)) return PyErr_Occurred() ? NULL : PLAIN();
  for (int i = 0; i < latch_rank(x); i++)
    if (latch_size_of(x, i).sym >= 0) return PLAIN(); /* symbolic: lowering.reshape keeps it so */
  return lp_wrap(latch_reshape(x, rank, dims));
}

static PyObject *fast_permute(latch_tensor *x, const int64_t *dims, int count) {
  int perm[LATCH_MAX_RANK], rank = latch_rank(x);
  if (count != rank) return PLAIN();
  for (int i = 0; i < rank; i++) perm[i] = norm_dim(dims[i], rank);
  return lp_wrap(latch_permute(x, perm));
}

static PyObject *fast_transpose(PyObject *args, PyObject *kwargs, enum kind kind) {
  latch_tensor *x = tensor_of(arg(args, kwargs, 0, "self"));
  int64_t dims[LATCH_MAX_RANK];
  int count, rank = x ? latch_rank(x) : 0;
  if (!x) return PLAIN();
  if (kind == K_PERMUTE)
    return ints_of(arg(args, kwargs, 1, "dims"), dims, LATCH_MAX_RANK, &count) ? fast_permute(x, dims, count)
                                                                               : PyErr_Occurred() ? NULL : PLAIN();
  if (kind == K_T && rank != 2) return lp_wrap(latch_retain(x));
  for (int i = 0; i < rank; i++) dims[i] = i;
  int64_t a = 0, b = 1;
  if (kind == K_TRANSPOSE && (!int_of(arg(args, kwargs, 1, "dim0"), 0, &a) || !int_of(arg(args, kwargs, 2, "dim1"), 1, &b)))
    return PyErr_Occurred() ? NULL : PLAIN();
  a = norm_dim(a, rank), b = norm_dim(b, rank);
  if (a < 0 || b < 0 || a >= rank || b >= rank) return PLAIN();
  dims[a] = b, dims[b] = a;
  return fast_permute(x, dims, rank);
}

static PyObject *fast_reduce(PyObject *args, PyObject *kwargs, int op) {
  latch_tensor *x = tensor_of(arg(args, kwargs, 0, "self"));
  PyObject *dims_obj = arg(args, kwargs, 1, "dim"), *dtype = arg(args, kwargs, 3, "dtype");
  int64_t dims64[LATCH_MAX_RANK];
  int dims[LATCH_MAX_RANK], count = 0;
  bool keepdim;
  /* a sum of bools or integers narrower than int64 is int64 in torch: lowering.py casts */
  if (!x || (dtype && dtype != Py_None) || (op == LATCH_SUM && !is_float(x) && latch_tensor_dtype(x) != LATCH_I64) ||
      (dims_obj && dims_obj != Py_None && !ints_of(dims_obj, dims64, LATCH_MAX_RANK, &count)) ||
      !bool_of(arg(args, kwargs, 2, "keepdim"), false, &keepdim))
    return PyErr_Occurred() ? NULL : PLAIN();
  for (int i = 0; i < count; i++) dims[i] = norm_dim(dims64[i], latch_rank(x));
  return lp_wrap(latch_reduce((latch_reduce_op)op, x, count, dims, keepdim));
}

/* max_pool2d without indices; max_pool2d_with_indices is lowering_train.py's (the indices a
 * backward reads). */
static PyObject *fast_max_pool(PyObject *args, PyObject *kwargs) {
  latch_tensor *x = tensor_of(arg(args, kwargs, 0, "self"));
  int64_t k[2], s[2], p[2], d[2];
  static const int64_t zeros[2] = {0, 0}, ones[2] = {1, 1};
  bool ceil_mode;
  if (!x || !pair_of(arg(args, kwargs, 1, "kernel_size"), zeros, k) || !pair_of(arg(args, kwargs, 2, "stride"), k, s) ||
      !pair_of(arg(args, kwargs, 3, "padding"), zeros, p) || !pair_of(arg(args, kwargs, 4, "dilation"), ones, d) ||
      d[0] != 1 || d[1] != 1 || !bool_of(arg(args, kwargs, 5, "ceil_mode"), false, &ceil_mode) || ceil_mode)
    return PyErr_Occurred() ? NULL : PLAIN();
  return lp_wrap(latch_max_pool2d(x, k, s, p));
}

static PyObject *fast_adaptive_pool(PyObject *args, PyObject *kwargs) {
  latch_tensor *x = tensor_of(arg(args, kwargs, 0, "self"));
  int64_t out[2], k[2];
  static const int64_t zeros[2] = {0, 0};
  if (!x || latch_rank(x) != 4 || !pair_of(arg(args, kwargs, 1, "output_size"), zeros, out) || out[0] <= 0 || out[1] <= 0)
    return PyErr_Occurred() ? NULL : PLAIN();
  int64_t h = latch_dim(x, 2), w = latch_dim(x, 3); /* pinned, as lowering.py's x.dim() */
  if (h % out[0] || w % out[1]) return PLAIN();
  k[0] = h / out[0], k[1] = w / out[1];
  return lp_wrap(latch_avg_pool2d(x, k, k, zeros));
}

static PyObject *fast_elementwise(op_entry *e, PyObject *args, PyObject *kwargs) {
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  latch_tensor *x = tensor_of(arg(args, kwargs, 0, "self")), *y = tensor_of(arg(args, kwargs, 1, "other"));
  double low, high;
  switch (e->kind) {
  case K_UNARY: return x && n == 1 && no_kwargs(kwargs) ? lp_wrap(latch_unary((latch_unop)e->code, x)) : PLAIN();
  case K_RELU: return x && n == 1 ? lp_wrap(latch_relu(x)) : PLAIN();
  case K_IDENTITY: return x && n == 1 ? lp_wrap(latch_cast(x, latch_tensor_dtype(x))) : PLAIN();
  case K_DIV:
    if (x && y && !is_float(x) && !is_float(y)) return PLAIN(); /* true division: lowering.py casts */
    /* fall through */
  case K_BINARY:
    /* a 0-dim operand beside a dimensioned one of another dtype: torch's promotion, lowering.py */
    if (x && y && (latch_rank(x) == 0) != (latch_rank(y) == 0) && latch_tensor_dtype(x) != latch_tensor_dtype(y))
      return PLAIN();
    /* fall through */
  case K_MATMUL:
    if (!x || !y || n != 2 || !no_kwargs(kwargs)) return PLAIN(); /* alpha, scalars: lowering.py */
    return lp_wrap(e->kind == K_MATMUL ? latch_matmul(x, y) : latch_binary((latch_binop)e->code, x, y));
  case K_GELU: {
    PyObject *approximate = arg(args, kwargs, 1, "approximate");
    if (!x || (approximate && !PyUnicode_Check(approximate))) return PLAIN();
    return lp_wrap(latch_gelu(x, approximate && !PyUnicode_CompareWithASCIIString(approximate, "tanh")));
  }
  case K_HARDTANH:
  case K_CLAMP: {
    bool hard = e->kind == K_HARDTANH;
    if (!x || !number_of(arg(args, kwargs, 1, hard ? "min_val" : "min"), hard ? -1.0 : -INFINITY, &low) ||
        !number_of(arg(args, kwargs, 2, hard ? "max_val" : "max"), hard ? 1.0 : INFINITY, &high))
      return PyErr_Occurred() ? NULL : PLAIN();
    return lp_wrap(latch_clamp(x, low, high));
  }
  case K_ADDMM: {
    latch_tensor *a = y, *b = tensor_of(arg(args, kwargs, 2, "mat2"));
    if (!x || !a || !b || n != 3 || !no_kwargs(kwargs)) return PLAIN(); /* beta, alpha: lowering.py */
    return binary_released(LATCH_ADD, latch_matmul(a, b), latch_retain(x));
  }
  case K_SOFTMAX: {
    PyObject *dim_obj = arg(args, kwargs, 1, "dim");
    int64_t dim;
    if (!x || !dim_obj || !int_of(dim_obj, 0, &dim)) return PyErr_Occurred() ? NULL : PLAIN();
    return lp_wrap(e->code ? latch_log_softmax(x, (int)dim) : latch_softmax(x, (int)dim));
  }
  default: return PLAIN();
  }
}

static PyObject *fast(op_entry *e, PyObject *args, PyObject *kwargs) {
  switch (e->kind) {
  case K_CONV: return fast_conv(args, kwargs);
  case K_BATCH_NORM: return fast_batch_norm(args, kwargs);
  case K_RESHAPE: return fast_reshape(args, kwargs);
  case K_PERMUTE:
  case K_T:
  case K_TRANSPOSE: return fast_transpose(args, kwargs, e->kind);
  case K_REDUCE: return fast_reduce(args, kwargs, e->code);
  case K_MAX_POOL: return fast_max_pool(args, kwargs);
  case K_ADAPTIVE_POOL: return fast_adaptive_pool(args, kwargs);
  default: return fast_elementwise(e, args, kwargs);
  }
}

/* An in-place kind: the value (cast to the target's dtype) assigned to the first argument,
 * which is the result. */
static PyObject *assign_result(PyObject *args, PyObject *value) {
  PyObject *target = PyTuple_GET_ITEM(args, 0);
  latch_tensor *dst = tensor_of(target), *src = tensor_of(value);
  if (!dst || !src) {
    Py_DECREF(value);
    return PyErr_Format(LatchUnsupported, "an in-place op whose value is not one tensor");
  }
  latch_tensor *cast = latch_tensor_dtype(src) == latch_tensor_dtype(dst) ? latch_retain(src)
                                                                         : latch_cast(src, latch_tensor_dtype(dst));
  latch_status status = cast ? latch_assign(dst, cast) : LATCH_ERR_INTERNAL;
  latch_release(cast);
  Py_DECREF(value);
  if (!cast) return PyErr_NoMemory();
  if (status != LATCH_OK) return lp_raise_status(status, "assign");
  return Py_NewRef(target);
}

/* The entry's lowering over latch Tensors (args a tuple, kwargs a dict or NULL). */
static PyObject *lower_entry(op_entry *e, PyObject *args, PyObject *kwargs) {
  if (e->kind != K_PY && PyTuple_GET_SIZE(args) > 0) {
    PyObject *out = fast(e, args, kwargs);
    if (out != Py_NotImplemented) return out && e->in_place ? assign_result(args, out) : out;
    Py_DECREF(out);
  }
  return PyObject_Call(e->lower, args, kwargs);
}

/* lower(overload, args, kwargs) -> the lowering's result over latch Tensors. */
static PyObject *py_lower(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
  (void)self;
  if (argc != 3 || !PyTuple_Check(argv[1]) || (argv[2] != Py_None && !PyDict_Check(argv[2])))
    return PyErr_Format(PyExc_TypeError, "lower(overload, args tuple, kwargs dict or None)");
  op_entry *e = lookup(argv[0]);
  if (!e) return PyErr_Format(LatchUnsupported, "%R is not lowered", argv[0]);
  return lower_entry(e, argv[1], argv[2] == Py_None ? NULL : argv[2]);
}

/* ---- LazyTensor: unwrapping and wrapping ---- */

static PyObject *unwrap_one(PyObject *a) {
  if (Py_TYPE(a) == (PyTypeObject *)lazy_type) return PyObject_GetAttr(a, s_lt);
  if (PyObject_TypeCheck(a, (PyTypeObject *)tensor_type)) return PyObject_CallOneArg(unwrap_fn, a);
  return Py_NewRef(a);
}

/* A new tuple (or list) of fn over each item of the list or tuple seq. */
static PyObject *map_items(PyObject *seq, bool tuple, PyObject *(*fn)(PyObject *)) {
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject *out = tuple ? PyTuple_New(n) : PyList_New(n);
  for (Py_ssize_t i = 0; out && i < n; i++) {
    PyObject *x = fn(PySequence_Fast_GET_ITEM(seq, i));
    if (!x) Py_CLEAR(out);
    else if (tuple) PyTuple_SET_ITEM(out, i, x);
    else PyList_SET_ITEM(out, i, x);
  }
  return out;
}

/* One argument: a LazyTensor (its latch Tensor), a list or tuple of tensors (a list of
 * theirs), anything else as it is. */
static PyObject *unwrap_arg(PyObject *a) {
  if ((PyList_CheckExact(a) || PyTuple_CheckExact(a)) && PySequence_Fast_GET_SIZE(a) &&
      PyObject_TypeCheck(PySequence_Fast_GET_ITEM(a, 0), (PyTypeObject *)tensor_type))
    return map_items(a, false, unwrap_one);
  return unwrap_one(a);
}

static PyObject *unwrap_kwargs(PyObject *kwargs) {
  if (!kwargs || !PyDict_GET_SIZE(kwargs)) return NULL;
  PyObject *out = PyDict_New(), *key, *value;
  Py_ssize_t pos = 0;
  while (out && PyDict_Next(kwargs, &pos, &key, &value)) {
    PyObject *x = unwrap_arg(value);
    if (!x || PyDict_SetItem(out, key, x) < 0) Py_CLEAR(out);
    Py_XDECREF(x);
  }
  return out;
}

/* A new LazyTensor holding the latch Tensor obj (a vectorcall of _make_wrapper_subclass with
 * the dtype as keyword, the device left to its default, the CPU: each keyword costs its
 * parse; requires_grad, rarely set, through a dict). */
static PyObject *lazy_new(PyObject *obj, bool requires_grad) {
  latch_tensor *t = ((LatchTensor *)obj)->t;
  int rank = latch_rank(t);
  latch_dtype dtype = latch_tensor_dtype(t);
  PyObject *torch_dtype = lp_torch_dtype(dtype);
  if (!torch_dtype) return PyErr_Format(LatchUnsupported, "latch dtype %d has no torch dtype", (int)dtype);
  PyObject *shape = PyTuple_New(rank), *r = NULL;
  for (int i = 0; shape && i < rank; i++) {
    PyObject *d = PyLong_FromLongLong(latch_dim(t, i));
    if (!d) Py_CLEAR(shape);
    else PyTuple_SET_ITEM(shape, i, d);
  }
  if (shape && !requires_grad) {
    PyObject *argv[4] = {NULL, lazy_type, shape, torch_dtype}; /* device: the default, the CPU */
    r = PyObject_Vectorcall(make_wrapper, argv + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, wrapper_kwnames);
  } else if (shape) {
    PyObject *kw = Py_BuildValue("{sOsOsO}", "dtype", torch_dtype, "device", cpu_device, "requires_grad", Py_True);
    PyObject *pos = kw ? PyTuple_Pack(2, lazy_type, shape) : NULL;
    r = pos ? PyObject_Call(make_wrapper, pos, kw) : NULL;
    Py_XDECREF(kw), Py_XDECREF(pos);
  }
  Py_XDECREF(shape);
  if (r && PyObject_SetAttr(r, s_lt, obj) < 0) Py_CLEAR(r);
  return r;
}

/* The lowering's result with every latch Tensor (in tuples and lists too) a LazyTensor. */
static PyObject *wrap_result(PyObject *out) {
  if (Py_TYPE(out) == &LatchTensor_Type) return lazy_new(out, false);
  if (!PyTuple_CheckExact(out) && !PyList_CheckExact(out)) return Py_NewRef(out);
  return map_items(out, PyTuple_CheckExact(out), wrap_result);
}

/* LazyTensor.__torch_dispatch__(cls, func, types, args=(), kwargs=None). */
static PyObject *py_lazy_dispatch(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
  (void)self;
  if (argc < 3 || argc > 5 || !lazy_type) return PyErr_Format(PyExc_TypeError, "lazy_dispatch: (cls, func, types, args, kwargs) after lazy_setup");
  PyObject *func = argv[1], *args = argc > 3 ? argv[3] : NULL, *kwargs = argc > 4 && argv[4] != Py_None ? argv[4] : NULL;
  op_entry *e = lookup(func);
  PyObject *empty = NULL;
  if (!args) args = empty = PyTuple_New(0);
  if (!args || !PyTuple_Check(args) || (kwargs && !PyDict_Check(kwargs))) {
    Py_XDECREF(empty);
    return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_TypeError, "lazy_dispatch: args must be a tuple, kwargs a dict");
  }
  PyObject *result = NULL, *largs = e ? map_items(args, true, unwrap_arg) : NULL, *lkwargs = largs ? unwrap_kwargs(kwargs) : NULL;
  PyObject *out = largs && (lkwargs || !PyErr_Occurred()) ? lower_entry(e, largs, lkwargs) : NULL;
  if (!e || (!out && PyErr_ExceptionMatches(LatchUnsupported))) {
    PyErr_Clear();
    PyObject *call[3] = {func, args, kwargs ? kwargs : Py_None};
    result = PyObject_Vectorcall(slow_fn, call, 3, NULL);
  } else if (out && e->in_place && PyTuple_GET_SIZE(args) && Py_TYPE(PyTuple_GET_ITEM(args, 0)) == (PyTypeObject *)lazy_type) {
    result = Py_NewRef(PyTuple_GET_ITEM(args, 0));
  } else if (out) {
    result = wrap_result(out);
  }
  Py_XDECREF(out), Py_XDECREF(largs), Py_XDECREF(lkwargs), Py_XDECREF(empty);
  return result;
}

/* lazy_wrap(latch Tensor, requires_grad=False) -> LazyTensor */
static PyObject *py_lazy_wrap(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
  (void)self;
  if (argc < 1 || argc > 2 || Py_TYPE(argv[0]) != &LatchTensor_Type || !lazy_type)
    return PyErr_Format(PyExc_TypeError, "lazy_wrap(latch Tensor, requires_grad=False) after lazy_setup");
  int rg = argc > 1 ? PyObject_IsTrue(argv[1]) : 0;
  if (rg < 0) return NULL;
  return lazy_new(argv[0], rg);
}

/* lazy_setup(LazyTensor, torch.Tensor, slow, unwrap, cpu device); the dtypes are set_dtypes' */
static PyObject *py_lazy_setup(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *cls, *base, *slow, *unwrap, *device;
  if (!PyArg_ParseTuple(args, "O!O!OOO", &PyType_Type, &cls, &PyType_Type, &base, &slow, &unwrap, &device))
    return NULL;
  PyObject *maker = PyObject_GetAttrString(base, "_make_wrapper_subclass");
  if (!maker) return NULL;
  Py_XSETREF(make_wrapper, maker);
  Py_XSETREF(lazy_type, Py_NewRef(cls));
  Py_XSETREF(tensor_type, Py_NewRef(base));
  Py_XSETREF(slow_fn, Py_NewRef(slow));
  Py_XSETREF(unwrap_fn, Py_NewRef(unwrap));
  Py_XSETREF(cpu_device, Py_NewRef(device));
  if (!s_lt && (!(s_lt = PyUnicode_InternFromString("lt")) || !(wrapper_kwnames = Py_BuildValue("(s)", "dtype"))))
    return NULL;
  Py_RETURN_NONE;
}

static PyMethodDef dispatch_functions[] = {
    {"lower_table", py_lower_table, METH_O, "lower_table([(overload, schema name, overload name, lowering)])"},
    {"lower", (PyCFunction)(void (*)(void))py_lower, METH_FASTCALL, "lower(overload, args, kwargs): over latch Tensors"},
    {"lazy_setup", py_lazy_setup, METH_VARARGS, "lazy_setup(LazyTensor, torch.Tensor, slow, unwrap, device)"},
    {"lazy_dispatch", (PyCFunction)(void (*)(void))py_lazy_dispatch, METH_FASTCALL,
     "lazy_dispatch(cls, func, types, args, kwargs): LazyTensor.__torch_dispatch__"},
    {"lazy_wrap", (PyCFunction)(void (*)(void))py_lazy_wrap, METH_FASTCALL, "lazy_wrap(Tensor, requires_grad=False) -> LazyTensor"},
    {NULL, NULL, 0, NULL},
};

int lp_dispatch_init(PyObject *module) { return PyModule_AddFunctions(module, dispatch_functions); }
