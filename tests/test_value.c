/* Values as a warm call makes them: a small array's data and a tuple's elements in the
 * value's own block, larger ones apart, all zero-filled, aligned and freed on release
 * (AddressSanitizer checks the frees); shapes written in place over dirty memory; and a
 * READY node's hash for its users, filled in by the first reader, equal to the hash of its
 * dtype and dims from any thread. */
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "capture/capture.h"
#include "hlo/hlo.h"
#include "runtime/runtime.h"
#include "test.h"

static bool all_zero(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i]) return false;
  return true;
}

static void test_small_and_large_arrays(void) {
  int64_t small_dims[2] = {3, 5}, large_dims[1] = {1000};
  rt_value *small = rt_value_new_array(HLO_F32, 2, small_dims); /* 60 bytes: inline */
  rt_value *large = rt_value_new_array(HLO_F64, 1, large_dims); /* 8000 bytes: apart */
  rt_value *empty = rt_value_new_array(HLO_F32, 1, (int64_t[]){0});
  CHECK(small && large && empty);
  CHECK_EQ_INT(small->count, 15);
  CHECK_EQ_INT(large->count, 1000);
  CHECK_EQ_INT(empty->count, 0);
  CHECK(all_zero(small->data, 60) && all_zero(large->data, 8000));
  CHECK((uintptr_t)small->data % alignof(max_align_t) == 0);
  CHECK((uintptr_t)large->data % alignof(max_align_t) == 0);
  CHECK(small->refcount == 1 && small->tuple_count == 0 && small->tuple == NULL && small->release == NULL);
  CHECK(small->stamp != 0 && large->stamp != small->stamp);
  /* Writing all of the inline data stays inside the block (ASan would say otherwise). */
  memset(small->data, 0xab, 60);
  rt_value *copy = rt_value_copy(small);
  CHECK(copy && copy->data != small->data && memcmp(copy->data, small->data, 60) == 0);
  CHECK(rt_value_retain(small) == small && small->refcount == 2);
  rt_value_release(small);
  CHECK_EQ_INT(small->refcount, 1);
  rt_value_release(small);
  rt_value_release(large);
  rt_value_release(empty);
  rt_value_release(copy);
}

/* An unfilled value is the zeroed one's twin but for its bytes: same shape, count, block
 * layout (inline when small) and alignment, every byte writable (ASan), freed on release;
 * a large copy holds the original's bytes. Out of memory fails cleanly. */
static void test_unfilled(void) {
  hlo_shape small_shape = hlo_shape_make(HLO_F32, 2, (int64_t[]){3, 5});
  hlo_shape large_shape = hlo_shape_make(HLO_F64, 1, (int64_t[]){1000});
  rt_value *small = rt_value_new_unfilled(&small_shape), *large = rt_value_new_unfilled(&large_shape);
  rt_value *zeroed = rt_value_new(&small_shape);
  CHECK(small && large && zeroed);
  CHECK(small->count == 15 && large->count == 1000 && hlo_shape_equal(&small->shape, &small_shape));
  CHECK((char *)small->data - (char *)small == (char *)zeroed->data - (char *)zeroed); /* inline, as the zeroed one */
  CHECK((uintptr_t)large->data % alignof(max_align_t) == 0);
  memset(small->data, 0xcd, 60);
  for (int i = 0; i < 1000; i++) ((double *)large->data)[i] = i;
  rt_value *copy = rt_value_copy(large);
  CHECK(copy && copy->data != large->data && memcmp(copy->data, large->data, 8000) == 0);
  rt_value_release(copy);
  rt_value_release(small);
  rt_value_release(large);
  rt_value_release(zeroed);
  hlo_alloc_test_fail(2, false);
  hlo_shape big = hlo_shape_make(HLO_F32, 1, (int64_t[]){100000});
  CHECK(rt_value_new_unfilled(&big) == NULL);
  hlo_alloc_test_fail(0, false);
}

static void test_tuples_of_few_and_many(void) {
  enum { MANY = 20 };
  rt_value *few[3], *many[MANY];
  for (int i = 0; i < 3; i++) few[i] = rt_value_new_array(HLO_S32, 1, (int64_t[]){i + 1});
  for (int i = 0; i < MANY; i++) many[i] = rt_value_new_array(HLO_S32, 0, NULL);
  rt_value *a = rt_value_new_tuple(3, few), *b = rt_value_new_tuple(MANY, many), *none = rt_value_new_tuple(0, NULL);
  CHECK(a && b && none);
  CHECK(a->shape.dtype == HLO_TUPLE && a->tuple_count == 3 && b->tuple_count == MANY && none->tuple_count == 0);
  for (int i = 0; i < 3; i++) CHECK(a->tuple[i] == few[i] && a->tuple[i]->count == i + 1);
  for (int i = 0; i < MANY; i++) CHECK(b->tuple[i] == many[i]);
  rt_value *deep = rt_value_copy(a);
  CHECK(deep && deep->tuple_count == 3 && deep->tuple[2] != few[2] && deep->tuple[2]->count == 3);
  rt_value_release(a); /* releases the elements too */
  rt_value_release(b);
  rt_value_release(none);
  rt_value_release(deep);
}

/* A value whose data is not latch's: released through the callback, never freed. */
static int given_back;
static void give_back(void *ctx) { given_back += *(int *)ctx; }

static void test_borrowed(void) {
  float data[4] = {1, 2, 3, 4};
  int one = 1;
  given_back = 0;
  rt_value *v = rt_value_borrow(HLO_F32, 1, (int64_t[]){4}, data, give_back, &one);
  CHECK(v && v->data == data && v->count == 4);
  rt_value_release(v);
  CHECK_EQ_INT(given_back, 1);
}

static void test_out_of_memory(void) {
  /* One allocation for a small array or a small tuple, two for a large array: each fails
   * cleanly (ASan reports a leak of the first if the second's failure loses it). */
  hlo_alloc_test_fail(1, false);
  CHECK(rt_value_new_array(HLO_F32, 1, (int64_t[]){4}) == NULL);
  hlo_alloc_test_fail(1, false);
  CHECK(rt_value_new_tuple(0, NULL) == NULL);
  hlo_alloc_test_fail(2, false);
  CHECK(rt_value_new_array(HLO_F32, 1, (int64_t[]){100000}) == NULL);
  hlo_alloc_test_fail(0, false);
}

/* A kept value's buffer, once released, is the next kept value of the same size's (and no
 * other size's), newest first; the four last released are kept, so a fifth release lets the
 * oldest go; small ones are plain values. Every byte is writable (ASan) and out of memory
 * fails cleanly. */
static void test_kept(void) {
  hlo_shape big = hlo_shape_make(HLO_F32, 1, (int64_t[]){1 << 18});
  hlo_shape other = hlo_shape_make(HLO_F32, 1, (int64_t[]){1000});
  hlo_shape odd = hlo_shape_make(HLO_F32, 1, (int64_t[]){12345});
  hlo_shape tiny = hlo_shape_make(HLO_F32, 1, (int64_t[]){4});
  rt_value *a = rt_value_new_kept(&big);
  CHECK(a && a->count == 1 << 18 && a->release != NULL);
  if (!a) return;
  memset(a->data, 0x7f, (size_t)4 << 18);
  void *a_data = a->data;
  rt_value_release(a);
  rt_value *b = rt_value_new_kept(&other), *v[4];
  CHECK(b && b->data != a_data);
  for (int i = 0; i < 4; i++) v[i] = rt_value_new_kept(&big);
  CHECK(v[0] && v[0]->data == a_data && (uintptr_t)v[0]->data % alignof(max_align_t) == 0);
  void *data[4];
  for (int i = 0; i < 4; i++) data[i] = v[i] ? v[i]->data : NULL;
  rt_value_release(b); /* b's buffer kept, then v's four: the last lets b's go */
  for (int i = 0; i < 4; i++) rt_value_release(v[i]);
  for (int i = 3; i >= 0; i--) {
    v[i] = rt_value_new_kept(&big);
    CHECK(v[i] && v[i]->data == data[i]);
  }
  rt_value *fresh = rt_value_new_kept(&big);
  for (int i = 0; i < 4; i++) CHECK(fresh && fresh->data != data[i]);
  rt_value_release(fresh);
  for (int i = 0; i < 4; i++) rt_value_release(v[i]);
  rt_value *small = rt_value_new_kept(&tiny);
  CHECK(small && small->release == NULL);
  rt_value_release(small);
  hlo_alloc_test_fail(1, false);
  CHECK(rt_value_new_kept(&odd) == NULL);
  hlo_alloc_test_fail(2, false);
  CHECK(rt_value_new_kept(&odd) == NULL);
  hlo_alloc_test_fail(0, false);
}

static void test_shape_written_in_place(void) {
  hlo_shape shape;
  memset(&shape, 0x5a, sizeof shape);
  int64_t dims[3] = {2, 3, 4};
  hlo_shape_set_array(&shape, HLO_BF16, 3, dims);
  CHECK(shape.dtype == HLO_BF16 && shape.rank == 3);
  CHECK(shape.dims[0] == 2 && shape.dims[1] == 3 && shape.dims[2] == 4);
  for (int i = 3; i < HLO_MAX_RANK; i++) CHECK(shape.dims[i] == 0);
  CHECK(shape.minor_to_major[0] == 2 && shape.minor_to_major[1] == 1 && shape.minor_to_major[2] == 0);
  for (int i = 3; i < HLO_MAX_RANK; i++) CHECK(shape.minor_to_major[i] == 0);
  for (int i = 0; i < HLO_MAX_RANK; i++) CHECK(shape.dim_kind[i] == 0);
  CHECK(shape.layout_extra == NULL && shape.tuple == NULL && shape.tuple_count == 0 && !shape.has_layout);
  char text[64];
  CHECK_STR(hlo_shape_str(&shape, text, sizeof text), "bf16[2,3,4]");
  hlo_shape made = hlo_shape_make(HLO_BF16, 3, dims);
  CHECK(hlo_shape_equal(&made, &shape));
}

/* The hash a READY node's users see is XXH3 over 'D', dtype, rank, then the dims, each
 * 8 bytes little-endian (node.c's canonical form), whether one thread reads it first or
 * several at once. */
static cache_key data_hash_by_hand(hlo_dtype dtype, int rank, const int64_t *dims) {
  unsigned char buf[8 + 8 * HLO_MAX_RANK] = {'D', (unsigned char)dtype, (unsigned char)rank};
  for (int i = 0; i < rank; i++)
    for (int b = 0; b < 8; b++) buf[8 + 8 * i + b] = (unsigned char)((uint64_t)dims[i] >> (8 * b));
  XXH128_hash_t h = XXH3_128bits_withSeed(buf, 8 + 8 * (size_t)rank, CAP_HASH_FORMAT);
  return (cache_key){h.low64, h.high64};
}

static void *read_hash(void *node) {
  cache_key *key = malloc(sizeof *key);
  if (key) *key = cap_operand_hash(node);
  return key;
}

static void test_ready_hash_filled_by_first_reader(void) {
  int64_t dims[2] = {7, 9};
  cache_key want = data_hash_by_hand(HLO_F32, 2, dims);
  cache_key other = data_hash_by_hand(HLO_F32, 2, (int64_t[]){9, 7});
  CHECK(want.lo != other.lo || want.hi != other.hi);
  for (int round = 0; round < 2; round++) {
    cap_node *node = cap_node_data(rt_value_new_array(HLO_F32, 2, dims));
    CHECK(node && node->state == CAP_READY);
    if (round == 0) { /* one reader, then the cached words */
      cache_key first = cap_operand_hash(node), second = cap_operand_hash(node);
      CHECK(first.lo == want.lo && first.hi == want.hi && second.lo == want.lo && second.hi == want.hi);
    } else { /* four threads read it at once (TSan checks the filling) */
      pthread_t threads[4];
      for (int t = 0; t < 4; t++) pthread_create(&threads[t], NULL, read_hash, node);
      for (int t = 0; t < 4; t++) {
        cache_key *got = NULL;
        pthread_join(threads[t], (void **)&got);
        CHECK(got && got->lo == want.lo && got->hi == want.hi);
        free(got);
      }
    }
    cap_node_release(node);
  }
}

int main(void) {
  RUN(test_small_and_large_arrays);
  RUN(test_unfilled);
  RUN(test_tuples_of_few_and_many);
  RUN(test_borrowed);
  RUN(test_out_of_memory);
  RUN(test_kept);
  RUN(test_shape_written_in_place);
  RUN(test_ready_hash_filled_by_first_reader);
  return TEST_REPORT();
}
