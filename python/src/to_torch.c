/* latch results as torch tensors, without a copy and without Python code: a DLPack capsule
 * (<dlpack/dlpack.h>, version 0.6, which torch 1.13 reads) over a latch tensor's synced
 * memory, handed to torch._C._from_dlpack, which makes a tensor of the right dtype and
 * shape in one C call (torch.frombuffer gives a flat tensor that needs a view after it:
 * 0.8 + 1.2 us a result against 0.55 us on this machine).
 *
 * Who owns what: the managed tensor holds one latch reference. torch calls its deleter when
 * its last tensor over the memory is freed, from whichever thread frees it and maybe
 * without the GIL, so the deleter touches no Python object: it releases the latch tensor,
 * which latch allows from any thread once the tensor is synced (include/latch.h, "Threads"),
 * and frees the malloc'd block. A capsule torch did not take (its name is still "dltensor")
 * runs the deleter when it is freed.
 *
 * DLPack 0.6 has no bool: bool results go over as uint8 and are viewed as bool (torch's
 * view(dtype), no copy). latch dtypes torch lacks (u16, u32, u64) are Unsupported. */
#include <dlpack/dlpack.h>
#include <stdlib.h>

#include "latchpy.h"

typedef struct {
  DLManagedTensor managed;
  int64_t shape[LATCH_MAX_RANK], strides[LATCH_MAX_RANK];
} managed_block;

static PyObject *from_dlpack; /* torch._C._from_dlpack, set by set_torch */
static PyObject *s_view;
static const char capsule_name[] = "dltensor";

static void release_managed(DLManagedTensor *managed) {
  latch_release(managed->manager_ctx);
  free(managed);
}

static void capsule_free(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, capsule_name)) return; /* taken: torch calls the deleter */
  DLManagedTensor *managed = PyCapsule_GetPointer(capsule, capsule_name);
  managed->deleter(managed);
}

/* DLPack's code and bits for a latch dtype; false for those torch has no dtype for. */
static bool dl_type_of(latch_dtype dtype, DLDataType *out) {
  static const DLDataType types[] = {
      [LATCH_BOOL] = {kDLUInt, 8, 1},   [LATCH_I8] = {kDLInt, 8, 1},      [LATCH_I16] = {kDLInt, 16, 1},
      [LATCH_I32] = {kDLInt, 32, 1},    [LATCH_I64] = {kDLInt, 64, 1},    [LATCH_U8] = {kDLUInt, 8, 1},
      [LATCH_F16] = {kDLFloat, 16, 1},  [LATCH_BF16] = {kDLBfloat, 16, 1}, [LATCH_F32] = {kDLFloat, 32, 1},
      [LATCH_F64] = {kDLFloat, 64, 1},
  };
  if (dtype <= LATCH_INVALID || dtype > LATCH_F64 || !types[dtype].bits) return false;
  *out = types[dtype];
  return true;
}

/* A capsule over t's synced data, taking over the reference t. */
static PyObject *make_capsule(latch_tensor *t, DLDataType type) {
  const void *data = latch_data(t); /* synced even when empty, so any thread may release it */
  if (!data && latch_numel(t)) {
    latch_release(t);
    return lp_raise_status(LATCH_ERR_INPUT, "read");
  }
  managed_block *block = malloc(sizeof *block);
  if (!block) {
    latch_release(t);
    return PyErr_NoMemory();
  }
  int rank = latch_rank(t);
  int64_t stride = 1; /* row-major, in elements; a dim of 0 or 1 counts as 1, as torch's own */
  for (int i = rank - 1; i >= 0; i--) {
    block->shape[i] = latch_dim(t, i);
    block->strides[i] = stride;
    stride *= block->shape[i] > 1 ? block->shape[i] : 1;
  }
  block->managed = (DLManagedTensor){
      .dl_tensor = {.data = (void *)data, .device = {kDLCPU, 0}, .ndim = rank, .dtype = type,
                    .shape = block->shape, .strides = block->strides, .byte_offset = 0},
      .manager_ctx = t,
      .deleter = release_managed,
  };
  PyObject *capsule = PyCapsule_New(&block->managed, capsule_name, capsule_free);
  if (!capsule) release_managed(&block->managed);
  return capsule;
}

PyObject *lp_to_torch(latch_tensor *t) {
  if (!lp_tensor_ok(t)) return NULL;
  latch_dtype dtype = latch_tensor_dtype(t);
  DLDataType type;
  PyObject *capsule = NULL, *out = NULL;
  if (!from_dlpack)
    PyErr_SetString(PyExc_RuntimeError, "latch: torch results before set_torch (import latch.torch)");
  else if (!dl_type_of(dtype, &type))
    PyErr_Format(LatchUnsupported, "latch: dtype %s has no torch dtype", latch_dtype_name(dtype));
  else
    capsule = make_capsule(t, type), t = NULL;
  latch_release(t);
  if (capsule) out = PyObject_CallOneArg(from_dlpack, capsule);
  Py_XDECREF(capsule);
  if (out && dtype == LATCH_BOOL) {
    PyObject *argv[3] = {NULL, out, lp_torch_dtype(LATCH_BOOL)}; /* argv[0]: the callee's to use */
    PyObject *viewed = argv[2] ? PyObject_VectorcallMethod(s_view, argv + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                               : PyErr_Format(LatchUnsupported, "latch: no torch dtype for bool");
    Py_SETREF(out, viewed);
  }
  return out;
}

/* to_torch(Tensor) -> torch.Tensor over its synced memory, keeping it alive. */
static PyObject *py_to_torch(PyObject *self, PyObject *obj) {
  (void)self;
  latch_tensor *t = lp_tensor_arg(obj, "to_torch", 0);
  return t ? lp_to_torch(latch_retain(t)) : NULL;
}

/* set_torch(torch._C._from_dlpack) */
static PyObject *py_set_torch(PyObject *self, PyObject *fn) {
  (void)self;
  if (!PyCallable_Check(fn)) return PyErr_Format(PyExc_TypeError, "set_torch: a callable, not %.100s", Py_TYPE(fn)->tp_name);
  Py_XSETREF(from_dlpack, Py_NewRef(fn));
  Py_RETURN_NONE;
}

static PyMethodDef to_torch_functions[] = {
    {"to_torch", py_to_torch, METH_O, "to_torch(Tensor) -> torch.Tensor viewing its synced memory (no copy; kept alive)"},
    {"set_torch", py_set_torch, METH_O, "set_torch(torch._C._from_dlpack): how results become torch tensors"},
    {NULL, NULL, 0, NULL},
};

int lp_to_torch_init(PyObject *module) {
  if (!(s_view = PyUnicode_InternFromString("view"))) return -1;
  return PyModule_AddFunctions(module, to_torch_functions);
}
