/* gather and scatter in the reference evaluator: HLO text snippets with expected values
 * worked out by hand from XLA's operation semantics (the arithmetic is in the comments). */
#include "eval_util.h"

/* Runs text and checks the array result against want (exactly unless tol > 0). A function
 * rather than eval_util.h's CHECK_RUN, whose locals collide with those of CHECK_NEAR. */
static void expect_run(int line, const char *text, rt_value *const *args, int arg_count, const double *want,
                       int64_t want_count, double tol) {
  hlo_diag diag;
  rt_value *got = run_text(text, args, arg_count, false, &diag);
  CHECK_MSG(got != NULL, "line %d: evaluation failed: %s", line, diag.message);
  if (!got) return;
  expect_values(line, got, want, want_count, tol);
  rt_value_release(got);
}
#define EXPECT_RUN(text, args, arg_count, want, want_count, tol) \
  expect_run(__LINE__, (text), (args), (arg_count), (want), (want_count), (tol))

/* table[r][c] = 10 * r + c, as f32[5,3]. */
static rt_value *make_table(void) {
  int64_t dims[2] = {5, 3};
  double values[15];
  for (int r = 0; r < 5; r++)
    for (int c = 0; c < 3; c++) values[r * 3 + c] = 10 * r + c;
  return make_value(HLO_F32, 2, dims, values);
}

/* Runs text and checks element `index` of a tuple result against want. */
static void check_tuple_element(const char *text, rt_value *const *args, int arg_count, int index,
                                const double *want, int64_t want_count) {
  hlo_diag diag;
  rt_value *got = run_text(text, args, arg_count, false, &diag);
  CHECK_MSG(got != NULL, "evaluation failed: %s", diag.message);
  if (!got) return;
  CHECK(got->shape.dtype == HLO_TUPLE && got->tuple_count > index);
  if (got->shape.dtype == HLO_TUPLE && got->tuple_count > index) {
    rt_value *element = got->tuple[index];
    CHECK_EQ_INT(element->count, want_count);
    for (int64_t i = 0; i < element->count && i < want_count; i++) CHECK_NEAR(rt_get_f64(element, i), want[i], 0);
  }
  rt_value_release(got);
}

/* Rows of a [5,3] table picked by s32[4] ids: the embedding lookup. */
static void test_gather_embedding(void) {
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  t = f32[5,3] parameter(0)\n"
      "  ids = s32[4] parameter(1)\n"
      "  ROOT g = f32[4,3] gather(t, ids), offset_dims={1}, collapsed_slice_dims={0},\n"
      "      start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}\n"
      "}\n";
  rt_value *table = make_table();
  int64_t id_dims[1] = {4};
  rt_value *ids = make_value(HLO_S32, 1, id_dims, (double[]){3, 0, 4, 3});
  rt_value *args[2] = {table, ids};
  /* rows 3, 0, 4, 3 */
  double want[12] = {30, 31, 32, 0, 1, 2, 40, 41, 42, 30, 31, 32};
  EXPECT_RUN(text, args, 2, want, 12, 0);
  rt_value_release(ids);

  /* Same with u8 ids: any integer type indexes. */
  static const char *text_u8 =
      "HloModule m\n"
      "ENTRY e {\n"
      "  t = f32[5,3] parameter(0)\n"
      "  ids = u8[2] parameter(1)\n"
      "  ROOT g = f32[2,3] gather(t, ids), offset_dims={1}, collapsed_slice_dims={0},\n"
      "      start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}\n"
      "}\n";
  int64_t two[1] = {2};
  ids = make_value(HLO_U8, 1, two, (double[]){1, 2});
  args[1] = ids;
  double want_u8[6] = {10, 11, 12, 20, 21, 22};
  EXPECT_RUN(text_u8, args, 2, want_u8, 6, 0);
  rt_value_release(ids);
  rt_value_release(table);
}

/* index_vector_dim == rank(indices): every element of s32[2,2] is a scalar row index. */
static void test_gather_scalar_indices(void) {
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  t = f32[5,3] parameter(0)\n"
      "  ids = s32[2,2] parameter(1)\n"
      "  ROOT g = f32[2,2,3] gather(t, ids), offset_dims={2}, collapsed_slice_dims={0},\n"
      "      start_index_map={0}, index_vector_dim=2, slice_sizes={1,3}\n"
      "}\n";
  rt_value *table = make_table();
  int64_t id_dims[2] = {2, 2};
  rt_value *ids = make_value(HLO_S32, 2, id_dims, (double[]){1, 2, 4, 0});
  rt_value *args[2] = {table, ids};
  /* out[i][j] = row ids[i][j]: rows 1, 2, 4, 0 */
  double want[12] = {10, 11, 12, 20, 21, 22, 40, 41, 42, 0, 1, 2};
  EXPECT_RUN(text, args, 2, want, 12, 0);
  rt_value_release(ids);
  rt_value_release(table);
}

/* index_vector_dim = 1 of s32[2,2,3]: idx[b0][k][b1] is coordinate k of the point (b0, b1). */
static void test_gather_index_vector_in_middle(void) {
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[4,4] parameter(0)\n"
      "  idx = s32[2,2,3] parameter(1)\n"
      "  ROOT g = f32[2,3] gather(a, idx), offset_dims={}, collapsed_slice_dims={0,1},\n"
      "      start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}\n"
      "}\n";
  int64_t a_dims[2] = {4, 4}, idx_dims[3] = {2, 2, 3};
  double a_values[16];
  for (int i = 0; i < 16; i++) a_values[i] = i; /* a[r][c] = 4r + c */
  rt_value *a = make_value(HLO_F32, 2, a_dims, a_values);
  /* rows {{0,1,2},{3,3,0}} at k = 0, columns {{1,2,3},{0,1,2}} at k = 1 */
  rt_value *idx = make_value(HLO_S32, 3, idx_dims, (double[]){0, 1, 2, 1, 2, 3, 3, 3, 0, 0, 1, 2});
  rt_value *args[2] = {a, idx};
  /* 4*0+1=1, 4*1+2=6, 4*2+3=11; 4*3+0=12, 4*3+1=13, 4*0+2=2 */
  double want[6] = {1, 6, 11, 12, 13, 2};
  EXPECT_RUN(text, args, 2, want, 6, 0);
  rt_value_release(idx);
  rt_value_release(a);
}

/* Starts are clamped to [0, dim - slice]: two-row slices of the 5-row table start at 0..3. */
static void test_gather_clamps(void) {
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  t = f32[5,3] parameter(0)\n"
      "  ids = s64[3] parameter(1)\n"
      "  ROOT g = f32[3,2,3] gather(t, ids), offset_dims={1,2}, collapsed_slice_dims={},\n"
      "      start_index_map={0}, index_vector_dim=1, slice_sizes={2,3}\n"
      "}\n";
  rt_value *table = make_table();
  int64_t id_dims[1] = {3};
  rt_value *ids = make_value(HLO_S64, 1, id_dims, (double[]){-2, 3, 9});
  rt_value *args[2] = {table, ids};
  /* -2 -> 0 (rows 0,1); 3 stays (rows 3,4); 9 -> 5-2 = 3 (rows 3,4) */
  double want[18] = {0, 1, 2, 10, 11, 12, 30, 31, 32, 40, 41, 42, 30, 31, 32, 40, 41, 42};
  EXPECT_RUN(text, args, 2, want, 18, 0);
  rt_value_release(ids);

  /* An unsigned index past int64 still clamps to the last start, not to 0. */
  static const char *text_u64 =
      "HloModule m\n"
      "ENTRY e {\n"
      "  t = f32[5,3] parameter(0)\n"
      "  ids = u64[1] parameter(1)\n"
      "  ROOT g = f32[1,3] gather(t, ids), offset_dims={1}, collapsed_slice_dims={0},\n"
      "      start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}\n"
      "}\n";
  int64_t one[1] = {1};
  ids = rt_value_new_array(HLO_U64, 1, one);
  rt_set_u64(ids, 0, UINT64_MAX);
  args[1] = ids;
  double want_u64[3] = {40, 41, 42}; /* clamped to row 5 - 1 = 4 */
  EXPECT_RUN(text_u64, args, 2, want_u64, 3, 0);
  rt_value_release(ids);
  rt_value_release(table);
}

/* Batching dims: out[b][i][:] = x[b][ids[b][i]][:], the batch coordinate coming from the
 * indices' batch dimension rather than from an index value. */
static void test_gather_batching(void) {
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[2,3,4] parameter(0)\n"
      "  ids = s32[2,2] parameter(1)\n"
      "  ROOT g = f32[2,2,4] gather(x, ids), offset_dims={2}, collapsed_slice_dims={1},\n"
      "      start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0},\n"
      "      index_vector_dim=2, slice_sizes={1,1,4}\n"
      "}\n";
  int64_t x_dims[3] = {2, 3, 4}, id_dims[2] = {2, 2};
  double x_values[24];
  for (int b = 0; b < 2; b++)
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 4; c++) x_values[b * 12 + r * 4 + c] = 100 * b + 10 * r + c;
  rt_value *x = make_value(HLO_F32, 3, x_dims, x_values);
  rt_value *ids = make_value(HLO_S32, 2, id_dims, (double[]){2, 0, 1, 1});
  rt_value *args[2] = {x, ids};
  /* batch 0 rows 2, 0; batch 1 rows 1, 1 */
  double want[16] = {20, 21, 22, 23, 0, 1, 2, 3, 110, 111, 112, 113, 110, 111, 112, 113};
  EXPECT_RUN(text, args, 2, want, 16, 0);
  rt_value_release(ids);
  rt_value_release(x);
}

static const char *add_f32 =
    "add {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(a, b)\n"
    "}\n";

/* Scatter-add with a repeated index: both updates land on row 0. */
static void test_scatter_add_duplicates(void) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule m\n%s"
           "ENTRY e {\n"
           "  op = f32[3,2] parameter(0)\n"
           "  idx = s32[3,1] parameter(1)\n"
           "  upd = f32[3,2] parameter(2)\n"
           "  ROOT s = f32[3,2] scatter(op, idx, upd), update_window_dims={1},\n"
           "      inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,\n"
           "      to_apply=add\n"
           "}\n",
           add_f32);
  int64_t op_dims[2] = {3, 2}, idx_dims[2] = {3, 1};
  rt_value *op = make_value(HLO_F32, 2, op_dims, (double[]){1, 1, 1, 1, 1, 1});
  rt_value *idx = make_value(HLO_S32, 2, idx_dims, (double[]){0, 2, 0});
  rt_value *upd = make_value(HLO_F32, 2, op_dims, (double[]){1, 2, 3, 4, 5, 6});
  rt_value *args[3] = {op, idx, upd};
  /* row 0: 1+1+5 = 7, 1+2+6 = 9; row 1 untouched; row 2: 1+3 = 4, 1+4 = 5 */
  double want[6] = {7, 9, 1, 1, 4, 5};
  EXPECT_RUN(text, args, 3, want, 6, 0);

  /* fp64 mode stores f32 as f64 and must give the same (exact) numbers. */
  hlo_diag diag;
  rt_value *got = run_text(text, args, 3, true, &diag);
  CHECK_MSG(got != NULL, "fp64 evaluation failed: %s", diag.message);
  if (got) {
    CHECK(got->shape.dtype == HLO_F64);
    for (int i = 0; i < 6 && i < got->count; i++) CHECK_NEAR(rt_get_f64(got, i), want[i], 0);
    rt_value_release(got);
  }
  rt_value_release(op);
  rt_value_release(idx);
  rt_value_release(upd);
}

/* index_vector_dim = 0: column k of s32[2,3] is the (row, col) point of update k. */
static void test_scatter_index_vector_dim(void) {
  static const char *text =
      "HloModule m\n"
      "add {\n"
      "  a = s32[] parameter(0)\n"
      "  b = s32[] parameter(1)\n"
      "  ROOT s = s32[] add(a, b)\n"
      "}\n"
      "ENTRY e {\n"
      "  op = s32[3,3] parameter(0)\n"
      "  idx = s32[2,3] parameter(1)\n"
      "  upd = s32[3] parameter(2)\n"
      "  ROOT s = s32[3,3] scatter(op, idx, upd), update_window_dims={},\n"
      "      inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=0,\n"
      "      to_apply=add\n"
      "}\n";
  int64_t op_dims[2] = {3, 3}, idx_dims[2] = {2, 3}, upd_dims[1] = {3};
  rt_value *op = make_value(HLO_S32, 2, op_dims, (double[]){0, 0, 0, 0, 0, 0, 0, 0, 0});
  rt_value *idx = make_value(HLO_S32, 2, idx_dims, (double[]){0, 1, 2, 2, 1, 0});
  rt_value *upd = make_value(HLO_S32, 1, upd_dims, (double[]){5, 6, 7});
  rt_value *args[3] = {op, idx, upd};
  /* points (0,2) <- 5, (1,1) <- 6, (2,0) <- 7 */
  double want[9] = {0, 0, 5, 0, 6, 0, 7, 0, 0};
  EXPECT_RUN(text, args, 3, want, 9, 0);
  rt_value_release(op);
  rt_value_release(idx);
  rt_value_release(upd);
}

/* Windows of 2 into f32[4]: starts -1 and 3 do not fit and are skipped whole (XLA does not
 * write the part of start 3's window that would fit); start 2 fits. */
static void test_scatter_out_of_bounds(void) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule m\n%s"
           "ENTRY e {\n"
           "  op = f32[4] parameter(0)\n"
           "  idx = s32[3,1] parameter(1)\n"
           "  upd = f32[3,2] parameter(2)\n"
           "  ROOT s = f32[4] scatter(op, idx, upd), update_window_dims={1},\n"
           "      inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,\n"
           "      to_apply=add\n"
           "}\n",
           add_f32);
  int64_t op_dims[1] = {4}, idx_dims[2] = {3, 1}, upd_dims[2] = {3, 2};
  rt_value *op = make_value(HLO_F32, 1, op_dims, (double[]){1, 2, 3, 4});
  rt_value *idx = make_value(HLO_S32, 2, idx_dims, (double[]){-1, 3, 2});
  rt_value *upd = make_value(HLO_F32, 2, upd_dims, (double[]){10, 20, 30, 40, 50, 60});
  rt_value *args[3] = {op, idx, upd};
  /* only start 2: 3+50 = 53, 4+60 = 64 */
  double want[4] = {1, 2, 53, 64};
  EXPECT_RUN(text, args, 3, want, 4, 0);
  rt_value_release(op);
  rt_value_release(idx);
  rt_value_release(upd);
}

/* The assign reducer (root = parameter 1) overwrites; scalar indices. */
static void test_scatter_assign(void) {
  static const char *text =
      "HloModule m\n"
      "assign {\n"
      "  a = s32[] parameter(0)\n"
      "  ROOT b = s32[] parameter(1)\n"
      "}\n"
      "ENTRY e {\n"
      "  op = s32[5] parameter(0)\n"
      "  idx = s32[2] parameter(1)\n"
      "  upd = s32[2] parameter(2)\n"
      "  ROOT s = s32[5] scatter(op, idx, upd), update_window_dims={},\n"
      "      inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,\n"
      "      to_apply=assign\n"
      "}\n";
  int64_t op_dims[1] = {5}, two[1] = {2};
  rt_value *op = make_value(HLO_S32, 1, op_dims, (double[]){1, 2, 3, 4, 5});
  rt_value *idx = make_value(HLO_S32, 1, two, (double[]){4, 1});
  rt_value *upd = make_value(HLO_S32, 1, two, (double[]){40, 10});
  rt_value *args[3] = {op, idx, upd};
  double want[5] = {1, 10, 3, 4, 40};
  EXPECT_RUN(text, args, 3, want, 5, 0);
  rt_value_release(op);
  rt_value_release(idx);
  rt_value_release(upd);
}

/* A combiner that is not one commutative op runs through the computation: old - update. */
static void test_scatter_general_combiner(void) {
  static const char *text =
      "HloModule m\n"
      "sub {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT d = f32[] subtract(a, b)\n"
      "}\n"
      "ENTRY e {\n"
      "  op = f32[3] parameter(0)\n"
      "  idx = s32[3] parameter(1)\n"
      "  upd = f32[3] parameter(2)\n"
      "  ROOT s = f32[3] scatter(op, idx, upd), update_window_dims={},\n"
      "      inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,\n"
      "      to_apply=sub\n"
      "}\n";
  int64_t three[1] = {3};
  rt_value *op = make_value(HLO_F32, 1, three, (double[]){10, 10, 10});
  rt_value *idx = make_value(HLO_S32, 1, three, (double[]){0, 0, 2});
  rt_value *upd = make_value(HLO_F32, 1, three, (double[]){1, 2, 3});
  rt_value *args[3] = {op, idx, upd};
  /* 10-1-2 = 7, 10, 10-3 = 7 */
  double want[3] = {7, 10, 7};
  EXPECT_RUN(text, args, 3, want, 3, 0);
  rt_value_release(op);
  rt_value_release(idx);
  rt_value_release(upd);
}

/* Two operands scattered together (a sum and a count): a tuple result. */
static void test_scatter_variadic(void) {
  static const char *text =
      "HloModule m\n"
      "pair_add {\n"
      "  s0 = f32[] parameter(0)\n"
      "  c0 = s32[] parameter(1)\n"
      "  s1 = f32[] parameter(2)\n"
      "  c1 = s32[] parameter(3)\n"
      "  s = f32[] add(s0, s1)\n"
      "  c = s32[] add(c0, c1)\n"
      "  ROOT t = (f32[], s32[]) tuple(s, c)\n"
      "}\n"
      "ENTRY e {\n"
      "  sums = f32[3] parameter(0)\n"
      "  counts = s32[3] parameter(1)\n"
      "  idx = s32[4] parameter(2)\n"
      "  values = f32[4] parameter(3)\n"
      "  ones = s32[4] parameter(4)\n"
      "  ROOT s = (f32[3], s32[3]) scatter(sums, counts, idx, values, ones), update_window_dims={},\n"
      "      inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,\n"
      "      to_apply=pair_add\n"
      "}\n";
  int64_t three[1] = {3}, four[1] = {4};
  rt_value *sums = make_value(HLO_F32, 1, three, (double[]){0, 0, 0});
  rt_value *counts = make_value(HLO_S32, 1, three, (double[]){0, 0, 0});
  rt_value *idx = make_value(HLO_S32, 1, four, (double[]){2, 0, 2, 2});
  rt_value *values = make_value(HLO_F32, 1, four, (double[]){1.5, 4, 2, -1});
  rt_value *ones = make_value(HLO_S32, 1, four, (double[]){1, 1, 1, 1});
  rt_value *args[5] = {sums, counts, idx, values, ones};
  /* slot 0: 4 (one value); slot 2: 1.5+2-1 = 2.5 (three values) */
  check_tuple_element(text, args, 5, 0, (double[]){4, 0, 2.5}, 3);
  check_tuple_element(text, args, 5, 1, (double[]){1, 0, 3}, 3);
  for (int i = 0; i < 5; i++) rt_value_release(args[i]);
}

/* Batching dims in scatter: out[b][idx[b][i]] += upd[b][i]. */
static void test_scatter_batching(void) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule m\n%s"
           "ENTRY e {\n"
           "  op = f32[2,3] parameter(0)\n"
           "  idx = s32[2,2] parameter(1)\n"
           "  upd = f32[2,2] parameter(2)\n"
           "  ROOT s = f32[2,3] scatter(op, idx, upd), update_window_dims={},\n"
           "      inserted_window_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0},\n"
           "      scatter_dims_to_operand_dims={1}, index_vector_dim=2, to_apply=add\n"
           "}\n",
           add_f32);
  int64_t op_dims[2] = {2, 3}, idx_dims[2] = {2, 2};
  rt_value *op = make_value(HLO_F32, 2, op_dims, (double[]){0, 0, 0, 0, 0, 0});
  rt_value *idx = make_value(HLO_S32, 2, idx_dims, (double[]){0, 2, 1, 1});
  rt_value *upd = make_value(HLO_F32, 2, idx_dims, (double[]){1, 2, 3, 4});
  rt_value *args[3] = {op, idx, upd};
  /* batch 0: [0] += 1, [2] += 2; batch 1: [1] += 3 + 4 = 7 */
  double want[6] = {1, 0, 2, 0, 7, 0};
  EXPECT_RUN(text, args, 3, want, 6, 0);
  rt_value_release(op);
  rt_value_release(idx);
  rt_value_release(upd);
}

/* A gather whose dimension numbers do not add up is an input error naming the instruction. */
static void test_gather_bad_dims(void) {
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  t = f32[5,3] parameter(0)\n"
      "  ids = s32[4] parameter(1)\n"
      "  ROOT bad_gather = f32[4,3] gather(t, ids), offset_dims={1}, collapsed_slice_dims={0},\n"
      "      start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}\n"
      "}\n";
  rt_value *table = make_table();
  int64_t id_dims[1] = {4};
  rt_value *ids = make_value(HLO_S32, 1, id_dims, (double[]){0, 0, 0, 0});
  rt_value *args[2] = {table, ids};
  hlo_diag diag;
  rt_value *got = run_text(text, args, 2, false, &diag);
  CHECK(got == NULL);
  rt_value_release(got);
  CHECK(diag.status != HLO_OK);
  CHECK_MSG(strstr(diag.message, "bad_gather") != NULL, "message: %s", diag.message);
  rt_value_release(ids);
  rt_value_release(table);
}

int main(void) {
  RUN(test_gather_embedding);
  RUN(test_gather_scalar_indices);
  RUN(test_gather_index_vector_in_middle);
  RUN(test_gather_clamps);
  RUN(test_gather_batching);
  RUN(test_gather_bad_dims);
  RUN(test_scatter_add_duplicates);
  RUN(test_scatter_index_vector_dim);
  RUN(test_scatter_out_of_bounds);
  RUN(test_scatter_assign);
  RUN(test_scatter_general_combiner);
  RUN(test_scatter_variadic);
  RUN(test_scatter_batching);
  return TEST_REPORT();
}
