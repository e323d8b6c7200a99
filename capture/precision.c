/* The precision setting (latch_options.precision, latch_function_options.precision): "f32"
 * runs every op in its declared types; "bf16" makes each dot product and convolution of f32
 * tensors round its operands to bf16 and sum in f32 into an f32 result, as PyTorch's autocast
 * does. The choice is made when the op is traced (ops_nn.c marks the node, lower_nn.c writes
 * the converts into the HLO), so it is part of the node's hash and so of every cache key, and
 * the accuracy check's reference evaluator rounds the same operands the backend does. */
#include <string.h>

#include "capture.h"

bool cap_precision_parse(const char *where, const char *text, bool *bf16) {
  *bf16 = false;
  if (!text || !*text || strcmp(text, "f32") == 0) return true;
  if (strcmp(text, "bf16") == 0) {
    *bf16 = true;
    return true;
  }
  cap_set_error("%s: unknown precision '%s' (f32 or bf16)", where, text);
  return false;
}

bool cap_products_bf16(const latch_runtime *rt) {
  const cap_trace *trace = cap_ctx_current()->trace;
  return trace && trace->rt == rt ? trace->bf16_products : rt->bf16_products;
}
