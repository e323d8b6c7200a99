/* HLO text written to break latch: sizes, offsets and strides that overflow int64 are
 * verifier errors naming the instruction (never a wrapped size a kernel then trusts), shapes
 * past HLO_MAX_BYTES are refused, and what the cpu backend cannot lay out is a compile
 * error. The command gives the same errors with a non-zero exit, never a crash. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "hlo/hlo.h"
#include "runtime/cpu/cpu.h"
#include "runtime/reference/reference.h"
#include "runtime/runtime.h"
#include "test.h"

/* low + high wraps to -100002 in int64, and -100002 + 200000 is the declared 99998: with
 * wrapping arithmetic the module verified and the cpu pad kernel wrote before its output. */
static const char pad_module[] =
    "HloModule pad_overflow\n"
    "ENTRY main {\n"
    "  p = f32[200000] parameter(0)\n"
    "  z = f32[] constant(0)\n"
    "  ROOT r = f32[99998] pad(p, z), padding=9223372036854675807_9223372036854775807\n"
    "}\n";

/* Parses text, which must fail to verify with a message holding each of want (NULL ends). */
static void expect_refused(const char *text, const char *const *want) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module *module = hlo_parse_module(text, strlen(text), "hostile", &diag);
  CHECK_MSG(module == NULL || hlo_verify_module(module, &diag) == HLO_ERR_INPUT, "verified:\n%s", text);
  for (int i = 0; want[i]; i++)
    CHECK_MSG(strstr(diag.message, want[i]) != NULL, "no \"%s\" in: %s", want[i], diag.message);
  hlo_module_free(module);
}

static hlo_module *verified(const char *text) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module *module = hlo_parse_module(text, strlen(text), "hostile", &diag);
  CHECK_MSG(module, "%s", diag.message);
  if (module && hlo_verify_module(module, &diag) != HLO_OK) {
    CHECK_MSG(false, "%s", diag.message);
    hlo_module_free(module);
    return NULL;
  }
  return module;
}

static void pad_overflow_is_a_verifier_error(void) {
  expect_refused(pad_module, (const char *[]){"pad %r", "overflows", "9223372036854675807", NULL});
}

/* interior * (size - 1) overflows: 2^62 * 3. */
static void pad_interior_overflow(void) {
  expect_refused("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
                 "  ROOT r = f32[4] pad(p, z), padding=0_0_4611686018427387904\n}\n",
                 (const char *[]){"pad %r", "overflows", NULL});
}

/* A window whose padding wraps: (base-1)*dilation + low + high. */
static void window_overflow(void) {
  expect_refused("HloModule m\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                 "  ROOT s = f32[] add(a, b)\n}\nENTRY e {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
                 "  ROOT r = f32[2] reduce-window(p, z), window={size=2 pad=9223372036854775807_9223372036854775807},"
                 " to_apply=add\n}\n",
                 (const char *[]){"%r", "overflow", NULL});
  expect_refused("HloModule m\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                 "  ROOT s = f32[] add(a, b)\n}\nENTRY e {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
                 "  ROOT r = f32[2] reduce-window(p, z), window={size=2 lhs_dilate=4611686018427387904}, to_apply=add\n}\n",
                 (const char *[]){"%r", "overflow", NULL});
}

/* Shapes whose bytes pass int64 (or HLO_MAX_BYTES) are refused, naming the instruction. */
static void huge_shapes_are_refused(void) {
  expect_refused("HloModule m\nENTRY e {\n  p = f32[72057594037927936] parameter(0)\n"
                 "  ROOT r = f32[72057594037927936] negate(p)\n}\n",
                 (const char *[]){"%p", "larger than", NULL});
  expect_refused("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n"
                 "  ROOT r = f32[18014398509481984,4] broadcast(p), dimensions={1}\n}\n",
                 (const char *[]){"%r", "larger than", NULL});
}

/* A slice's stride near INT64_MAX is a valid (one-element) slice: its size, computed as
 * (limit - start + stride - 1) / stride, wrapped. */
static void slice_with_a_huge_stride(void) {
  hlo_module *module = verified("HloModule m\nENTRY e {\n  p = f32[10] parameter(0)\n"
                                "  ROOT r = f32[1] slice(p), slice={[3:10:9223372036854775807]}\n}\n");
  if (!module) return;
  rt_value *x = rt_value_new(&module->entry->params[0]->shape);
  for (int i = 0; i < 10; i++) ((float *)x->data)[i] = (float)(i * i);
  const rt_backend *backends[] = {&rt_backend_reference, &rt_backend_cpu};
  for (int b = 0; b < 2; b++) {
    hlo_diag diag;
    hlo_diag_clear(&diag);
    rt_executable *exe = backends[b]->compile(module, NULL, &diag);
    rt_value *out = NULL;
    CHECK_MSG(exe && backends[b]->execute(exe, &x, 1, &out, &diag) == HLO_OK, "%s: %s", backends[b]->name,
              diag.message);
    if (out) CHECK_NEAR(((float *)out->data)[0], 9.0, 0); /* element 3 */
    rt_value_release(out);
    backends[b]->destroy(exe);
  }
  rt_value_release(x);
  hlo_module_free(module);
}

/* The cpu plan views an entry constant's bytes in place; a tuple constant has none: a
 * compile error (it called a missing kernel). */
static void tuple_constant_is_a_compile_error(void) {
  hlo_module *module = verified("HloModule m\nENTRY e {\n  t = (f32[], s32[2]) constant((1.5, {2, 3}))\n"
                                "  ROOT r = ((f32[], s32[2])) tuple(t)\n}\n");
  if (!module) return;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  rt_executable *exe = rt_backend_cpu.compile(module, NULL, &diag);
  CHECK(exe == NULL && diag.status == HLO_ERR_UNSUPPORTED);
  CHECK_MSG(strstr(diag.message, "constant %t") != NULL, "%s", diag.message);
  rt_backend_cpu.destroy(exe);
  hlo_module_free(module);
}

/* The command: exit 1 with the verifier's message, on both backends (the cpu one crashed). */
static void command_refuses_the_pad_module(void) {
  if (!cli_setup()) return;
  cli_write_text(cli_path("pad.hlo"), pad_module);
  const char *backends[] = {"cpu", "reference"};
  for (int b = 0; b < 2; b++) {
    CLI_CHECK(1, "", "run --backend %s '%s'", backends[b], cli_path("pad.hlo"));
    CLI_HAS(cli_err, "pad %r: dim 0's padded size overflows");
  }
  cli_cleanup();
}

int main(void) {
  RUN(pad_overflow_is_a_verifier_error);
  RUN(pad_interior_overflow);
  RUN(window_overflow);
  RUN(huge_shapes_are_refused);
  RUN(slice_with_a_huge_stride);
  RUN(tuple_constant_is_a_compile_error);
  RUN(command_refuses_the_pad_module);
  return TEST_REPORT();
}
