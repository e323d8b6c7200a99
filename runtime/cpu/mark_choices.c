/* Two of the backend's choices that are neither a rewrite nor a plan decision, asked of
 * hlo_choice once per instruction at compile time and kept as a raw attribute on the
 * instruction when refused, so the serialized module carries the answer to a loaded
 * executable and `latch bisect` can name each (LATCH_CHOICES, LATCH_AVOID):
 *   onednn_product  an f32 product (not dot_rows.c's few rows) runs through oneDNN's sgemm
 *                   (a processor with AVX-512) rather than OpenBLAS's sgemm or sgemv;
 *                   refused: OpenBLAS (RT_CPU_ON_BLAS)
 *   known_finite    a oneDNN convolution or concatenation trusts what earlier steps of the
 *                   run found finite and skips scanning those inputs for inf and NaN;
 *                   refused: it scans every input (RT_CPU_SCAN_INPUTS) */
#include <string.h>

#include "dnnl_internal.h"
#include "exec_internal.h"
#include "kernel_internal.h"

/* Adds name=value to x's raw attributes; out of memory leaves the choice taken (the arena's
 * failed flag, which the compile checks after its passes, says why). */
static void mark(hlo_module *module, hlo_instr *x, const char *name, const char *value) {
  hlo_raw_attr *attrs = hlo_arena_alloc(&module->arena, sizeof *attrs * (size_t)(x->raw_attr_count + 1));
  if (!attrs) return;
  if (x->raw_attr_count) memcpy(attrs, x->raw_attrs, sizeof *attrs * (size_t)x->raw_attr_count);
  attrs[x->raw_attr_count] = (hlo_raw_attr){name, value};
  x->raw_attrs = attrs;
  x->raw_attr_count++;
}

void rt_cpu_mark_choices(hlo_module *module) {
  hlo_comp *entry = module->entry;
  for (int i = 0; i < entry->instr_count; i++) {
    hlo_instr *x = entry->instrs[i];
    if (rt_cpu_dot_product_on_dnnl(x) && !hlo_choice("onednn_product", x->name)) mark(module, x, RT_CPU_ON_BLAS, "1");
    bool finite_shortcut = (x->opcode == HLO_OP_CONVOLUTION && rt_cpu_dnnl_conv_supported(x)) ||
                           (x->opcode == HLO_OP_CONCATENATE && rt_cpu_dnnl_concat_supported(x));
    if (finite_shortcut && !hlo_choice("known_finite", x->name)) mark(module, x, RT_CPU_SCAN_INPUTS, "1");
  }
}
