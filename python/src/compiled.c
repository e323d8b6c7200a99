/* The type latch.torch.Compiled derives from (latch._latch.Compiled): its call is the warm
 * path of latch.torch.compile, in C, with no Python frame: the Function's guards and cached
 * executable (lp_function_call), then the outputs as torch tensors (lp_to_torch), the one
 * output itself when `single` is set. Everything else goes to the Python subclass:
 *   - no `function` yet, or keyword arguments: self._slow_call(args, kwargs or None) (the first
 *     call, which traces; the eager fallback once `function` is None again);
 *   - latch raised Unsupported (an op the trace cannot lower): self._unsupported(exc, args);
 *   - an argument the C path does not take (TypeError or ValueError: not a tensor, not
 *     contiguous, another device or dtype; latch's error with a 0-size tensor):
 *     self._bad_args(exc, args), which normalizes them or runs the call eagerly;
 *   - several outputs or a structure: self._pack(list of torch tensors);
 *   - a guard on what the graph depends on besides its tensors fails (guards_hold below):
 *     self._slow_call(args, kwargs or None), which compares by value, picks or traces the
 *     graph for the new state and sets the guards again.
 * A Python subclass of a C type with tp_call keeps that tp_call as its __call__ unless it
 * defines its own; latch.torch.Compiled does not. */
#include <stddef.h>

#include "latchpy.h"
#include <structmember.h>

typedef struct {
  PyObject_HEAD
  PyObject *function; /* a Function, or NULL (None from Python) */
  char single;        /* one tensor output, returned as is */
  /* Set by the Python subclass (latch/torch/guards.py), NULL when unset:
   * guards: a flat tuple of triples (owner, key, value), each holding when
   *   owner is a dict and key None:  len(owner) == value (an int);
   *   owner is a dict:               owner[key] is value;
   *   otherwise:                     getattr(owner, key) is value.
   * Identity, not equality: a value that is equal but another object takes the slow path once.
   * grad_query: torch.is_grad_enabled; grad_mode: what it returned at the trace (True/False).
   * input_grads: each input's requires_grad at the trace, a tuple of True/False. */
  PyObject *guards, *grad_query, *grad_mode, *input_grads;
} LatchCompiled;

static PyObject *s_slow_call, *s_unsupported, *s_bad_args, *s_pack;

static PyObject *call_method2(PyObject *self, PyObject *name, PyObject *a, PyObject *b) {
  PyObject *argv[4] = {NULL, self, a, b}; /* argv[0]: the callee's to use */
  return PyObject_VectorcallMethod(name, argv + 1, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* The pending exception handed to the subclass's method (name)(exc, args). */
static PyObject *hand_over(PyObject *self, PyObject *name, PyObject *args) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyObject *result = value ? call_method2(self, name, value, args) : NULL;
  Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
  return result;
}

static PyObject *s_requires_grad, *s_numel;

/* Whether self has the method (a subclass may not), the pending error kept. */
static bool has_method(PyObject *self, PyObject *name) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  bool has = PyObject_HasAttr(self, name);
  PyErr_Restore(type, value, tb);
  return has;
}

/* Whether an argument is a 0-size tensor (latch's error for it is not the caller's fault:
 * eager gives a 0-size result). Asked only after a failed call; the pending error kept. */
static bool has_empty(PyObject *args) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  bool empty = false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args) && !empty; i++) {
    PyObject *n = PyObject_CallMethodNoArgs(PyTuple_GET_ITEM(args, i), s_numel);
    empty = n && PyLong_Check(n) && PyLong_AsLongLong(n) == 0;
    Py_XDECREF(n);
    PyErr_Clear();
  }
  PyErr_Restore(type, value, tb);
  return empty;
}

/* 1 when the guard at g[0..2] holds, 0 when not, -1 with an exception. */
static int guard_holds(PyObject *const *g) {
  if (PyDict_Check(g[0]) && g[1] == Py_None) return PyDict_GET_SIZE(g[0]) == PyLong_AsSsize_t(g[2]);
  if (PyDict_Check(g[0])) {
    PyObject *now = PyDict_GetItemWithError(g[0], g[1]);
    return now ? now == g[2] : PyErr_Occurred() ? -1 : 0;
  }
  PyObject *now = PyObject_GetAttr(g[0], g[1]);
  if (!now) return -1;
  Py_DECREF(now);
  return now == g[2];
}

/* Whether the call may take the cached graph: grad mode, the inputs' requires_grad and every
 * guard as at the trace. -1 with an exception. */
static bool is_set(PyObject *member) { return member && member != Py_None; }

static int guards_hold(LatchCompiled *self, PyObject *args) {
  if (is_set(self->grad_query) && is_set(self->grad_mode)) {
    PyObject *mode = PyObject_CallNoArgs(self->grad_query);
    if (!mode) return -1;
    Py_DECREF(mode);
    if (mode != self->grad_mode) return 0;
  }
  if (is_set(self->input_grads)) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (!PyTuple_Check(self->input_grads) || PyTuple_GET_SIZE(self->input_grads) != n) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
      PyObject *now = PyObject_GetAttr(PyTuple_GET_ITEM(args, i), s_requires_grad);
      if (!now && !PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
      if (!now) { /* not a tensor: the Function's call says so (TypeError) */
        PyErr_Clear();
        continue;
      }
      Py_DECREF(now);
      if (now != PyTuple_GET_ITEM(self->input_grads, i)) return 0;
    }
  }
  if (!is_set(self->guards)) return 1;
  if (!PyTuple_Check(self->guards) || PyTuple_GET_SIZE(self->guards) % 3) {
    PyErr_SetString(PyExc_TypeError, "latch Compiled: guards must be a flat tuple of (owner, key, value) triples");
    return -1;
  }
  PyObject *const *g = &PyTuple_GET_ITEM(self->guards, 0);
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(self->guards); i < n; i += 3) {
    int holds = guard_holds(g + i);
    if (holds != 1) return holds;
  }
  return 1;
}

static PyObject *compiled_call(LatchCompiled *self, PyObject *args, PyObject *kwargs) {
  int holds = self->function ? guards_hold(self, args) : 0;
  if (holds < 0) return NULL;
  if (!holds || (kwargs && PyDict_GET_SIZE(kwargs)))
    return call_method2((PyObject *)self, s_slow_call, args, kwargs ? kwargs : Py_None);
  PyObject *function = Py_NewRef(self->function); /* the fallback may drop self->function */
  bool single = self->single; /* one output, returned itself: no list made */
  PyObject *outs =
      lp_function_call(function, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), lp_to_torch, single);
  Py_DECREF(function);
  if (!outs) {
    if (PyErr_ExceptionMatches(LatchUnsupported)) return hand_over((PyObject *)self, s_unsupported, args);
    if ((PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError) ||
         (PyErr_ExceptionMatches(LatchError) && has_empty(args))) &&
        has_method((PyObject *)self, s_bad_args))
      return hand_over((PyObject *)self, s_bad_args, args);
    return NULL;
  }
  if (single) return outs;
  PyObject *packed = PyObject_CallMethodOneArg((PyObject *)self, s_pack, outs);
  Py_DECREF(outs);
  return packed;
}

static PyObject *compiled_guards_hold(LatchCompiled *self, PyObject *args) {
  if (!PyTuple_Check(args)) return PyErr_Format(PyExc_TypeError, "_guards_hold takes the call's argument tuple");
  int holds = guards_hold(self, args);
  return holds < 0 ? NULL : PyBool_FromLong(holds);
}

static PyMethodDef compiled_methods[] = {
    {"_guards_hold", (PyCFunction)compiled_guards_hold, METH_O,
     "_guards_hold(args): whether grad mode, the inputs' requires_grad and the guards are as at the trace"},
    {NULL, NULL, 0, NULL},
};

static PyObject *compiled_get_function(LatchCompiled *self, void *closure) {
  (void)closure;
  return Py_NewRef(self->function ? self->function : Py_None);
}

static int compiled_set_function(LatchCompiled *self, PyObject *value, void *closure) {
  (void)closure;
  if (value && value != Py_None && !PyObject_TypeCheck(value, &LatchFunction_Type)) {
    PyErr_Format(PyExc_TypeError, "latch Compiled: function must be a latch Function or None, not %.100s",
                 Py_TYPE(value)->tp_name);
    return -1;
  }
  Py_XSETREF(self->function, value && value != Py_None ? Py_NewRef(value) : NULL);
  return 0;
}

static int compiled_traverse(LatchCompiled *self, visitproc visit, void *arg) {
  Py_VISIT(self->function);
  Py_VISIT(self->guards);
  Py_VISIT(self->grad_query);
  Py_VISIT(self->grad_mode);
  Py_VISIT(self->input_grads);
  return 0;
}

static int compiled_clear(LatchCompiled *self) {
  Py_CLEAR(self->function);
  Py_CLEAR(self->guards);
  Py_CLEAR(self->grad_query);
  Py_CLEAR(self->grad_mode);
  Py_CLEAR(self->input_grads);
  return 0;
}

static void compiled_dealloc(LatchCompiled *self) {
  PyObject_GC_UnTrack(self);
  compiled_clear(self);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyGetSetDef compiled_getset[] = {
    {"function", (getter)compiled_get_function, (setter)compiled_set_function,
     "the latch Function warm calls go through; None: calls go to _slow_call", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef compiled_members[] = {
    {"single", T_BOOL, offsetof(LatchCompiled, single), 0, "one tensor output, returned as is (else _pack)"},
    {"guards", T_OBJECT, offsetof(LatchCompiled, guards), 0, "flat tuple of (owner, key, value) identity guards"},
    {"grad_query", T_OBJECT, offsetof(LatchCompiled, grad_query), 0, "torch.is_grad_enabled, or None"},
    {"grad_mode", T_OBJECT, offsetof(LatchCompiled, grad_mode), 0, "grad mode at the trace (True/False), or None"},
    {"input_grads", T_OBJECT, offsetof(LatchCompiled, input_grads), 0, "inputs' requires_grad at the trace, or None"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject LatchCompiled_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "latch._latch.Compiled",
    .tp_basicsize = sizeof(LatchCompiled),
    .tp_dealloc = (destructor)compiled_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_doc = "base of latch.torch.Compiled: calls run the Function and give torch tensors in C; the subclass "
              "defines _slow_call(args, kwargs), _unsupported(exc, args), _bad_args(exc, args) and _pack(outputs)",
    .tp_traverse = (traverseproc)compiled_traverse,
    .tp_clear = (inquiry)compiled_clear,
    .tp_call = (ternaryfunc)compiled_call,
    .tp_getset = compiled_getset,
    .tp_members = compiled_members,
    .tp_methods = compiled_methods,
    .tp_new = PyType_GenericNew,
};

int lp_compiled_init(PyObject *module) {
  if (!(s_slow_call = PyUnicode_InternFromString("_slow_call")) ||
      !(s_unsupported = PyUnicode_InternFromString("_unsupported")) ||
      !(s_bad_args = PyUnicode_InternFromString("_bad_args")) || !(s_pack = PyUnicode_InternFromString("_pack")) ||
      !(s_requires_grad = PyUnicode_InternFromString("requires_grad")) ||
      !(s_numel = PyUnicode_InternFromString("numel")))
    return -1;
  if (PyType_Ready(&LatchCompiled_Type) < 0) return -1;
  return PyModule_AddObjectRef(module, "Compiled", (PyObject *)&LatchCompiled_Type);
}
