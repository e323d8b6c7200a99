/* The type latch.torch.Compiled derives from (latch._latch.Compiled): its call is the warm
 * path of latch.torch.compile, in C, with no Python frame: the Function's guards and cached
 * executable (lp_function_call), then the outputs as torch tensors (lp_to_torch), the one
 * output itself when `single` is set. Everything else goes to the Python subclass:
 *   - no `function` yet, or keyword arguments: self._slow_call(args, kwargs or None) (the first
 *     call, which traces; the eager fallback once `function` is None again);
 *   - latch raised Unsupported (an op the trace cannot lower): self._unsupported(exc, args);
 *   - several outputs or a structure: self._pack(list of torch tensors).
 * A Python subclass of a C type with tp_call keeps that tp_call as its __call__ unless it
 * defines its own; latch.torch.Compiled does not. */
#include <stddef.h>

#include "latchpy.h"
#include <structmember.h>

typedef struct {
  PyObject_HEAD
  PyObject *function; /* a Function, or NULL (None from Python) */
  char single;        /* one tensor output, returned as is */
} LatchCompiled;

static PyObject *s_slow_call, *s_unsupported, *s_pack;

static PyObject *call_method2(PyObject *self, PyObject *name, PyObject *a, PyObject *b) {
  PyObject *argv[4] = {NULL, self, a, b}; /* argv[0]: the callee's to use */
  return PyObject_VectorcallMethod(name, argv + 1, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static PyObject *unsupported(PyObject *self, PyObject *args) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyObject *result = value ? call_method2(self, s_unsupported, value, args) : NULL;
  Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
  return result;
}

static PyObject *compiled_call(LatchCompiled *self, PyObject *args, PyObject *kwargs) {
  if (!self->function || (kwargs && PyDict_GET_SIZE(kwargs)))
    return call_method2((PyObject *)self, s_slow_call, args, kwargs ? kwargs : Py_None);
  PyObject *function = Py_NewRef(self->function); /* the fallback may drop self->function */
  bool single = self->single; /* one output, returned itself: no list made */
  PyObject *outs =
      lp_function_call(function, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), lp_to_torch, single);
  Py_DECREF(function);
  if (!outs) return PyErr_ExceptionMatches(LatchUnsupported) ? unsupported((PyObject *)self, args) : NULL;
  if (single) return outs;
  PyObject *packed = PyObject_CallMethodOneArg((PyObject *)self, s_pack, outs);
  Py_DECREF(outs);
  return packed;
}

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
  return 0;
}

static int compiled_clear(LatchCompiled *self) {
  Py_CLEAR(self->function);
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
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject LatchCompiled_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "latch._latch.Compiled",
    .tp_basicsize = sizeof(LatchCompiled),
    .tp_dealloc = (destructor)compiled_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_doc = "base of latch.torch.Compiled: calls run the Function and give torch tensors in C; the subclass "
              "defines _slow_call(args, kwargs), _unsupported(exc, args) and _pack(outputs)",
    .tp_traverse = (traverseproc)compiled_traverse,
    .tp_clear = (inquiry)compiled_clear,
    .tp_call = (ternaryfunc)compiled_call,
    .tp_getset = compiled_getset,
    .tp_members = compiled_members,
    .tp_new = PyType_GenericNew,
};

int lp_compiled_init(PyObject *module) {
  if (!(s_slow_call = PyUnicode_InternFromString("_slow_call")) ||
      !(s_unsupported = PyUnicode_InternFromString("_unsupported")) || !(s_pack = PyUnicode_InternFromString("_pack")))
    return -1;
  if (PyType_Ready(&LatchCompiled_Type) < 0) return -1;
  return PyModule_AddObjectRef(module, "Compiled", (PyObject *)&LatchCompiled_Type);
}
