/* The cpu backend's insides, shared by the files of runtime/cpu/: the execution plan and
 * the fast kernels. Nothing outside the backend includes this. */
#ifndef RT_BACKEND_CPU_H
#define RT_BACKEND_CPU_H
#include <stdbool.h>
#include <stdint.h>

#include "runtime/cpu/cpu.h"
#include "runtime/reference/reference.h"
#include "hlo/hlo.h"
#include "runtime/runtime.h"

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
/* pooling.c: a max or min pool over f32 planes, window w (the last two dims only, no dilation
 * or reversal) into y; false, nothing written, for other reducers or types or rows wider
 * than the kernel's buffer. */
bool rt_cpu_pool_f32(const hlo_window *w, hlo_opcode op, const rt_value *x, const rt_value *init, rt_value *y);
/* The same over an [N, C, H, W] activation x in oneDNN's blocked layout with blocks of
 * `block` (8 or 16) channels (window w over dims 2 and 3 only), into y blocked the same way
 * (padded lanes zero) or row-major; sums too (op HLO_OP_ADD, each window's taps added in
 * row-major order from init, as the reference folds); false for other blocks, reducers or
 * window ranks.
 * *finite: whether every value written is finite (checked as they are written, so the next
 * convolution need not scan them). */
bool rt_cpu_pool_blocked_f32(const hlo_window *w, hlo_opcode op, int block, const float *x, const int64_t *in_dims,
                             float init, float *y, const int64_t *out_dims, bool blocked_out, bool *finite);
/* 1 when x is inf or NaN, else 0: x * 0 is NaN exactly for those. Callers or the flags
 * together as integers, which the compiler may vectorize (a float sum it may not reorder),
 * so a scan, or a kernel checking what it writes, runs at memory speed. */
static inline unsigned rt_cpu_nonfinite(float x) {
  float zero = x * 0.0f;
  return zero != zero;
}
/* Whether count floats hold no inf or NaN. */
static inline bool rt_cpu_finite_run(const float *x, int64_t count) {
  unsigned bad = 0;
  for (int64_t i = 0; i < count; i++) bad |= rt_cpu_nonfinite(x[i]);
  return bad == 0;
}
rt_cpu_kernel rt_cpu_pick_gather(const hlo_instr *instr);

/* A fast kernel that needs working memory besides its result (operand copies in a canonical
 * order, im2col matrices): scratch is the step's own stretch of the arena, sized at plan time
 * by the picker (*scratch_bytes), holding garbage. Planning it with the results, instead of
 * allocating it on every call, is what keeps a step to no allocations: large fresh
 * allocations are mmaps whose pages fault in again on every call. */
typedef bool (*rt_cpu_scratch_kernel)(const hlo_instr *instr, const rt_value *const *in, rt_value *out,
                                      void *scratch);
rt_cpu_scratch_kernel rt_cpu_pick_conv_scratch(const hlo_instr *instr, int64_t *scratch_bytes);
rt_cpu_scratch_kernel rt_cpu_pick_dot_scratch(const hlo_instr *instr, int64_t *scratch_bytes);
/* batch-norm-training and batch-norm-grad as fast kernels whose out is a tuple of the three
 * result arrays (each in the arena): NULL when instr is not one they handle. */
rt_cpu_kernel rt_cpu_pick_batch_norm_parts(const hlo_instr *instr);

/* The reference path for everything else (fallback.c): the kernel, or NULL for
 * an opcode neither path runs. Control flow evaluates its computations with the reference
 * evaluator. */
rt_kernel rt_cpu_slow_kernel(hlo_opcode opcode);
/* Typed, parallel kernels for ops that make tuples (batchnorm.c): they have the
 * reference kernels' signature and replace them; NULL when instr is not one they handle. */
rt_kernel rt_cpu_pick_batch_norm(const hlo_instr *instr);

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
} rt_cpu_step;

/* Whether step (a DNNL one) keeps its weights reordered in the arena's kept region. */
static inline bool rt_cpu_step_keeps_weights(const rt_cpu_step *step) {
  return step->weight_param >= 0 || step->weight_kept >= 0;
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

/* The passes the cpu backend runs after hlo/'s (executable.c), which the reference evaluator
 * does not: rewrites that are exact only up to rounding, and pay only with the cpu backend's
 * kernels and kept work. */
/* (pass_dot_repeat.c) Rewrites dot(L, W), L [M, K] made by reshapes and concatenations or broadcasts that
 * repeat the values of a V [M, ...] along K, as dot(V, W summed over the repeats): the
 * weight is read once by a reduce instead of multiplied J times by equal values. Not
 * exact (each group of W's rows is summed before the products): for backends that accept
 * reassociated sums. Returns the number of dots rewritten. */
int rt_cpu_pass_dot_of_repeats(hlo_module *module);

/* (pass_fold_affine.c) Folds a chain of per-channel adds, subtracts, multiplies and divides after a convolution
 * whose weight is a parameter (batch norm in inference form) into the convolution: its
 * weight scaled per output feature, then one per-channel add. Not exact (the scale is
 * applied before the sums): for backends that accept reassociated products. Returns the
 * number of convolutions folded into. */
int rt_cpu_pass_fold_affine(hlo_module *module);

/* (pass_space_to_depth.c) Rewrites a convolution with strides of 3 or more over few input features (alexnet's
 * 11x11 stride-4 stem over 3) as a stride-1 convolution over the input's space-to-depth
 * blocks, the kernel padded with zeros and cut the same way. Not exact (the sums include
 * the zeros and run in another order): for backends that accept reassociated sums. Returns
 * the number of convolutions rewritten. */
int rt_cpu_pass_space_to_depth(hlo_module *module);

/* Builds the plan for module's entry (after passes); NULL with diag (HLO_ERR_UNSUPPORTED
 * naming the op and the instruction) when some instruction cannot run. options (NULL: the
 * defaults) says whether to fuse. */
rt_cpu_plan *rt_cpu_plan_build(const hlo_module *module, const rt_compile_options *options, hlo_diag *diag);
void rt_cpu_plan_free(rt_cpu_plan *plan);

/* (serialize.c, deserialize.c) The executable's serialized form: the module after the
 * passes, the plan with every decision in it (steps, kernels, buffers, fused programs, oneDNN
 * descriptions with their layouts) and the module before the passes, encoded (what bind
 * compares bindings with; NULL when there is none), in a versioned, checksummed binary format
 * (serialize.c's header). Loading runs no pass and no planning: kernels are looked up again
 * by the family recorded for each step, and oneDNN's primitives, which oneDNN 2.6 cannot
 * serialize, are made from their descriptions at the first execute (primitives_pending). */
hlo_status rt_cpu_serialize(const hlo_module *module, const rt_cpu_plan *plan, const char *source, size_t source_len,
                            void **bytes, size_t *len, hlo_diag *diag);
/* On success *module and *plan are new (the plan's steps point into the module), and
 * *source is where the source module's encoding lies in bytes (*source_len bytes; the
 * optimized module's follow), or NULL: the caller copies it or keeps bytes, and decodes it
 * when it binds (rt_cpu_decode_module). A truncated, damaged or foreign blob is
 * HLO_ERR_INPUT naming what could not be read. */
hlo_status rt_cpu_deserialize(const void *bytes, size_t len, hlo_module **module, rt_cpu_plan **plan,
                              const char **source, size_t *source_len, hlo_diag *diag);
/* (serialize.c, deserialize_module.c) A module with its instructions' origins, in the
 * same encoding: print(decode(encode(m))) == print(m); with live_only, only the
 * computations the entry calls, directly or not (an executable's module after the passes
 * keeps the bodies it inlined, which never run). */
void rt_cpu_encode_module(hlo_strbuf *out, const hlo_module *module, bool live_only);
struct rt_blob_in;
hlo_module *rt_cpu_decode_module(struct rt_blob_in *in);
/* The oneDNN primitives of a deserialized plan's DNNL steps (dnnl_conv.c per step);
 * HLO_ERR_INTERNAL when oneDNN no longer takes a description. */
hlo_status rt_cpu_plan_make_primitives(rt_cpu_plan *plan, hlo_diag *diag);

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

/* (kept.c) Marks the kept steps of a plan whose outputs are marked; false when
 * memory ran out. */
bool rt_cpu_find_kept(rt_cpu_plan *plan, const hlo_comp *entry);
/* (kept_places.c) Where plan keeps its kept results: NULL when it keeps none (or runs on
 * the reference evaluator), or when memory ran out. It points into plan and its module, and
 * goes before them. */
typedef struct rt_cpu_kept_places rt_cpu_kept_places;
rt_cpu_kept_places *rt_cpu_kept_places_of(const rt_cpu_plan *plan);
/* Whether plan, of the same family as places's (the same optimized graph), keeps the same
 * results at the same places: an arena the one ran then holds the other's too. */
bool rt_cpu_kept_places_matches(const rt_cpu_kept_places *places, const rt_cpu_plan *plan);
void rt_cpu_kept_places_free(rt_cpu_kept_places *places);
/* Kept steps skipped so far, process-wide (for tests). */
int64_t rt_cpu_kept_reuse_count(void);

/* Allocations made by cpu executes so far, process-wide: fresh arenas, the entry's results,
 * values of the reference path and tuples (a reference kernel counts once, whatever it
 * allocates inside). For tests. */
int64_t rt_cpu_allocation_count(void);

/* (bind.c) The optimized module of a compile of source, rebuilt for binding:
 * source at other sizes. Its entry is its own; its other computations are optimized's, which
 * must outlive it; free it with rt_cpu_bound_module_free. NULL with diag (HLO_ERR_UNSUPPORTED
 * and why) when the compile's decisions cannot be shown to hold at the binding's sizes. */
hlo_module *rt_cpu_bind_module(const hlo_module *source, const hlo_module *optimized, const hlo_module *binding,
                               hlo_diag *diag);
void rt_cpu_bound_module_free(hlo_module *bound);
/* Whether b is a at other sizes: the same computations, instruction counts, opcodes,
 * operands and attributes but sizes (what bind checks of the graph it binds). Two optimized
 * modules alike so are one family: instruction i is the same operation in both. */
bool rt_cpu_same_graph(const hlo_module *a, const hlo_module *b);

/* Work run on a part [begin, end) of a kernel's f32 output right after the kernel wrote it,
 * while it is still in cache, inside the same parallel task. */
typedef struct rt_cpu_epilogue {
  void (*run)(const void *ctx, int64_t begin, int64_t end);
  const void *ctx;
} rt_cpu_epilogue;
/* The dot kernel with an epilogue over each block it computes (epilogue may be NULL), its
 * working memory in scratch (rt_cpu_pick_dot_scratch's bytes; NULL when they are 0). */
bool rt_cpu_dot_with_epilogue(const hlo_instr *instr, const rt_value *const *in, rt_value *out,
                              const rt_cpu_epilogue *epilogue, void *scratch);
bool rt_cpu_is_dot_kernel(rt_cpu_scratch_kernel kernel);
/* c[r][j] = sum over t of a[r][t] * b[j][t], for r < m and col0 <= j < col1 (dot_rows.c): a
 * few rows (a is [m][k]) against a matrix stored [n][k], which is read once; c is [m][n].
 * The dot kernel's path for 2 to RT_CPU_DOT_ROWS rows of f32. */
enum { RT_CPU_DOT_ROWS = 8 };
void rt_cpu_dot_rows_f32(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k, int64_t col0,
                         int64_t col1);

/* Fusion (fusion_groups.c), run on a plan whose steps are classified and not yet
 * assigned buffers: turns groups of elementwise steps into one FUSED step each (at the
 * group's last instruction) and marks the rest INSIDE. Decided from the module's shapes
 * alone, so a plan built again for other sizes decides again. */
hlo_status rt_cpu_fuse(rt_cpu_plan *plan, const hlo_comp *entry, hlo_diag *diag);
void rt_cpu_fusion_free(rt_cpu_fusion *fusion);
/* Runs a fused group (fusion_run.c): in[k] is the value of the step's input k;
 * scratch: the head's working memory (the FUSED step's scratch_bytes). */
bool rt_cpu_fusion_run(const rt_cpu_fusion *fusion, const rt_value *const *in, rt_value *out, void *scratch);
/* The instruction sets fused groups are compiled for (fusion_run.c); the widest the
 * processor has runs, unless a test picked another. All give the same results. */
#if defined(__GNUC__) && defined(__x86_64__)
#define RT_CPU_X86_VARIANTS 1
#else
#define RT_CPU_X86_VARIANTS 0
#endif
typedef enum rt_cpu_isa { RT_CPU_ISA_PORTABLE, RT_CPU_ISA_AVX2, RT_CPU_ISA_AVX512, RT_CPU_ISA_COUNT } rt_cpu_isa;
rt_cpu_isa rt_cpu_fused_isa(void);
const char *rt_cpu_isa_name(rt_cpu_isa isa);
/* Test-only: runs fused groups as isa from now on, process-wide; false (nothing changed)
 * when this build or processor has no such variant. */
bool rt_cpu_fused_use_isa(rt_cpu_isa isa);
/* The steps a step reads, by instruction id: a fused step's inputs, else the operands. */
int rt_cpu_step_input_count(const rt_cpu_step *step);
int rt_cpu_step_input(const rt_cpu_step *step, int k);
static inline bool rt_cpu_step_writes_buffer(const rt_cpu_step *step) {
  return step->kind == RT_STEP_FAST || step->kind == RT_STEP_FUSED || step->kind == RT_STEP_DNNL;
}

/* oneDNN (dnnl_plan.c), run on a plan whose steps are classified, before fusion:
 * turns the convolutions oneDNN runs, with the epilogues they absorb, into DNNL steps and
 * plans the layouts between them. The rest stays as it was. */
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
/* The instruction set oneDNN's kernels use on this host ("avx2", "avx512_core", ...)
 * (dnnl_conv.c). */
const char *rt_cpu_dnnl_isa_name(void);
/* Runs a DNNL step (dnnl_conv.c); kept is the arena's kept weights and stamp
 * when weight_param >= 0, else NULL. in_finite[k], one per input as in[] (the source, the
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
/* Convolutions run by latch's own Winograd (wino.c) so far, process-wide (for tests). */
int64_t rt_cpu_wino_run_count(void);
/* Sets the calling thread's OpenMP team to latch's thread count (one under ThreadSanitizer)
 * for the oneDNN calls that follow; returns the size it had, for omp_set_num_threads after. */
int rt_cpu_dnnl_team_begin(void);
/* dot.c: whether f32 gemm runs on oneDNN's sgemm (the processor has AVX-512) rather than
 * OpenBLAS; test-only: rt_cpu_dot_use_dnnl picks, process-wide. */
bool rt_cpu_dot_on_dnnl(void);
void rt_cpu_dot_use_dnnl(bool on);

/* The floating-point unary opcodes the elementwise kernels (and fused groups) compute. */
bool rt_cpu_float_unary(hlo_opcode op);

/* Shared loop helpers. */
static inline float rt_cpu_half_load(hlo_dtype dtype, uint16_t bits) {
  return dtype == HLO_F16 ? hlo_f16_to_f32(bits) : hlo_bf16_to_f32(bits);
}
static inline uint16_t rt_cpu_half_store(hlo_dtype dtype, float value) {
  return dtype == HLO_F16 ? hlo_f32_to_f16(value) : hlo_f32_to_bf16(value);
}
/* Below this many elements a loop stays on the calling thread. */
enum { RT_CPU_GRAIN = 1 << 15 };
/* Buffers and arenas are cut at this alignment (a cache line; aligned_alloc's size must be a
 * multiple of it). */
enum { RT_CPU_ALIGN = 64 };
static inline int64_t rt_cpu_aligned(int64_t bytes) { return (bytes + RT_CPU_ALIGN - 1) / RT_CPU_ALIGN * RT_CPU_ALIGN; }

#endif
