/* latch_from_borrowed and latch_touch: the caller's memory read without a copy, written in
 * place by latch_assign, given back exactly once (also when creation fails), and new
 * contents seen after latch_touch, by a traced function's cached executable too. */
#include <stdlib.h>
#include <string.h>

#include "latch.h"
#include "test.h"

static int released;
static void count_release(void *ctx) { released += *(int *)ctx; }

static latch_runtime *open_rt(void) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "cpu";
  return latch_open(&options);
}

static void test_read_without_copy(void) {
  latch_runtime *rt = open_rt();
  float data[4] = {1, 2, 3, 4};
  int64_t dims[1] = {4};
  int one = 1;
  released = 0;
  latch_tensor *x = latch_from_borrowed(rt, LATCH_F32, 1, dims, data, count_release, &one);
  CHECK(latch_tensor_error(x) == NULL);
  CHECK(latch_data(x) == data); /* the very memory */
  latch_tensor *two = latch_scalar(rt, LATCH_F32, 2), *y = latch_binary(LATCH_MUL, x, two);
  latch_release(x);
  CHECK_EQ_INT(released, 0); /* pending y still reads it */
  float out[4];
  CHECK_EQ_INT(latch_read(y, out, sizeof out), LATCH_OK);
  for (int i = 0; i < 4; i++) CHECK_NEAR(out[i], 2.0 * (i + 1), 0);
  CHECK_EQ_INT(released, 1); /* computed: given back, exactly once */
  latch_release(y), latch_release(two);
  CHECK_EQ_INT(released, 1);
  latch_close(rt);
}

static void test_assign_writes_the_memory(void) {
  latch_runtime *rt = open_rt();
  float w[3] = {1, 2, 3};
  int64_t dims[1] = {3};
  int one = 1;
  released = 0;
  latch_tensor *t = latch_from_borrowed(rt, LATCH_F32, 1, dims, w, count_release, &one);
  latch_tensor *ten = latch_scalar(rt, LATCH_F32, 10), *next = latch_binary(LATCH_ADD, t, ten);
  CHECK_EQ_INT(latch_assign(t, next), LATCH_OK);
  latch_release(next), latch_release(ten);
  CHECK_EQ_INT(latch_sync(rt), LATCH_OK);
  CHECK(latch_data(t) == w); /* written back in place: 1+10, 2+10, 3+10 */
  CHECK_NEAR(w[0], 11, 0);
  CHECK_NEAR(w[1], 12, 0);
  CHECK_NEAR(w[2], 13, 0);
  latch_release(t);
  CHECK_EQ_INT(released, 1);
  latch_close(rt);
}

/* A sum of a weight alone is kept by the cpu backend while the weight's contents keep their
 * stamp: written from outside, touch gives them a new one. */
typedef struct {
  latch_tensor *w;
} model;

static latch_status sum_step(void *user, latch_tensor *const *in, int n, latch_tensor **out, int m) {
  (void)n, (void)m;
  model *md = user;
  latch_tensor *s = latch_reduce(LATCH_SUM, md->w, 0, NULL, false);
  out[0] = latch_binary(LATCH_ADD, s, in[0]);
  latch_release(s);
  return LATCH_OK;
}

static float call_sum(latch_function *f, latch_runtime *rt) {
  float zero = 0, got = -1;
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 0, NULL, &zero), *y = NULL;
  if (latch_call(f, &x, 1, NULL, 0, &y, 1) == LATCH_OK) latch_read(y, &got, sizeof got);
  latch_release(x), latch_release(y);
  return got;
}

static void test_touch_after_outside_write(void) {
  latch_runtime *rt = open_rt();
  float w[4] = {1, 1, 1, 1};
  int64_t dims[1] = {4};
  model md = {latch_from_borrowed(rt, LATCH_F32, 1, dims, w, NULL, NULL)};
  latch_function *f = latch_function_new_step(rt, sum_step, &md, NULL);
  CHECK_NEAR(call_sum(f, rt), 4, 0);
  CHECK_NEAR(call_sum(f, rt), 4, 0);
  w[0] = 5; /* 5 + 1 + 1 + 1 */
  CHECK_EQ_INT(latch_touch(md.w), LATCH_OK);
  CHECK_NEAR(call_sum(f, rt), 8, 0);
  latch_function_free(f);
  latch_release(md.w);
  latch_close(rt);
}

static void test_errors_give_the_memory_back(void) {
  latch_runtime *rt = open_rt();
  float data[2] = {0, 0};
  int64_t bad[1] = {-2}, dims[1] = {2};
  int one = 1;
  released = 0;
  latch_tensor *t = latch_from_borrowed(rt, LATCH_F32, 1, bad, data, count_release, &one);
  CHECK(latch_tensor_error(t) != NULL && strstr(latch_tensor_error(t), "negative") != NULL);
  CHECK_EQ_INT(released, 1);
  latch_release(t);
  t = latch_from_borrowed(rt, LATCH_F32, 1, dims, NULL, count_release, &one);
  CHECK(latch_tensor_error(t) != NULL && strstr(latch_tensor_error(t), "data is NULL") != NULL);
  CHECK_EQ_INT(released, 2);
  latch_release(t);
  t = latch_from_borrowed(rt, LATCH_INVALID, 1, dims, data, count_release, &one);
  CHECK(latch_tensor_error(t) != NULL);
  CHECK_EQ_INT(released, 3);
  latch_release(t);
  CHECK_EQ_INT(latch_touch(NULL), LATCH_ERR_INPUT);
  latch_sync(rt); /* reports the error tensors made above */
  latch_close(rt);
}

int main(void) {
  RUN(test_read_without_copy);
  RUN(test_assign_writes_the_memory);
  RUN(test_touch_after_outside_write);
  RUN(test_errors_give_the_memory_back);
  return TEST_REPORT();
}
