/* A convolution's input gradient as XLA writes it reads its kernel through a reverse of the
 * kernel's spatial dims:
 *
 *   convolution(g, reverse(w, {kernel spatial dims}))  ->  convolution(g, w), window reversed
 *
 * (window reversal on both spatial dims reads tap t of the window with weight K - 1 - t:
 * the same products, summed in the same order, so the rewrite is exact). Done only where the
 * rewritten convolution runs on oneDNN's backward-data primitive (dnnl_conv_grad.c), which
 * reads the kernel as it is: the reversed copy of every kernel is no longer made, and the
 * convolution no longer runs as a forward one over it (Winograd's weight transform each call
 * included, the weights being new each training step). Elsewhere the reverse stays, and the
 * convolution keeps the forward kernels that take it. */
#include "exec_internal.h"
#include "hlo/hlo.h"
#include "kernel_internal.h"

/* Whether r reverses exactly the kernel's spatial dims of conv. */
static bool reverses_kernel_space(const hlo_instr *r, const hlo_instr *conv) {
  const hlo_conv_dims *cd = conv->conv;
  if (r->opcode != HLO_OP_REVERSE || r->operand_count != 1 || r->dimensions.count != 2 || cd->spatial_count != 2)
    return false;
  const int64_t *d = r->dimensions.values;
  return (d[0] == cd->kernel_spatial[0] && d[1] == cd->kernel_spatial[1]) ||
         (d[0] == cd->kernel_spatial[1] && d[1] == cd->kernel_spatial[0]);
}

/* conv's window with both spatial dims reversed into *w; false when one already is. */
static bool reversed_window(const hlo_instr *conv, hlo_window *w) {
  *w = *conv->window;
  for (int d = 0; d < w->rank; d++) {
    if (w->dims[d].reversal) return false;
    w->dims[d].reversal = true;
  }
  return w->rank == 2;
}

/* The rewritten convolution, or NULL to leave conv as it is. */
static hlo_instr *rewrite(hlo_comp *comp, hlo_instr *conv) {
  if (conv->opcode != HLO_OP_CONVOLUTION || conv->operand_count != 2 || !conv->conv || !conv->window ||
      !reverses_kernel_space(conv->operands[1], conv))
    return NULL;
  hlo_window window;
  if (!reversed_window(conv, &window)) return NULL;
  /* what the kernel picker would see */
  hlo_instr probe = *conv, *operands[2] = {conv->operands[0], conv->operands[1]->operands[0]};
  probe.operands = operands;
  probe.window = &window;
  int64_t scratch;
  if (!rt_cpu_pick_conv_grad(&probe, &scratch) || !hlo_choice("input_grad", conv->name)) return NULL;
  hlo_diag diag;
  hlo_instr *folded = hlo_build_convolution_to(comp, operands[0], operands[1], &window, conv->conv,
                                               conv->feature_group_count, conv->batch_group_count,
                                               conv->shape.dtype, &diag);
  if (!folded || !hlo_shape_equal(&folded->shape, &conv->shape)) return NULL;
  folded->origin = conv->origin; /* binding takes its shape from the source's convolution */
  return folded;
}

static int rewrite_comp(hlo_comp *comp) {
  int count = comp->instr_count, rewrites = 0;
  for (int i = 0; i < count; i++) {
    hlo_instr *conv = comp->instrs[i];
    hlo_instr *folded = rewrite(comp, conv);
    if (!folded) continue;
    hlo_replace_uses(comp, conv, folded);
    rewrites++;
  }
  hlo_diag diag;
  /* new instructions were appended after their users: sort them in (no cycle is made) */
  if (rewrites) hlo_comp_sort(comp, &diag);
  return rewrites;
}

int rt_cpu_pass_input_grad(hlo_module *module) {
  int rewrites = 0;
  for (int c = 0; c < module->comp_count; c++) rewrites += rewrite_comp(module->comps[c]);
  if (rewrites) hlo_pass_dce(module);
  return rewrites;
}
