/* latch's CPython extension (module latch._latch): declarations shared by its files. The
 * extension is written against include/latch.h alone, as bench/ is; it holds one runtime per
 * process, opened on first use from the LATCH_* variables (latch_options_init).
 *
 *   module.c    the module, the runtime, errors, stats, sync
 *   tensor.c    the Tensor type (one latch_tensor reference), torch tensors lent zero-copy,
 *               results read through the buffer protocol
 *   to_torch.c  results as torch tensors in one C call (DLPack), no copy
 *   ops.c       one Python function per latch op
 *   function.c  the Function type: a latch_function whose trace runs a Python callable, with
 *               the torch-side guards (device, layout, parameters and their versions) in C
 *   compiled.c  the base of latch.torch.Compiled: its warm call, Function to torch results,
 *               in C
 *   dispatch.c  the aten op table both latch.torch modes lower through (the common ops made
 *               in C), and latch lazy's __torch_dispatch__ */
#ifndef LATCHPY_H
#define LATCHPY_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "latch.h"

typedef struct {
  PyObject_HEAD
  latch_tensor *t;
} LatchTensor;

extern PyTypeObject LatchTensor_Type;
extern PyTypeObject LatchFunction_Type;
extern PyObject *LatchError;       /* latch._latch.Error: an op or a sync failed */
extern PyObject *LatchUnsupported; /* latch._latch.Unsupported: valid, latch cannot do it */

/* module.c */
latch_runtime *lp_runtime(void); /* NULL with a Python error set when it cannot open */
PyObject *lp_raise_status(latch_status status, const char *what);

/* tensor.c */
/* true when t is a tensor and no error tensor; else false with MemoryError or Error raised
 * (and t released). */
bool lp_tensor_ok(latch_tensor *t);
/* A new Tensor owning t (reference taken over); raises Error (and releases t) when t is an
 * error tensor, MemoryError when t is NULL. */
PyObject *lp_wrap(latch_tensor *t);
/* The latch_tensor of a Tensor, or NULL with TypeError naming the argument. */
latch_tensor *lp_tensor_arg(PyObject *obj, const char *fn, int index);
/* A latch tensor over a torch tensor's memory (contiguous, on the CPU), keeping it alive;
 * NULL with ValueError/TypeError naming the problem. data_ptr receives the address. */
latch_tensor *lp_borrow_torch(PyObject *tensor, void **data_ptr);
/* torch dtype object <-> latch dtype, from the table latch/_dtypes.py installs. */
latch_dtype lp_dtype_of_torch(PyObject *dtype);
PyObject *lp_torch_dtype(latch_dtype dtype); /* borrowed; NULL when torch has none */
int lp_tensor_init(PyObject *module);

/* ops.c */
extern PyMethodDef lp_op_methods[];

/* to_torch.c */
/* A torch tensor over t's synced memory, taking over the reference t (released on error). */
PyObject *lp_to_torch(latch_tensor *t);
int lp_to_torch_init(PyObject *module);

/* function.c */
/* Calls function (a Function) on the torch tensors args: the list of its outputs, each made
 * by convert (lp_wrap, lp_to_torch), which takes over the reference, or with one set the
 * only output itself (RuntimeError if there are several); NULL with an exception. */
PyObject *lp_function_call(PyObject *function, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *(*convert)(latch_tensor *), bool one);
int lp_function_init(PyObject *module);

/* compiled.c */
int lp_compiled_init(PyObject *module);

/* dispatch.c */
int lp_dispatch_init(PyObject *module);
#endif
