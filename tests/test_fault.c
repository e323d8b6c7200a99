/* Fault injection (test-only): parsing LATCH_FAULT, and each fault's effect on a backend. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eval_util.h"
#include "runtime/runtime.h"
#include "runtime/reference/reference.h"
#include "runtime/cpu/cpu.h"

static const char *const text =
    "HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  n = f32[2] negate(x)\n  ROOT a = f32[2] add(n, x)\n}\n";

static void test_parse(void) {
  rt_fault f;
  hlo_diag d = {HLO_OK, ""};
  CHECK_EQ_INT(rt_fault_parse("compile:negate", &f, &d), HLO_OK);
  CHECK_EQ_INT(f.kind, RT_FAULT_COMPILE);
  CHECK_EQ_INT(f.opcode, HLO_OP_NEGATE);
  CHECK_EQ_INT(rt_fault_parse("accuracy:add:0.5", &f, &d), HLO_OK);
  CHECK_NEAR(f.eps, 0.5, 0);
  CHECK_EQ_INT(rt_fault_parse("crash:dot", &f, &d), HLO_OK);
  CHECK_EQ_INT(rt_fault_parse("hang:dot", &f, &d), HLO_OK);
  CHECK_EQ_INT(f.kind, RT_FAULT_HANG);
  CHECK_EQ_INT(rt_fault_parse("shift:cosine", &f, &d), HLO_OK);
  CHECK(f.kind == RT_FAULT_SHIFT && f.opcode == HLO_OP_COS);
  CHECK_EQ_INT(rt_fault_parse("compile:add+negate", &f, &d), HLO_OK);
  CHECK(f.paired && f.opcode == HLO_OP_ADD && f.partner == HLO_OP_NEGATE);
  CHECK_EQ_INT(rt_fault_parse("accuracy:negate+add:0.25", &f, &d), HLO_OK);
  CHECK(f.paired && f.opcode == HLO_OP_NEGATE && f.partner == HLO_OP_ADD);
  CHECK_NEAR(f.eps, 0.25, 0);
  const char *bad[] = {"", "compile", "compile:nonsense", "explode:add", "accuracy:add", "accuracy:add:x",
                       "compile:add:1", "compile:add+", "compile:add+nonsense", "crash:add+negate",
                       "accuracy:add+negate", "shift:add:1", "shift:add+negate"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hlo_diag_clear(&d);
    CHECK_MSG(rt_fault_parse(bad[i], &f, &d) == HLO_ERR_INPUT, "%s", bad[i]);
  }
}

static void test_compile_and_accuracy(void) {
  hlo_diag d = {HLO_OK, ""};
  hlo_module *m = hlo_parse_module(text, strlen(text), "m", &d);
  rt_fault f = {.kind = RT_FAULT_COMPILE, .opcode = HLO_OP_NEGATE};
  const rt_backend *b = rt_fault_backend(&rt_backend_reference, &f);
  CHECK(b != &rt_backend_reference);
  CHECK_STR(b->name, "reference");
  CHECK(b->compile(m, NULL, &d) == NULL);
  CHECK_EQ_INT(d.status, HLO_ERR_UNSUPPORTED);
  CHECK(strstr(d.message, "negate %n") != NULL);
  /* An op the module lacks: compiles and runs as the inner backend. */
  f.opcode = HLO_OP_DOT;
  b = rt_fault_backend(&rt_backend_reference, &f);
  hlo_diag_clear(&d);
  rt_executable *exe = b->compile(m, NULL, &d);
  CHECK(exe != NULL);
  b->destroy(exe);
  /* accuracy:negate:0.5 on x = (1, -2): n = (-1, 2) becomes n + 0.5 (|n| + 1) = (0, 3.5),
   * so a = n + x = (1, 1.5) where the truth is (0, 0). */
  f = (rt_fault){.kind = RT_FAULT_ACCURACY, .opcode = HLO_OP_NEGATE, .eps = 0.5};
  b = rt_fault_backend(&rt_backend_reference, &f);
  exe = b->compile(m, NULL, &d);
  CHECK(exe != NULL);
  int64_t dims[1] = {2};
  rt_value *x = make_value(HLO_F32, 1, dims, (double[]){1, -2}), *y = NULL;
  CHECK_EQ_INT(b->execute(exe, &x, 1, &y, &d), HLO_OK);
  if (y) {
    CHECK_NEAR(rt_get_f64(y, 0), 1, 0);
    CHECK_NEAR(rt_get_f64(y, 1), 1.5, 0);
  }
  rt_value_release(y);
  rt_value_release(x);
  b->destroy(exe);
  /* shift:negate on x = (1, -2, 5): n = (-1, 2, -5) comes out (2, -5, -1), so a = n + x
   * = (3, -7, 4) where the truth is (0, 0, 0); on constant x = (4, 4, 4) the shift is
   * invisible: a = (0, 0, 0). */
  const char *three = "HloModule m\nENTRY e {\n  x = f32[3] parameter(0)\n  n = f32[3] negate(x)\n"
                      "  ROOT a = f32[3] add(n, x)\n}\n";
  hlo_module *m3 = hlo_parse_module(three, strlen(three), "m", &d);
  f = (rt_fault){.kind = RT_FAULT_SHIFT, .opcode = HLO_OP_NEGATE};
  b = rt_fault_backend(&rt_backend_reference, &f);
  exe = m3 ? b->compile(m3, NULL, &d) : NULL;
  CHECK_MSG(exe != NULL, "%s", d.message);
  int64_t dims3[1] = {3};
  double inputs[2][3] = {{1, -2, 5}, {4, 4, 4}}, want[2][3] = {{3, -7, 4}, {0, 0, 0}};
  for (int k = 0; exe && k < 2; k++) {
    x = make_value(HLO_F32, 1, dims3, inputs[k]);
    y = NULL;
    CHECK_EQ_INT(b->execute(exe, &x, 1, &y, &d), HLO_OK);
    if (y) expect_values(__LINE__, y, want[k], 3, 0);
    rt_value_release(y);
    rt_value_release(x);
  }
  if (exe) b->destroy(exe);
  hlo_module_free(m3);
  CHECK(rt_fault_backend(&rt_backend_reference, &(rt_fault){0}) == &rt_backend_reference);
  hlo_module_free(m);
}

/* OP1+OP2: a compile fails only with both in the module; the accuracy error hits only the
 * partner fed by OP1. */
static void test_pairs(void) {
  hlo_diag d = {HLO_OK, ""};
  hlo_module *m = hlo_parse_module(text, strlen(text), "m", &d);
  rt_fault f = {0};
  CHECK_EQ_INT(rt_fault_parse("compile:negate+add", &f, &d), HLO_OK);
  const rt_backend *b = rt_fault_backend(&rt_backend_reference, &f);
  CHECK(b->compile(m, NULL, &d) == NULL);
  CHECK(strstr(d.message, "negate %n together with add %a") != NULL);
  CHECK_EQ_INT(rt_fault_parse("compile:negate+dot", &f, &d), HLO_OK);
  b = rt_fault_backend(&rt_backend_reference, &f);
  hlo_diag_clear(&d);
  rt_executable *exe = b->compile(m, NULL, &d);
  CHECK(exe != NULL);
  b->destroy(exe);
  /* accuracy:negate+add:0.5 on x = (1, -2): a = n + x = (0, 0) is fed by the negate, so it
   * becomes 0 + 0.5 (0 + 1) = 0.5 everywhere; n itself is exact. */
  CHECK_EQ_INT(rt_fault_parse("accuracy:negate+add:0.5", &f, &d), HLO_OK);
  b = rt_fault_backend(&rt_backend_reference, &f);
  exe = b->compile(m, NULL, &d);
  int64_t dims[1] = {2};
  rt_value *x = make_value(HLO_F32, 1, dims, (double[]){1, -2}), *y = NULL;
  CHECK(exe && b->execute(exe, &x, 1, &y, &d) == HLO_OK);
  if (y) {
    CHECK_NEAR(rt_get_f64(y, 0), 0.5, 0);
    CHECK_NEAR(rt_get_f64(y, 1), 0.5, 0);
  }
  rt_value_release(y);
  if (exe) b->destroy(exe);
  /* add+negate: the negate is fed by x, not by an add: nothing changes. */
  CHECK_EQ_INT(rt_fault_parse("accuracy:add+negate:0.5", &f, &d), HLO_OK);
  b = rt_fault_backend(&rt_backend_reference, &f);
  exe = b->compile(m, NULL, &d);
  y = NULL;
  CHECK(exe && b->execute(exe, &x, 1, &y, &d) == HLO_OK);
  if (y) {
    CHECK_NEAR(rt_get_f64(y, 0), 0, 0);
    CHECK_NEAR(rt_get_f64(y, 1), 0, 0);
  }
  rt_value_release(y);
  rt_value_release(x);
  if (exe) b->destroy(exe);
  hlo_module_free(m);
}

static void test_crash(void) {
  hlo_diag d = {HLO_OK, ""};
  hlo_module *m = hlo_parse_module(text, strlen(text), "m", &d);
  rt_fault f = {.kind = RT_FAULT_CRASH, .opcode = HLO_OP_NEGATE};
  const rt_backend *b = rt_fault_backend(&rt_backend_reference, &f);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stderr);
    b->compile(m, NULL, &d);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
  hlo_module_free(m);
}

/* choice:KIND:N: the kind and the 1-based index; N missing, zero or not a number, or no
 * kind, is an error naming the form. */
static void test_parse_choice(void) {
  rt_fault f;
  hlo_diag d = {HLO_OK, ""};
  CHECK_EQ_INT(rt_fault_parse("choice:fold_affine:3", &f, &d), HLO_OK);
  CHECK_EQ_INT(f.kind, RT_FAULT_CHOICE);
  CHECK_STR(f.choice_kind, "fold_affine");
  CHECK_EQ_INT(f.choice_index, 3);
  const char *bad[] = {"choice:fusion", "choice:fusion:0", "choice:fusion:x", "choice::2", "choice:fusion:2x"};
  for (int i = 0; i < 5; i++) {
    CHECK_EQ_INT(rt_fault_parse(bad[i], &f, &d), HLO_ERR_INPUT);
    CHECK_MSG(strstr(d.message, "choice:KIND:N") != NULL, "%s", d.message);
  }
}

/* The wrapper speaks for the backend it wraps: the same libraries (so the fingerprint is the
 * same) and the same report of work done. */
static void test_forwards_hooks(void) {
  rt_fault f;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK(rt_fault_parse("compile:sine", &f, &diag) == HLO_OK);
  const rt_backend *b = rt_fault_backend(&rt_backend_cpu, &f);
  CHECK(b != &rt_backend_cpu && b->libraries && b->work_so_far);
  CHECK(strcmp(b->libraries(), rt_backend_cpu.libraries()) == 0);
  CHECK(strstr(b->libraries(), "dnnl") != NULL || strstr(b->libraries(), "onednn") != NULL);
  char inner[256], wrapped[256];
  rt_backend_cpu.work_so_far(inner, sizeof inner);
  b->work_so_far(wrapped, sizeof wrapped);
  CHECK(strcmp(inner, wrapped) == 0 && wrapped[0] != '\0');
  b = rt_fault_backend(&rt_backend_reference, &f);
  CHECK(b->libraries && strcmp(b->libraries(), "") == 0);
  b->work_so_far(wrapped, sizeof wrapped);
  CHECK(wrapped[0] == '\0');
}

int main(void) {
  RUN(test_parse);
  RUN(test_parse_choice);
  RUN(test_compile_and_accuracy);
  RUN(test_pairs);
  RUN(test_crash);
  RUN(test_forwards_hooks);
  return TEST_REPORT();
}
