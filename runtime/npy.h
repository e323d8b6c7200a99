/* NumPy .npy files: how latch exchanges tensors with other tools.
 *
 * Reads format versions 1.0, 2.0 and 3.0 with element types f2 f4 f8, i1..i8, u1..u8 and
 * b1, either byte order, C or Fortran order (Fortran data is transposed to row-major).
 * NumPy has no bfloat16 type code: ml_dtypes arrays are saved as '<V2', raw bytes with no
 * type, so that descr is refused; the descr 'bfloat16' (a latch extension) is read as bf16.
 * Writes version 1.0 (2.0 when the header needs it), little-endian, C order; bf16 values are
 * written as exact f4 so that NumPy can read them (callers may want to say so). */
#ifndef RT_NPY_H
#define RT_NPY_H
#include <stddef.h>

#include "hlo/diag.h"
#include "value.h"

/* Reads an array; NULL with a message naming the file in diag on any failure. */
rt_value *rt_npy_read(const char *path, hlo_diag *diag);
/* Decodes a whole .npy file held in memory; name is used in messages. */
rt_value *rt_npy_decode(const void *bytes, size_t size, const char *name, hlo_diag *diag);
/* Writes an array value (not a tuple). */
hlo_status rt_npy_write(const char *path, const rt_value *value, hlo_diag *diag);
/* The descr rt_npy_write uses for an element type ("<f4", "|b1", ...), or NULL when the
 * type cannot be written. */
const char *rt_npy_descr(hlo_dtype dtype);

#endif
