/* The HLO text printer, against text written out by hand: whole modules built with the
 * builder, single instructions with each attribute syntax, and constants. */
#include <stdint.h>
#include <stdlib.h>

#include "hlo/hlo.h"
#include "test.h"

static hlo_diag diag;

/* The printed text of one literal, in a static buffer. */
static const char *literal_text(const hlo_literal *literal) {
  static char text[512];
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  hlo_print_literal(&sb, literal);
  snprintf(text, sizeof text, "%s", sb.data ? sb.data : "");
  hlo_sb_free(&sb);
  return text;
}

static hlo_literal array_literal(hlo_dtype dtype, int rank, const int64_t *dims, void *data) {
  hlo_literal literal;
  memset(&literal, 0, sizeof literal);
  literal.shape = hlo_shape_make(dtype, rank, dims);
  literal.data = data;
  return literal;
}

static const char *f32_text(float value) {
  return literal_text(&(hlo_literal){.shape = hlo_shape_scalar(HLO_F32), .data = &value});
}

static const char *f64_text(double value) {
  return literal_text(&(hlo_literal){.shape = hlo_shape_scalar(HLO_F64), .data = &value});
}

static const char *bits_text(hlo_dtype dtype, uint16_t bits) {
  return literal_text(&(hlo_literal){.shape = hlo_shape_scalar(dtype), .data = &bits});
}

static float f32_bits(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

static void floats_print_shortest(void) {
  CHECK_STR(f32_text(0.1f), "0.1");
  CHECK_STR(f32_text(1.0f), "1");
  CHECK_STR(f32_text(-2.5f), "-2.5");
  CHECK_STR(f32_text(1.0f / 3.0f), "0.33333334"); /* 0.3333333 reads back one ulp low */
  CHECK_STR(f32_text(16777216.0f), "16777216");   /* 1.677722e+07 would be 16777220 */
  CHECK_STR(f32_text(1e-05f), "1e-05");
  CHECK_STR(f32_text(7.94728621e-08f), "7.947286e-08");
  CHECK_STR(f32_text(-0.0f), "-0");
  CHECK_STR(f32_text(f32_bits(0x00000001)), "1e-45"); /* smallest subnormal */
  CHECK_STR(f32_text(3.4028235e38f), "3.4028235e+38");
  CHECK_STR(f64_text(0.1), "0.1");
  CHECK_STR(f64_text(1.0 / 3.0), "0.3333333333333333");
  CHECK_STR(f64_text(1e300), "1e+300");
}

static void specials_print_as_xla_reads_them(void) {
  CHECK_STR(f32_text(INFINITY), "inf");
  CHECK_STR(f32_text(-INFINITY), "-inf");
  CHECK_STR(f32_text(f32_bits(0x7fc00000)), "nan");
  CHECK_STR(f32_text(f32_bits(0xffc00000)), "-nan");
  CHECK_STR(f32_text(f32_bits(0x7fc00001)), "nan(0x400001)"); /* a payload is kept */
  CHECK_STR(f64_text(-INFINITY), "-inf");
  CHECK_STR(bits_text(HLO_BF16, 0x7f80), "inf");
  CHECK_STR(bits_text(HLO_BF16, 0x7fc0), "nan");
  CHECK_STR(bits_text(HLO_F16, 0xfc00), "-inf");
  CHECK_STR(bits_text(HLO_F16, 0x7e00), "nan");
}

static void halves_print_their_value(void) {
  CHECK_STR(bits_text(HLO_BF16, 0x4049), "3.140625");   /* 0x4049 = 1.5703125 * 2 */
  CHECK_STR(bits_text(HLO_BF16, 0x3f80), "1");
  CHECK_STR(bits_text(HLO_BF16, 0xc000), "-2");
  CHECK_STR(bits_text(HLO_F16, 0xfbff), "-65504");      /* the largest f16 */
  CHECK_STR(bits_text(HLO_F16, 0x3555), "0.33325195");  /* 0.333251953125 as shortest f32 */
  CHECK_STR(bits_text(HLO_F16, 0x0001), "5.9604645e-08"); /* 2^-24 */
}

static void integers_and_preds(void) {
  uint8_t yes = 1, no = 0;
  CHECK_STR(literal_text(&(hlo_literal){.shape = hlo_shape_scalar(HLO_PRED), .data = &yes}), "true");
  CHECK_STR(literal_text(&(hlo_literal){.shape = hlo_shape_scalar(HLO_PRED), .data = &no}), "false");
  uint8_t preds[3] = {1, 0, 1};
  int64_t three = 3;
  hlo_literal p = array_literal(HLO_PRED, 1, &three, preds);
  CHECK_STR(literal_text(&p), "{1, 0, 1}"); /* XLA prints pred arrays as 0/1 */
  uint64_t big = UINT64_MAX;
  CHECK_STR(literal_text(&(hlo_literal){.shape = hlo_shape_scalar(HLO_U64), .data = &big}),
            "18446744073709551615");
  int64_t small = INT64_MIN;
  CHECK_STR(literal_text(&(hlo_literal){.shape = hlo_shape_scalar(HLO_S64), .data = &small}),
            "-9223372036854775808");
  int8_t bytes[2] = {-128, 127};
  int64_t two = 2;
  hlo_literal b = array_literal(HLO_S8, 1, &two, bytes);
  CHECK_STR(literal_text(&b), "{-128, 127}");
}

static void arrays_nest_per_dim(void) {
  int32_t values[6] = {1, 2, 3, 4, 5, 6};
  int64_t dims23[2] = {2, 3}, dims21[2] = {2, 1}, dims0[1] = {0}, dims122[3] = {1, 2, 2};
  hlo_literal a = array_literal(HLO_S32, 2, dims23, values);
  CHECK_STR(literal_text(&a), "{ { 1, 2, 3 }, { 4, 5, 6 } }");
  hlo_literal column = array_literal(HLO_S32, 2, dims21, values);
  CHECK_STR(literal_text(&column), "{ {1}, {2} }");
  hlo_literal cube = array_literal(HLO_S32, 3, dims122, values);
  CHECK_STR(literal_text(&cube), "{ { { 1, 2 }, { 3, 4 } } }");
  hlo_literal empty = array_literal(HLO_F32, 1, dims0, values);
  CHECK_STR(literal_text(&empty), "{}");
}

static void tuples_and_raw_text(void) {
  float one = 1;
  int32_t pair[2] = {2, 3};
  int64_t two = 2;
  hlo_literal elements[2] = {{.shape = hlo_shape_scalar(HLO_F32), .data = &one},
                             array_literal(HLO_S32, 1, &two, pair)};
  hlo_literal tuple;
  memset(&tuple, 0, sizeof tuple);
  tuple.shape.dtype = HLO_TUPLE;
  tuple.shape.tuple_count = 2;
  tuple.elements = elements;
  CHECK_STR(literal_text(&tuple), "(1, {2, 3})");
  hlo_literal complex = {.shape = hlo_shape_scalar(HLO_C64), .raw_text = "(1, 0)"};
  CHECK_STR(literal_text(&complex), "(1, 0)");
}

/* A module built with the builder prints as XLA would print it. */
static void module_prints_whole(void) {
  hlo_module *m = hlo_module_new("m");
  hlo_comp *add = hlo_build_scalar_reducer(m, HLO_OP_ADD, HLO_F32);
  hlo_comp *main = hlo_build_computation(m, "main", true);
  int64_t dims[2] = {2, 3}, one = 1;
  hlo_shape shape = hlo_shape_make(HLO_F32, 2, dims);
  hlo_instr *x = hlo_build_parameter(main, 0, &shape, "x", &diag);
  hlo_instr *c = hlo_build_constant_scalar(main, HLO_F32, 0.1, &diag);
  hlo_instr *b = hlo_build_broadcast(main, c, 2, dims, NULL, &diag);
  hlo_instr *sum = hlo_build_binary(main, HLO_OP_ADD, x, b, &diag);
  hlo_instr *zero = hlo_build_constant_scalar(main, HLO_F32, 0, &diag);
  hlo_instr *r = hlo_build_reduce(main, sum, zero, 1, &one, add, &diag);
  CHECK(r != NULL);
  CHECK(hlo_comp_set_root(main, r, &diag) == HLO_OK);
  char *text = hlo_module_to_text(m);
  CHECK_STR(text,
            "HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[2]{0}}\n"
            "\n"
            "%add_f32.1 (lhs.2: f32[], rhs.3: f32[]) -> f32[] {\n"
            "  %lhs.2 = f32[] parameter(0)\n"
            "  %rhs.3 = f32[] parameter(1)\n"
            "  ROOT %add.4 = f32[] add(%lhs.2, %rhs.3)\n"
            "}\n"
            "\n"
            "ENTRY %main (x: f32[2,3]) -> f32[2] {\n"
            "  %x = f32[2,3] parameter(0)\n"
            "  %constant.5 = f32[] constant(0.1)\n"
            "  %broadcast.6 = f32[2,3] broadcast(%constant.5), dimensions={}\n"
            "  %add.7 = f32[2,3] add(%x, %broadcast.6)\n"
            "  %constant.8 = f32[] constant(0)\n"
            "  ROOT %reduce.9 = f32[2] reduce(%add.7, %constant.8), dimensions={1}, to_apply=%add_f32.1\n"
            "}\n");
  free(text);
  hlo_module_free(m);
}

/* Computations print callees first even when the module lists a caller first, because
 * XLA's parser needs a computation defined before it is named. */
static void callees_print_first(void) {
  hlo_module *m = hlo_module_new("order");
  hlo_comp *main = hlo_build_computation(m, "main", true);
  hlo_comp *negate = hlo_build_computation(m, "negate", false);
  hlo_shape scalar = hlo_shape_scalar(HLO_F32);
  hlo_instr *x = hlo_build_parameter(negate, 0, &scalar, "x", &diag);
  hlo_comp_set_root(negate, hlo_build_unary(negate, HLO_OP_NEGATE, x, &diag), &diag);
  hlo_instr *y = hlo_build_parameter(main, 0, &scalar, "y", &diag);
  hlo_comp_set_root(main, hlo_build_call(main, negate, 1, &y, &diag), &diag);
  char *text = hlo_module_to_text(m);
  const char *callee = strstr(text, "%negate (x: f32[]) -> f32[] {"), *caller = strstr(text, "ENTRY %main");
  CHECK(callee && caller && callee < caller);
  CHECK(strstr(text, "ROOT %call.2 = f32[] call(%y), to_apply=%negate\n") != NULL);
  free(text);
  hlo_module_free(m);
}

/* ---- single instructions ---- */

static hlo_module *module;
static hlo_comp *comp;

static hlo_instr *param(int number, hlo_dtype dtype, int rank, const int64_t *dims) {
  hlo_shape shape = hlo_shape_make(dtype, rank, dims);
  char name[16];
  snprintf(name, sizeof name, "p%d", number);
  return hlo_build_parameter(comp, number, &shape, name, &diag);
}

static const char *instr_text(const hlo_instr *instr) {
  static char text[1024];
  if (!instr) return "(null)";
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  hlo_print_instr(&sb, instr);
  snprintf(text, sizeof text, "%s", sb.data);
  hlo_sb_free(&sb);
  return text;
}

static void attributes_print_as_xla_spells_them(void) {
  module = hlo_module_new("attrs");
  comp = hlo_build_computation(module, "main", true);
  int64_t d10x8[2] = {10, 8}, d4[1] = {4};
  hlo_instr *x = param(0, HLO_F32, 2, d10x8);
  int64_t starts[2] = {1, 0}, limits[2] = {9, 8}, strides[2] = {3, 1};
  CHECK_STR(instr_text(hlo_build_slice(comp, x, starts, limits, strides, &diag)),
            "%slice.1 = f32[3,8] slice(%p0), slice={[1:9:3], [0:8]}");

  hlo_instr *v = param(1, HLO_F32, 1, d4);
  hlo_instr *zero = hlo_build_constant_scalar(comp, HLO_F32, 0, &diag);
  hlo_padding pad = {.rank = 1, .low = {1}, .high = {2}, .interior = {0}};
  CHECK_STR(instr_text(hlo_build_pad(comp, v, zero, &pad, &diag)),
            "%pad.3 = f32[7] pad(%p1, %constant.2), padding=1_2");
  pad.interior[0] = 1;
  CHECK_STR(instr_text(hlo_build_pad(comp, v, zero, &pad, &diag)),
            "%pad.4 = f32[10] pad(%p1, %constant.2), padding=1_2_1");

  CHECK_STR(instr_text(hlo_build_compare(comp, HLO_DIR_GT, v, v, &diag)),
            "%compare.5 = pred[4] compare(%p1, %p1), direction=GT");
  hlo_instr *total = hlo_build_compare(comp, HLO_DIR_LT, v, v, &diag);
  total->compare_type = HLO_CMP_TOTALORDER;
  CHECK_STR(instr_text(total), "%compare.6 = pred[4] compare(%p1, %p1), direction=LT, type=TOTALORDER");

  int64_t d2x3[2] = {2, 3}, d3x5[2] = {3, 5};
  hlo_instr *a = param(2, HLO_F32, 2, d2x3), *b = param(3, HLO_F32, 2, d3x5);
  int64_t one = 1, zero_dim = 0;
  hlo_dot_dims dot = {.lhs_contracting = {1, &one}, .rhs_contracting = {1, &zero_dim}};
  CHECK_STR(instr_text(hlo_build_dot(comp, a, b, &dot, &diag)),
            "%dot.7 = f32[2,5] dot(%p2, %p3), lhs_contracting_dims={1}, rhs_contracting_dims={0}");

  CHECK_STR(instr_text(hlo_build_iota(comp, HLO_S32, 2, d2x3, 1, &diag)),
            "%iota.8 = s32[2,3] iota(), iota_dimension=1");
  hlo_instr *elements[2] = {a, v};
  hlo_instr *t = hlo_build_tuple(comp, 2, elements, &diag);
  CHECK_STR(instr_text(t), "%tuple.9 = (f32[2,3], f32[4]) tuple(%p2, %p1)");
  CHECK_STR(instr_text(hlo_build_gte(comp, t, 1, &diag)), "%get-tuple-element.10 = f32[4] get-tuple-element(%tuple.9), index=1");

  int64_t perm[2] = {1, 0};
  CHECK_STR(instr_text(hlo_build_transpose(comp, a, perm, &diag)),
            "%transpose.11 = f32[3,2] transpose(%p2), dimensions={1,0}");
  CHECK_STR(instr_text(hlo_build_convert(comp, a, HLO_BF16, &diag)), "%convert.12 = bf16[2,3] convert(%p2)");
  hlo_module_free(module);
}

static void windows_print_only_what_differs(void) {
  module = hlo_module_new("windows");
  hlo_comp *max = hlo_build_scalar_reducer(module, HLO_OP_MAXIMUM, HLO_F32);
  comp = hlo_build_computation(module, "main", true);
  int64_t nhwc[4] = {1, 8, 8, 4}, hwio[4] = {3, 3, 4, 16};
  hlo_instr *image = param(0, HLO_F32, 4, nhwc), *kernel = param(1, HLO_F32, 4, hwio);
  hlo_window w = {.rank = 2};
  for (int i = 0; i < 2; i++)
    w.dims[i] = (hlo_window_dim){.size = 3, .stride = 2, .pad_low = 1, .pad_high = 1, .lhs_dilate = 1, .rhs_dilate = 1};
  hlo_conv_dims nhwc_dims = {.spatial_count = 2, .input_batch = 0, .input_feature = 3, .input_spatial = {1, 2},
                             .kernel_input_feature = 2, .kernel_output_feature = 3, .kernel_spatial = {0, 1},
                             .output_batch = 0, .output_feature = 3, .output_spatial = {1, 2}};
  /* spatial: (8 + 2 - 3) / 2 + 1 = 4 */
  CHECK_STR(instr_text(hlo_build_convolution(comp, image, kernel, &w, &nhwc_dims, 1, 1, &diag)),
            "%convolution.5 = f32[1,4,4,16] convolution(%p0, %p1), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
            "dim_labels=b01f_01io->b01f");
  w.dims[1].rhs_dilate = 2; /* the dilated window spans 5: (8 + 2 - 5) / 2 + 1 = 3 */
  w.dims[0].reversal = true;
  CHECK_STR(instr_text(hlo_build_convolution(comp, image, kernel, &w, &nhwc_dims, 1, 1, &diag)),
            "%convolution.6 = f32[1,4,3,16] convolution(%p0, %p1), window={size=3x3 stride=2x2 pad=1_1x1_1 "
            "rhs_dilate=1x2 rhs_reversal=1x0}, dim_labels=b01f_01io->b01f");
  int64_t grouped_hwio[4] = {3, 3, 2, 16};
  hlo_instr *grouped = param(2, HLO_F32, 4, grouped_hwio);
  hlo_window same = {.rank = 2};
  for (int i = 0; i < 2; i++)
    same.dims[i] = (hlo_window_dim){.size = 3, .stride = 1, .pad_low = 1, .pad_high = 1, .lhs_dilate = 1, .rhs_dilate = 1};
  CHECK_STR(instr_text(hlo_build_convolution(comp, image, grouped, &same, &nhwc_dims, 2, 1, &diag)),
            "%convolution.7 = f32[1,8,8,16] convolution(%p0, %p2), window={size=3x3 pad=1_1x1_1}, "
            "dim_labels=b01f_01io->b01f, feature_group_count=2");
  hlo_window pool = {.rank = 4};
  for (int i = 0; i < 4; i++) pool.dims[i] = (hlo_window_dim){.size = 1, .stride = 1, .lhs_dilate = 1, .rhs_dilate = 1};
  pool.dims[1].size = pool.dims[2].size = 2;
  pool.dims[1].stride = pool.dims[2].stride = 2;
  hlo_instr *lowest = hlo_build_constant_scalar(comp, HLO_F32, -INFINITY, &diag);
  CHECK_STR(instr_text(hlo_build_reduce_window(comp, image, lowest, &pool, max, &diag)),
            "%reduce-window.9 = f32[1,4,4,4] reduce-window(%p0, %constant.8), "
            "window={size=1x2x2x1 stride=1x2x2x1}, to_apply=%maximum_f32.1");
  CHECK_STR(instr_text(lowest), "%constant.8 = f32[] constant(-inf)");
  hlo_module_free(module);
}

static void gathers_print_their_dimension_numbers(void) {
  module = hlo_module_new("gathers");
  comp = hlo_build_computation(module, "main", true);
  int64_t table[2] = {50, 16}, ids[2] = {8, 1};
  hlo_instr *t = param(0, HLO_F32, 2, table), *i = param(1, HLO_S32, 2, ids);
  int64_t one = 1, zero = 0, sizes[2] = {1, 16};
  hlo_gather_dims g = {.offset_dims = {1, &one}, .collapsed_slice_dims = {1, &zero}, .start_index_map = {1, &zero},
                       .index_vector_dim = 1};
  CHECK_STR(instr_text(hlo_build_gather(comp, t, i, &g, sizes, &diag)),
            "%gather.1 = f32[8,16] gather(%p0, %p1), offset_dims={1}, collapsed_slice_dims={0}, "
            "start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}");
  hlo_module_free(module);
}

int main(void) {
  RUN(floats_print_shortest);
  RUN(specials_print_as_xla_reads_them);
  RUN(halves_print_their_value);
  RUN(integers_and_preds);
  RUN(arrays_nest_per_dim);
  RUN(tuples_and_raw_text);
  RUN(module_prints_whole);
  RUN(callees_print_first);
  RUN(attributes_print_as_xla_spells_them);
  RUN(windows_print_only_what_differs);
  RUN(gathers_print_their_dimension_numbers);
  return TEST_REPORT();
}
