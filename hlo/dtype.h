/* HLO element types: names as XLA prints them, sizes, and which ones latch computes with. */
#ifndef HLO_DTYPE_H
#define HLO_DTYPE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum hlo_dtype {
  HLO_INVALID = 0,
  HLO_PRED,
  HLO_S2, HLO_S4, HLO_S8, HLO_S16, HLO_S32, HLO_S64,
  HLO_U2, HLO_U4, HLO_U8, HLO_U16, HLO_U32, HLO_U64,
  HLO_F16, HLO_BF16, HLO_F32, HLO_F64,
  HLO_C64, HLO_C128,
  HLO_F8E5M2, HLO_F8E4M3, HLO_F8E4M3FN, HLO_F8E4M3B11FNUZ, HLO_F8E5M2FNUZ,
  HLO_F8E4M3FNUZ, HLO_F8E3M4, HLO_F8E8M0FNU, HLO_F4E2M1FN,
  HLO_TOKEN, HLO_TUPLE, HLO_OPAQUE,
  HLO_DTYPE_COUNT
} hlo_dtype;

const char *hlo_dtype_name(hlo_dtype dtype);
/* HLO_INVALID when the name is not an element type (tuple is not named this way). */
hlo_dtype hlo_dtype_from_name(const char *name, size_t len);

/* True for the types latch evaluates: pred, s8..s64, u8..u64, f16, bf16, f32, f64. */
bool hlo_dtype_is_computable(hlo_dtype dtype);
/* Bytes of one element of a computable type; 0 for others. */
size_t hlo_dtype_size(hlo_dtype dtype);
bool hlo_dtype_is_float(hlo_dtype dtype);    /* f16 bf16 f32 f64 and the f8/f4 families */
bool hlo_dtype_is_signed(hlo_dtype dtype);   /* s2..s64 */
bool hlo_dtype_is_unsigned(hlo_dtype dtype); /* u2..u64 */
bool hlo_dtype_is_integral(hlo_dtype dtype); /* signed or unsigned, not pred */
bool hlo_dtype_is_complex(hlo_dtype dtype);
bool hlo_dtype_is_array(hlo_dtype dtype);    /* not token, tuple or opaque */
int hlo_dtype_bits(hlo_dtype dtype);

/* Conversions between half types and float, round-to-nearest-even, NaN kept quiet. */
float hlo_f16_to_f32(uint16_t bits);
uint16_t hlo_f32_to_f16(float value);
uint16_t hlo_f64_to_f16(double value);
float hlo_bf16_to_f32(uint16_t bits);
uint16_t hlo_f32_to_bf16(float value);
uint16_t hlo_f64_to_bf16(double value);

#endif
