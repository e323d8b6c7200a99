/* Element type names and half-precision rounding, against values worked out by hand. */
#include "hlo/hlo.h"
#include "test.h"

static void names_round_trip(void) {
  CHECK(hlo_dtype_from_name("bf16", 4) == HLO_BF16);
  CHECK(hlo_dtype_from_name("f8e4m3fn", 8) == HLO_F8E4M3FN);
  CHECK(hlo_dtype_from_name("f33", 3) == HLO_INVALID);
  CHECK(hlo_dtype_from_name("tuple", 5) == HLO_INVALID);
  for (int t = HLO_PRED; t < HLO_TUPLE; t++) {
    const char *name = hlo_dtype_name((hlo_dtype)t);
    CHECK((int)hlo_dtype_from_name(name, strlen(name)) == t);
  }
  CHECK(hlo_dtype_is_computable(HLO_BF16));
  CHECK(!hlo_dtype_is_computable(HLO_C64));
  CHECK(!hlo_dtype_is_computable(HLO_S4));
}

static void bf16_rounds_to_nearest_even(void) {
  /* 1 + 2^-8 is halfway between bf16 1.0 and 1+2^-7: ties to even -> 1.0 (0x3f80). */
  CHECK_EQ_INT(hlo_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  /* 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: ties to even -> 0x3f82. */
  CHECK_EQ_INT(hlo_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  /* just above a tie rounds up */
  CHECK_EQ_INT(hlo_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  /* a double just above the tie must round up even though f32 would round it to the tie */
  CHECK_EQ_INT(hlo_f64_to_bf16(1.0 + 0x1p-8 + 0x1p-40), 0x3f81);
  CHECK_EQ_INT(hlo_f32_to_bf16(-2.0f), 0xc000);
  CHECK_EQ_INT(hlo_f32_to_bf16(INFINITY), 0x7f80);
  CHECK_EQ_INT(hlo_f32_to_bf16(3.4e38f), 0x7f80); /* past the largest bf16: rounds to inf */
  CHECK(isnan(hlo_bf16_to_f32(hlo_f32_to_bf16(NAN))));
  CHECK_NEAR(hlo_bf16_to_f32(0x4049), 3.140625, 0);
}

static void f16_rounds_to_nearest_even(void) {
  CHECK_EQ_INT(hlo_f32_to_f16(1.0f), 0x3c00);
  CHECK_EQ_INT(hlo_f32_to_f16(65504.0f), 0x7bff);
  CHECK_EQ_INT(hlo_f32_to_f16(65520.0f), 0x7c00);  /* the tie above max rounds to inf */
  CHECK_EQ_INT(hlo_f32_to_f16(65519.0f), 0x7bff);
  CHECK_EQ_INT(hlo_f32_to_f16(0x1p-24f), 0x0001);  /* smallest subnormal */
  CHECK_EQ_INT(hlo_f32_to_f16(0x1p-25f), 0x0000);  /* half of it: tie to even zero */
  CHECK_EQ_INT(hlo_f32_to_f16(0x1.8p-24f), 0x0002);/* 1.5 units: tie to even 2 */
  CHECK_EQ_INT(hlo_f32_to_f16(1.0f + 0x1p-11f), 0x3c00); /* tie -> even */
  CHECK_EQ_INT(hlo_f32_to_f16(-0.0f), 0x8000);
  CHECK_NEAR(hlo_f16_to_f32(0x3555), 0.333251953125, 0);
  CHECK_NEAR(hlo_f16_to_f32(0x0001), 0x1p-24, 0);
  CHECK_NEAR(hlo_f16_to_f32(0xfc00), -INFINITY, 0);
}

int main(void) {
  RUN(names_round_trip);
  RUN(bf16_rounds_to_nearest_even);
  RUN(f16_rounds_to_nearest_even);
  return TEST_REPORT();
}
