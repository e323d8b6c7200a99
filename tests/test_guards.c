/* Symbolic sizes, guard sets and guard programs, with expectations worked out by hand. */
#include <stdlib.h>

#include "guards/guards.h"
#include "test.h"

static char *expr_text(guard_expr e) {
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  guard_expr_print(&sb, &e);
  return hlo_sb_take(&sb);
}

#define CHECK_EXPR(e, want)       \
  do {                            \
    char *text_ = expr_text(e);   \
    CHECK_STR(text_, want);       \
    free(text_);                  \
  } while (0)

static void test_expr_canonical(void) {
  guard_expr s0 = guard_expr_sym(0), s1 = guard_expr_sym(1), ab, ba;
  CHECK(guard_expr_add(s0, s1, &ab) && guard_expr_add(s1, s0, &ba));
  CHECK(guard_expr_equal(&ab, &ba));
  CHECK_EXPR(ab, "s1 + s0");
  /* (s0 + 2) * (s1 + 3) = s0*s1 + 3*s0 + 2*s1 + 6 */
  guard_expr x, y, p;
  CHECK(guard_expr_add(s0, guard_expr_const(2), &x) && guard_expr_add(s1, guard_expr_const(3), &y));
  CHECK(guard_expr_mul(x, y, &p));
  CHECK_EXPR(p, "s0*s1 + 2*s1 + 3*s0 + 6");
  int64_t bindings[] = {5, 7}, value = 0;
  CHECK(guard_expr_eval(&p, bindings, &value));
  CHECK_EQ_INT(value, (5 + 2) * (7 + 3));
  /* x - x cancels to the constant 0. */
  guard_expr neg, zero;
  CHECK(guard_expr_scale(x, -1, &neg) && guard_expr_add(x, neg, &zero));
  int64_t c = -1;
  CHECK(guard_expr_is_const(&zero, &c) && c == 0);
  CHECK_EXPR(zero, "0");
  CHECK_EQ_INT(guard_expr_as_sym(&s1), 1);
  CHECK_EQ_INT(guard_expr_as_sym(&x), -1);
  guard_expr sq;
  CHECK(guard_expr_mul(s0, s0, &sq));
  CHECK_EXPR(sq, "s0*s0");
}

static void test_expr_division_and_limits(void) {
  guard_expr s0 = guard_expr_sym(0), e, q;
  CHECK(guard_expr_scale(s0, 768, &e));
  CHECK(guard_expr_div_exact(e, 64, &q));
  CHECK_EXPR(q, "12*s0");
  CHECK(!guard_expr_div_exact(s0, 4, &q)); /* s0 / 4 is not a polynomial */
  guard_expr big = guard_expr_const(INT64_MAX), out;
  CHECK(!guard_expr_add(big, guard_expr_const(1), &out));
  CHECK(!guard_expr_scale(big, 2, &out));
  int64_t huge[] = {INT64_MAX / 2};
  int64_t value;
  guard_expr s0x3;
  CHECK(guard_expr_scale(s0, 3, &s0x3));
  CHECK(!guard_expr_eval(&s0x3, huge, &value)); /* 3 * (2^62 - 1) overflows */
  guard_expr deg = s0;
  for (int i = 1; i < GUARD_MAX_DEGREE; i++) CHECK(guard_expr_mul(deg, s0, &deg));
  CHECK(!guard_expr_mul(deg, s0, &out)); /* degree 5 */
  /* substitute s0 := 2*s1 in s0*s0 + 1 -> 4*s1*s1 + 1 */
  guard_expr sq, sq1, two_s1, sub;
  CHECK(guard_expr_mul(s0, s0, &sq) && guard_expr_add(sq, guard_expr_const(1), &sq1));
  CHECK(guard_expr_scale(guard_expr_sym(1), 2, &two_s1));
  CHECK(guard_expr_substitute(&sq1, 0, &two_s1, &sub));
  CHECK_EXPR(sub, "4*s1*s1 + 1");
}

static guard_tensor tensor(hlo_dtype dtype, int rank, const int64_t *dims) {
  return (guard_tensor){dtype, rank, dims};
}

/* An MLP-like trace: x f32[B,784], w f32[784,128], b f32[128]; B symbolic. */
static void test_duck_sizing_and_program(void) {
  guard_set *set = guard_set_new();
  guard_set_input(set, 0, HLO_F32, 2);
  guard_expr batch = guard_set_dim_symbolic(set, 0, 0, 8, false);
  guard_set_dim_static(set, 0, 1, 784);
  guard_set_input(set, 1, HLO_F32, 2);
  guard_set_dim_static(set, 1, 0, 784);
  guard_set_dim_static(set, 1, 1, 128);
  guard_set_input(set, 2, HLO_S32, 1);
  guard_expr lengths = guard_set_dim_symbolic(set, 2, 0, 8, false); /* same size: same symbol */
  CHECK(guard_expr_equal(&batch, &lengths));
  guard_set_input(set, 3, HLO_S32, 1);
  guard_expr other = guard_set_dim_symbolic(set, 3, 0, 8, true); /* independent: its own */
  CHECK(!guard_expr_equal(&batch, &other));
  CHECK_EQ_INT(guard_set_symbol_count(set), 2);
  hlo_diag diag = {0};
  guard_program *program = guard_program_compile(set, &diag);
  CHECK_MSG(program != NULL, "%s", diag.message);
  if (!program) return guard_set_free(set);
  const int64_t x16[] = {16, 784}, w[] = {784, 128}, len16[] = {16}, len5[] = {5}, x1[] = {1, 784};
  guard_tensor inputs[] = {tensor(HLO_F32, 2, x16), tensor(HLO_F32, 2, w), tensor(HLO_S32, 1, len16),
                           tensor(HLO_S32, 1, len5)};
  int64_t bindings[2] = {0};
  guard_failure why;
  CHECK(guard_program_check(program, inputs, 4, NULL, 0, bindings, &why));
  CHECK_EQ_INT(bindings[0], 16);
  CHECK_EQ_INT(bindings[1], 5);
  /* The shared symbol: lengths must follow the batch. */
  inputs[2] = tensor(HLO_S32, 1, len5);
  CHECK(!guard_program_check(program, inputs, 4, NULL, 0, bindings, &why));
  CHECK_EQ_INT(why.input, 2);
  CHECK_EQ_INT(why.dim, 0);
  CHECK(strstr(why.message, "input 2 dim 0 == s0") != NULL);
  /* Size 1 is specialized away from s0 >= 2. */
  inputs[0] = tensor(HLO_F32, 2, x1);
  inputs[2] = tensor(HLO_S32, 1, (const int64_t[]){1});
  CHECK(!guard_program_check(program, inputs, 4, NULL, 0, bindings, &why));
  CHECK(strstr(why.message, "s0 >= 2") != NULL);
  /* dtype is checked before any dim: an f16 x with a bad dim reports the dtype. */
  const int64_t bad[] = {16, 783};
  inputs[0] = tensor(HLO_F16, 2, bad);
  CHECK(!guard_program_check(program, inputs, 4, NULL, 0, bindings, &why));
  CHECK_EQ_INT(why.expected, HLO_F32);
  CHECK_EQ_INT(why.got, HLO_F16);
  CHECK(strstr(why.message, "dtype") != NULL);
  inputs[0] = tensor(HLO_F32, 2, bad);
  CHECK(!guard_program_check(program, inputs, 4, NULL, 0, bindings, &why));
  CHECK_EQ_INT(why.expected, 784);
  CHECK_EQ_INT(why.got, 783);
  CHECK(!guard_program_check(program, inputs, 3, NULL, 0, bindings, &why));
  CHECK(strstr(why.message, "expected 4 inputs, got 3") != NULL);
  guard_program_free(program);
  guard_set_free(set);
}

static void test_zero_and_one_specialized(void) {
  guard_set *set = guard_set_new();
  guard_set_input(set, 0, HLO_F32, 3);
  guard_expr d0 = guard_set_dim_symbolic(set, 0, 0, 0, false);
  guard_expr d1 = guard_set_dim_symbolic(set, 0, 1, 1, false);
  guard_expr d2 = guard_set_dim_symbolic(set, 0, 2, 2, false);
  int64_t v = -1;
  CHECK(guard_expr_is_const(&d0, &v) && v == 0);
  CHECK(guard_expr_is_const(&d1, &v) && v == 1);
  CHECK_EQ_INT(guard_expr_as_sym(&d2), 0);
  CHECK_EQ_INT(guard_set_symbol_count(set), 1);
  hlo_diag diag = {0};
  guard_program *program = guard_program_compile(set, &diag);
  const int64_t ok_dims[] = {0, 1, 9}, bad_dims[] = {2, 1, 9};
  guard_tensor in = tensor(HLO_F32, 3, ok_dims);
  int64_t bindings[1];
  CHECK(guard_program_check(program, &in, 1, NULL, 0, bindings, NULL));
  CHECK_EQ_INT(bindings[0], 9);
  in.dims = bad_dims;
  CHECK(!guard_program_check(program, &in, 1, NULL, 0, bindings, NULL));
  guard_program_free(program);
  guard_set_free(set);
}

/* x.reshape(-1, 4) on x of size [s0] needs s0 % 4 == 0 and introduces s1 = s0 / 4. */
static void test_reshape_divisibility(void) {
  guard_set *set = guard_set_new();
  guard_set_input(set, 0, HLO_F32, 1);
  guard_expr n = guard_set_dim_symbolic(set, 0, 0, 12, false);
  CHECK(guard_set_divisible(set, n, 4));
  guard_expr rows = guard_set_define_quotient(set, n, 4);
  CHECK_EQ_INT(guard_set_hint(set, &rows), 3);
  CHECK_EQ_INT(guard_expr_as_sym(&rows), 1);
  /* A quotient that is already a polynomial needs no new symbol: (8*s0) / 4 = 2*s0. */
  guard_expr eight_n;
  CHECK(guard_expr_scale(n, 8, &eight_n));
  guard_expr two_n = guard_set_define_quotient(set, eight_n, 4);
  CHECK_EXPR(two_n, "2*s0");
  CHECK_EQ_INT(guard_set_symbol_count(set), 2);
  hlo_diag diag = {0};
  guard_program *program = guard_program_compile(set, &diag);
  CHECK_MSG(program != NULL, "%s", diag.message);
  int64_t bindings[2];
  const int64_t d20[] = {20}, d18[] = {18}, d4[] = {4};
  guard_tensor in = tensor(HLO_F32, 1, d20);
  CHECK(guard_program_check(program, &in, 1, NULL, 0, bindings, NULL));
  CHECK_EQ_INT(bindings[0], 20);
  CHECK_EQ_INT(bindings[1], 5);
  guard_failure why;
  in.dims = d18;
  CHECK(!guard_program_check(program, &in, 1, NULL, 0, bindings, &why));
  CHECK(strstr(why.message, "s0 % 4 == 0") != NULL);
  CHECK(strstr(why.message, "s0 = 18") != NULL);
  in.dims = d4; /* 4 / 4 = 1: the trace assumed s1 >= 2 */
  CHECK(!guard_program_check(program, &in, 1, NULL, 0, bindings, &why));
  CHECK(strstr(why.message, "s1 >= 2") != NULL);
  guard_program_free(program);
  guard_set_free(set);
}

/* if (x.size(0) > 16) ... during tracing: the branch taken becomes a guard. */
static void test_comparison_guards(void) {
  guard_set *set = guard_set_new();
  guard_set_input(set, 0, HLO_F32, 2);
  guard_expr s0 = guard_set_dim_symbolic(set, 0, 0, 10, false);
  guard_expr s1 = guard_set_dim_symbolic(set, 0, 1, 20, false);
  CHECK(!guard_set_compare(set, s0, GUARD_GT, guard_expr_const(16))); /* records s0 <= 16 */
  CHECK(guard_set_compare(set, s0, GUARD_LT, s1));                    /* records s0 < s1 */
  CHECK(guard_set_compare(set, s0, GUARD_EQ, s0));                    /* always true, no guard */
  hlo_diag diag = {0};
  guard_program *program = guard_program_compile(set, &diag);
  int64_t bindings[2];
  guard_failure why;
  guard_tensor in = tensor(HLO_F32, 2, (const int64_t[]){16, 17});
  CHECK(guard_program_check(program, &in, 1, NULL, 0, bindings, &why));
  in.dims = (const int64_t[]){17, 30};
  CHECK(!guard_program_check(program, &in, 1, NULL, 0, bindings, &why));
  CHECK(strstr(why.message, "s0 <= 16") != NULL);
  in.dims = (const int64_t[]){9, 9}; /* 9 == 9 is a new symbol pair, but s0 < s1 fails */
  CHECK(!guard_program_check(program, &in, 1, NULL, 0, bindings, &why));
  CHECK(strstr(why.message, "s0 < s1") != NULL);
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  guard_set_print(set, &sb);
  CHECK(strstr(sb.data, "s0 := input 0 dim 0") != NULL);
  CHECK(strstr(sb.data, "s0 <= 16") != NULL);
  hlo_sb_free(&sb);
  guard_program_free(program);
  guard_set_free(set);
}

static void test_static_arguments(void) {
  guard_set *set = guard_set_new();
  guard_set_static(set, 0, &(guard_static){.kind = GUARD_STATIC_INT, .i = 3});
  guard_set_static(set, 1, &(guard_static){.kind = GUARD_STATIC_FLOAT, .f = 0.5});
  char mode[] = "train";
  guard_set_static(set, 2, &(guard_static){.kind = GUARD_STATIC_BYTES, .bytes = mode, .len = 5});
  mode[0] = 'X'; /* the set keeps its own copy */
  hlo_diag diag = {0};
  guard_program *program = guard_program_compile(set, &diag);
  guard_set_free(set); /* the program is independent of the set */
  guard_static statics[] = {{.kind = GUARD_STATIC_INT, .i = 3}, {.kind = GUARD_STATIC_FLOAT, .f = 0.5},
                            {.kind = GUARD_STATIC_BYTES, .bytes = "train", .len = 5}};
  guard_failure why;
  CHECK(guard_program_check(program, NULL, 0, statics, 3, NULL, &why));
  statics[2].bytes = "trail";
  CHECK(!guard_program_check(program, NULL, 0, statics, 3, NULL, &why));
  CHECK(strstr(why.message, "static 2") != NULL);
  statics[2].bytes = "train";
  statics[1].f = -0.5;
  CHECK(!guard_program_check(program, NULL, 0, statics, 3, NULL, &why));
  statics[1].f = 0.5;
  statics[0].kind = GUARD_STATIC_FLOAT; /* same bits, other kind */
  CHECK(!guard_program_check(program, NULL, 0, statics, 3, NULL, &why));
  statics[0].kind = GUARD_STATIC_INT;
  CHECK(!guard_program_check(program, NULL, 0, statics, 2, NULL, &why)); /* missing */
  CHECK(strstr(why.message, "missing") != NULL);
  guard_program_free(program);
}

static void test_malformed_sets_refused(void) {
  guard_set *set = guard_set_new();
  guard_set_input(set, 0, HLO_F32, 1);
  guard_set_dim_static(set, 0, 3, 5); /* dim 3 of a rank-1 input */
  hlo_diag diag = {0};
  CHECK(guard_program_compile(set, &diag) == NULL);
  CHECK(strstr(diag.message, "malformed guard") != NULL);
  guard_set_free(set);
  set = guard_set_new();
  guard_set_input(set, 0, HLO_F32, 1);
  for (int i = 0; i < GUARD_MAX_SYMBOLS + 1; i++) guard_set_dim_symbolic(set, 0, 0, 100 + i, false);
  hlo_diag_clear(&diag);
  CHECK(guard_program_compile(set, &diag) == NULL);
  CHECK(strstr(diag.message, "too many symbolic sizes") != NULL);
  guard_set_free(set);
}

int main(void) {
  RUN(test_expr_canonical);
  RUN(test_expr_division_and_limits);
  RUN(test_duck_sizing_and_program);
  RUN(test_zero_and_one_specialized);
  RUN(test_reshape_divisibility);
  RUN(test_comparison_guards);
  RUN(test_static_arguments);
  RUN(test_malformed_sets_refused);
  return TEST_REPORT();
}
