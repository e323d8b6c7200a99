/* The cpu backend's plan: how each instruction of the entry runs (its step: which kernel,
 * where its result lives), and the functions that build, fuse, keep and run steps, each
 * under the file that defines it. The planner's files and the executable include this;
 * kernel files need only kernel_internal.h. Nothing outside the backend includes this but
 * the tests. */
#ifndef RT_CPU_PLAN_INTERNAL_H
#define RT_CPU_PLAN_INTERNAL_H
#include "attention_internal.h"

/* How a step gets its result. */
typedef enum rt_cpu_step_kind {
  RT_STEP_PARAM,  /* a view of the caller's argument */
  RT_STEP_CONST,  /* a view of the literal's bytes */
  RT_STEP_ALIAS,  /* a view of operand 0's bytes: reshape, bitcast, copy, get-tuple-element */
  RT_STEP_TUPLE,  /* a new tuple of its operands (copies of views) */
  RT_STEP_FAST,   /* a fast kernel into an assigned buffer, or into an output value; a tuple
                   * result (batch-norm) is one buffer per element, read only through PART */
  RT_STEP_PART,   /* get-tuple-element of a FAST tuple: a view of that element's buffer */
  RT_STEP_SLOW,   /* a reference kernel making a new value */
  RT_STEP_FUSED,  /* a fused group (fusion_groups.c) into an assigned buffer or output */
  RT_STEP_INSIDE, /* computed inside a fused step, or a broadcast folded into its loads: no result */
  RT_STEP_DNNL,   /* a convolution and its epilogue on oneDNN (dnnl_internal.h), at the
                   * epilogue's last instruction, into an assigned buffer or output */
  RT_STEP_ATTENTION, /* softmax(Q K^T ...) V (attention_internal.h), at the last product,
                      * or a softmax alone, at its division; into an assigned buffer or output */
} rt_cpu_step_kind;

typedef struct rt_cpu_fusion rt_cpu_fusion;
typedef struct rt_cpu_dnnl rt_cpu_dnnl;

typedef struct rt_cpu_step { /* (ordered to leave no hole: a load writes one per instruction) */
  const hlo_instr *instr;
  rt_cpu_kernel fast;
  rt_cpu_scratch_kernel fast_scratch; /* FAST: runs instead of fast when set */
  rt_kernel slow;
  rt_cpu_fusion *fusion; /* FUSED: the group's program and the steps it reads */
  rt_cpu_step_kind kind;
  /* the storage holding this result: a step index (itself, or what an alias views), or
   * step_count + i for element i of the FAST tuple results, numbered in step order */
  int storage;
  bool output;      /* FAST: a result of the entry, written into a value of its own */
  bool in_place;    /* FAST: its buffer is an operand's, which dies here (elementwise ops) */
  bool kept;        /* kept.c: below */
  int part_count;   /* FAST tuple: its elements, whose buffers are at part_offsets */
  int64_t offset;   /* FAST array not output, and PART: byte offset of its buffer in the arena */
  int64_t *part_offsets;
  int64_t scratch_bytes, scratch_offset; /* fast_scratch's (or a FUSED head's) working memory in the arena */
  int free_count;   /* storages whose last reader is this step */
  /* kept (kept.c): work on weights alone, its buffer never reused: the arena keeps the
   * result from one execute to the next, with the stamps (rt_value.stamp) of the arguments
   * kept_params at stamp_offset (a slot holding the result's version, 0 when there is none,
   * then one per argument), and a later execute whose arguments have the same stamps skips
   * the step */
  int kept_param_count;
  int *frees;
  int *kept_params;
  int64_t stamp_offset;
  /* DNNL: its primitives; weight_param >= 0 when its weights are that parameter's (through
   * reshapes), weight_kept >= 0 when they are that kept step's result (weights scaled by a
   * folded batch norm), and oneDNN wants them in another layout: the reordered weights are
   * kept in the arena at weight_offset, with the argument's stamp (or the kept result's
   * version) at stamp_offset, and reordered again only when that changes */
  rt_cpu_dnnl *dnnl;
  int weight_param, weight_kept;
  int64_t weight_offset;
  /* the bytes kept at weight_offset: a DNNL step's reordered weights, or the rhs of a bf16
   * product on oneDNN packed in its kernel's layout (rt_cpu_step_packed_dot), kept the same
   * way */
  int64_t weight_bytes;
  rt_cpu_attention *attention; /* ATTENTION: what it reads and computes */
} rt_cpu_step;

/* Whether step (a DNNL one) keeps its weights reordered in the arena's kept region. */
static inline bool rt_cpu_step_keeps_weights(const rt_cpu_step *step) {
  return step->weight_param >= 0 || step->weight_kept >= 0;
}
/* Whether step's result is written into a buffer of its own (or an output). */
static inline bool rt_cpu_step_writes_buffer(const rt_cpu_step *step) {
  return step->kind == RT_STEP_FAST || step->kind == RT_STEP_FUSED || step->kind == RT_STEP_DNNL ||
         step->kind == RT_STEP_ATTENTION;
}

typedef struct rt_cpu_plan {
  int step_count;
  rt_cpu_step *steps;   /* in execution order; step i is entry->instrs[i] */
  int64_t arena_bytes;  /* all reused buffers together */
  int64_t buffer_count; /* distinct buffers after reuse (for tests and reports) */
  int64_t buffer_bytes; /* all buffers and scratch before reuse (for reports) */
  int64_t peak_live_bytes; /* the most bytes live at one step: the least any arena could be */
  int max_operands;
  bool dynamic;         /* some shape is dynamic: every step takes the reference path */
  /* deserialized: the steps' lists (frees, parts, kept parameters) and fused programs are
   * in the module's arena and go with it; rt_cpu_plan_free leaves them */
  bool pieces_in_module;
  /* deserialized: the DNNL steps hold their descriptions but no oneDNN primitives yet
   * (rt_cpu_plan_make_primitives makes them, at the first execute) */
  bool primitives_pending;
  /* kept steps (kept_count): their stamps (kept_slots of them, from the arena's offset 0)
   * and buffers come before the other buffers; an arena last run by another plan holds no
   * kept results unless that plan keeps the same ones at the same places
   * (rt_cpu_kept_places_matches) */
  int kept_count;
  int kept_slots;
} rt_cpu_plan;

/* Which picker chose a step's kernel, recorded so that a deserialized plan finds the same
 * kernel again without classifying the step (serialize.c, deserialize.c). */
typedef enum rt_cpu_kernel_family {
  RT_KERNEL_NONE = 0,
  RT_KERNEL_ELEMENTWISE, RT_KERNEL_LAYOUT, RT_KERNEL_REDUCE, RT_KERNEL_GATHER, /* fast */
  RT_KERNEL_BATCH_NORM_PARTS,                                                  /* fast, tuple */
  RT_KERNEL_CONV, RT_KERNEL_DOT,                                               /* fast_scratch */
  RT_KERNEL_BATCH_NORM, RT_KERNEL_SLOW,                                        /* slow */
  RT_KERNEL_FAMILY_COUNT
} rt_cpu_kernel_family;

/* plan.c */
/* The dot whose rhs step may read packed: a FAST dot, or a fused group's dot head; or NULL. */
const hlo_instr *rt_cpu_step_packed_dot(const rt_cpu_step *step);
/* Builds the plan for module's entry (after passes); NULL with diag (HLO_ERR_UNSUPPORTED
 * naming the op and the instruction) when some instruction cannot run. options (NULL: the
 * defaults) says whether to fuse. */
rt_cpu_plan *rt_cpu_plan_build(const hlo_module *module, const rt_compile_options *options, hlo_diag *diag);
void rt_cpu_plan_free(rt_cpu_plan *plan);

/* attention_plan.c: attention, run on a plan whose steps are classified, before oneDNN and
 * fusion: turns each softmax(Q K^T ...) V it finds into one ATTENTION step (at the last
 * product), then each other softmax over the last dim into one (at its division), and
 * marks the instructions they compute INSIDE. */
hlo_status rt_cpu_attention_plan(rt_cpu_plan *plan, const hlo_comp *entry, hlo_diag *diag);

/* kept.c: marks the kept steps of a plan whose outputs are marked; false when memory ran
 * out. */
bool rt_cpu_find_kept(rt_cpu_plan *plan, const hlo_comp *entry);

/* kept_places.c: where plan keeps its kept results: NULL when it keeps none (or runs on the
 * reference evaluator), or when memory ran out. It points into plan and its module, and
 * goes before them. */
typedef struct rt_cpu_kept_places rt_cpu_kept_places;
rt_cpu_kept_places *rt_cpu_kept_places_of(const rt_cpu_plan *plan);
/* Whether plan, of the same family as places's (the same optimized graph), keeps the same
 * results at the same places: an arena the one ran then holds the other's too. */
bool rt_cpu_kept_places_matches(const rt_cpu_kept_places *places, const rt_cpu_plan *plan);
void rt_cpu_kept_places_free(rt_cpu_kept_places *places);

/* fusion_groups.c: fusion, run on a plan whose steps are classified and not yet assigned
 * buffers: turns groups of elementwise steps into one FUSED step each (at the group's last
 * instruction) and marks the rest INSIDE. Decided from the module's shapes alone, so a plan
 * built again for other sizes decides again. */
hlo_status rt_cpu_fuse(rt_cpu_plan *plan, const hlo_comp *entry, hlo_diag *diag);
void rt_cpu_fusion_free(rt_cpu_fusion *fusion);
/* The dot a fused group runs as its head and whose rhs it reads as it is (so may read it
 * packed: rt_cpu_dot_packed_bytes), or NULL. */
const hlo_instr *rt_cpu_fusion_dot_head(const rt_cpu_fusion *fusion);
/* The steps a step reads, by instruction id: a fused step's inputs, else the operands. */
int rt_cpu_step_input_count(const rt_cpu_step *step);
int rt_cpu_step_input(const rt_cpu_step *step, int k);

/* step_check.c: what is wrong with a loaded plan's steps, as a phrase (*bad the step it is
 * about), or NULL: each step's kind one its instruction may have, and every value a step
 * reads made before it and not yet freed, the result's to the end. *oom when memory ran out
 * (the phrase then says so). */
const char *rt_cpu_steps_check(const rt_cpu_plan *plan, const hlo_comp *entry, int *bad, bool *oom);

/* fusion_run.c: runs a fused group: in[k] is the value of the step's input k; scratch: the
 * head's working memory (the FUSED step's scratch_bytes); packed: its dot head's rhs kept
 * packed, or NULL. */
bool rt_cpu_fusion_run(const rt_cpu_fusion *fusion, const rt_value *const *in, rt_value *out, void *scratch,
                       const rt_cpu_packed *packed);

/* dnnl_plan.c: oneDNN, run on a plan whose steps are classified, before fusion: turns the
 * convolutions oneDNN runs, with the epilogues they absorb, into DNNL steps and plans the
 * layouts between them. The rest stays as it was. */
hlo_status rt_cpu_dnnl_plan(rt_cpu_plan *plan, const hlo_comp *entry, hlo_diag *diag);
void rt_cpu_dnnl_free(rt_cpu_dnnl *dnnl);
/* The steps a DNNL step reads, by instruction id: the convolution's operands, then the
 * post-ops' operands. */
int rt_cpu_dnnl_input_count(const rt_cpu_dnnl *dnnl);
int rt_cpu_dnnl_input(const rt_cpu_dnnl *dnnl, int k);
/* The bytes of a DNNL step's result buffer (a blocked layout pads features) and of its
 * reordered weights. */
int64_t rt_cpu_dnnl_out_bytes(const rt_cpu_dnnl *dnnl);
int64_t rt_cpu_dnnl_weights_bytes(const rt_cpu_dnnl *dnnl);
int rt_cpu_dnnl_weights_operand(const rt_cpu_dnnl *dnnl);

/* dnnl_conv.c: runs a DNNL step; kept is the arena's kept weights and stamp when
 * weight_param >= 0, else NULL. in_finite[k], one per input as in[] (the source, the
 * weights, then the post-ops' inputs): true when input k is known to hold no inf or NaN (a
 * step said so of its result, or a scan earlier in the run found it), so it is not scanned;
 * set true when this step scans the source or a post-op input and finds it finite.
 * *result_finite says the same of this step's result (a convolution that ran its fast
 * primitive with a clamp between finite bounds last: oneDNN's clip maps every value, NaN
 * included, into them; a pool or a concatenation whose values were checked as they were
 * written). */
enum { RT_CPU_DNNL_STEP_INPUTS = 18 }; /* at most: a convolution's two operands, its post-ops' 16 inputs */
hlo_status rt_cpu_dnnl_step(const rt_cpu_dnnl *dnnl, const rt_value *const *in, void *out, void *scratch,
                            char *kept, uint64_t *kept_stamp, uint64_t weight_stamp, bool *in_finite,
                            bool *result_finite, hlo_diag *diag);
/* Inputs (sources and post-op inputs) scanned for inf and NaN so far, process-wide (for tests). */
int64_t rt_cpu_dnnl_input_scan_count(void);
/* Weight reorders made so far (wino.c's filter transforms too), process-wide (for tests). */
int64_t rt_cpu_dnnl_weight_reorder_count(void);
/* Convolutions run as conv_gemm.c's product instead of their primitive (weights new at every
 * run that outweigh the activations), process-wide (for tests). */
int64_t rt_cpu_dnnl_gemm_step_count(void);

/* wino.c: convolutions run by latch's own Winograd so far, process-wide (for tests). */
int64_t rt_cpu_wino_run_count(void);

#endif
