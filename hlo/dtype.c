#include "hlo.h"

#include <math.h>
#include <string.h>

static const char *const dtype_names[HLO_DTYPE_COUNT] = {
    [HLO_INVALID] = "invalid", [HLO_PRED] = "pred",
    [HLO_S2] = "s2", [HLO_S4] = "s4", [HLO_S8] = "s8", [HLO_S16] = "s16", [HLO_S32] = "s32",
    [HLO_S64] = "s64", [HLO_U2] = "u2", [HLO_U4] = "u4", [HLO_U8] = "u8", [HLO_U16] = "u16",
    [HLO_U32] = "u32", [HLO_U64] = "u64", [HLO_F16] = "f16", [HLO_BF16] = "bf16",
    [HLO_F32] = "f32", [HLO_F64] = "f64", [HLO_C64] = "c64", [HLO_C128] = "c128",
    [HLO_F8E5M2] = "f8e5m2", [HLO_F8E4M3] = "f8e4m3", [HLO_F8E4M3FN] = "f8e4m3fn",
    [HLO_F8E4M3B11FNUZ] = "f8e4m3b11fnuz", [HLO_F8E5M2FNUZ] = "f8e5m2fnuz",
    [HLO_F8E4M3FNUZ] = "f8e4m3fnuz", [HLO_F8E3M4] = "f8e3m4", [HLO_F8E8M0FNU] = "f8e8m0fnu",
    [HLO_F4E2M1FN] = "f4e2m1fn", [HLO_TOKEN] = "token", [HLO_TUPLE] = "tuple",
    [HLO_OPAQUE] = "opaque",
};

const char *hlo_dtype_name(hlo_dtype dtype) {
  if (dtype < 0 || dtype >= HLO_DTYPE_COUNT) return "invalid";
  return dtype_names[dtype];
}

hlo_dtype hlo_dtype_from_name(const char *name, size_t len) {
  for (int i = HLO_PRED; i < HLO_DTYPE_COUNT; i++) {
    if (i == HLO_TUPLE) continue;
    if (strlen(dtype_names[i]) == len && memcmp(dtype_names[i], name, len) == 0)
      return (hlo_dtype)i;
  }
  return HLO_INVALID;
}

bool hlo_dtype_is_computable(hlo_dtype dtype) { return hlo_dtype_size(dtype) != 0; }

size_t hlo_dtype_size(hlo_dtype dtype) {
  switch (dtype) {
    case HLO_PRED: case HLO_S8: case HLO_U8: return 1;
    case HLO_S16: case HLO_U16: case HLO_F16: case HLO_BF16: return 2;
    case HLO_S32: case HLO_U32: case HLO_F32: return 4;
    case HLO_S64: case HLO_U64: case HLO_F64: return 8;
    default: return 0;
  }
}

bool hlo_dtype_is_float(hlo_dtype dtype) {
  return (dtype >= HLO_F16 && dtype <= HLO_F64) || (dtype >= HLO_F8E5M2 && dtype <= HLO_F4E2M1FN);
}
bool hlo_dtype_is_signed(hlo_dtype dtype) { return dtype >= HLO_S2 && dtype <= HLO_S64; }
bool hlo_dtype_is_unsigned(hlo_dtype dtype) { return dtype >= HLO_U2 && dtype <= HLO_U64; }
bool hlo_dtype_is_integral(hlo_dtype dtype) {
  return hlo_dtype_is_signed(dtype) || hlo_dtype_is_unsigned(dtype);
}
bool hlo_dtype_is_complex(hlo_dtype dtype) { return dtype == HLO_C64 || dtype == HLO_C128; }
bool hlo_dtype_is_array(hlo_dtype dtype) {
  return dtype > HLO_INVALID && dtype < HLO_TOKEN;
}

int hlo_dtype_bits(hlo_dtype dtype) {
  switch (dtype) {
    case HLO_PRED: return 1;
    case HLO_S2: case HLO_U2: return 2;
    case HLO_S4: case HLO_U4: case HLO_F4E2M1FN: return 4;
    case HLO_C64: return 64;
    case HLO_C128: return 128;
    default:
      if (dtype >= HLO_F8E5M2 && dtype <= HLO_F8E8M0FNU) return 8;
      return (int)hlo_dtype_size(dtype) * 8;
  }
}

/* Rounds a double to an IEEE-style binary format with the given field widths, in one step
 * (round-to-nearest-even, subnormals, overflow to infinity): going through f32 first could
 * round twice. Returns the bit pattern without the sign. */
static uint32_t round_to_format(double magnitude, int mantissa_bits, int exponent_bits) {
  int bias = (1 << (exponent_bits - 1)) - 1;
  int min_exponent = 1 - bias;
  uint32_t all_ones_exponent = (uint32_t)((1 << exponent_bits) - 1);
  if (isnan(magnitude)) return (all_ones_exponent << mantissa_bits) | (1u << (mantissa_bits - 1));
  if (isinf(magnitude)) return all_ones_exponent << mantissa_bits;
  if (magnitude < ldexp(1.0, min_exponent)) {
    /* Subnormal: count units of 2^(min_exponent - mantissa_bits); a carry into the smallest
     * normal lands on exactly its bit pattern. */
    return (uint32_t)nearbyint(ldexp(magnitude, mantissa_bits - min_exponent));
  }
  int exponent;
  double fraction = frexp(magnitude, &exponent); /* magnitude = fraction * 2^exponent */
  double significand = nearbyint(ldexp(fraction, mantissa_bits + 1));
  if (significand >= ldexp(1.0, mantissa_bits + 1)) {
    significand /= 2;
    exponent++;
  }
  int biased = exponent - 1 + bias;
  if (biased >= (int)all_ones_exponent) return all_ones_exponent << mantissa_bits;
  return ((uint32_t)biased << mantissa_bits) | ((uint32_t)significand & ((1u << mantissa_bits) - 1));
}

float hlo_bf16_to_f32(uint16_t bits) {
  uint32_t wide = (uint32_t)bits << 16;
  float value;
  memcpy(&value, &wide, sizeof value);
  return value;
}

uint16_t hlo_f64_to_bf16(double value) {
  uint16_t sign = signbit(value) ? 0x8000 : 0;
  return sign | (uint16_t)round_to_format(fabs(value), 7, 8);
}

/* On the bits: bf16 is f32's upper half, so nearest-even is "add 0x7FFF plus the lowest kept
 * bit, then truncate"; a carry rounds up into the exponent and on to infinity, subnormals
 * round alike. NaN becomes the quiet NaN hlo_f64_to_bf16 gives. Kernels round every bf16
 * result through here, so it must be cheap. */
uint16_t hlo_f32_to_bf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((bits >> 16 & 0x8000u) | 0x7FC0u);
  return (uint16_t)((bits + 0x7FFFu + (bits >> 16 & 1u)) >> 16);
}

float hlo_f16_to_f32(uint16_t bits) {
  int exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0x1f) magnitude = mantissa ? NAN : INFINITY;
  else if (exponent == 0) magnitude = ldexpf((float)mantissa, -24);
  else magnitude = ldexpf((float)(mantissa | 0x400), exponent - 25);
  return (bits & 0x8000) ? -magnitude : magnitude;
}

uint16_t hlo_f64_to_f16(double value) {
  uint16_t sign = signbit(value) ? 0x8000 : 0;
  return sign | (uint16_t)round_to_format(fabs(value), 10, 5);
}

uint16_t hlo_f32_to_f16(float value) { return hlo_f64_to_f16((double)value); }
