/* OpenBLAS's pthread build starts a worker thread when it loads, which spins for about 0.1 s
 * before it sleeps, beside the OpenMP threads that run latch's steps. The cpu backend's
 * first compile stops it (runtime/cpu/executable.c, stop_blas_threads): right after that
 * compile, in a process that has just started, this process spends almost no CPU time while
 * its main thread sleeps (with the worker left spinning it spent about 100 ms of the 150).
 * A product still runs right, on one thread. Process CPU time, not wall time: other load on
 * the machine does not add to it. Later compiles and loads start no thread again (that build
 * starts its stopped workers whenever its thread count is set), counted in /proc/self/task;
 * a host that raised the count since has latch's calls held to one again. (Under another
 * OpenBLAS build there is no worker, and the checks hold trivially.) */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "hlo/hlo.h"
#include "runtime/cpu/cpu.h"
#include "runtime/runtime.h"
#include "test.h"

static double process_cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static const char text[] = "HloModule m\nENTRY e {\n a = f32[2,3] parameter(0)\n b = f32[3,2] parameter(1)\n"
                            " ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";

/* The product [[1 2 3] [4 5 6]] . [[0 1] [0 1] [0 1]] run by exe: [[0 6] [0 15]]. */
static void check_product(rt_executable *exe) {
  hlo_diag diag = {0};
  rt_value *args[2] = {rt_value_new_array(HLO_F32, 2, (int64_t[]){2, 3}), rt_value_new_array(HLO_F32, 2, (int64_t[]){3, 2})};
  for (int i = 0; args[0] && args[1] && i < 6; i++) {
    ((float *)args[0]->data)[i] = (float)(i + 1);
    ((float *)args[1]->data)[i] = (float)(i % 2);
  }
  rt_value *out = NULL;
  if (exe && args[0] && args[1]) CHECK_EQ_INT(rt_backend_cpu.execute(exe, args, 2, &out, &diag), HLO_OK);
  const float want[4] = {0, 6, 0, 15};
  CHECK(out && out->count == 4 && memcmp(out->data, want, sizeof want) == 0);
  rt_value_release(out);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
}

static int thread_count(void) {
  DIR *dir = opendir("/proc/self/task");
  int n = 0;
  for (struct dirent *e = dir ? readdir(dir) : NULL; e; e = readdir(dir)) n += e->d_name[0] != '.';
  if (dir) closedir(dir);
  return n;
}

static rt_executable *compile_product(hlo_module **module) {
  hlo_diag diag = {0};
  *module = hlo_parse_module(text, sizeof text - 1, "m", &diag);
  rt_executable *exe = *module ? rt_backend_cpu.compile(*module, NULL, &diag) : NULL;
  CHECK_MSG(exe != NULL, "%s", diag.message);
  return exe;
}

static void test_no_thread_spins_after_a_compile(void) {
  hlo_module *module;
  rt_executable *exe = compile_product(&module);
  double before = process_cpu_ms();
  struct timespec pause = {0, 150 * 1000 * 1000};
  nanosleep(&pause, NULL);
  double spent = process_cpu_ms() - before;
  CHECK_MSG(spent < 30, "%.1f ms of CPU time while sleeping 150 ms", spent);
  check_product(exe);
  rt_backend_cpu.destroy(exe);
  hlo_module_free(module);
}

/* After the first compile: more compiles, a load of the serialized executable and their runs
 * leave the process with as many threads as it had, and OpenBLAS at one thread. */
static void test_later_compiles_start_no_thread(void) {
  int threads = thread_count();
  CHECK(threads >= 1);
  hlo_module *first_module;
  rt_executable *first = compile_product(&first_module);
  check_product(first);
  hlo_module *module;
  rt_executable *exe = compile_product(&module);
  void *bytes = NULL;
  size_t len = 0;
  hlo_diag diag = {0};
  CHECK_EQ_INT(rt_backend_cpu.serialize(exe, &bytes, &len, &diag), HLO_OK);
  rt_executable *loaded = bytes ? rt_backend_cpu.deserialize(bytes, len, NULL, &diag) : NULL;
  CHECK_MSG(loaded != NULL, "%s", diag.message);
  check_product(exe);
  check_product(loaded);
  CHECK_EQ_INT(thread_count(), threads);
  CHECK_EQ_INT(openblas_get_num_threads(), 1);
  free(bytes);
  if (loaded) rt_backend_cpu.destroy(loaded);
  rt_backend_cpu.destroy(exe);
  hlo_module_free(module);
  rt_backend_cpu.destroy(first);
  hlo_module_free(first_module);
}

/* A host that sets OpenBLAS to more threads after latch's first compile (its own products on
 * two threads) keeps that until latch's next compile, whose calls run on one again. */
static void test_a_raised_count_is_held_to_one(void) {
  openblas_set_num_threads(2);
  hlo_module *module;
  rt_executable *exe = compile_product(&module);
  CHECK_EQ_INT(openblas_get_num_threads(), 1);
  check_product(exe);
  rt_backend_cpu.destroy(exe);
  hlo_module_free(module);
}

int main(void) {
  RUN(test_no_thread_spins_after_a_compile);
  RUN(test_later_compiles_start_no_thread);
  RUN(test_a_raised_count_is_held_to_one);
  return TEST_REPORT();
}
