/* The Function type: a latch_function (trace once, guard every call) whose trace runs a
 * Python callable over latch Tensors. latch's guards check the inputs' dtypes and dims; the
 * torch side's are checked here, in C, on every call: each input is a CPU tensor, contiguous,
 * of a latch dtype (else ValueError/TypeError), and each registered parameter or buffer is
 * still the tensor the owner module holds (looked up by name in its dict: a new tensor is
 * lent again), at the same address (else lent again) and version (an in-place update from
 * outside: latch_touch, so latch drops results it kept from the old contents). Parameters
 * are passed after the inputs, so a replaced parameter of the same shape hits the same entry.
 *
 * After a call, an input or parameter the function assigned in place whose new value latch
 * could not write back into the lent memory is copied there, so torch sees every update.
 *
 * latch_call runs without the GIL: a hit's execution lets other Python threads run, and a
 * call that waits for another thread's trace (latch runs traces one at a time) does not hold
 * the GIL that trace's Python code needs (it did, and two threads hung). The tracer takes
 * the GIL back; what it needs of the call is in the thread's call_state.
 *
 * lp_function_call is the call for both Function.__call__ (latch Tensors out) and
 * latch.torch.Compiled's (torch tensors out, compiled.c). */
#include <stddef.h>
#include <string.h>

#include "latchpy.h"

typedef struct param_guard {
  PyObject *dict, *key; /* the owner's _parameters or _buffers dict, and the name */
  PyObject *tensor;     /* the tensor lent at the last call */
  latch_tensor *lt;     /* latch's tensor over its memory */
  void *data;
  long long version;
} param_guard;

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  latch_function *fn;
  PyObject *tracer; /* tracer([Tensor], (torch tensors of the call)) -> [Tensor] of output_count */
  int output_count;
  int param_count;
  param_guard *params;
} LatchFunction;

static PyObject *s_version, *s_data_ptr;

/* The call in progress on this thread: its torch tensors, for the tracer, and the first
 * exception the tracer raised. A trace runs inside latch_call on the calling thread, which
 * let go of the GIL for it (the tracer takes it back); nested calls save and restore it. */
typedef struct {
  PyObject *const *args;
  Py_ssize_t nargs;
  PyObject *error_type, *error_value, *error_tb;
} call_state;
static _Thread_local call_state *current;

/* ---- the trace: latch calls this; it calls the Python tracer ---- */

static void keep_error(call_state *call) {
  if (call->error_type) { /* the first one is the cause */
    PyErr_Clear();
    return;
  }
  PyErr_Fetch(&call->error_type, &call->error_value, &call->error_tb);
}

static PyObject *args_tuple(const call_state *call) {
  PyObject *args = PyTuple_New(call->nargs);
  for (Py_ssize_t i = 0; args && i < call->nargs; i++) PyTuple_SET_ITEM(args, i, Py_NewRef(call->args[i]));
  return args;
}

static latch_status trace_outputs(PyObject *result, latch_tensor **outputs, int output_count) {
  PyObject *fast = PySequence_Fast(result, "the tracer returns a sequence of latch Tensors");
  if (!fast) return LATCH_ERR_INPUT;
  latch_status status = LATCH_OK;
  if (PySequence_Fast_GET_SIZE(fast) != output_count) {
    PyErr_Format(LatchUnsupported, "the traced function gave %zd outputs, %d expected", PySequence_Fast_GET_SIZE(fast),
                 output_count);
    status = LATCH_ERR_UNSUPPORTED;
  }
  for (int i = 0; status == LATCH_OK && i < output_count; i++) {
    latch_tensor *t = lp_tensor_arg(PySequence_Fast_GET_ITEM(fast, i), "tracer output", i);
    if (!t) status = LATCH_ERR_INPUT;
    else outputs[i] = latch_retain(t);
  }
  if (status != LATCH_OK)
    for (int i = 0; i < output_count; i++) latch_release(outputs[i]), outputs[i] = NULL;
  Py_DECREF(fast);
  return status;
}

static latch_status trace_locked(LatchFunction *self, call_state *call, latch_tensor *const *inputs, int input_count,
                                 latch_tensor **outputs, int output_count) {
  PyObject *list = PyList_New(input_count), *args = list ? args_tuple(call) : NULL, *result = NULL;
  for (int i = 0; args && i < input_count; i++) {
    PyObject *t = lp_wrap(latch_retain(inputs[i]));
    if (!t) Py_CLEAR(args);
    else PyList_SET_ITEM(list, i, t);
  }
  if (args) result = PyObject_CallFunctionObjArgs(self->tracer, list, args, NULL);
  Py_XDECREF(list);
  Py_XDECREF(args);
  latch_status status = result ? trace_outputs(result, outputs, output_count) : LATCH_ERR_INPUT;
  Py_XDECREF(result);
  if (status != LATCH_OK) {
    if (PyErr_ExceptionMatches(LatchUnsupported)) status = LATCH_ERR_UNSUPPORTED;
    keep_error(call);
  }
  return status;
}

static latch_status trace(void *user, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                          int output_count) {
  if (!current) return LATCH_ERR_INTERNAL; /* latch traces only inside run's latch_call */
  PyGILState_STATE gil = PyGILState_Ensure();
  latch_status status = trace_locked(user, current, inputs, input_count, outputs, output_count);
  PyGILState_Release(gil);
  return status;
}

/* ---- parameters: lent once, checked every call ---- */

static long long version_of(PyObject *tensor) {
  PyObject *v = PyObject_GetAttr(tensor, s_version);
  long long version = v ? PyLong_AsLongLong(v) : -1;
  Py_XDECREF(v);
  return version;
}

static void param_drop(param_guard *p) {
  latch_release(p->lt);
  Py_CLEAR(p->tensor);
  p->lt = NULL;
}

static bool param_lend(param_guard *p, PyObject *tensor) {
  param_drop(p);
  p->lt = lp_borrow_torch(tensor, &p->data);
  if (!p->lt) return false;
  p->tensor = Py_NewRef(tensor);
  p->version = version_of(tensor);
  return !PyErr_Occurred();
}

static PyObject *data_ptr_of(PyObject *tensor) { return PyObject_CallMethodNoArgs(tensor, s_data_ptr); }

/* The guard on one parameter: same tensor, same address, same version. */
static bool param_check(param_guard *p) {
  PyObject *now = PyDict_GetItemWithError(p->dict, p->key);
  if (!now) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_KeyError, "latch: the module no longer has %R", p->key);
    return false;
  }
  if (now != p->tensor) return param_lend(p, now);
  PyObject *ptr = data_ptr_of(now);
  if (!ptr) return false;
  void *data = PyLong_AsVoidPtr(ptr);
  Py_DECREF(ptr);
  if (data != p->data) return param_lend(p, now);
  long long version = version_of(now);
  if (version == p->version) return true;
  p->version = version;
  return latch_touch(p->lt) == LATCH_OK || lp_raise_status(LATCH_ERR_INPUT, "touch");
}

/* After the call: lent memory that no longer holds the tensor's value gets it copied in. */
static bool write_back(latch_tensor *t, void *lent) {
  const void *now = latch_data(t);
  if (!now) return lp_raise_status(LATCH_ERR_INPUT, "write back");
  if (now != lent) memcpy(lent, now, (size_t)latch_numel(t) * latch_dtype_size(latch_tensor_dtype(t)));
  return true;
}

/* ---- the call ---- */

static PyObject *outputs_list(latch_tensor **outputs, int count, PyObject *(*convert)(latch_tensor *)) {
  PyObject *list = PyList_New(count);
  for (int i = 0; i < count; i++) {
    PyObject *t = list ? convert(outputs[i]) : (latch_release(outputs[i]), NULL);
    if (list && !t) Py_CLEAR(list);
    if (list) PyList_SET_ITEM(list, i, t);
  }
  return list;
}

/* The torch inputs lent, then the parameters checked (each retained: another thread may lend
 * it again while this call runs); in[0..*made) hold references, lent the memory. */
static bool gather_inputs(LatchFunction *self, PyObject *const *args, int n, latch_tensor **in, void **lent,
                          int *made) {
  for (; *made < n; ++*made)
    if (!(in[*made] = lp_borrow_torch(args[*made], &lent[*made]))) return false;
  for (int p = 0; p < self->param_count; p++, ++*made) {
    if (!param_check(&self->params[p])) return false;
    in[n + p] = latch_retain(self->params[p].lt);
    lent[n + p] = self->params[p].data;
  }
  return true;
}

/* latch_call without the GIL (a hit runs while other threads run Python; a trace waiting for
 * another thread's does not hold up the tracer), the tracer's exception raised after it. */
static bool run(LatchFunction *self, PyObject *const *args, Py_ssize_t nargs, latch_tensor **in, int count,
                latch_tensor **out) {
  call_state call = {args, nargs, NULL, NULL, NULL}, *outer = current;
  current = &call;
  latch_status status;
  Py_BEGIN_ALLOW_THREADS
  status = latch_call(self->fn, in, count, NULL, 0, out, self->output_count);
  Py_END_ALLOW_THREADS
  current = outer;
  if (call.error_type) {
    for (int i = 0; i < self->output_count; i++) latch_release(out[i]), out[i] = NULL;
    PyErr_Restore(call.error_type, call.error_value, call.error_tb);
    return false;
  }
  return status == LATCH_OK || lp_raise_status(status, "call");
}

#define FEW 16
static PyObject *function_call_inner(LatchFunction *self, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *(*convert)(latch_tensor *), bool one, latch_tensor **in,
                                     void **lent, latch_tensor **out) {
  int n = (int)nargs, made = 0, count = n + self->param_count;
  PyObject *result = NULL;
  if (one && self->output_count != 1)
    return PyErr_Format(PyExc_RuntimeError, "latch Compiled: single set, %d outputs", self->output_count);
  if (gather_inputs(self, args, n, in, lent, &made) && run(self, args, nargs, in, count, out)) {
    bool ok = true;
    for (int i = 0; ok && i < count; i++) ok = write_back(in[i], lent[i]);
    result = !ok ? NULL : one ? convert(out[0]) : outputs_list(out, self->output_count, convert);
    if (!ok)
      for (int i = 0; i < self->output_count; i++) latch_release(out[i]);
  }
  for (int i = 0; i < made; i++) latch_release(in[i]);
  return result;
}

PyObject *lp_function_call(PyObject *function, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *(*convert)(latch_tensor *), bool one) {
  LatchFunction *self = (LatchFunction *)function;
  size_t n = (size_t)nargs + (size_t)self->param_count;
  latch_tensor *in_few[FEW], *out_few[FEW], **in = in_few, **out = out_few;
  void *lent_few[FEW], **lent = lent_few;
  if (n > FEW) in = PyMem_Calloc(n, sizeof *in), lent = PyMem_Calloc(n, sizeof *lent);
  if (self->output_count > FEW) out = PyMem_Calloc((size_t)self->output_count, sizeof *out);
  PyObject *result =
      in && lent && out ? function_call_inner(self, args, nargs, convert, one, in, lent, out) : PyErr_NoMemory();
  if (in != in_few) PyMem_Free(in);
  if (lent != lent_few) PyMem_Free(lent);
  if (out != out_few) PyMem_Free(out);
  return result;
}

static PyObject *function_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  if (kwnames && PyTuple_GET_SIZE(kwnames))
    return PyErr_Format(PyExc_TypeError, "latch Function: keyword arguments are not taken");
  return lp_function_call(callable, args, PyVectorcall_NARGS(nargsf), lp_wrap, false);
}

/* ---- construction, parameters, stats ---- */

static void free_params(LatchFunction *self) {
  for (int p = 0; p < self->param_count; p++) {
    param_drop(&self->params[p]);
    Py_CLEAR(self->params[p].dict);
    Py_CLEAR(self->params[p].key);
  }
  PyMem_Free(self->params);
  self->params = NULL;
  self->param_count = 0;
}

/* set_params([(owner dict, name), ...]): the tensors passed after the inputs, guarded. */
static PyObject *function_set_params(LatchFunction *self, PyObject *list) {
  PyObject *fast = PySequence_Fast(list, "set_params: a sequence of (dict, name) pairs");
  if (!fast) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  free_params(self);
  self->params = PyMem_Calloc((size_t)(n ? n : 1), sizeof(param_guard));
  if (!self->params) {
    Py_DECREF(fast);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *dict, *key;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "O!O", &PyDict_Type, &dict, &key)) {
      Py_DECREF(fast);
      return NULL;
    }
    self->params[i].dict = Py_NewRef(dict);
    self->params[i].key = Py_NewRef(key);
    self->param_count = (int)i + 1;
  }
  Py_DECREF(fast);
  Py_RETURN_NONE;
}

#define FSTAT(field) PyDict_SetItemString(d, #field, v = PyLong_FromUnsignedLongLong(s.field)), Py_XDECREF(v)
static PyObject *function_stats(LatchFunction *self, PyObject *noargs) {
  (void)noargs;
  latch_function_stats s;
  latch_function_get_stats(self->fn, &s);
  PyObject *d = PyDict_New(), *v;
  if (!d) return NULL;
  FSTAT(calls), FSTAT(hits), FSTAT(traces), FSTAT(recompiles), FSTAT(fallback_calls), FSTAT(specializations);
  FSTAT(instantiations), FSTAT(instantiate_ns), FSTAT(entries), FSTAT(guard_checks), FSTAT(guard_ns);
  FSTAT(trace_ns), FSTAT(trace_every);
  return d;
}

/* marks: a sequence of (input, dim) pairs, each dim symbolic from the first trace. */
static latch_dim_mark *read_marks(PyObject *marks, int *count) {
  *count = 0;
  if (!marks || marks == Py_None) return NULL;
  PyObject *fast = PySequence_Fast(marks, "latch Function: marks is a sequence of (input, dim) pairs");
  if (!fast) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  latch_dim_mark *out = PyMem_Calloc((size_t)(n ? n : 1), sizeof *out);
  if (!out) PyErr_NoMemory();
  for (Py_ssize_t i = 0; out && i < n; i++) {
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "ii", &out[i].input, &out[i].dim)) {
      PyMem_Free(out);
      out = NULL;
    } else {
      out[i].dynamic = true;
    }
  }
  Py_DECREF(fast);
  if (out) *count = (int)n;
  return out;
}

static int function_init(LatchFunction *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"tracer", "output_count", "name", "mode", "shapes", "recompile_limit", "marks", "seed",
                          "precision", NULL};
  PyObject *tracer, *marks_obj = NULL, *seed_obj = NULL;
  int output_count, mode = 0, shapes = 0, limit = -1;
  const char *name = NULL, *precision = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|ziiiOOz", names, &tracer, &output_count, &name, &mode, &shapes,
                                   &limit, &marks_obj, &seed_obj, &precision))
    return -1;
  latch_runtime *rt = lp_runtime();
  if (!rt) return -1;
  if (self->fn) {
    PyErr_SetString(PyExc_RuntimeError, "latch Function: already initialized");
    return -1;
  }
  if (output_count < 0) {
    PyErr_Format(PyExc_ValueError, "latch Function: output_count %d is negative", output_count);
    return -1;
  }
  latch_function_options options;
  if (latch_function_options_init(&options) != LATCH_OK) {
    lp_raise_status(LATCH_ERR_INPUT, "function options");
    return -1;
  }
  options.name = name;
  options.mode = (latch_trace_mode)mode;
  options.shapes = (latch_shape_policy)shapes;
  options.precision = precision;
  if (limit >= 0) options.recompile_limit = limit;
  if (seed_obj && seed_obj != Py_None) {
    options.seed = PyLong_AsUnsignedLongLongMask(seed_obj);
    if (PyErr_Occurred()) return -1;
  }
  latch_dim_mark *marks = read_marks(marks_obj, &options.mark_count);
  if (!marks && PyErr_Occurred()) return -1;
  options.marks = marks;
  self->fn = latch_function_new_step(rt, trace, self, &options); /* marks copied */
  PyMem_Free(marks);
  if (!self->fn) {
    lp_raise_status(LATCH_ERR_INPUT, "function");
    return -1;
  }
  self->tracer = Py_NewRef(tracer);
  self->output_count = output_count;
  return 0;
}

static PyObject *function_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  (void)args, (void)kw;
  LatchFunction *self = (LatchFunction *)type->tp_alloc(type, 0);
  if (self) self->vectorcall = function_vectorcall;
  return (PyObject *)self;
}

static void function_dealloc(LatchFunction *self) {
  PyObject_GC_UnTrack(self);
  if (self->fn) latch_function_free(self->fn);
  free_params(self);
  Py_CLEAR(self->tracer);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int function_traverse(LatchFunction *self, visitproc visit, void *arg) {
  Py_VISIT(self->tracer);
  for (int p = 0; p < self->param_count; p++) {
    Py_VISIT(self->params[p].dict);
    Py_VISIT(self->params[p].tensor);
  }
  return 0;
}

static int function_clear(LatchFunction *self) {
  Py_CLEAR(self->tracer);
  for (int p = 0; p < self->param_count; p++) Py_CLEAR(self->params[p].dict);
  return 0;
}

static PyMethodDef function_methods[] = {
    {"set_params", (PyCFunction)function_set_params, METH_O, "set_params([(dict, name)]): guarded tensors passed after the inputs"},
    {"stats", (PyCFunction)function_stats, METH_NOARGS, "stats() -> dict (latch_function_stats)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LatchFunction_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "latch._latch.Function",
    .tp_basicsize = sizeof(LatchFunction),
    .tp_dealloc = (destructor)function_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Function(tracer, output_count, name=None, mode=0, shapes=0, recompile_limit=-1, marks=None, "
              "seed=None, precision=None): trace once, guard every call; call with torch tensors, get latch Tensors. tracer(inputs, "
              "args) gets the latch Tensors to trace over and the call's torch tensors. marks: (input, dim) pairs "
              "symbolic from the first trace. seed: the graph random numbers' seed (latch_function_options.seed). "
              "precision: 'f32' or 'bf16' (latch_function_options.precision), None: the runtime's",
    .tp_traverse = (traverseproc)function_traverse,
    .tp_clear = (inquiry)function_clear,
    .tp_init = (initproc)function_init,
    .tp_new = function_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(LatchFunction, vectorcall),
    .tp_methods = function_methods,
};

int lp_function_init(PyObject *module) {
  if (!(s_version = PyUnicode_InternFromString("_version")) || !(s_data_ptr = PyUnicode_InternFromString("data_ptr")))
    return -1;
  if (PyType_Ready(&LatchFunction_Type) < 0) return -1;
  return PyModule_AddObjectRef(module, "Function", (PyObject *)&LatchFunction_Type);
}
