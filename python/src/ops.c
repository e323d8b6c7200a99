/* One Python function per latch op: arguments parsed, the op called, the result wrapped (an
 * error tensor raises latch._latch.Error with latch's message, naming the op and shapes). */
#include "latchpy.h"

#define T(obj, i) lp_tensor_arg(obj, __func__ + 3, i) /* py_foo -> "foo" */

/* A sequence of ints into out[0..*count); false with a Python error. */
static bool int_list(PyObject *seq, int64_t *out, int max, int *count, const char *what) {
  PyObject *fast = PySequence_Fast(seq, what);
  if (!fast) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  if (n > max) {
    Py_DECREF(fast);
    PyErr_Format(PyExc_ValueError, "%s: %zd values (at most %d)", what, n, max);
    return false;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (out[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
  }
  Py_DECREF(fast);
  *count = (int)n;
  return true;
}

/* An optional tensor argument: None -> NULL (ok stays true). */
static latch_tensor *optional(PyObject *obj, const char *fn, int index, bool *ok) {
  if (obj == Py_None) return NULL;
  latch_tensor *t = lp_tensor_arg(obj, fn, index);
  if (!t) *ok = false;
  return t;
}

static PyObject *py_unary(PyObject *self, PyObject *args) {
  (void)self;
  int op;
  PyObject *x;
  if (!PyArg_ParseTuple(args, "iO", &op, &x) || !T(x, 1)) return NULL;
  return lp_wrap(latch_unary((latch_unop)op, T(x, 1)));
}

static PyObject *py_binary(PyObject *self, PyObject *args) {
  (void)self;
  int op;
  PyObject *a, *b;
  if (!PyArg_ParseTuple(args, "iOO", &op, &a, &b) || !T(a, 1) || !T(b, 2)) return NULL;
  return lp_wrap(latch_binary((latch_binop)op, T(a, 1), T(b, 2)));
}

static PyObject *py_compare(PyObject *self, PyObject *args) {
  (void)self;
  int op;
  PyObject *a, *b;
  if (!PyArg_ParseTuple(args, "iOO", &op, &a, &b) || !T(a, 1) || !T(b, 2)) return NULL;
  return lp_wrap(latch_compare((latch_cmp)op, T(a, 1), T(b, 2)));
}

static PyObject *py_where(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *c, *a, *b;
  if (!PyArg_ParseTuple(args, "OOO", &c, &a, &b) || !T(c, 0) || !T(a, 1) || !T(b, 2)) return NULL;
  return lp_wrap(latch_where(T(c, 0), T(a, 1), T(b, 2)));
}

static PyObject *py_clamp(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x;
  double low, high;
  if (!PyArg_ParseTuple(args, "Odd", &x, &low, &high) || !T(x, 0)) return NULL;
  return lp_wrap(latch_clamp(T(x, 0), low, high));
}

static PyObject *py_cast(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x;
  int dtype;
  if (!PyArg_ParseTuple(args, "Oi", &x, &dtype) || !T(x, 0)) return NULL;
  return lp_wrap(latch_cast(T(x, 0), (latch_dtype)dtype));
}

static PyObject *py_relu(PyObject *self, PyObject *x) {
  (void)self;
  return T(x, 0) ? lp_wrap(latch_relu(T(x, 0))) : NULL;
}

static PyObject *py_gelu(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x;
  int tanh_form;
  if (!PyArg_ParseTuple(args, "Op", &x, &tanh_form) || !T(x, 0)) return NULL;
  return lp_wrap(latch_gelu(T(x, 0), tanh_form));
}

static PyObject *py_matmul(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *a, *b;
  if (!PyArg_ParseTuple(args, "OO", &a, &b) || !T(a, 0) || !T(b, 1)) return NULL;
  return lp_wrap(latch_matmul(T(a, 0), T(b, 1)));
}

static bool pair(PyObject *seq, int64_t out[2], const char *what) {
  int n;
  if (!int_list(seq, out, 2, &n, what)) return false;
  if (n == 1) out[1] = out[0];
  if (n == 0) PyErr_Format(PyExc_ValueError, "%s: no values", what);
  return n > 0;
}

static PyObject *py_conv2d(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x, *w, *stride, *padding, *dilation;
  long long groups;
  if (!PyArg_ParseTuple(args, "OOOOOL", &x, &w, &stride, &padding, &dilation, &groups) || !T(x, 0) || !T(w, 1))
    return NULL;
  latch_conv2d_params p = {.groups = groups};
  if (!pair(stride, p.stride, "conv2d stride") || !pair(padding, p.padding, "conv2d padding") ||
      !pair(dilation, p.dilation, "conv2d dilation"))
    return NULL;
  return lp_wrap(latch_conv2d(T(x, 0), T(w, 1), &p));
}

static PyObject *py_conv2d_input_grad(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *g, *w, *stride, *padding, *dilation, *size;
  if (!PyArg_ParseTuple(args, "OOOOOO", &g, &w, &stride, &padding, &dilation, &size) || !T(g, 0) || !T(w, 1))
    return NULL;
  latch_conv2d_params p = {.groups = 1};
  int64_t input_size[2];
  if (!pair(stride, p.stride, "conv2d_input_grad stride") || !pair(padding, p.padding, "conv2d_input_grad padding") ||
      !pair(dilation, p.dilation, "conv2d_input_grad dilation") || !pair(size, input_size, "conv2d_input_grad size"))
    return NULL;
  return lp_wrap(latch_conv2d_input_grad(T(g, 0), T(w, 1), &p, input_size));
}

static PyObject *py_conv2d_weight_grad(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x, *g, *stride, *padding, *dilation, *size;
  if (!PyArg_ParseTuple(args, "OOOOOO", &x, &g, &stride, &padding, &dilation, &size) || !T(x, 0) || !T(g, 1))
    return NULL;
  latch_conv2d_params p = {.groups = 1};
  int64_t kernel_size[2];
  if (!pair(stride, p.stride, "conv2d_weight_grad stride") || !pair(padding, p.padding, "conv2d_weight_grad padding") ||
      !pair(dilation, p.dilation, "conv2d_weight_grad dilation") ||
      !pair(size, kernel_size, "conv2d_weight_grad kernel size"))
    return NULL;
  return lp_wrap(latch_conv2d_weight_grad(T(x, 0), T(g, 1), &p, kernel_size));
}

static PyObject *py_pool2d(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x, *kernel, *stride, *padding;
  int average;
  int64_t k[2], s[2], p[2];
  if (!PyArg_ParseTuple(args, "pOOOO", &average, &x, &kernel, &stride, &padding) || !T(x, 1)) return NULL;
  if (!pair(kernel, k, "pool2d kernel") || !pair(stride, s, "pool2d stride") || !pair(padding, p, "pool2d padding"))
    return NULL;
  return lp_wrap(average ? latch_avg_pool2d(T(x, 1), k, s, p) : latch_max_pool2d(T(x, 1), k, s, p));
}

static PyObject *py_max_pool2d_grad(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x, *grad, *kernel, *stride, *padding;
  int64_t k[2], s[2], p[2];
  if (!PyArg_ParseTuple(args, "OOOOO", &x, &grad, &kernel, &stride, &padding) || !T(x, 0) || !T(grad, 1)) return NULL;
  if (!pair(kernel, k, "max_pool2d_grad kernel") || !pair(stride, s, "max_pool2d_grad stride") ||
      !pair(padding, p, "max_pool2d_grad padding"))
    return NULL;
  return lp_wrap(latch_max_pool2d_grad(T(x, 0), T(grad, 1), k, s, p));
}

static PyObject *py_reduce(PyObject *self, PyObject *args) {
  (void)self;
  int op, keepdim, count;
  PyObject *x, *dims_obj;
  int64_t dims64[LATCH_MAX_RANK];
  int dims[LATCH_MAX_RANK];
  if (!PyArg_ParseTuple(args, "iOOp", &op, &x, &dims_obj, &keepdim) || !T(x, 1) ||
      !int_list(dims_obj, dims64, LATCH_MAX_RANK, &count, "reduce dims"))
    return NULL;
  for (int i = 0; i < count; i++) dims[i] = (int)dims64[i];
  return lp_wrap(latch_reduce((latch_reduce_op)op, T(x, 1), count, dims, keepdim));
}

static PyObject *py_argmax(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x;
  int dim, keepdim;
  if (!PyArg_ParseTuple(args, "Oip", &x, &dim, &keepdim) || !T(x, 0)) return NULL;
  return lp_wrap(latch_argmax(T(x, 0), dim, keepdim));
}

static PyObject *py_softmax(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x;
  int dim, log_form;
  if (!PyArg_ParseTuple(args, "Oip", &x, &dim, &log_form) || !T(x, 0)) return NULL;
  return lp_wrap(log_form ? latch_log_softmax(T(x, 0), dim) : latch_softmax(T(x, 0), dim));
}

static PyObject *py_layer_norm(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x, *w, *b;
  int rank;
  double eps;
  bool ok = true;
  if (!PyArg_ParseTuple(args, "OiOOd", &x, &rank, &w, &b, &eps) || !T(x, 0)) return NULL;
  latch_tensor *wt = optional(w, "layer_norm", 2, &ok), *bt = optional(b, "layer_norm", 3, &ok);
  return ok ? lp_wrap(latch_layer_norm(T(x, 0), rank, wt, bt, eps)) : NULL;
}

static PyObject *py_batch_norm(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x, *mean, *var, *w, *b;
  double eps;
  bool ok = true;
  if (!PyArg_ParseTuple(args, "OOOOOd", &x, &mean, &var, &w, &b, &eps) || !T(x, 0) || !T(mean, 1) || !T(var, 2))
    return NULL;
  latch_tensor *wt = optional(w, "batch_norm", 3, &ok), *bt = optional(b, "batch_norm", 4, &ok);
  return ok ? lp_wrap(latch_batch_norm(T(x, 0), T(mean, 1), T(var, 2), wt, bt, eps)) : NULL;
}

static PyObject *py_embedding(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *table, *indices;
  if (!PyArg_ParseTuple(args, "OO", &table, &indices) || !T(table, 0) || !T(indices, 1)) return NULL;
  return lp_wrap(latch_embedding(T(table, 0), T(indices, 1)));
}

static PyObject *py_reshape(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x, *dims_obj;
  int64_t dims[LATCH_MAX_RANK];
  int rank;
  if (!PyArg_ParseTuple(args, "OO", &x, &dims_obj) || !T(x, 0) ||
      !int_list(dims_obj, dims, LATCH_MAX_RANK, &rank, "reshape dims"))
    return NULL;
  return lp_wrap(latch_reshape(T(x, 0), rank, dims));
}

static PyObject *py_permute(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x, *perm_obj;
  int64_t perm64[LATCH_MAX_RANK];
  int perm[LATCH_MAX_RANK], rank;
  if (!PyArg_ParseTuple(args, "OO", &x, &perm_obj) || !T(x, 0) ||
      !int_list(perm_obj, perm64, LATCH_MAX_RANK, &rank, "permute perm"))
    return NULL;
  if (rank != latch_rank(T(x, 0)))
    return PyErr_Format(PyExc_ValueError, "permute: %d dims in perm for a rank-%d tensor", rank, latch_rank(T(x, 0)));
  for (int i = 0; i < rank; i++) perm[i] = (int)perm64[i];
  return lp_wrap(latch_permute(T(x, 0), perm));
}

static PyObject *py_flip(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x, *dims_obj;
  int64_t dims64[LATCH_MAX_RANK];
  int dims[LATCH_MAX_RANK], count;
  if (!PyArg_ParseTuple(args, "OO", &x, &dims_obj) || !T(x, 0) ||
      !int_list(dims_obj, dims64, LATCH_MAX_RANK, &count, "flip dims"))
    return NULL;
  for (int i = 0; i < count; i++) dims[i] = (int)dims64[i];
  return lp_wrap(latch_flip(T(x, 0), count, dims));
}

static PyObject *py_slice(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x;
  int dim;
  long long start, stop, step;
  if (!PyArg_ParseTuple(args, "OiLLL", &x, &dim, &start, &stop, &step) || !T(x, 0)) return NULL;
  return lp_wrap(latch_slice(T(x, 0), dim, start, stop, step));
}

static PyObject *py_concat(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *list;
  int dim;
  if (!PyArg_ParseTuple(args, "Oi", &list, &dim)) return NULL;
  PyObject *fast = PySequence_Fast(list, "concat: a sequence of tensors");
  if (!fast) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  latch_tensor **xs = PyMem_Malloc(sizeof(latch_tensor *) * (size_t)(n ? n : 1));
  PyObject *result = NULL;
  bool ok = xs != NULL;
  for (Py_ssize_t i = 0; ok && i < n; i++) ok = (xs[i] = lp_tensor_arg(PySequence_Fast_GET_ITEM(fast, i), "concat", (int)i));
  if (ok) result = lp_wrap(latch_concat((int)n, xs, dim));
  else if (!xs) PyErr_NoMemory();
  PyMem_Free(xs);
  Py_DECREF(fast);
  return result;
}

static PyObject *py_pad(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x, *low_obj, *high_obj;
  double value;
  int64_t low[LATCH_MAX_RANK], high[LATCH_MAX_RANK];
  int nl, nh;
  if (!PyArg_ParseTuple(args, "OOOd", &x, &low_obj, &high_obj, &value) || !T(x, 0) ||
      !int_list(low_obj, low, LATCH_MAX_RANK, &nl, "pad low") || !int_list(high_obj, high, LATCH_MAX_RANK, &nh, "pad high"))
    return NULL;
  if (nl != latch_rank(T(x, 0)) || nh != nl)
    return PyErr_Format(PyExc_ValueError, "pad: %d and %d pads for a rank-%d tensor", nl, nh, latch_rank(T(x, 0)));
  return lp_wrap(latch_pad(T(x, 0), low, high, value));
}

static PyObject *py_broadcast_to(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x, *dims_obj;
  int64_t dims[LATCH_MAX_RANK];
  int rank;
  if (!PyArg_ParseTuple(args, "OO", &x, &dims_obj) || !T(x, 0) ||
      !int_list(dims_obj, dims, LATCH_MAX_RANK, &rank, "broadcast_to dims"))
    return NULL;
  return lp_wrap(latch_broadcast_to(T(x, 0), rank, dims));
}

static PyObject *py_full(PyObject *self, PyObject *args) {
  (void)self;
  int dtype, rank;
  PyObject *dims_obj;
  double value;
  int64_t dims[LATCH_MAX_RANK];
  latch_runtime *rt = lp_runtime();
  if (!rt || !PyArg_ParseTuple(args, "iOd", &dtype, &dims_obj, &value) ||
      !int_list(dims_obj, dims, LATCH_MAX_RANK, &rank, "full dims"))
    return NULL;
  return lp_wrap(latch_full(rt, (latch_dtype)dtype, rank, dims, value));
}

static PyObject *py_iota(PyObject *self, PyObject *args) {
  (void)self;
  int dtype, rank, dim;
  PyObject *dims_obj;
  int64_t dims[LATCH_MAX_RANK];
  latch_runtime *rt = lp_runtime();
  if (!rt || !PyArg_ParseTuple(args, "iOi", &dtype, &dims_obj, &dim) ||
      !int_list(dims_obj, dims, LATCH_MAX_RANK, &rank, "iota dims"))
    return NULL;
  return lp_wrap(latch_iota(rt, (latch_dtype)dtype, rank, dims, dim));
}

static PyObject *py_dropout(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x;
  double p;
  if (!PyArg_ParseTuple(args, "Od", &x, &p) || !T(x, 0)) return NULL;
  return lp_wrap(latch_dropout(T(x, 0), p));
}

static PyObject *py_rand_uniform_like(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x;
  double low, high;
  if (!PyArg_ParseTuple(args, "Odd", &x, &low, &high) || !T(x, 0)) return NULL;
  return lp_wrap(latch_rand_uniform_like(T(x, 0), low, high));
}

static PyObject *py_assign(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *dst, *src;
  if (!PyArg_ParseTuple(args, "OO", &dst, &src) || !T(dst, 0) || !T(src, 1)) return NULL;
  latch_status status = latch_assign(T(dst, 0), T(src, 1));
  if (status != LATCH_OK) return lp_raise_status(status, "assign");
  Py_RETURN_NONE;
}

static PyObject *py_all_reduce(PyObject *self, PyObject *args) {
  (void)self;
  int op;
  PyObject *x;
  if (!PyArg_ParseTuple(args, "iO", &op, &x) || !T(x, 1)) return NULL;
  return lp_wrap(latch_all_reduce(T(x, 1), (latch_reduce_op)op));
}

static PyObject *py_leave_world(PyObject *self, PyObject *noargs) {
  (void)self, (void)noargs;
  latch_runtime *rt = lp_runtime();
  if (!rt) return NULL;
  latch_world_leave(rt);
  Py_RETURN_NONE;
}

static PyObject *py_world(PyObject *self, PyObject *noargs) {
  (void)self, (void)noargs;
  latch_runtime *rt = lp_runtime();
  if (!rt) return NULL;
  int rank = 0, size = 1;
  latch_world(rt, &rank, &size);
  return Py_BuildValue("(ii)", rank, size);
}

PyMethodDef lp_op_methods[] = {
    {"unary", py_unary, METH_VARARGS, "unary(op, x)"},
    {"binary", py_binary, METH_VARARGS, "binary(op, a, b): broadcasts and promotes"},
    {"compare", py_compare, METH_VARARGS, "compare(op, a, b) -> bool tensor"},
    {"where", py_where, METH_VARARGS, "where(cond, a, b)"},
    {"clamp", py_clamp, METH_VARARGS, "clamp(x, low, high)"},
    {"cast", py_cast, METH_VARARGS, "cast(x, dtype)"},
    {"relu", py_relu, METH_O, "relu(x)"},
    {"gelu", py_gelu, METH_VARARGS, "gelu(x, tanh_form)"},
    {"matmul", py_matmul, METH_VARARGS, "matmul(a, b): NumPy matmul"},
    {"conv2d", py_conv2d, METH_VARARGS, "conv2d(x, w, stride, padding, dilation, groups)"},
    {"conv2d_input_grad", py_conv2d_input_grad, METH_VARARGS,
     "conv2d_input_grad(grad, w, stride, padding, dilation, input_size): conv2d's gradient for its input"},
    {"conv2d_weight_grad", py_conv2d_weight_grad, METH_VARARGS,
     "conv2d_weight_grad(x, grad, stride, padding, dilation, kernel_size): conv2d's gradient for its weights"},
    {"pool2d", py_pool2d, METH_VARARGS, "pool2d(average, x, kernel, stride, padding)"},
    {"max_pool2d_grad", py_max_pool2d_grad, METH_VARARGS,
     "max_pool2d_grad(x, grad, kernel, stride, padding): each window's gradient to its first maximum of x"},
    {"reduce", py_reduce, METH_VARARGS, "reduce(op, x, dims, keepdim)"},
    {"argmax", py_argmax, METH_VARARGS, "argmax(x, dim, keepdim)"},
    {"softmax", py_softmax, METH_VARARGS, "softmax(x, dim, log_form)"},
    {"layer_norm", py_layer_norm, METH_VARARGS, "layer_norm(x, normalized_rank, weight, bias, eps)"},
    {"batch_norm", py_batch_norm, METH_VARARGS, "batch_norm(x, mean, var, weight, bias, eps): inference"},
    {"embedding", py_embedding, METH_VARARGS, "embedding(table, indices)"},
    {"reshape", py_reshape, METH_VARARGS, "reshape(x, dims): one dim may be -1"},
    {"permute", py_permute, METH_VARARGS, "permute(x, perm)"},
    {"flip", py_flip, METH_VARARGS, "flip(x, dims): the elements in reverse order along dims"},
    {"slice", py_slice, METH_VARARGS, "slice(x, dim, start, stop, step)"},
    {"concat", py_concat, METH_VARARGS, "concat(tensors, dim)"},
    {"pad", py_pad, METH_VARARGS, "pad(x, low, high, value)"},
    {"broadcast_to", py_broadcast_to, METH_VARARGS, "broadcast_to(x, dims)"},
    {"all_reduce", py_all_reduce, METH_VARARGS, "all_reduce(op, x): over every rank of the world (a graph op)"},
    {"leave_world", py_leave_world, METH_NOARGS, "leave_world(): MPI finalized now (at exit; latch_world_leave)"},
    {"world", py_world, METH_NOARGS, "world() -> (rank, size): 0, 1 without a world (LATCH_MPI)"},
    {"full", py_full, METH_VARARGS, "full(dtype, dims, value): a constant of the graph"},
    {"iota", py_iota, METH_VARARGS, "iota(dtype, dims, dim)"},
    {"dropout", py_dropout, METH_VARARGS, "dropout(x, p): inverted dropout, a graph op"},
    {"rand_uniform_like", py_rand_uniform_like, METH_VARARGS,
     "rand_uniform_like(x, low, high): uniform numbers of x's shape, a graph op (latch's graph random numbers)"},
    {"assign", py_assign, METH_VARARGS, "assign(dst, src): in-place update"},
    {NULL, NULL, 0, NULL},
};
