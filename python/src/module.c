/* The latch._latch module: the process's runtime (opened on first use), errors, stats and
 * sync. See latchpy.h for the other files. */
#include "latchpy.h"

PyObject *LatchError, *LatchUnsupported;
static latch_runtime *runtime;

latch_runtime *lp_runtime(void) {
  if (runtime) return runtime;
  runtime = latch_open(NULL);
  if (!runtime) PyErr_Format(LatchError, "latch: cannot open the runtime: %s", latch_last_error());
  return runtime;
}

PyObject *lp_raise_status(latch_status status, const char *what) {
  PyObject *type = status == LATCH_ERR_UNSUPPORTED ? LatchUnsupported : LatchError;
  if (status == LATCH_ERR_INTERNAL && strstr(latch_last_error(), "out of memory")) return PyErr_NoMemory();
  PyErr_Format(type, "%s: %s", what, latch_last_error());
  return NULL;
}

static PyObject *py_sync(PyObject *self, PyObject *noargs) {
  (void)self, (void)noargs;
  latch_runtime *rt = lp_runtime();
  if (!rt) return NULL;
  latch_status status = latch_sync(rt);
  if (status != LATCH_OK) return lp_raise_status(status, "sync");
  Py_RETURN_NONE;
}

#define STAT(field) PyDict_SetItemString(d, #field, v = PyLong_FromUnsignedLongLong(s.field)), Py_XDECREF(v)
static PyObject *py_stats(PyObject *self, PyObject *noargs) {
  (void)self, (void)noargs;
  latch_runtime *rt = lp_runtime();
  if (!rt) return NULL;
  latch_stats s;
  latch_get_stats(rt, &s);
  PyObject *d = PyDict_New(), *v;
  if (!d) return NULL;
  STAT(syncs), STAT(ops_traced), STAT(nodes_synced), STAT(cache_hits), STAT(cache_misses);
  STAT(compile_failures), STAT(evictions), STAT(cache_entries), STAT(compiles), STAT(disk_loads);
  STAT(disk_writes), STAT(compile_ns), STAT(check_failures), STAT(key_ns), STAT(execute_ns);
  return d;
}

static PyObject *py_runtime_open(PyObject *self, PyObject *noargs) {
  (void)self, (void)noargs;
  return PyBool_FromLong(runtime != NULL);
}

static PyObject *py_last_repro(PyObject *self, PyObject *noargs) {
  (void)self, (void)noargs;
  latch_runtime *rt = lp_runtime();
  return rt ? PyUnicode_FromString(latch_last_repro(rt)) : NULL;
}

static PyMethodDef module_methods[] = {
    {"sync", py_sync, METH_NOARGS, "sync(): run everything pending on this thread as one graph"},
    {"stats", py_stats, METH_NOARGS, "stats() -> dict: the runtime's counters (latch_stats)"},
    {"runtime_open", py_runtime_open, METH_NOARGS,
     "runtime_open() -> bool: whether the runtime is open (its settings fixed; latch.config)"},
    {"last_repro", py_last_repro, METH_NOARGS, "last_repro() -> str: the newest LATCH_CHECK repro dir"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "latch._latch",
                                        "latch's C API for Python (see latch/__init__.py)", -1, NULL,
                                        NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__latch(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  LatchError = PyErr_NewException("latch._latch.Error", PyExc_RuntimeError, NULL);
  LatchUnsupported = PyErr_NewException("latch._latch.Unsupported", LatchError, NULL);
  if (!LatchError || !LatchUnsupported || PyModule_AddObjectRef(m, "Error", LatchError) < 0 ||
      PyModule_AddObjectRef(m, "Unsupported", LatchUnsupported) < 0 || PyModule_AddFunctions(m, module_methods) < 0 ||
      PyModule_AddFunctions(m, lp_op_methods) < 0 || lp_tensor_init(m) < 0 || lp_function_init(m) < 0 ||
      lp_to_torch_init(m) < 0 || lp_compiled_init(m) < 0 ||
      lp_dispatch_init(m) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
