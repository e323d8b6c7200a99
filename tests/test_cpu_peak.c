/* bench_cpu_peak on crafted /proc/cpuinfo files: cores counted once per physical id and core
 * id (hyperthreads share them), the first cpu MHz, the FMA width from the flags (16 lanes
 * with avx512f, 8 with avx2 and fma), 2 FMA units; a file without a clock or without FMA
 * says it cannot tell. Expected figures worked out by hand. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench/bench.h"
#include "test.h"

static char path[64];

static void write_file(const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f) fputs(text, f), fclose(f);
}

#define CPU(n, phys, core, mhz, flags)                                                                         \
  "processor\t: " #n "\nmodel name\t: Test\ncpu MHz\t\t: " mhz "\nphysical id\t: " #phys "\ncore id\t\t: " #core \
  "\nflags\t\t: fpu sse2 " flags "\n\n"

int main(void) {
  snprintf(path, sizeof path, "/tmp/latch-cpuinfo-%d", (int)getpid());
  bench_cpu_peak_info info;
  /* Two cores with two hyperthreads each, AVX-512 at 2000 MHz: 2 x 2000 x 64 = 256 GFLOP/s. */
  write_file(CPU(0, 0, 0, "2000.000", "avx2 fma avx512f avx512bw") CPU(1, 0, 1, "2000.000", "avx2 fma avx512f")
                 CPU(2, 0, 0, "1999.000", "avx2 fma avx512f") CPU(3, 0, 1, "2001.000", "avx2 fma avx512f"));
  CHECK(bench_cpu_peak(path, &info));
  CHECK_EQ_INT(info.processors, 4);
  CHECK_EQ_INT(info.cores, 2);
  CHECK_EQ_INT(info.lanes, 16);
  CHECK_EQ_INT(info.flops_per_cycle, 64);
  CHECK(info.gflops > 255.999 && info.gflops < 256.001);
  /* AVX2 with FMA, two sockets of one core each at 3000 MHz: 2 x 3000 x 32 = 192. */
  write_file(CPU(0, 0, 0, "3000.0", "avx avx2 fma") CPU(1, 1, 0, "3000.0", "avx avx2 fma"));
  CHECK(bench_cpu_peak(path, &info));
  CHECK_EQ_INT(info.cores, 2);
  CHECK_EQ_INT(info.lanes, 8);
  CHECK(info.gflops > 191.999 && info.gflops < 192.001);
  /* avx512fp16 alone is not avx512f; avx2 without fma has no FMA: unknown. */
  write_file(CPU(0, 0, 0, "3000.0", "avx2 avx512fp16"));
  CHECK(!bench_cpu_peak(path, &info));
  CHECK_EQ_INT(info.lanes, 0);
  /* No clock: unknown. A missing file: unknown. */
  write_file("processor\t: 0\nflags\t\t: avx2 fma avx512f\n");
  CHECK(!bench_cpu_peak(path, &info));
  unlink(path);
  CHECK(!bench_cpu_peak(path, &info));
  return TEST_REPORT();
}
