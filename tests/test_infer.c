/* Shape inference through the builder, with every expected shape worked out by hand from
 * XLA's operation semantics, and error messages that name the op and the shapes. */
#include <stdlib.h>

#include "hlo/hlo.h"
#include "test.h"

static hlo_module *module;
static hlo_comp *comp;
static hlo_diag diag;

static void begin(void) {
  module = hlo_module_new("t");
  comp = hlo_build_computation(module, "main", true);
  hlo_diag_clear(&diag);
}

static void end(void) { hlo_module_free(module); }

static hlo_instr *param(hlo_dtype dtype, int rank, const int64_t *dims) {
  hlo_shape shape = hlo_shape_make(dtype, rank, dims);
  return hlo_build_parameter(comp, comp->param_count, &shape, NULL, &diag);
}

/* An instruction's shape as text, "(null)" when building it failed. */
static const char *shape_of(const hlo_instr *instr) {
  static char text[256];
  if (!instr) return "(null)";
  return hlo_shape_str(&instr->shape, text, sizeof text);
}

/* Building failed with a message that contains want. */
#define CHECK_FAILS(instr, want)                                                       \
  do {                                                                                 \
    CHECK((instr) == NULL);                                                            \
    CHECK_MSG(strstr(diag.message, (want)) != NULL, "message \"%s\" lacks \"%s\"",     \
              diag.message, (want));                                                   \
    hlo_diag_clear(&diag);                                                             \
  } while (0)

static hlo_ints list(int count, const int64_t *values) { return (hlo_ints){count, (int64_t *)values}; }

static void elementwise_needs_equal_shapes(void) {
  begin();
  int64_t d23[2] = {2, 3}, d32[2] = {3, 2};
  hlo_instr *a = param(HLO_F32, 2, d23), *b = param(HLO_F32, 2, d32), *i = param(HLO_S32, 2, d23);
  CHECK_STR(shape_of(hlo_build_binary(comp, HLO_OP_ADD, a, a, &diag)), "f32[2,3]");
  CHECK_STR(shape_of(hlo_build_compare(comp, HLO_DIR_LT, a, a, &diag)), "pred[2,3]");
  CHECK_STR(shape_of(hlo_build_unary(comp, HLO_OP_IS_FINITE, a, &diag)), "pred[2,3]");
  CHECK_STR(shape_of(hlo_build_unary(comp, HLO_OP_NEGATE, i, &diag)), "s32[2,3]");
  CHECK_FAILS(hlo_build_binary(comp, HLO_OP_ADD, a, b, &diag),
              "same dims (no implicit broadcast in HLO) (operand 0 f32[2,3], operand 1 f32[3,2])");
  CHECK_FAILS(hlo_build_binary(comp, HLO_OP_MULTIPLY, a, i, &diag), "the same element type, not f32 and s32");
  CHECK_FAILS(hlo_build_binary(comp, HLO_OP_SHIFT_LEFT, a, a, &diag), "needs an integer type");
  CHECK_FAILS(hlo_build_unary(comp, HLO_OP_EXP, i, &diag), "exponential %exponential.");

  hlo_instr *z = param(HLO_C64, 2, d23);
  CHECK_STR(shape_of(hlo_build_unary(comp, HLO_OP_ABS, z, &diag)), "f32[2,3]"); /* |complex| is real */
  CHECK_STR(shape_of(hlo_build_unary(comp, HLO_OP_REAL, z, &diag)), "f32[2,3]");
  CHECK_STR(shape_of(hlo_build_convert(comp, a, HLO_BF16, &diag)), "bf16[2,3]");

  hlo_instr *p = hlo_build_compare(comp, HLO_DIR_GT, a, a, &diag);
  hlo_instr *s = param(HLO_F32, 0, NULL);
  CHECK_STR(shape_of(hlo_build_select(comp, p, a, a, &diag)), "f32[2,3]");
  CHECK_FAILS(hlo_build_select(comp, a, a, a, &diag), "pred must have type pred, not f32");
  CHECK_STR(shape_of(hlo_build_clamp(comp, s, a, s, &diag)), "f32[2,3]"); /* scalar bounds */
  CHECK_STR(shape_of(hlo_build_clamp(comp, a, a, a, &diag)), "f32[2,3]");
  CHECK_FAILS(hlo_build_clamp(comp, b, a, s, &diag), "min and max must be scalars or have the operand's dims");
  end();
}

static void broadcast_maps_operand_dims(void) {
  begin();
  int64_t d3[1] = {3}, d234[3] = {2, 3, 4}, d23[2] = {2, 3};
  hlo_instr *v = param(HLO_F32, 1, d3), *m = param(HLO_F32, 2, d23);
  int64_t to1[1] = {1}, to2[1] = {2}, to01[2] = {0, 1}, to10[2] = {1, 0}, to11[2] = {1, 1};
  int64_t d324[3] = {3, 2, 4};
  CHECK_STR(shape_of(hlo_build_broadcast(comp, v, 3, d234, to1, &diag)), "f32[2,3,4]");
  CHECK_FAILS(hlo_build_broadcast(comp, v, 3, d234, to2, &diag),
              "operand dim 0 has size 3 but result dim 2 has size 4 (result f32[2,3,4]) (operand f32[3])");
  CHECK_STR(shape_of(hlo_build_broadcast(comp, m, 3, d234, to01, &diag)), "f32[2,3,4]");
  /* XLA's verifier lets a broadcast transpose too: operand dim 0 (2) -> result dim 1. */
  CHECK_STR(shape_of(hlo_build_broadcast(comp, m, 3, d324, to10, &diag)), "f32[3,2,4]");
  int64_t d33[2] = {3, 3}, d334[3] = {3, 3, 4};
  hlo_instr *square = param(HLO_F32, 2, d33);
  CHECK_FAILS(hlo_build_broadcast(comp, square, 3, d334, to11, &diag), "dimensions repeats dim 1");
  hlo_instr *s = param(HLO_F32, 0, NULL);
  CHECK_STR(shape_of(hlo_build_broadcast(comp, s, 3, d234, NULL, &diag)), "f32[2,3,4]");
  end();
}

static void reshape_transpose_slice(void) {
  begin();
  int64_t d26[2] = {2, 6}, d34[2] = {3, 4}, d5[1] = {5}, d234[3] = {2, 3, 4};
  hlo_instr *x = param(HLO_F32, 2, d26), *y = param(HLO_S8, 3, d234);
  CHECK_STR(shape_of(hlo_build_reshape(comp, x, 2, d34, &diag)), "f32[3,4]");
  CHECK_FAILS(hlo_build_reshape(comp, x, 1, d5, &diag), "result f32[5] has 5 elements but the operand has 12");
  int64_t perm[3] = {2, 0, 1}, bad[3] = {0, 0, 1};
  CHECK_STR(shape_of(hlo_build_transpose(comp, y, perm, &diag)), "s8[4,2,3]"); /* result i = dim perm[i] */
  CHECK_FAILS(hlo_build_transpose(comp, y, bad, &diag), "dimensions repeats dim 0");
  int64_t d108[2] = {10, 8};
  hlo_instr *z = param(HLO_F32, 2, d108);
  int64_t starts[2] = {1, 0}, limits[2] = {9, 8}, strides[2] = {3, 2}, over[2] = {11, 8};
  /* ceil((9-1)/3) = 3, ceil(8/2) = 4 */
  CHECK_STR(shape_of(hlo_build_slice(comp, z, starts, limits, strides, &diag)), "f32[3,4]");
  CHECK_FAILS(hlo_build_slice(comp, z, starts, over, NULL, &diag), "dim 0 range [1:11] is outside [0:10]");
  end();
}

static void concatenate_and_pad(void) {
  begin();
  int64_t d23[2] = {2, 3}, d25[2] = {2, 5}, d33[2] = {3, 3}, d4[1] = {4};
  hlo_instr *a = param(HLO_F32, 2, d23), *b = param(HLO_F32, 2, d25), *c = param(HLO_F32, 2, d33);
  hlo_instr *ab[2] = {a, b}, *ac[2] = {a, c};
  CHECK_STR(shape_of(hlo_build_concatenate(comp, 2, ab, 1, &diag)), "f32[2,8]");
  CHECK_FAILS(hlo_build_concatenate(comp, 2, ac, 1, &diag), "operand 1 dim 0 has size 3 but operand 0 has 2");
  hlo_instr *v = param(HLO_F32, 1, d4), *zero = hlo_build_constant_scalar(comp, HLO_F32, 0, &diag);
  hlo_padding pad = {.rank = 1, .low = {1}, .high = {2}, .interior = {3}};
  CHECK_STR(shape_of(hlo_build_pad(comp, v, zero, &pad, &diag)), "f32[16]"); /* 1 + 4 + 3*3 + 2 */
  pad = (hlo_padding){.rank = 1, .low = {-1}, .high = {0}, .interior = {0}};
  CHECK_STR(shape_of(hlo_build_pad(comp, v, zero, &pad, &diag)), "f32[3]"); /* negative low crops */
  pad = (hlo_padding){.rank = 1, .low = {-3}, .high = {-2}, .interior = {0}};
  CHECK_FAILS(hlo_build_pad(comp, v, zero, &pad, &diag), "dim 0 would have negative size -1");
  CHECK_STR(shape_of(hlo_build_iota(comp, HLO_S32, 2, d23, 1, &diag)), "s32[2,3]");
  CHECK_FAILS(hlo_build_iota(comp, HLO_S32, 2, d23, 2, &diag), "iota_dimension 2 is out of range");
  end();
}

static void dot_orders_batch_then_free_dims(void) {
  begin();
  int64_t d23[2] = {2, 3}, d35[2] = {3, 5}, d45[2] = {4, 5};
  hlo_instr *a = param(HLO_F32, 2, d23), *b = param(HLO_F32, 2, d35), *c = param(HLO_F32, 2, d45);
  int64_t one = 1, zero = 0, two = 2;
  hlo_dot_dims mm = {.lhs_contracting = list(1, &one), .rhs_contracting = list(1, &zero)};
  CHECK_STR(shape_of(hlo_build_dot(comp, a, b, &mm, &diag)), "f32[2,5]");
  CHECK(hlo_build_dot(comp, a, c, &mm, &diag) == NULL);
  CHECK_MSG(strncmp(diag.message, "dot %dot.", 9) == 0 &&
                strstr(diag.message, ": lhs contracting dim 1 has size 3 but rhs contracting dim 0 has size 4 "
                                     "(lhs f32[2,3], rhs f32[4,5])"),
            "%s", diag.message);
  hlo_diag_clear(&diag);

  /* Batch dims need not lead: lhs [2,7,3] batch 1 contracting 2, rhs [3,5,7] batch 2
   * contracting 0: result = batch (7), lhs free (2), rhs free (5). */
  int64_t l[3] = {2, 7, 3}, r[3] = {3, 5, 7};
  hlo_instr *bl = param(HLO_BF16, 3, l), *br = param(HLO_BF16, 3, r);
  hlo_dot_dims batched = {.lhs_batch = list(1, &one), .lhs_contracting = list(1, &two),
                          .rhs_batch = list(1, &two), .rhs_contracting = list(1, &zero)};
  CHECK_STR(shape_of(hlo_build_dot(comp, bl, br, &batched, &diag)), "bf16[7,2,5]");
  hlo_dot_dims mismatched = {.lhs_batch = list(1, &zero), .lhs_contracting = list(1, &two),
                             .rhs_batch = list(1, &two), .rhs_contracting = list(1, &zero)};
  CHECK_FAILS(hlo_build_dot(comp, bl, br, &mismatched, &diag), "lhs batch dim 0 has size 2 but rhs batch dim 2 has size 7");
  hlo_dot_dims outer = {{0, NULL}, {0, NULL}, {0, NULL}, {0, NULL}};
  CHECK_STR(shape_of(hlo_build_dot(comp, a, b, &outer, &diag)), "f32[2,3,3,5]");
  end();
}

static hlo_window window2(int64_t size, int64_t stride, int64_t pad) {
  hlo_window w = {.rank = 2};
  for (int i = 0; i < 2; i++)
    w.dims[i] = (hlo_window_dim){.size = size, .stride = stride, .pad_low = pad, .pad_high = pad,
                                 .lhs_dilate = 1, .rhs_dilate = 1};
  return w;
}

static void convolution_windows_and_groups(void) {
  begin();
  hlo_conv_dims nhwc = {.spatial_count = 2, .input_batch = 0, .input_feature = 3, .input_spatial = {1, 2},
                        .kernel_input_feature = 2, .kernel_output_feature = 3, .kernel_spatial = {0, 1},
                        .output_batch = 0, .output_feature = 3, .output_spatial = {1, 2}};
  int64_t in[4] = {1, 5, 5, 4}, k[4] = {3, 3, 4, 8}, k2[4] = {3, 3, 2, 8};
  hlo_instr *x = param(HLO_F32, 4, in), *w = param(HLO_F32, 4, k), *wg = param(HLO_F32, 4, k2);
  hlo_window same = window2(3, 1, 1), strided = window2(3, 2, 0);
  CHECK_STR(shape_of(hlo_build_convolution(comp, x, w, &same, &nhwc, 1, 1, &diag)), "f32[1,5,5,8]");
  CHECK_STR(shape_of(hlo_build_convolution(comp, x, w, &strided, &nhwc, 1, 1, &diag)), "f32[1,2,2,8]"); /* (5-3)/2+1 */
  /* Grouped: 4 input features in 2 groups of 2, each group's kernel takes 2. */
  CHECK_STR(shape_of(hlo_build_convolution(comp, x, wg, &same, &nhwc, 2, 1, &diag)), "f32[1,5,5,8]");
  CHECK_FAILS(hlo_build_convolution(comp, x, w, &same, &nhwc, 2, 1, &diag),
              "input features 4 / feature_group_count 2 must equal the kernel's input features 4");
  hlo_window big = window2(5, 1, 1);
  CHECK_FAILS(hlo_build_convolution(comp, x, w, &big, &nhwc, 1, 1, &diag),
              "window dim 0 has size 5 but the kernel's spatial dim 0 has size 3");

  /* Dilations: lhs_dilate 2 makes 5 into 9, rhs_dilate 2 makes the 3-window span 5:
   * (9 - 5) / 1 + 1 = 5. */
  hlo_window dilated = window2(3, 1, 0);
  for (int i = 0; i < 2; i++) dilated.dims[i].lhs_dilate = dilated.dims[i].rhs_dilate = 2;
  CHECK_STR(shape_of(hlo_build_convolution(comp, x, w, &dilated, &nhwc, 1, 1, &diag)), "f32[1,5,5,8]");

  /* batch_group_count 2: batch 4 -> 2, and the output features (6) split into 2 groups. */
  int64_t in4[4] = {4, 5, 5, 3}, k6[4] = {3, 3, 3, 6};
  hlo_instr *xb = param(HLO_F32, 4, in4), *wb = param(HLO_F32, 4, k6);
  CHECK_STR(shape_of(hlo_build_convolution(comp, xb, wb, &same, &nhwc, 1, 2, &diag)), "f32[2,5,5,6]");

  /* NCHW input, OIHW kernel, NCHW output: dim_labels bf01_oi01->bf01. */
  hlo_conv_dims nchw = {.spatial_count = 2, .input_batch = 0, .input_feature = 1, .input_spatial = {2, 3},
                        .kernel_input_feature = 1, .kernel_output_feature = 0, .kernel_spatial = {2, 3},
                        .output_batch = 0, .output_feature = 1, .output_spatial = {2, 3}};
  int64_t in_nchw[4] = {1, 4, 6, 5}, k_oihw[4] = {8, 4, 3, 3};
  hlo_instr *xn = param(HLO_F32, 4, in_nchw), *wn = param(HLO_F32, 4, k_oihw);
  CHECK_STR(shape_of(hlo_build_convolution(comp, xn, wn, &strided, &nchw, 1, 1, &diag)), "f32[1,8,2,2]");
  end();
}

static void reductions(void) {
  begin();
  hlo_comp *add = hlo_build_scalar_reducer(module, HLO_OP_ADD, HLO_F32);
  hlo_comp *add_int = hlo_build_scalar_reducer(module, HLO_OP_ADD, HLO_S32);
  CHECK(hlo_build_scalar_reducer(module, HLO_OP_AND, HLO_F32) == NULL);
  /* the shared form hands back an identical reducer the module has, or makes one */
  int comps = module->comp_count;
  CHECK(hlo_shared_scalar_reducer(module, HLO_OP_ADD, HLO_F32) == add);
  CHECK(hlo_shared_scalar_reducer(module, HLO_OP_ADD, HLO_S32) == add_int);
  CHECK_EQ_INT(module->comp_count, comps);
  hlo_comp *max = hlo_shared_scalar_reducer(module, HLO_OP_MAXIMUM, HLO_F32);
  CHECK(max && max != add && max->root->opcode == HLO_OP_MAXIMUM);
  CHECK(hlo_shared_scalar_reducer(module, HLO_OP_MAXIMUM, HLO_F32) == max);
  CHECK_EQ_INT(module->comp_count, comps + 1);
  int64_t d234[3] = {2, 3, 4}, kept[2] = {0, 2}, dup[2] = {1, 1};
  hlo_instr *x = param(HLO_F32, 3, d234), *zero = hlo_build_constant_scalar(comp, HLO_F32, 0, &diag);
  CHECK_STR(shape_of(hlo_build_reduce(comp, x, zero, 2, kept, add, &diag)), "f32[3]");
  CHECK_STR(shape_of(hlo_build_reduce(comp, x, zero, 0, NULL, add, &diag)), "f32[2,3,4]");
  CHECK_FAILS(hlo_build_reduce(comp, x, zero, 2, dup, add, &diag), "dimensions repeats dim 1");
  CHECK_FAILS(hlo_build_reduce(comp, x, x, 2, kept, add, &diag), "init must be a scalar, not f32[2,3,4]");
  /* bf16 summed in f32, as XLA allows: the result takes the init's type. */
  hlo_instr *h = param(HLO_BF16, 3, d234);
  CHECK_STR(shape_of(hlo_build_reduce(comp, h, zero, 2, kept, add, &diag)), "f32[3]");
  /* reducers are named add_f32.1 (lhs.2, rhs.3, add.4) and add_s32.5 */
  CHECK_FAILS(hlo_build_reduce(comp, x, zero, 2, kept, add_int, &diag),
              "called computation %add_s32.5 parameter 0 is s32[] but needs f32[]");
  end();
}

static void reduce_window_padding_and_stride(void) {
  begin();
  hlo_comp *max = hlo_build_scalar_reducer(module, HLO_OP_MAXIMUM, HLO_F32);
  int64_t d46[2] = {4, 6};
  hlo_instr *x = param(HLO_F32, 2, d46), *low = hlo_build_constant_scalar(comp, HLO_F32, -INFINITY, &diag);
  hlo_window w = {.rank = 2};
  /* dim 0: 4 + 1 padded, windows of 2 every 2: (5 - 2) / 2 + 1 = 2
   * dim 1: 6 + 2 padded, windows of 3 every 2: (8 - 3) / 2 + 1 = 3 */
  w.dims[0] = (hlo_window_dim){.size = 2, .stride = 2, .pad_low = 0, .pad_high = 1, .lhs_dilate = 1, .rhs_dilate = 1};
  w.dims[1] = (hlo_window_dim){.size = 3, .stride = 2, .pad_low = 1, .pad_high = 1, .lhs_dilate = 1, .rhs_dilate = 1};
  CHECK_STR(shape_of(hlo_build_reduce_window(comp, x, low, &w, max, &diag)), "f32[2,3]");
  /* base dilation 2 turns 6 into 11: with the window of 3 every 2 and padding 1+1,
   * (13 - 3) / 2 + 1 = 6 */
  w.dims[1].lhs_dilate = 2;
  CHECK_STR(shape_of(hlo_build_reduce_window(comp, x, low, &w, max, &diag)), "f32[2,6]");
  /* a window wider than the padded input has no position */
  w.dims[1] = (hlo_window_dim){.size = 9, .stride = 1, .lhs_dilate = 1, .rhs_dilate = 1};
  CHECK_STR(shape_of(hlo_build_reduce_window(comp, x, low, &w, max, &diag)), "f32[2,0]");
  w.dims[1].stride = 0;
  CHECK_FAILS(hlo_build_reduce_window(comp, x, low, &w, max, &diag), "window dim 1 has size 9, stride 0");
  end();
}

static void gathers(void) {
  begin();
  int64_t zero = 0, one = 1, two = 2, d01[2] = {0, 1}, d02[2] = {0, 2};
  /* Embedding lookup: table [50,16], ids [8,1] with the index vector in dim 1. */
  int64_t table[2] = {50, 16}, ids[2] = {8, 1}, flat_ids[1] = {8}, rows[2] = {1, 16};
  hlo_instr *t = param(HLO_F32, 2, table), *i = param(HLO_S32, 2, ids), *f = param(HLO_S32, 1, flat_ids);
  hlo_gather_dims g = {.offset_dims = list(1, &one), .collapsed_slice_dims = list(1, &zero),
                       .start_index_map = list(1, &zero), .index_vector_dim = 1};
  CHECK_STR(shape_of(hlo_build_gather(comp, t, i, &g, rows, &diag)), "f32[8,16]");
  /* index_vector_dim == rank: each index is a scalar, as if the ids had a trailing 1. */
  CHECK_STR(shape_of(hlo_build_gather(comp, t, f, &g, rows, &diag)), "f32[8,16]");
  g.start_index_map = list(2, d01);
  CHECK_FAILS(hlo_build_gather(comp, t, i, &g, rows, &diag), "start_index_map has 2 entries but index vectors have 1");

  /* Offset dims around a batch dim: operand [3,4,5], collapse dim 1, indices [6,1]:
   * result dim 0 = slice size 3, dim 1 = batch 6, dim 2 = slice size 5. */
  int64_t cube[3] = {3, 4, 5}, idx[2] = {6, 1}, sizes[3] = {3, 1, 5};
  hlo_instr *c = param(HLO_F32, 3, cube), *ci = param(HLO_S64, 2, idx);
  hlo_gather_dims around = {.offset_dims = list(2, d02), .collapsed_slice_dims = list(1, &one),
                            .start_index_map = list(1, &one), .index_vector_dim = 1};
  CHECK_STR(shape_of(hlo_build_gather(comp, c, ci, &around, sizes, &diag)), "f32[3,6,5]");
  int64_t too_big[3] = {3, 2, 5};
  CHECK_FAILS(hlo_build_gather(comp, c, ci, &around, too_big, &diag), "slice_sizes[1]=2 must be 1 for a collapsed dim");

  /* Batching dims: operand [200,100,300] batched over dims 0 and 1 by indices dims 1 and 0. */
  int64_t big[3] = {200, 100, 300}, bidx[3] = {100, 200, 1}, bsizes[3] = {1, 1, 300}, d10[2] = {1, 0};
  hlo_instr *o = param(HLO_F32, 3, big), *oi = param(HLO_S32, 3, bidx);
  hlo_gather_dims batched = {.offset_dims = list(1, &two), .start_index_map = list(1, &two),
                             .operand_batching_dims = list(2, d01), .start_indices_batching_dims = list(2, d10),
                             .index_vector_dim = 2};
  CHECK_STR(shape_of(hlo_build_gather(comp, o, oi, &batched, bsizes, &diag)), "f32[100,200,300]");
  end();
}

static void scatters(void) {
  begin();
  hlo_comp *add = hlo_build_scalar_reducer(module, HLO_OP_ADD, HLO_F32);
  int64_t one = 1, d01[2] = {0, 1};
  int64_t big[3] = {200, 100, 300}, idx[2] = {10, 2}, upd[2] = {10, 300}, wide[2] = {10, 301}, few[2] = {9, 300};
  hlo_instr *o = param(HLO_F32, 3, big), *i = param(HLO_S64, 2, idx);
  hlo_instr *u = param(HLO_F32, 2, upd), *uw = param(HLO_F32, 2, wide), *uf = param(HLO_F32, 2, few);
  hlo_scatter_dims s = {.update_window_dims = list(1, &one), .inserted_window_dims = list(2, d01),
                        .scatter_dims_to_operand_dims = list(2, d01), .index_vector_dim = 1};
  CHECK_STR(shape_of(hlo_build_scatter(comp, o, i, u, &s, add, &diag)), "f32[200,100,300]");
  CHECK_FAILS(hlo_build_scatter(comp, o, i, uw, &s, add, &diag),
              "update window dim 1 has size 301, larger than operand dim 2 (300)");
  CHECK_FAILS(hlo_build_scatter(comp, o, i, uf, &s, add, &diag), "update scatter dim 0 has size 9 but indices dim 0 has 10");
  end();
}

static void tuples_and_calls(void) {
  begin();
  int64_t d2[1] = {2};
  hlo_instr *a = param(HLO_F32, 1, d2), *b = param(HLO_S32, 0, NULL);
  hlo_instr *ab[2] = {a, b};
  hlo_instr *t = hlo_build_tuple(comp, 2, ab, &diag);
  CHECK_STR(shape_of(t), "(f32[2], s32[])");
  CHECK_STR(shape_of(hlo_build_gte(comp, t, 1, &diag)), "s32[]");
  CHECK_FAILS(hlo_build_gte(comp, t, 2, &diag), "index 2 is out of range for a tuple of 2");
  CHECK_FAILS(hlo_build_gte(comp, a, 0, &diag), "operand must be a tuple, not f32[2]");

  /* A callee (x: f32[2]) -> (x, x) as a tuple; calls pass operands as parameters. */
  hlo_comp *callee = hlo_build_computation(module, "twice", false);
  hlo_shape vec = hlo_shape_make(HLO_F32, 1, d2);
  hlo_instr *x = hlo_build_parameter(callee, 0, &vec, "x", &diag);
  hlo_instr *xx[2] = {x, x};
  CHECK(hlo_comp_set_root(callee, hlo_build_tuple(callee, 2, xx, &diag), &diag) == HLO_OK);
  CHECK_STR(shape_of(hlo_build_call(comp, callee, 1, &a, &diag)), "(f32[2], f32[2])");
  CHECK_FAILS(hlo_build_call(comp, callee, 1, &b, &diag), "parameter 0 is f32[2] but needs s32[]");
  CHECK_FAILS(hlo_build_binary(comp, HLO_OP_ADD, a, x, &diag), "belongs to computation twice, not main");
  end();
}

/* Ops the builder does not offer, built by hand and inferred directly. */
static hlo_instr *by_hand(hlo_opcode op, int count, hlo_instr *const *operands) {
  return hlo_comp_append(comp, op, hlo_opcode_name(op), count, operands);
}

/* The inferred shape as text (and now the instruction's shape), or the error message. */
static const char *infer_text(hlo_instr *instr) {
  static char text[256];
  hlo_shape shape;
  hlo_diag_clear(&diag);
  if (hlo_infer_shape(instr, &shape, &module->arena, &diag)) return diag.message;
  instr->shape = shape;
  return hlo_shape_str(&shape, text, sizeof text);
}

static void ops_by_hand(void) {
  begin();
  int64_t d4[1] = {4}, d44[2] = {4, 4}, d88[2] = {8, 8}, sizes[2] = {2, 3};
  hlo_instr *f = param(HLO_F32, 1, d4), *bytes = param(HLO_U8, 2, d44);
  hlo_instr *wide = by_hand(HLO_OP_BITCAST_CONVERT, 1, &f);
  wide->shape.dtype = HLO_U8;
  CHECK_STR(infer_text(wide), "u8[4,4]"); /* each f32 becomes 4 bytes in a new minor dim */
  hlo_instr *narrow = by_hand(HLO_OP_BITCAST_CONVERT, 1, &bytes);
  narrow->shape.dtype = HLO_F32;
  CHECK_STR(infer_text(narrow), "f32[4]");

  hlo_instr *m = param(HLO_F32, 2, d88), *i = param(HLO_S32, 0, NULL);
  hlo_instr *ds_operands[3] = {m, i, i};
  hlo_instr *ds = by_hand(HLO_OP_DYNAMIC_SLICE, 3, ds_operands);
  ds->dimensions = hlo_ints_copy(&module->arena, 2, sizes);
  CHECK_STR(infer_text(ds), "f32[2,3]");
  hlo_instr *dus_operands[4] = {m, ds, i, i};
  CHECK_STR(infer_text(by_hand(HLO_OP_DYNAMIC_UPDATE_SLICE, 4, dus_operands)), "f32[8,8]");

  int64_t nchw[4] = {2, 3, 4, 5}, d3[1] = {3};
  hlo_instr *x = param(HLO_F32, 4, nchw), *scale = param(HLO_F32, 1, d3);
  hlo_instr *bn_operands[3] = {x, scale, scale};
  hlo_instr *bn = by_hand(HLO_OP_BATCH_NORM_TRAINING, 3, bn_operands);
  bn->index = 1;
  CHECK_STR(infer_text(bn), "(f32[2,3,4,5], f32[3], f32[3])");
  bn->index = 3; /* 5 features, but scale has 3 */
  CHECK(strstr(infer_text(bn), "scale must be a vector of 5 features") != NULL);
  hlo_diag_clear(&diag);

  /* all-gather over replica groups of 4 multiplies the gathered dim by 4. */
  int64_t d128x32[2] = {128, 32}, one = 1;
  hlo_instr *in = param(HLO_F32, 2, d128x32);
  hlo_instr *ag = by_hand(HLO_OP_ALL_GATHER, 1, &in);
  ag->dimensions = hlo_ints_copy(&module->arena, 1, &one);
  hlo_raw_attr groups = {"replica_groups", "{{0,2,4,6},{1,3,5,7}}"};
  ag->raw_attr_count = 1;
  ag->raw_attrs = &groups;
  CHECK_STR(infer_text(ag), "f32[128,128]");
  groups.value = "[2,64]<=[128]";
  CHECK_STR(infer_text(ag), "f32[128,2048]");
  hlo_instr *rs = by_hand(HLO_OP_REDUCE_SCATTER, 1, &in);
  rs->dimensions = ag->dimensions;
  rs->raw_attr_count = 1;
  rs->raw_attrs = &groups;
  groups.value = "{{0,1}}";
  CHECK_STR(infer_text(rs), "f32[128,16]");

  hlo_instr *gds = by_hand(HLO_OP_GET_DIMENSION_SIZE, 1, &m);
  gds->index = 1;
  CHECK_STR(infer_text(gds), "s32[]");
  hlo_instr *sds_operands[2] = {m, i};
  hlo_instr *sds = by_hand(HLO_OP_SET_DIMENSION_SIZE, 2, sds_operands);
  sds->index = 1;
  CHECK_STR(infer_text(sds), "f32[8,<=8]");
  end();
}

static void compatibility_ignores_layout_and_compares_bounds(void) {
  int64_t d4[1] = {4}, d23[2] = {2, 3};
  hlo_shape a = hlo_shape_make(HLO_F32, 2, d23), b = a;
  b.has_layout = true;
  b.minor_to_major[0] = 0;
  b.minor_to_major[1] = 1;
  CHECK(hlo_shape_compatible(&a, &b));
  hlo_shape bounded = hlo_shape_make(HLO_F32, 1, d4), fixed = bounded, unbounded = bounded;
  bounded.dim_kind[0] = HLO_DIM_BOUNDED;
  unbounded.dim_kind[0] = HLO_DIM_UNBOUNDED;
  unbounded.dims[0] = -1;
  CHECK(hlo_shape_compatible(&bounded, &fixed));
  CHECK(hlo_shape_compatible(&unbounded, &fixed));
  fixed.dims[0] = 5;
  CHECK(!hlo_shape_compatible(&bounded, &fixed));
  CHECK(!hlo_shape_compatible(&a, &fixed));
}

int main(void) {
  RUN(elementwise_needs_equal_shapes);
  RUN(broadcast_maps_operand_dims);
  RUN(reshape_transpose_slice);
  RUN(concatenate_and_pad);
  RUN(dot_orders_batch_then_free_dims);
  RUN(convolution_windows_and_groups);
  RUN(reductions);
  RUN(reduce_window_padding_and_stride);
  RUN(gathers);
  RUN(scatters);
  RUN(tuples_and_calls);
  RUN(ops_by_hand);
  RUN(compatibility_ignores_layout_and_compares_bounds);
  return TEST_REPORT();
}
