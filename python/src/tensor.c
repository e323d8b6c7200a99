/* The Tensor type: one reference to a latch_tensor. Torch tensors are lent to latch without
 * a copy (latch_from_borrowed over their storage, the torch tensor kept alive until latch
 * lets go). A Tensor's synced values can be read through the buffer protocol over
 * latch_data (memoryview, bytes; the Tensor, and so the latch tensor, stays alive as long
 * as the view); results go to torch through to_torch.c. */
#include "latchpy.h"

static PyObject *dtype_table; /* torch dtype -> latch dtype (int), set by latch/torch/dtypes.py */
static PyObject *torch_dtypes[LATCH_F64 + 1]; /* the other way, from the same table */
static PyObject *s_dtype, *s_is_cpu, *s_is_contiguous, *s_shape, *s_data_ptr, *s_device;

latch_dtype lp_dtype_of_torch(PyObject *dtype) {
  PyObject *v = dtype_table ? PyDict_GetItemWithError(dtype_table, dtype) : NULL;
  return v ? (latch_dtype)PyLong_AsLong(v) : LATCH_INVALID;
}

bool lp_tensor_ok(latch_tensor *t) {
  if (!t) return PyErr_NoMemory(), false;
  const char *error = latch_tensor_error(t);
  if (!error) return true;
  PyErr_SetString(LatchError, error);
  latch_release(t);
  return false;
}

PyObject *lp_torch_dtype(latch_dtype dtype) {
  return dtype > LATCH_INVALID && dtype <= LATCH_F64 ? torch_dtypes[dtype] : NULL;
}

PyObject *lp_wrap(latch_tensor *t) {
  if (!lp_tensor_ok(t)) return NULL;
  LatchTensor *self = PyObject_New(LatchTensor, &LatchTensor_Type);
  if (!self) {
    latch_release(t);
    return NULL;
  }
  self->t = t;
  return (PyObject *)self;
}

latch_tensor *lp_tensor_arg(PyObject *obj, const char *fn, int index) {
  if (Py_TYPE(obj) == &LatchTensor_Type) return ((LatchTensor *)obj)->t;
  PyErr_Format(PyExc_TypeError, "%s: argument %d must be a latch Tensor, not %.100s", fn, index, Py_TYPE(obj)->tp_name);
  return NULL;
}

/* ---- torch tensors lent to latch ---- */

static void release_pyobject(void *obj) {
  PyGILState_STATE state = PyGILState_Ensure();
  Py_DECREF((PyObject *)obj);
  PyGILState_Release(state);
}

/* The attributes a lend reads (dtype, is_cpu, shape) are data descriptors of torch's tensor
 * base type: the lookup that finds them (the type's MRO, the attribute cache, the instance
 * dict checked after) cost as much as the getters. They are looked up once per tensor type
 * and called directly while that type is unchanged (its version tag) and reads attributes
 * the generic way, which is what the lookup would find: a data descriptor of the type comes
 * before anything in the instance's dict. Methods (is_contiguous, data_ptr) are looked up as
 * usual, since an instance may hold its own. One type is remembered, torch.Tensor in
 * practice; another type is looked up as before. */
typedef struct {
  PyTypeObject *type; /* borrowed: compared only, with its version tag */
  unsigned int version;
  PyObject *dtype, *is_cpu, *shape; /* borrowed from the type's MRO, valid while the tag is */
} known_type;
static known_type known;

static bool learn_type(PyTypeObject *type) {
  known.type = NULL;
  if (type->tp_getattro != PyObject_GenericGetAttr) return false;
  PyObject *dtype = _PyType_Lookup(type, s_dtype), *is_cpu = _PyType_Lookup(type, s_is_cpu),
           *shape = _PyType_Lookup(type, s_shape);
  PyObject *found[3] = {dtype, is_cpu, shape};
  for (int i = 0; i < 3; i++)
    if (!found[i] || !Py_TYPE(found[i])->tp_descr_get || !Py_TYPE(found[i])->tp_descr_set) return false;
  if (!PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) return false; /* set by the lookups */
  known = (known_type){type, type->tp_version_tag, dtype, is_cpu, shape};
  return true;
}

/* tensor.<name>, where direct is the known type's descriptor for it. */
static PyObject *read_attr(PyObject *tensor, PyObject *name, PyObject *const *direct) {
  PyTypeObject *type = Py_TYPE(tensor);
  bool same = type == known.type && PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG) &&
              type->tp_version_tag == known.version;
  if (!same && !learn_type(type)) return PyObject_GetAttr(tensor, name);
  return Py_TYPE(*direct)->tp_descr_get(*direct, tensor, (PyObject *)type);
}

static bool attr_true(PyObject *obj, PyObject *name, bool call) {
  PyObject *v = call ? PyObject_CallMethodNoArgs(obj, name) : read_attr(obj, name, &known.is_cpu);
  int truth = v ? PyObject_IsTrue(v) : -1;
  Py_XDECREF(v);
  return truth == 1;
}

static bool read_dims(PyObject *tensor, int *rank, int64_t *dims) {
  PyObject *shape = read_attr(tensor, s_shape, &known.shape);
  if (!shape) return false;
  Py_ssize_t n = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
  bool ok = n >= 0 && n <= LATCH_MAX_RANK;
  for (Py_ssize_t i = 0; ok && i < n; i++) {
    dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
    ok = !(dims[i] == -1 && PyErr_Occurred());
  }
  Py_DECREF(shape);
  if (!ok && !PyErr_Occurred())
    PyErr_Format(PyExc_ValueError, "latch: a tensor of rank %zd (latch takes at most %d dims)", n, LATCH_MAX_RANK);
  *rank = (int)n;
  return ok;
}

latch_tensor *lp_borrow_torch(PyObject *tensor, void **data_ptr) {
  latch_runtime *rt = lp_runtime();
  if (!rt) return NULL;
  PyObject *dtype = read_attr(tensor, s_dtype, &known.dtype);
  if (!dtype) {
    PyErr_Format(PyExc_TypeError, "latch: a torch tensor expected, not %.100s", Py_TYPE(tensor)->tp_name);
    return NULL;
  }
  latch_dtype d = lp_dtype_of_torch(dtype);
  if (d == LATCH_INVALID) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "latch: torch dtype %R has no latch dtype", dtype);
    Py_DECREF(dtype);
    return NULL;
  }
  Py_DECREF(dtype);
  if (!attr_true(tensor, s_is_cpu, false)) {
    if (PyErr_Occurred()) return NULL;
    PyObject *device = PyObject_GetAttr(tensor, s_device);
    PyErr_Format(PyExc_ValueError, "latch: a tensor on device %R: latch takes CPU tensors only", device);
    Py_XDECREF(device);
    return NULL;
  }
  if (!attr_true(tensor, s_is_contiguous, true)) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError, "latch: a non-contiguous tensor (call .contiguous() first)");
    return NULL;
  }
  int rank;
  int64_t dims[LATCH_MAX_RANK];
  if (!read_dims(tensor, &rank, dims)) return NULL;
  PyObject *ptr = PyObject_CallMethodNoArgs(tensor, s_data_ptr);
  if (!ptr) return NULL;
  void *data = PyLong_AsVoidPtr(ptr);
  Py_DECREF(ptr);
  if (PyErr_Occurred()) return NULL;
  Py_INCREF(tensor);
  latch_tensor *t = latch_from_borrowed(rt, d, rank, dims, data, release_pyobject, tensor);
  if (t && latch_tensor_error(t)) {
    PyErr_SetString(LatchError, latch_tensor_error(t));
    latch_release(t);
    return NULL;
  }
  if (!t) PyErr_NoMemory();
  if (data_ptr) *data_ptr = data;
  return t;
}

static PyObject *py_from_torch(PyObject *self, PyObject *tensor) {
  (void)self;
  latch_tensor *t = lp_borrow_torch(tensor, NULL);
  return t ? lp_wrap(t) : NULL;
}

static PyObject *py_set_dtypes(PyObject *self, PyObject *table) {
  (void)self;
  if (!PyDict_Check(table)) return PyErr_Format(PyExc_TypeError, "set_dtypes: a dict, not %.100s", Py_TYPE(table)->tp_name);
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(table, &pos, &key, &value)) {
    long d = PyLong_AsLong(value);
    if (d == -1 && PyErr_Occurred()) return NULL;
    if (d <= LATCH_INVALID || d > LATCH_F64) return PyErr_Format(PyExc_ValueError, "set_dtypes: %ld is no latch dtype", d);
    Py_XSETREF(torch_dtypes[d], Py_NewRef(key));
  }
  Py_XSETREF(dtype_table, Py_NewRef(table));
  Py_RETURN_NONE;
}

/* ---- the type ---- */

static void tensor_dealloc(LatchTensor *self) {
  latch_release(self->t);
  PyObject_Free(self);
}

static PyObject *tensor_dtype(LatchTensor *self, void *closure) {
  (void)closure;
  return PyLong_FromLong(latch_tensor_dtype(self->t));
}

static PyObject *tensor_rank(LatchTensor *self, void *closure) {
  (void)closure;
  return PyLong_FromLong(latch_rank(self->t));
}

/* Reading the dims specializes them inside a trace (latch_dim); size_of does not. */
static PyObject *tensor_shape(LatchTensor *self, void *closure) {
  (void)closure;
  int rank = latch_rank(self->t);
  PyObject *shape = PyTuple_New(rank);
  for (int i = 0; shape && i < rank; i++) PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(latch_dim(self->t, i)));
  return shape;
}

static PyObject *tensor_dim(LatchTensor *self, PyObject *arg) {
  int dim = (int)PyLong_AsLong(arg);
  if (dim == -1 && PyErr_Occurred()) return NULL;
  int64_t size = latch_dim(self->t, dim);
  if (size < 0) return PyErr_Format(PyExc_IndexError, "dim %d out of range for rank %d", dim, latch_rank(self->t));
  return PyLong_FromLongLong(size);
}

static PyObject *tensor_size_of(LatchTensor *self, PyObject *arg) {
  int dim = (int)PyLong_AsLong(arg);
  if (dim == -1 && PyErr_Occurred()) return NULL;
  latch_size s = latch_size_of(self->t, dim);
  return Py_BuildValue("(Li)", (long long)s.value, (int)s.sym);
}

static PyObject *tensor_touch(LatchTensor *self, PyObject *noargs) {
  (void)noargs;
  latch_status status = latch_touch(self->t);
  if (status != LATCH_OK) return lp_raise_status(status, "touch");
  Py_RETURN_NONE;
}

/* The address of the synced data (syncing what it needs), as an int. */
static PyObject *tensor_data_ptr(LatchTensor *self, PyObject *noargs) {
  (void)noargs;
  const void *data = latch_numel(self->t) ? latch_data(self->t) : NULL;
  if (!data && latch_numel(self->t)) return lp_raise_status(LATCH_ERR_INPUT, "read");
  return PyLong_FromVoidPtr((void *)data);
}

static int tensor_getbuffer(LatchTensor *self, Py_buffer *view, int flags) {
  int64_t bytes = latch_numel(self->t) * (int64_t)latch_dtype_size(latch_tensor_dtype(self->t));
  const void *data = latch_data(self->t);
  if (!data) {
    lp_raise_status(LATCH_ERR_INPUT, "read");
    return -1;
  }
  return PyBuffer_FillInfo(view, (PyObject *)self, (void *)data, (Py_ssize_t)bytes, 0, flags);
}

static PyBufferProcs tensor_buffer = {(getbufferproc)tensor_getbuffer, NULL};

static PyGetSetDef tensor_getset[] = {
    {"dtype", (getter)tensor_dtype, NULL, "latch dtype number (latch_dtype)", NULL},
    {"rank", (getter)tensor_rank, NULL, "number of dims", NULL},
    {"shape", (getter)tensor_shape, NULL, "dims (inside a trace, reading them specializes them)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef tensor_methods[] = {
    {"dim", (PyCFunction)tensor_dim, METH_O, "dim(i) -> int (inside a trace, reading it specializes that dim)"},
    {"size_of", (PyCFunction)tensor_size_of, METH_O, "size_of(dim) -> (value, symbol or -1), not specializing"},
    {"touch", (PyCFunction)tensor_touch, METH_NOARGS, "touch(): the lent memory was written from outside"},
    {"data_ptr", (PyCFunction)tensor_data_ptr, METH_NOARGS, "data_ptr() -> int: the synced data's address"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LatchTensor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "latch._latch.Tensor",
    .tp_basicsize = sizeof(LatchTensor),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a latch tensor (one reference); made by ops, never directly",
    .tp_getset = tensor_getset,
    .tp_methods = tensor_methods,
    .tp_as_buffer = &tensor_buffer,
};

static PyMethodDef tensor_functions[] = {
    {"from_torch", py_from_torch, METH_O, "from_torch(t) -> Tensor over t's memory (CPU, contiguous), no copy"},
    {"set_dtypes", py_set_dtypes, METH_O, "set_dtypes({torch dtype: latch dtype number})"},
    {NULL, NULL, 0, NULL},
};

int lp_tensor_init(PyObject *module) {
  if (!(s_dtype = PyUnicode_InternFromString("dtype")) || !(s_is_cpu = PyUnicode_InternFromString("is_cpu")) ||
      !(s_is_contiguous = PyUnicode_InternFromString("is_contiguous")) ||
      !(s_shape = PyUnicode_InternFromString("shape")) || !(s_data_ptr = PyUnicode_InternFromString("data_ptr")) ||
      !(s_device = PyUnicode_InternFromString("device")))
    return -1;
  if (PyType_Ready(&LatchTensor_Type) < 0) return -1;
  if (PyModule_AddObjectRef(module, "Tensor", (PyObject *)&LatchTensor_Type) < 0) return -1;
  return PyModule_AddFunctions(module, tensor_functions);
}
