/* The backend table and the reference backend: compile, execute, serialize, deserialize. */
#include <stdlib.h>

#include "eval_util.h"
#include "runtime/runtime.h"
#include "runtime/reference/reference.h"
#include "capture/capture.h"

static const char *const affine =
    "HloModule affine\n"
    "ENTRY main {\n"
    "  x = f32[3] parameter(0)\n"
    "  two = f32[] constant(2)\n"
    "  b = f32[3] broadcast(two), dimensions={}\n"
    "  ROOT y = f32[3] multiply(x, b)\n"
    "}\n";

static void check_doubles(const rt_value *got, const double *want, int count) {
  CHECK(got != NULL);
  if (!got) return;
  CHECK_EQ_INT(got->count, count);
  for (int i = 0; i < count && i < got->count; i++) CHECK_NEAR(rt_get_f64(got, i), want[i], 0);
}

static void test_find(void) {
  CHECK(cap_backend_find("reference") == &rt_backend_reference);
  CHECK(cap_backend_find("no-such-backend") == NULL);
  CHECK(cap_backend_find(NULL) == NULL);
  /* The names are the list's, in its order: each one found, none other. */
  CHECK_STR(cap_backend_names(), "reference, cpu");
  char names[256];
  snprintf(names, sizeof names, "%s", cap_backend_names());
  int count = 0;
  for (char *name = strtok(names, ", "); name; name = strtok(NULL, ", ")) {
    const rt_backend *found = cap_backend_find(name);
    CHECK_MSG(found && strcmp(found->name, name) == 0, "%s", name);
    count++;
  }
  CHECK_EQ_INT(count, 2);
}

static void test_compile_execute_roundtrip(void) {
  hlo_diag diag = {0};
  hlo_module *module = hlo_parse_module(affine, strlen(affine), "affine", &diag);
  CHECK(module != NULL);
  const rt_backend *backend = &rt_backend_reference;
  rt_executable *exe = backend->compile(module, NULL, &diag);
  hlo_module_free(module); /* the executable keeps its own copy */
  CHECK_MSG(exe != NULL, "%s", diag.message);
  int64_t dims[] = {3};
  rt_value *x = make_value(HLO_F32, 1, dims, (double[]){1, -2.5, 4});
  rt_value *y = NULL;
  CHECK_EQ_INT(backend->execute(exe, &x, 1, &y, &diag), HLO_OK);
  check_doubles(y, (double[]){2, -5, 8}, 3);
  rt_value_release(y);

  void *bytes = NULL;
  size_t len = 0;
  CHECK_EQ_INT(backend->serialize(exe, &bytes, &len, &diag), HLO_OK);
  CHECK(len > 0);
  rt_executable *again = backend->deserialize(bytes, len, NULL, &diag);
  CHECK_MSG(again != NULL, "%s", diag.message);
  y = NULL;
  CHECK_EQ_INT(backend->execute(again, &x, 1, &y, &diag), HLO_OK);
  check_doubles(y, (double[]){2, -5, 8}, 3);
  rt_value_release(y);
  /* Garbage bytes are an error, not a crash. */
  CHECK(backend->deserialize("HloModule x\nENTRY {", 19, NULL, &diag) == NULL);
  CHECK(diag.status != HLO_OK);
  free(bytes);
  backend->destroy(again);
  backend->destroy(exe);
  rt_value_release(x);
}

int main(void) {
  RUN(test_find);
  RUN(test_compile_execute_roundtrip);
  return TEST_REPORT();
}
