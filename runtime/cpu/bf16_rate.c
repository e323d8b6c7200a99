/* Whether bf16 arithmetic pays on this processor: its bf16 dot-product instruction
 * (vdpbf16ps, avx512_bf16) does twice the multiply-adds of an f32 FMA per instruction, but
 * processors issue it at different rates: where it issues at half the FMA's rate (measured on
 * a Sapphire Rapids virtual machine without AMX: oneDNN's bf16 matmul ran at half its f32
 * sgemm's speed), a product bound by arithmetic runs faster on its operands widened to f32,
 * which gives the same products (a product of two bf16 values is exact in f32) summed in f32.
 *
 * The rule is measured once per process: a few hundred thousand instructions of each kind on
 * independent accumulators, the best of five short runs each, taken back to back; bf16 pays
 * when it does at least 1.25 times the f32 multiply-adds per second. The two rates are far
 * apart on the processors measured (0.5x or 2x), so a busy machine does not flip the answer. */
#include <stdatomic.h>
#include <time.h>

#include "kernel_internal.h"

#if RT_CPU_X86_VARIANTS
#include <immintrin.h>

enum { ROUNDS = 20000, TRIES = 5 };

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The accumulators are twelve named variables, not an array: an array stays in memory, and
 * each instruction then waits on a load and a store, which measures the loop rather than the
 * instruction (it made vdpbf16ps look 1.7 times as fast as the FMA where it is half as fast).
 * Each starts at a different value, so the compiler cannot merge them into one chain; twelve
 * independent chains cover either instruction's latency. */
#define ACCUMULATORS 12
#define EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define DECLARE(i) __m512 acc##i = _mm512_set1_ps((float)(i));
#define ADD(i) sum = _mm512_add_ps(sum, acc##i);

/* Multiply-adds per second of vdpbf16ps (32 per instruction). */
__attribute__((target("avx512f,avx512bf16"))) static double bf16_rate(void) {
  EACH(DECLARE)
  __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = a;
  double start = seconds();
  for (int r = 0; r < ROUNDS; r++) {
#define DPBF16(i) acc##i = _mm512_dpbf16_ps(acc##i, a, b);
    EACH(DPBF16)
    __asm__ volatile("" : "+v"(a));
  }
  double t = seconds() - start;
  __m512 sum = _mm512_setzero_ps();
  EACH(ADD)
  float total = _mm512_reduce_add_ps(sum);
  __asm__ volatile("" : : "x"(total));
  return t > 0 ? (double)ROUNDS * ACCUMULATORS * 32 / t : 0;
}

/* Multiply-adds per second of vfmadd231ps on zmm (16 per instruction). */
__attribute__((target("avx512f"))) static double f32_rate(void) {
  EACH(DECLARE)
  __m512 a = _mm512_set1_ps(1.0f), b = a;
  double start = seconds();
  for (int r = 0; r < ROUNDS; r++) {
#define FMA(i) acc##i = _mm512_fmadd_ps(a, b, acc##i);
    EACH(FMA)
    __asm__ volatile("" : "+v"(a));
  }
  double t = seconds() - start;
  __m512 sum = _mm512_setzero_ps();
  EACH(ADD)
  float total = _mm512_reduce_add_ps(sum);
  __asm__ volatile("" : : "x"(total));
  return t > 0 ? (double)ROUNDS * ACCUMULATORS * 16 / t : 0;
}

static bool measure(void) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bf16")) return false;
  double bf16 = 0, f32 = 0;
  for (int i = 0; i < TRIES; i++) {
    double x = bf16_rate(), y = f32_rate();
    if (x > bf16) bf16 = x;
    if (y > f32) f32 = y;
  }
  return bf16 >= 1.25 * f32;
}
#else
static bool measure(void) { return false; }
#endif

/* -1 until measured; then whether bf16 arithmetic pays. */
static _Atomic int pays = -1;

bool rt_cpu_bf16_arithmetic_pays(void) {
  int on = atomic_load_explicit(&pays, memory_order_relaxed);
  if (on < 0) {
    on = measure();
    atomic_store_explicit(&pays, on, memory_order_relaxed);
  }
  return on;
}
