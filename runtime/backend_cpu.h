/* The cpu backend's insides, shared by its files (backend_cpu*.c): the execution plan and
 * the fast kernels. Nothing outside the backend includes this. */
#ifndef RT_BACKEND_CPU_H
#define RT_BACKEND_CPU_H
#include <stdbool.h>
#include <stdint.h>

#include "eval.h"
#include "hlo/ir.h"
#include "value.h"

/* A fast kernel: reads its operands (arrays in the instruction's declared operand shapes)
 * and writes every element of out, whose shape is the instruction's and whose data is a
 * reused buffer holding garbage. Picked at compile time only for shapes it handles, so it
 * checks nothing again. false only when scratch memory ran out. */
typedef bool (*rt_cpu_kernel)(const hlo_instr *instr, const rt_value *const *in, rt_value *out);

/* Each picker returns the fast kernel for instr, or NULL when it has none for this opcode,
 * these element types or shapes (the reference kernel then runs). */
rt_cpu_kernel rt_cpu_pick_elementwise(const hlo_instr *instr);
rt_cpu_kernel rt_cpu_pick_layout(const hlo_instr *instr);
rt_cpu_kernel rt_cpu_pick_reduce(const hlo_instr *instr);
rt_cpu_kernel rt_cpu_pick_dot(const hlo_instr *instr);
rt_cpu_kernel rt_cpu_pick_conv(const hlo_instr *instr);

/* The reference path for everything else (backend_cpu_fallback.c): the kernel, or NULL for
 * an opcode neither path runs. Control flow evaluates its computations with the reference
 * evaluator. */
rt_kernel rt_cpu_slow_kernel(hlo_opcode opcode);
/* Typed, parallel kernels for ops that make tuples (backend_cpu_batchnorm.c): they have the
 * reference kernels' signature and replace them; NULL when instr is not one they handle. */
rt_kernel rt_cpu_pick_batch_norm(const hlo_instr *instr);

/* How a step gets its result. */
typedef enum rt_cpu_step_kind {
  RT_STEP_PARAM,  /* a view of the caller's argument */
  RT_STEP_CONST,  /* a view of the literal's bytes */
  RT_STEP_ALIAS,  /* a view of operand 0's bytes: reshape, bitcast, copy, get-tuple-element */
  RT_STEP_TUPLE,  /* a new tuple of its operands (copies of views) */
  RT_STEP_FAST,   /* a fast kernel into an assigned buffer, or into an output value */
  RT_STEP_SLOW,   /* a reference kernel making a new value */
  RT_STEP_FUSED,  /* a fused group (backend_cpu_fusion.c) into an assigned buffer or output */
  RT_STEP_INSIDE, /* computed inside a fused step, or a broadcast folded into its loads: no result */
} rt_cpu_step_kind;

typedef struct rt_cpu_fusion rt_cpu_fusion;

typedef struct rt_cpu_step {
  const hlo_instr *instr;
  rt_cpu_step_kind kind;
  rt_cpu_kernel fast;
  rt_kernel slow;
  rt_cpu_fusion *fusion; /* FUSED: the group's program and the steps it reads */
  int storage;      /* the step whose memory holds this result (itself unless an alias) */
  bool output;      /* FAST: a result of the entry, written into a value of its own */
  int64_t offset;   /* FAST, not output: byte offset of its buffer in the arena */
  int free_count;   /* storages whose last reader is this step */
  int *frees;
} rt_cpu_step;

typedef struct rt_cpu_plan {
  int step_count;
  rt_cpu_step *steps;   /* in execution order; step i is entry->instrs[i] */
  int64_t arena_bytes;  /* all reused buffers together */
  int64_t buffer_count; /* distinct buffers after reuse (for tests and reports) */
  int max_operands;
  bool dynamic;         /* some shape is dynamic: every step takes the reference path */
} rt_cpu_plan;

/* Builds the plan for module's entry (after passes); NULL with diag (HLO_ERR_UNSUPPORTED
 * naming the op and the instruction) when some instruction cannot run. */
rt_cpu_plan *rt_cpu_plan_build(const hlo_module *module, hlo_diag *diag);
void rt_cpu_plan_free(rt_cpu_plan *plan);

/* Work run on a part [begin, end) of a kernel's f32 output right after the kernel wrote it,
 * while it is still in cache, inside the same parallel task. */
typedef struct rt_cpu_epilogue {
  void (*run)(const void *ctx, int64_t begin, int64_t end);
  const void *ctx;
} rt_cpu_epilogue;
/* The dot kernel with an epilogue over each block it computes (epilogue may be NULL). */
bool rt_cpu_dot_with_epilogue(const hlo_instr *instr, const rt_value *const *in, rt_value *out,
                              const rt_cpu_epilogue *epilogue);
bool rt_cpu_is_dot_kernel(rt_cpu_kernel kernel);

/* Fusion (backend_cpu_fusion.c), run on a plan whose steps are classified and not yet
 * assigned buffers: turns groups of elementwise steps into one FUSED step each (at the
 * group's last instruction) and marks the rest INSIDE. Decided from the module's shapes
 * alone, so a plan built again for other sizes decides again. */
hlo_status rt_cpu_fuse(rt_cpu_plan *plan, const hlo_comp *entry, hlo_diag *diag);
void rt_cpu_fusion_free(rt_cpu_fusion *fusion);
/* Runs a fused group (backend_cpu_fused.c): in[k] is the value of the step's input k. */
bool rt_cpu_fusion_run(const rt_cpu_fusion *fusion, const rt_value *const *in, rt_value *out);
/* The steps a step reads, by instruction id: a fused step's inputs, else the operands. */
int rt_cpu_step_input_count(const rt_cpu_step *step);
int rt_cpu_step_input(const rt_cpu_step *step, int k);
static inline bool rt_cpu_step_writes_buffer(const rt_cpu_step *step) {
  return step->kind == RT_STEP_FAST || step->kind == RT_STEP_FUSED;
}

/* Shared loop helpers. */
static inline float rt_cpu_half_load(hlo_dtype dtype, uint16_t bits) {
  return dtype == HLO_F16 ? hlo_f16_to_f32(bits) : hlo_bf16_to_f32(bits);
}
static inline uint16_t rt_cpu_half_store(hlo_dtype dtype, float value) {
  return dtype == HLO_F16 ? hlo_f32_to_f16(value) : hlo_f32_to_bf16(value);
}
/* Below this many elements a loop stays on the calling thread. */
enum { RT_CPU_GRAIN = 1 << 15 };

#endif
