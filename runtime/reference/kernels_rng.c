/* rng-bit-generator and the older rng op.
 *
 * rng-bit-generator follows XLA's own expansion of the op (RngBitGeneratorExpander with the
 * bit generators of its prng library), so the bits are meant to match XLA's CPU backend:
 *   state[0] is the key; three-fry's counter is state[1] (u64), philox's is the 128-bit
 *   (state[1], state[2]), or (state[1], state[0]) for a u64[2] state;
 *   the new state is the key followed by the counter advanced past every block used.
 * rng_default is philox, as on XLA's CPU backend. Threefry-2x32 (20 rounds) and
 * Philox-4x32-10 are written from Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"
 * (SC 2011), and checked against the Random123 known-answer vectors in the tests.
 *
 * rng (distribution uniform or normal, operands a and b) has no state operand in HLO, so it is
 * made deterministic here: Philox keyed by a hash of the instruction's name, counter = the
 * element index. The same instruction gives the same numbers on every evaluation; a different
 * name gives different ones. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

static uint32_t rotl32(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }
static uint32_t lo32(uint64_t x) { return (uint32_t)x; }
static uint32_t hi32(uint64_t x) { return (uint32_t)(x >> 32); }
static uint64_t join64(uint32_t lo, uint32_t hi) { return (uint64_t)lo | (uint64_t)hi << 32; }

/* Threefry-2x32, 20 rounds: five groups of four add-rotate-xor rounds, a key injection after
 * each group. The third key word is the parity constant 0x1BD11BDA xor both key words, and
 * injection s adds s to the second word so no two injections are alike. */
static void threefry2x32(const uint32_t key[2], uint32_t x[2]) {
  static const int rotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
  x[0] += ks[0];
  x[1] += ks[1];
  for (uint32_t group = 0; group < 5; group++) {
    for (int r = 0; r < 4; r++) {
      x[0] += x[1];
      x[1] = rotl32(x[1], rotations[(group % 2) * 4 + r]);
      x[1] ^= x[0];
    }
    uint32_t s = group + 1;
    x[0] += ks[s % 3];
    x[1] += ks[(s + 1) % 3] + s;
  }
}

/* Philox-4x32, 10 rounds: each round multiplies two words by the Philox constants, mixes the
 * high halves with the other words and the key, and the key grows by the Weyl increments
 * (golden ratio, sqrt(3) - 1) between rounds. */
static void philox4x32(const uint32_t key_in[2], uint32_t x[4]) {
  uint32_t key[2] = {key_in[0], key_in[1]};
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)x[0] * 0xD2511F53u, p1 = (uint64_t)x[2] * 0xCD9E8D57u;
    uint32_t y[4] = {hi32(p1) ^ x[1] ^ key[0], lo32(p1), hi32(p0) ^ x[3] ^ key[1], lo32(p0)};
    memcpy(x, y, sizeof y);
    key[0] += 0x9E3779B9u;
    key[1] += 0xBB67AE85u;
  }
}

/* Stores raw random bits as an element of the declared type: integers take the low bits,
 * floats get the bit pattern (then widened when the storage type is f64). */
static void store_bits(rt_value *value, int64_t index, uint64_t bits, hlo_dtype declared) {
  switch (declared) {
    case HLO_F64: {
      double d;
      memcpy(&d, &bits, sizeof d);
      rt_set_f64(value, index, d);
      return;
    }
    case HLO_F32: {
      uint32_t narrow = (uint32_t)bits;
      float f;
      memcpy(&f, &narrow, sizeof f);
      rt_set_f64(value, index, f);
      return;
    }
    case HLO_F16: rt_set_f64(value, index, hlo_f16_to_f32((uint16_t)bits)); return;
    case HLO_BF16: rt_set_f64(value, index, hlo_bf16_to_f32((uint16_t)bits)); return;
    default: rt_set_u64(value, index, bits); return;
  }
}

/* 128-bit counter as (low, high) u64 words. */
typedef struct counter128 {
  uint64_t low, high;
} counter128;

static counter128 counter_add(counter128 c, uint64_t n) {
  counter128 r = {c.low + n, c.high};
  if (r.low < c.low) r.high++;
  return r;
}

/* Philox bits: block b encrypts counter + b; 32-bit elements take the four words of each block
 * in order, 64-bit elements take words (0,1) and (2,3) as low/high halves. */
static counter128 philox_fill(rt_value *data, hlo_dtype declared, uint64_t key64, counter128 counter) {
  uint32_t key[2] = {lo32(key64), hi32(key64)};
  bool wide = hlo_dtype_bits(declared) == 64;
  int64_t per_block = wide ? 2 : 4;
  int64_t blocks = (data->count + per_block - 1) / per_block;
  for (int64_t b = 0; b < blocks; b++) {
    counter128 c = counter_add(counter, (uint64_t)b);
    uint32_t x[4] = {lo32(c.low), hi32(c.low), lo32(c.high), hi32(c.high)};
    philox4x32(key, x);
    for (int64_t k = 0; k < per_block && b * per_block + k < data->count; k++) {
      uint64_t bits = wide ? join64(x[2 * k], x[2 * k + 1]) : x[k];
      store_bits(data, b * per_block + k, bits, declared);
    }
  }
  return counter_add(counter, (uint64_t)blocks);
}

/* Three-fry with 64-bit elements: element e encrypts counter + e, the two words joined. */
static uint64_t threefry_fill64(rt_value *data, hlo_dtype declared, const uint32_t key[2], uint64_t counter) {
  for (int64_t e = 0; e < data->count; e++) {
    uint64_t c = counter + (uint64_t)e;
    uint32_t x[2] = {lo32(c), hi32(c)};
    threefry2x32(key, x);
    store_bits(data, e, join64(x[0], x[1]), declared);
  }
  return counter + (uint64_t)data->count;
}

/* Three-fry with 32-bit (or narrower) elements. XLA halves the shape along one dimension (the
 * first even one, else the first longest), encrypts one counter per element of the half shape,
 * and interleaves the two output words along that dimension: element c takes word c[split] % 2
 * of half element c with c[split] / 2. */
static uint64_t threefry_fill32(rt_value *data, hlo_dtype declared, const uint32_t key[2], uint64_t counter) {
  const hlo_shape *shape = &data->shape;
  if (shape->rank == 0) {
    uint32_t x[2] = {lo32(counter), hi32(counter)};
    threefry2x32(key, x);
    store_bits(data, 0, x[0], declared);
    return counter + 1;
  }
  int split = -1;
  for (int d = 0; d < shape->rank && split < 0; d++)
    if (shape->dims[d] % 2 == 0) split = d;
  if (split < 0) { /* no even dim: the first longest */
    split = 0;
    for (int d = 1; d < shape->rank; d++)
      if (shape->dims[d] > shape->dims[split]) split = d;
  }
  hlo_shape half = *shape;
  half.dims[split] = (shape->dims[split] + 1) / 2;
  int64_t coords[HLO_MAX_RANK] = {0}, half_coords[HLO_MAX_RANK];
  for (int64_t e = 0; e < data->count; e++, rt_next_coords(shape, coords)) {
    memcpy(half_coords, coords, sizeof coords);
    half_coords[split] = coords[split] / 2;
    uint64_t c = counter + (uint64_t)rt_flat_index(&half, half_coords);
    uint32_t x[2] = {lo32(c), hi32(c)};
    threefry2x32(key, x);
    store_bits(data, e, x[coords[split] % 2], declared);
  }
  return counter + (uint64_t)hlo_shape_elements(&half);
}

static const char *check_bit_generator(const hlo_instr *instr, rt_value *const *args) {
  if (instr->operand_count != 1) return "needs one state operand";
  const rt_value *state = args[0];
  if (state->shape.dtype != HLO_U64 && state->shape.dtype != HLO_S64) return "the state must be u64";
  if (state->shape.rank != 1) return "the state must be a vector";
  if (!hlo_shape_is_tuple(&instr->shape) || instr->shape.tuple_count != 2)
    return "the result must be a tuple (new state, bits)";
  if (!hlo_shape_is_array(&instr->shape.tuple[1])) return "the bits must be an array";
  return NULL;
}

RT_KERNEL(rt_kernel_rng_bit_generator) {
  const char *why = check_bit_generator(instr, args);
  if (why) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", why);
  const rt_value *state = args[0];
  const hlo_shape *data_shape = &instr->shape.tuple[1];
  hlo_dtype declared = data_shape->dtype;
  int bits = hlo_dtype_bits(declared);
  if (!hlo_dtype_is_computable(declared) || declared == HLO_PRED || bits < 8)
    return rt_kernel_fail(eval, instr, HLO_ERR_UNSUPPORTED, "unsupported element type %s for random bits",
                hlo_dtype_name(declared));
  hlo_rng_algorithm algorithm = instr->rng_algorithm == HLO_RNG_DEFAULT ? HLO_RNG_PHILOX : instr->rng_algorithm;
  int64_t words = state->count;
  if (algorithm == HLO_RNG_THREE_FRY && words != 2)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "three-fry needs a u64[2] state, got %lld words", (long long)words);
  if (algorithm == HLO_RNG_PHILOX && words != 2 && words != 3)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "philox needs a u64[2] or u64[3] state, got %lld words", (long long)words);

  rt_value *data = rt_new_output(eval, instr, data_shape);
  rt_value *new_state = data ? rt_new_output(eval, instr, &instr->shape.tuple[0]) : NULL;
  if (new_state && new_state->count != words) {
    rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "the new state's shape differs from the state's");
    rt_value_release(new_state);
    new_state = NULL;
  }
  if (!data || !new_state) {
    rt_value_release(data);
    return eval->diag->status;
  }
  uint64_t key = rt_get_u64(state, 0);
  rt_set_u64(new_state, 0, key);
  if (algorithm == HLO_RNG_THREE_FRY) {
    uint32_t key32[2] = {lo32(key), hi32(key)};
    uint64_t counter = rt_get_u64(state, 1);
    counter = bits == 64 ? threefry_fill64(data, declared, key32, counter)
                         : threefry_fill32(data, declared, key32, counter);
    rt_set_u64(new_state, 1, counter);
  } else {
    counter128 counter = words == 3 ? (counter128){rt_get_u64(state, 1), rt_get_u64(state, 2)}
                                    : (counter128){rt_get_u64(state, 1), rt_get_u64(state, 0)};
    counter = philox_fill(data, declared, key, counter);
    rt_set_u64(new_state, 1, counter.low);
    if (words == 3) rt_set_u64(new_state, 2, counter.high);
  }
  rt_value *parts[2] = {new_state, data};
  *out = rt_value_new_tuple(2, parts);
  if (*out) return HLO_OK;
  rt_value_release(new_state);
  rt_value_release(data);
  return rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
}

/* FNV-1a: a stable hash of the instruction name, the rng op's key. */
static uint64_t name_hash(const char *name) {
  uint64_t h = 0xcbf29ce484222325u;
  for (const unsigned char *p = (const unsigned char *)name; p && *p; p++) h = (h ^ *p) * 0x100000001b3u;
  return h;
}

/* Mantissa bits of a float type: uniform floats carry that many random bits, so fp64 mode
 * draws the same numbers as a run in the declared type. */
static int mantissa_bits(hlo_dtype dtype) {
  switch (dtype) {
    case HLO_F16: return 10;
    case HLO_BF16: return 7;
    case HLO_F32: return 23;
    default: return 52;
  }
}

RT_KERNEL(rt_kernel_rng) {
  if (instr->operand_count != 2 || args[0]->shape.dtype == HLO_TUPLE || args[1]->shape.dtype == HLO_TUPLE ||
      args[0]->count != 1 || args[1]->count != 1 || !hlo_shape_is_array(&instr->shape))
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "needs two scalar operands and an array result");
  hlo_dtype declared = instr->shape.dtype;
  bool is_float = hlo_dtype_is_float(declared);
  if (instr->rng_distribution == HLO_RNG_NORMAL && !is_float)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "a normal distribution needs a floating-point type, not %s",
                hlo_dtype_name(declared));
  rt_value *result = rt_new_output(eval, instr, &instr->shape);
  if (!result) return eval->diag->status;
  uint64_t seed = name_hash(instr->name);
  uint32_t key[2] = {lo32(seed), hi32(seed)};
  int precision = mantissa_bits(declared);
  for (int64_t i = 0; i < result->count; i++) {
    uint32_t x[4] = {lo32((uint64_t)i), hi32((uint64_t)i), 0, 0};
    philox4x32(key, x);
    uint64_t bits0 = join64(x[0], x[1]), bits1 = join64(x[2], x[3]);
    if (!is_float) {
      /* [a, b): an empty range (b <= a) gives a. */
      int64_t a = rt_get_i64(args[0], 0), b = rt_get_i64(args[1], 0);
      bool nonempty = hlo_dtype_is_unsigned(declared) ? (uint64_t)b > (uint64_t)a : b > a;
      uint64_t range = nonempty ? (uint64_t)b - (uint64_t)a : 0;
      rt_set_u64(result, i, (uint64_t)a + (range ? bits0 % range : 0));
      continue;
    }
    double a = rt_get_f64(args[0], 0), b = rt_get_f64(args[1], 0);
    double u0 = ldexp((double)(bits0 >> (64 - precision)), -precision); /* [0, 1) */
    if (instr->rng_distribution == HLO_RNG_UNIFORM) {
      rt_set_f64(result, i, a + u0 * (b - a));
    } else {
      /* Box-Muller with mean a and standard deviation b; 1 - u0 is in (0, 1], so log is finite. */
      double u1 = ldexp((double)(bits1 >> 11), -53);
      double z = sqrt(-2.0 * log(1.0 - u0)) * cos(2.0 * M_PI * u1);
      rt_set_f64(result, i, a + b * z);
    }
  }
  *out = result;
  return HLO_OK;
}
