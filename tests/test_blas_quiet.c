/* OpenBLAS's pthread build starts a worker thread when it loads, which spins for about 0.1 s
 * before it sleeps, beside the OpenMP threads that run latch's steps. The cpu backend's
 * first compile stops it (runtime/cpu/executable.c, stop_blas_threads): right after that
 * compile, in a process that has just started, this process spends almost no CPU time while
 * its main thread sleeps (with the worker left spinning it spent about 100 ms of the 150).
 * A product still runs right, on one thread. Process CPU time, not wall time: other load on
 * the machine does not add to it. (Under another OpenBLAS build there is no worker, and the
 * check holds trivially.) */
#include <string.h>
#include <time.h>

#include "hlo/hlo.h"
#include "runtime/cpu/cpu.h"
#include "runtime/runtime.h"
#include "test.h"

static double process_cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void test_no_thread_spins_after_a_compile(void) {
  static const char text[] = "HloModule m\nENTRY e {\n a = f32[2,3] parameter(0)\n b = f32[3,2] parameter(1)\n"
                             " ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  hlo_diag diag = {0};
  hlo_module *module = hlo_parse_module(text, sizeof text - 1, "m", &diag);
  rt_executable *exe = module ? rt_backend_cpu.compile(module, NULL, &diag) : NULL;
  CHECK_MSG(exe != NULL, "%s", diag.message);
  double before = process_cpu_ms();
  struct timespec pause = {0, 150 * 1000 * 1000};
  nanosleep(&pause, NULL);
  double spent = process_cpu_ms() - before;
  CHECK_MSG(spent < 30, "%.1f ms of CPU time while sleeping 150 ms", spent);
  rt_value *args[2] = {rt_value_new_array(HLO_F32, 2, (int64_t[]){2, 3}), rt_value_new_array(HLO_F32, 2, (int64_t[]){3, 2})};
  for (int i = 0; args[0] && args[1] && i < 6; i++) {
    ((float *)args[0]->data)[i] = (float)(i + 1); /* [[1 2 3] [4 5 6]] */
    ((float *)args[1]->data)[i] = (float)(i % 2); /* [[0 1] [0 1] [0 1]] */
  }
  rt_value *out = NULL;
  if (exe && args[0] && args[1]) CHECK_EQ_INT(rt_backend_cpu.execute(exe, args, 2, &out, &diag), HLO_OK);
  const float want[4] = {0, 6, 0, 15};
  CHECK(out && out->count == 4 && memcmp(out->data, want, sizeof want) == 0);
  rt_value_release(out);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
  rt_backend_cpu.destroy(exe);
  hlo_module_free(module);
}

int main(void) {
  RUN(test_no_thread_spins_after_a_compile);
  return TEST_REPORT();
}
