/* libFuzzer target for everything HLO text reaches: parse, verify, then compile and execute
 * on the cpu and reference backends, on seeded random inputs. Any text must be refused with
 * a message (parse, verify, compile or execute error) or run; never a crash, an overflow,
 * a leak or a read outside a buffer. Modules are kept small so each run is quick: at most
 * MAX_INSTRS instructions, every shape at most MAX_SHAPE_BYTES, windows of at most
 * MAX_WINDOW positions, and no while loops (whose trip count random inputs decide).
 * Seeds: the small real dumps and the modules the tests write (tests/fuzz/run_seeds.py,
 * run by `make fuzz-run`). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/hlo.h"
#include "runtime/cpu/cpu.h"
#include "runtime/reference/reference.h"
#include "runtime/runtime.h"

enum { MAX_INSTRS = 64, MAX_SHAPE_BYTES = 1 << 14, MAX_WINDOW = 256 };

/* A failure must say why. */
static void check_refusal(const hlo_diag *diag) {
  if (diag->status == HLO_OK || diag->message[0] == '\0') abort();
}

static bool small_shape(const hlo_shape *shape) {
  if (shape->dtype == HLO_TUPLE) {
    for (int i = 0; i < shape->tuple_count; i++)
      if (!small_shape(&shape->tuple[i])) return false;
    return true;
  }
  return hlo_shape_bytes(shape) <= MAX_SHAPE_BYTES && hlo_shape_elements(shape) <= MAX_SHAPE_BYTES;
}

static bool small_window(const hlo_window *window) {
  int64_t positions = 1;
  for (int i = 0; window && i < window->rank; i++) {
    const hlo_window_dim *w = &window->dims[i];
    if (w->size > MAX_WINDOW || w->rhs_dilate > MAX_WINDOW || w->lhs_dilate > MAX_WINDOW) return false;
    positions *= w->size;
    if (positions > MAX_WINDOW) return false;
  }
  return true;
}

/* Whether the verified module is small and quick enough to run. */
static bool runnable(const hlo_module *module) {
  int instrs = 0;
  for (int c = 0; c < module->comp_count; c++) {
    const hlo_comp *comp = module->comps[c];
    for (int i = 0; i < comp->instr_count; i++) {
      const hlo_instr *instr = comp->instrs[i];
      if (++instrs > MAX_INSTRS || instr->opcode == HLO_OP_WHILE) return false;
      if (!small_shape(&instr->shape) || !small_window(instr->window)) return false;
    }
  }
  return true;
}

static void run_on(const rt_backend *backend, const hlo_module *module, rt_value **args, int count) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  rt_executable *exe = backend->compile(module, NULL, &diag);
  if (!exe) {
    check_refusal(&diag);
    return;
  }
  rt_value *result = NULL;
  hlo_diag_clear(&diag);
  if (backend->execute(exe, args, count, &result, &diag) == HLO_OK) rt_value_release(result);
  else check_refusal(&diag);
  backend->destroy(exe);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool started;
  if (!started) {
    rt_parallel_request_threads(2);
    started = true;
  }
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module *module = hlo_parse_module((const char *)data, size, "fuzz", &diag);
  if (!module) {
    check_refusal(&diag);
    return 0;
  }
  if (hlo_verify_module(module, &diag) != HLO_OK) {
    check_refusal(&diag);
  } else if (runnable(module)) {
    const hlo_comp *entry = module->entry;
    rt_value **args = calloc((size_t)entry->param_count + 1, sizeof *args);
    bool ok = args != NULL;
    for (int i = 0; ok && i < entry->param_count; i++) {
      args[i] = rt_random_value(&entry->params[i]->shape, 1, (uint64_t)i, &diag);
      ok = args[i] != NULL;
    }
    if (ok) {
      run_on(&rt_backend_reference, module, args, entry->param_count);
      run_on(&rt_backend_cpu, module, args, entry->param_count);
    }
    for (int i = 0; args && i < entry->param_count; i++) rt_value_release(args[i]);
    free(args);
  }
  hlo_module_free(module);
  return 0;
}
