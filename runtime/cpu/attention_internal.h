/* The attention step of the cpu plan: softmax(Q K^T, scaled and masked) V run as one step,
 * found in the entry by attention_plan.c and run by attention.c, and the row steps of the
 * same kind: a softmax alone, and a layer norm (layer_norm_plan.c, layer_norm.c). They see
 * it through this header; the plan and the executable see it through plan_internal.h. Nothing outside the
 * backend includes this but the tests. */
#ifndef RT_CPU_ATTENTION_INTERNAL_H
#define RT_CPU_ATTENTION_INTERNAL_H
#include <string.h>

#include "kernel_internal.h"

/* At most this many elementwise ops between the scores and the softmax (a scale, a mask
 * added, a select of a fill), and this many masks among them; bf16 products take head sizes
 * up to RT_ATTENTION_BF16_MAX_D. */
enum { RT_ATTENTION_MAX_OPS = 6, RT_ATTENTION_MAX_MASKS = 3, RT_ATTENTION_BF16_MAX_D = 256 };

/* How an operand of the products is read: f32 as it is, f32 rounded to bf16 on the way (the
 * graph's convert to bf16 computed by the step), or bf16 values. */
typedef enum rt_attention_type { RT_ATT_F32, RT_ATT_F32_ROUNDED, RT_ATT_BF16 } rt_attention_type;

/* Where an operand's elements lie: element (b, row, col) of a [batch, rows, cols] view is at
 * sum over i of ((b / inner_i) % batch_size[i]) * batch_stride[i] + row * row_stride + col *
 * col_stride, in elements of the operand's value, b the flat batch index (row-major over
 * batch_size[0..batch_rank)). Strides are 0 along what a broadcast spreads. */
typedef struct rt_cpu_attention_view {
  int batch_rank;
  int64_t batch_size[HLO_MAX_RANK], batch_stride[HLO_MAX_RANK];
  int64_t row_stride, col_stride;
} rt_cpu_attention_view;

/* One op on the scores x, in the graph's order: x = x op imm, x = x op mask (an f32 view of
 * mask `mask`), or select: x = fill where the pred mask is true (fill_on_true), else where it
 * is false. */
typedef enum rt_attention_op_code {
  RT_ATT_ADD, RT_ATT_SUBTRACT, RT_ATT_MULTIPLY, RT_ATT_DIVIDE, /* x op imm, or x op mask */
  RT_ATT_SELECT
} rt_attention_op_code;

typedef struct rt_cpu_attention_op {
  rt_attention_op_code code;
  int mask; /* an index into masks, or -1: imm (select: the condition on indices below) */
  float imm; /* the operand, or select's fill */
  bool fill_on_true;
  /* select without a mask: the condition is row * index[0] + col * index[1] + index[2]
   * compared with 0 by direction (an hlo_direction), row and col the query's and the key's
   * positions (a causal mask made of iotas) */
  int direction;
  int64_t index[3];
} rt_cpu_attention_op;

/* out[b, i, :] = sum over j of softmax_j(x[b, i, j]) v[b, j, :], x[b, i, j] the ops applied to
 * sum over t of q[b, i, t] k[b, j, t]; out is row-major [batch, sq, dv]. q's, k's and v's
 * columns are contiguous (col_stride 1: the planner takes no other). */
typedef struct rt_cpu_attention {
  /* a softmax alone over the last dim (no product reads it): rows of sk values from
   * inputs[0] into out, batch * sq rows, each in one pass (attention_plan.c's second kind) */
  bool softmax_only;
  /* a layer norm over rows of sk values of inputs[0] (sq rows, layer_norm_plan.c): eps,
   * which inputs hold the weight and bias, each sk values (-1: none), and which of the
   * input, the weight and bias, and the result hold bf16 values (else f32) */
  bool layer_norm;
  float eps;
  int weight_input, bias_input;
  bool x_bf16, wb_bf16, out_bf16;
  int64_t batch, sq, sk, d, dv;
  bool on_blas; /* the last product's onednn_product choice was refused: sgemm from OpenBLAS */
  rt_cpu_attention_view q, k, v; /* q [batch, sq, d], k [batch, sk, d], v [batch, sk, dv] */
  /* bf16 products (the graph's dots of bf16 operands, f32 results): how q, k and v are read,
   * and whether the probabilities are rounded to bf16 before the second product; all F32 and
   * false: f32 products */
  rt_attention_type q_type, k_type, v_type;
  bool p_rounded;
  int op_count, mask_count;
  /* the last op is a select of -inf on an inequality of indices: a block of keys where it
   * holds for every row and key contributes nothing and is skipped (the future under a
   * causal mask); else false */
  bool skip_masked_blocks;
  rt_cpu_attention_op ops[RT_ATTENTION_MAX_OPS];
  rt_cpu_attention_view masks[RT_ATTENTION_MAX_MASKS]; /* each [batch, sq, sk] */
  bool mask_pred[RT_ATTENTION_MAX_MASKS];              /* pred (one byte), else f32 */
  /* the steps read, by instruction id: q, k, v, then the masks */
  int input_count;
  int inputs[3 + RT_ATTENTION_MAX_MASKS];
} rt_cpu_attention;

/* f32 to bf16 bits, to nearest even, NaN kept quiet (hlo_f32_to_bf16's rounding), and back:
 * inline so the loops that load and store bf16 vectorize. */
static inline uint16_t rt_cpu_bf16_bits(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  uint32_t rounded = (bits + 0x7FFFu + (bits >> 16 & 1u)) >> 16, nan = (bits >> 16 & 0x8000u) | 0x7FC0u;
  return (uint16_t)((bits & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}
static inline float rt_cpu_bf16_value(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

/* attention.c: runs the step: in[k] is the value of inputs[k]; out a row-major f32
 * [batch, sq, dv] (the final dot's result). Uses no memory but the stack (a block of scores
 * per thread), so it cannot fail. */
void rt_cpu_attention_run(const rt_cpu_attention *a, const rt_value *const *in, rt_value *out);
/* Attention steps run so far, process-wide (for tests). */
int64_t rt_cpu_attention_run_count(void);

/* layer_norm.c: runs a layer norm step (a->layer_norm): in[k] is the value of inputs[k]; out
 * row-major like inputs[0], f32 or bf16 (out_bf16). Cannot fail. */
void rt_cpu_layer_norm_run(const rt_cpu_attention *a, const rt_value *const *in, rt_value *out);
/* Layer norm steps run so far, process-wide (for tests). */
int64_t rt_cpu_layer_norm_run_count(void);

/* layer_norm_plan.c: whether last is the last instruction of a layer norm's decomposition
 * (see there); then *a describes it and inside[i] is set for every instruction it computes
 * that no other step reads. use_count and result as for rt_cpu_attention_match. */
bool rt_cpu_layer_norm_match(const hlo_instr *last, const int *use_count, const bool *result, bool *inside,
                             rt_cpu_attention *a);
/* How many of list[0..count) read instr (each reader once): whether a matched pattern's
 * values are read by its own instructions alone (here and in attention_plan.c). */
int rt_cpu_readers_among(const hlo_instr *const *list, int count, const hlo_instr *instr);

/* attention_plan.c: the description of the attention whose last product is dot (or of the
 * softmax alone whose division is dot, or of the layer norm whose last instruction is dot),
 * or NULL (also when memory ran out: *oom set). inside[i] (entry->instr_count of them) is set for
 * every instruction the step computes and no other step reads; use_count[i]: instruction
 * i's users (each once), result[i]: whether it is a result of the entry. */
rt_cpu_attention *rt_cpu_attention_match(const hlo_comp *entry, const hlo_instr *dot, const int *use_count,
                                         const bool *result, bool *inside, bool *oom);
/* use_count and result for rt_cpu_attention_match; false when memory ran out. */
bool rt_cpu_attention_uses(const hlo_comp *entry, int **use_count, bool **result);

#endif
