/* libFuzzer target for the cpu backend's serialized executables (runtime/cpu/deserialize.c,
 * deserialize_module.c, blob.c). The input is a blob's body, everything after its header: the
 * target writes the header (magic, format version, the body's checksum) in front, so that the
 * fuzzer's changes reach the decoder instead of stopping at the checksum. Any body must load
 * or fail with a message (HLO_ERR_INPUT, or out of memory), never crash or leak; one that
 * loads must serialize again, and that blob must load, serialize to the same bytes, run once
 * on small seeded inputs (an error is fine, a read or write outside a buffer is not) and
 * serialize to the same bytes again. The
 * first load takes the bytes (rt_backend_cpu.adopt, as the disk cache loads), the second
 * copies what it keeps (deserialize) and is bound to another module, which decodes the
 * source module the blob keeps: it binds or refuses with a message.
 * Seeds are bodies of blobs the cpu backend wrote for small corpus modules
 * (tests/fuzz/blob_seeds.sh, run by `make fuzz-blob`). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cpu/blob_internal.h"
#include "runtime/cpu/cpu.h"
#include "runtime/cpu/exec_internal.h"
#include "runtime/runtime.h"

/* A failure must say why, as an input error or out of memory. */
static void check_refusal(const hlo_diag *diag) {
  if (diag->message[0] == '\0') abort();
  if (diag->status != HLO_ERR_INPUT && !(diag->status == HLO_ERR_INTERNAL && strstr(diag->message, "out of memory")))
    abort();
}

/* adopt: bytes is malloc'd and the load takes it. */
static rt_executable *load(void *bytes, size_t len, bool adopt) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  rt_executable *exe = adopt ? rt_backend_cpu.adopt(bytes, len, NULL, &diag)
                             : rt_backend_cpu.deserialize(bytes, len, NULL, &diag);
  if (!exe) check_refusal(&diag);
  return exe;
}

/* exe serialized; aborts when it cannot be (a loaded executable always can). */
static unsigned char *serialize(const rt_executable *exe, size_t *len) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  void *bytes = NULL;
  if (rt_backend_cpu.serialize(exe, &bytes, len, &diag) != HLO_OK) abort();
  return bytes;
}

/* Binding exe decodes its source module first; a binding it cannot take is refused with a
 * message (or out of memory), never a crash. */
static void bind_once(rt_executable *exe) {
  static const char text[] = "HloModule b\nENTRY e {\n x = f32[3] parameter(0)\n ROOT y = f32[3] add(x, x)\n}\n";
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module *binding = hlo_parse_module(text, sizeof text - 1, "binding", &diag);
  if (!binding) abort();
  rt_executable *bound = rt_backend_cpu.bind(exe, binding, &diag);
  if (!bound && diag.message[0] == '\0') abort();
  rt_backend_cpu.destroy(bound);
  hlo_module_free(binding);
}

/* Whether module has a while loop: its trip count is what random inputs make it, up to
 * forever, so such a module is loaded, bound and serialized but not run (as in fuzz_run). */
static bool has_while(const hlo_module *module) {
  for (int c = 0; c < module->comp_count; c++)
    for (int i = 0; i < module->comps[c]->instr_count; i++)
      if (module->comps[c]->instrs[i]->opcode == HLO_OP_WHILE) return true;
  return false;
}

/* Runs exe once on seeded random inputs of its module's parameters (read again from the
 * blob), when they are small and it has no while loop: what loads must execute or fail with
 * a message, never reach outside its buffers. */
static void execute_once(rt_executable *exe, const unsigned char *blob, size_t len) {
  hlo_module *module = NULL;
  rt_cpu_plan *plan = NULL;
  const char *source;
  size_t source_len;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (rt_cpu_deserialize(blob, len, &module, &plan, &source, &source_len, &diag) != HLO_OK) abort();
  const hlo_comp *entry = module->entry;
  rt_value *args[16] = {NULL};
  bool small = entry->param_count <= 16 && plan->arena_bytes <= (1 << 24) && !has_while(module);
  for (int i = 0; small && i < entry->param_count; i++) {
    small = hlo_shape_bytes(&entry->params[i]->shape) <= (1 << 20);
    if (small) args[i] = rt_random_value(&entry->params[i]->shape, 1, (uint64_t)i, &diag);
    small = small && args[i];
  }
  rt_value *result = NULL;
  hlo_diag_clear(&diag);
  if (small && rt_backend_cpu.execute(exe, args, entry->param_count, &result, &diag) == HLO_OK)
    rt_value_release(result);
  else if (small && diag.message[0] == '\0')
    abort();
  for (int i = 0; i < 16; i++) rt_value_release(args[i]);
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned char *blob = malloc(RT_CPU_BLOB_HEADER + size + 1);
  if (!blob) return 0;
  memcpy(blob, RT_CPU_BLOB_MAGIC, 8);
  blob[8] = RT_CPU_BLOB_VERSION;
  uint64_t sum = rt_blob_checksum(data, size);
  for (int i = 0; i < 8; i++) blob[9 + i] = (unsigned char)(sum >> (8 * i));
  if (size) memcpy(blob + RT_CPU_BLOB_HEADER, data, size);
  rt_executable *exe = load(blob, RT_CPU_BLOB_HEADER + size, true);
  if (!exe) return 0;
  size_t len = 0, again_len = 0;
  unsigned char *bytes = serialize(exe, &len);
  rt_backend_cpu.destroy(exe);
  rt_executable *again = load(bytes, len, false);
  if (!again) abort(); /* what a load gave must load again */
  unsigned char *again_bytes = serialize(again, &again_len);
  if (again_len != len || memcmp(bytes, again_bytes, len) != 0) abort();
  free(again_bytes);
  /* Running changes nothing a serialization writes: an execute never writes into the
   * loaded plan's descriptions. */
  execute_once(again, bytes, len);
  again_bytes = serialize(again, &again_len);
  if (again_len != len || memcmp(bytes, again_bytes, len) != 0) abort();
  bind_once(again);
  rt_backend_cpu.destroy(again);
  free(bytes);
  free(again_bytes);
  return 0;
}
