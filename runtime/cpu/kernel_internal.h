/* What the cpu backend's kernels share: the kernel signatures, the pickers that choose a
 * kernel for an instruction, the loop helpers, and the few functions one kernel file calls
 * in another. Kernel files include this alone; the plan and the executable see it through
 * plan_internal.h. Declarations sit under the file that defines them. Nothing outside the
 * backend includes this but the tests. */
#ifndef RT_CPU_KERNEL_INTERNAL_H
#define RT_CPU_KERNEL_INTERNAL_H
#include <stdbool.h>
#include <stdint.h>

#include "hlo/hlo.h"
#include "runtime/cpu/cpu.h"
#include "runtime/reference/reference.h"
#include "runtime/runtime.h"

/* A fast kernel: reads its operands (arrays in the instruction's declared operand shapes)
 * and writes every element of out, whose shape is the instruction's and whose data is a
 * reused buffer holding garbage. Picked at compile time only for shapes it handles, so it
 * checks nothing again. false only when scratch memory ran out. */
typedef bool (*rt_cpu_kernel)(const hlo_instr *instr, const rt_value *const *in, rt_value *out);

/* A fast kernel that needs working memory besides its result (operand copies in a canonical
 * order, im2col matrices): scratch is the step's own stretch of the arena, sized at plan time
 * by the picker (*scratch_bytes), holding garbage. Planning it with the results, instead of
 * allocating it on every call, is what keeps a step to no allocations: large fresh
 * allocations are mmaps whose pages fault in again on every call. */
typedef bool (*rt_cpu_scratch_kernel)(const hlo_instr *instr, const rt_value *const *in, rt_value *out,
                                      void *scratch);

/* Work run on a part [begin, end) of a kernel's f32 output right after the kernel wrote it,
 * while it is still in cache, inside the same parallel task. */
typedef struct rt_cpu_epilogue {
  void (*run)(const void *ctx, int64_t begin, int64_t end);
  const void *ctx;
} rt_cpu_epilogue;

/* Loop helpers. */
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

/* An f32 sum over the runs of a reduce whose kept dims sit between reduced ones (reduce.c's
 * middle reduce and a fused group's middle tail, which must give the same bits): element b of
 * each run of `inner` goes to lane b % width (width = RT_CPU_LANES, or inner when shorter),
 * so the adds of a run are independent vector adds where a single chain waits on each one.
 * The lanes start at -0 (adding it changes nothing, -0 included) and are added in lane order
 * at the end, then to init. Each lane is still summed in order, so every instruction set's
 * variant gives the same bits. */
enum { RT_CPU_LANES = 16 };
static inline int rt_cpu_lanes_width(int64_t inner) { return inner < RT_CPU_LANES ? (int)inner : RT_CPU_LANES; }
static inline void rt_cpu_lanes_clear(float *lane, int64_t count) {
  for (int64_t l = 0; l < count; l++) lane[l] = -0.0f;
}
/* Adds v[0..n) into the lanes; v starts a run, or a part of it at a multiple of RT_CPU_LANES. */
static inline void rt_cpu_lanes_add(float *lane, int width, const float *v, int64_t n) {
  if (width < RT_CPU_LANES) { /* a run shorter than the lanes: n == width */
    for (int l = 0; l < width; l++) lane[l] += v[l];
    return;
  }
  int64_t b = 0;
  for (; b + RT_CPU_LANES <= n; b += RT_CPU_LANES)
    for (int l = 0; l < RT_CPU_LANES; l++) lane[l] += v[b + l];
  for (int l = 0; b + l < n; l++) lane[l] += v[b + l];
}
static inline float rt_cpu_lanes_total(const float *lane, int width, float init) {
  float sum = -0.0f;
  for (int l = 0; l < width; l++) sum += lane[l];
  return init + sum;
}

/* Each picker below returns the fast kernel for instr, or NULL when it has none for this
 * opcode, these element types or shapes (the reference kernel then runs). */

/* elementwise.c */
rt_cpu_kernel rt_cpu_pick_elementwise(const hlo_instr *instr);
/* The floating-point unary opcodes the elementwise kernels (and fused groups) compute. */
bool rt_cpu_float_unary(hlo_opcode op);

/* layout.c */
rt_cpu_kernel rt_cpu_pick_layout(const hlo_instr *instr);

/* pool_grad.c: select-and-scatter as a max pool's gradient (a >= select, an add scatter, a
 * window over the last two dims of f32 planes). */
rt_cpu_kernel rt_cpu_pick_pool_grad(const hlo_instr *instr);

/* reduce.c: reduce and reduce-window, and select-and-scatter (pool_grad.c's). */
rt_cpu_kernel rt_cpu_pick_reduce(const hlo_instr *instr);
/* Whether the kept dims of a reduce of s over the dims marked in reduced are one block with
 * reduced dims before and after it: the input is then [*outer, *kept, *inner]. */
bool rt_cpu_reduce_middle(const hlo_shape *s, const bool *reduced, int64_t *outer, int64_t *kept, int64_t *inner);

/* gather.c */
rt_cpu_kernel rt_cpu_pick_gather(const hlo_instr *instr);

/* dnnl_conv_bf16.c: a convolution with bf16 operands (f32 or bf16 result) on oneDNN, where
 * rt_cpu_bf16_native and oneDNN has a kernel for it: NULL otherwise. No scratch. */
rt_cpu_scratch_kernel rt_cpu_pick_conv_bf16(const hlo_instr *instr, int64_t *scratch_bytes);
/* Convolutions run so far in this process (tests: which path a graph took). */
int64_t rt_cpu_conv_bf16_runs(void);

/* conv_gemm.c: a convolution or one of its gradients as one matrix product over the batch,
 * the weights read or written as they are. The forward convolution's geometry, as oneDNN's
 * primitives are told it; dilate: the taps' spacing (1 for none). */
typedef enum rt_cpu_conv_kind { RT_CPU_CONV_FORWARD, RT_CPU_CONV_WEIGHTS_GRAD, RT_CPU_CONV_INPUT_GRAD } rt_cpu_conv_kind;
typedef struct rt_cpu_conv_geom {
  rt_cpu_conv_kind kind;
  int64_t n, c, h, w, o, oh, ow, kh, kw;
  int64_t stride[2], dilate[2], pad[2]; /* pad: the low side's */
  /* element strides of (N, C, H, W), (O, C, KH, KW), (N, O, OH, OW): the source (or its
   * gradient), the weights (or theirs), the result (or its gradient) */
  int64_t src_strides[4], wei_strides[4], dst_strides[4];
} rt_cpu_conv_geom;
/* Whether it pays over oneDNN's primitives with weights new at each call: the weights
 * outweigh the activations. */
bool rt_cpu_conv_gemm_pays(const rt_cpu_conv_geom *g);
int64_t rt_cpu_conv_gemm_scratch(const rt_cpu_conv_geom *g);
/* out: the result, from src and wei; the weights' gradient, from src and dst; or the input's,
 * from wei and dst. */
bool rt_cpu_conv_gemm_run(const rt_cpu_conv_geom *g, const float *src, const float *wei, const float *dst, float *out,
                          char *scratch);
/* Products run so far in this process (tests: which path a graph took). */
int64_t rt_cpu_conv_gemm_runs(void);

/* dnnl_conv_grad.c: an f32 convolution that is a weights gradient (its lhs holds its features
 * in an outer dim to its batch) on oneDNN's backward-weights primitive, or an input gradient
 * (lhs dilated by the forward's stride, window stride 1 and reversed) on its backward-data
 * one, where oneDNN has a kernel for it: NULL otherwise. */
rt_cpu_scratch_kernel rt_cpu_pick_conv_grad(const hlo_instr *instr, int64_t *scratch_bytes);
/* Weights and input gradients run so far in this process (tests: which path a graph took). */
int64_t rt_cpu_conv_grad_runs(void);
int64_t rt_cpu_conv_input_grad_runs(void);

/* conv.c: rt_cpu_pick_conv_grad's or rt_cpu_pick_conv_bf16's kernel where one has one, else im2col + GEMM (bf16 operands
 * widened to f32). */
rt_cpu_scratch_kernel rt_cpu_pick_conv_scratch(const hlo_instr *instr, int64_t *scratch_bytes);

/* The raw attributes mark_choices.c puts on an instruction whose choice was refused: a
 * product's gemm on OpenBLAS (dot.c), a oneDNN step that scans every input (dnnl_conv.c). */
#define RT_CPU_ON_BLAS "latch_product_on_blas"
#define RT_CPU_SCAN_INPUTS "latch_scan_inputs"
/* dnnl_matmul.c: products on oneDNN's matmul. A batch of products c[b] = a[b] x b[b], a [m][k]
 * (stored [k][m] when a_transposed), b [k][n] (stored [n][k] when b_transposed), both bf16
 * (c row-major [batch][m][n] of c_type, f32 or bf16, summed in f32) or both f32 (c f32). */
typedef struct rt_cpu_matmul {
  int64_t batch, m, n, k;
  bool a_transposed, b_transposed;
  /* b is in the layout oneDNN's kernel reads (rt_cpu_matmul_bf16_pack made it), not plain */
  bool b_packed;
  bool f32; /* f32 operands (set by rt_cpu_matmul_f32), else bf16 */
  hlo_dtype c_type;
  const void *a, *b;
  void *c;
} rt_cpu_matmul;
/* Whether oneDNN runs bf16 products on this processor's own bf16 instructions (avx512_bf16 or
 * AMX); test-only: rt_cpu_bf16_use_native(0) pretends it has none, 1 that it has, -1 asks the
 * processor again. Process-wide; set it before compiling. */
bool rt_cpu_bf16_native(void);
void rt_cpu_bf16_use_native(int on);
/* Whether a bf16 product of this many rows (its batch times m) runs on oneDNN's bf16 kernel:
 * the processor has bf16 instructions, and the product has at most RT_CPU_BF16_FEW_ROWS rows
 * (bound by reading its weight, which bf16 halves) or bf16 arithmetic pays here
 * (rt_cpu_bf16_arithmetic_pays); always after rt_cpu_bf16_use_native(1). */
enum { RT_CPU_BF16_FEW_ROWS = 16 };
bool rt_cpu_bf16_native_for(int64_t rows);
/* Makes (and keeps) the primitive for mm's shape: false when oneDNN offers none. */
bool rt_cpu_matmul_bf16_ready(const rt_cpu_matmul *mm);
/* Runs it on the runtime's threads; false when oneDNN failed. */
bool rt_cpu_matmul_bf16(const rt_cpu_matmul *mm);
/* The bytes of mm's b in the layout oneDNN's kernel reads (a weight prepacked once, where
 * its kernel would otherwise pack b on every call), or 0 when that layout is the plain one
 * or oneDNN offers no primitive for it. */
int64_t rt_cpu_matmul_bf16_packed_bytes(const rt_cpu_matmul *mm);
/* Writes mm's plain b into packed (rt_cpu_matmul_bf16_packed_bytes of them); false when
 * oneDNN failed. */
bool rt_cpu_matmul_bf16_pack(const rt_cpu_matmul *mm, void *packed);
/* Products run so far in this process (tests: which path a graph took). */
int64_t rt_cpu_matmul_bf16_runs(void);
/* The same for f32 operands and result (c_type HLO_F32). */
bool rt_cpu_matmul_f32(const rt_cpu_matmul *mm);
int64_t rt_cpu_matmul_f32_runs(void);
/* With options->log_compiles, says once per process on stderr that entry's bf16 products run
 * converted to f32, when the processor has no bf16 instructions and entry has such a product. */
void rt_cpu_bf16_note(const hlo_comp *entry, const rt_compile_options *options);

/* bf16_rate.c: whether this processor's bf16 dot-product instruction does more multiply-adds
 * per second than its f32 FMA (measured once per process; false without avx512_bf16). */
bool rt_cpu_bf16_arithmetic_pays(void);

/* dot.c */
rt_cpu_scratch_kernel rt_cpu_pick_dot_scratch(const hlo_instr *instr, int64_t *scratch_bytes);
/* A product's weight kept packed in the arena: bytes at data, packed from the weight whose
 * stamp (or kept version) is stamp; *slot holds the stamp the bytes were packed from (0:
 * none yet). A stamp of 0 is unknown: the weight is packed again. */
typedef struct rt_cpu_packed {
  void *data;
  uint64_t *slot;
  uint64_t stamp;
} rt_cpu_packed;
/* The dot kernel with an epilogue over each block it computes (epilogue may be NULL), its
 * working memory in scratch (rt_cpu_pick_dot_scratch's bytes; NULL when they are 0), its rhs
 * packed into packed when that is not NULL (rt_cpu_dot_packed_bytes of them). */
bool rt_cpu_dot_with_epilogue(const hlo_instr *instr, const rt_value *const *in, rt_value *out,
                              const rt_cpu_epilogue *epilogue, void *scratch, const rt_cpu_packed *packed);
/* The bytes instr's rhs takes packed for its product (a bf16 matmul on oneDNN of one matrix,
 * whose kernel would pack the rhs on every call; or a bf16 rhs widened to f32 for the f32
 * path, which would copy it on every call), or 0 when it runs as it is. */
int64_t rt_cpu_dot_packed_bytes(const hlo_instr *instr);
/* Rhs packs (for oneDNN, or widened to f32) made so far in this process (tests: once per
 * weight version). */
int64_t rt_cpu_dot_packs(void);
bool rt_cpu_is_dot_kernel(rt_cpu_scratch_kernel kernel);
/* Whether f32 gemm runs on oneDNN's sgemm (the processor has AVX-512) rather than OpenBLAS;
 * test-only: rt_cpu_dot_use_dnnl picks, process-wide. */
bool rt_cpu_dot_on_dnnl(void);
void rt_cpu_dot_use_dnnl(bool on);
/* Whether instr is a product that would run on oneDNN's sgemm (f32, not few rows, on a
 * processor where rt_cpu_dot_on_dnnl; single rows and split sums included, one row by a
 * matrix each call): what the onednn_product choice is asked about. */
bool rt_cpu_dot_product_on_dnnl(const hlo_instr *instr);
/* Whether an f32 batch of products (batch > 1, m > 1, the gemm path on oneDNN) runs as one
 * call of oneDNN's matmul rather than one sgemm per matrix; test-only: rt_cpu_dot_use_batched
 * forces it (1) or the per-matrix loop (0), -1 restores the measured rule. Process-wide. */
void rt_cpu_dot_use_batched(int on);

/* dot_rows.c: c[r][j] = sum over t of a[r][t] * b[j][t], for r < m and col0 <= j < col1: a
 * few rows (a is [m][k]) against a matrix stored [n][k], which is read once; c is [m][n].
 * The dot kernel's path for 2 to RT_CPU_DOT_ROWS rows of f32. */
enum { RT_CPU_DOT_ROWS = 8 };
void rt_cpu_dot_rows_f32(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k, int64_t col0,
                         int64_t col1);

/* pooling.c: a max or min pool over f32 planes, window w (the last two dims only, no
 * dilation or reversal) into y; false, nothing written, for other reducers or types or rows
 * wider than the kernel's buffer. */
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

/* batchnorm.c */
/* batch-norm-training and batch-norm-grad as fast kernels whose out is a tuple of the three
 * result arrays (each in the arena): NULL when instr is not one they handle. */
rt_cpu_kernel rt_cpu_pick_batch_norm_parts(const hlo_instr *instr);
/* Typed, parallel kernels for ops that make tuples: they have the reference kernels'
 * signature and replace them; NULL when instr is not one they handle. */
rt_kernel rt_cpu_pick_batch_norm(const hlo_instr *instr);

/* fallback.c: the reference path for everything else: the kernel, or NULL for an opcode
 * neither path runs. Control flow evaluates its computations with the reference evaluator. */
rt_kernel rt_cpu_slow_kernel(hlo_opcode opcode);
/* The reference convolution into out, for the fast kernels' operands holding inf or NaN;
 * false when memory ran out. */
bool rt_cpu_reference_conv(const hlo_instr *instr, const rt_value *const *in, rt_value *out);

/* isa.c: the instruction set the vector loops run as (fused groups, dot_rows.c, pooling.c),
 * each compiled for every one; the widest the processor has runs, unless a test picked
 * another. All give the same results. */
#if defined(__GNUC__) && defined(__x86_64__)
#define RT_CPU_X86_VARIANTS 1
#else
#define RT_CPU_X86_VARIANTS 0
#endif
typedef enum rt_cpu_isa { RT_CPU_ISA_PORTABLE, RT_CPU_ISA_AVX2, RT_CPU_ISA_AVX512, RT_CPU_ISA_COUNT } rt_cpu_isa;
rt_cpu_isa rt_cpu_isa_in_use(void);
const char *rt_cpu_isa_name(rt_cpu_isa isa);
/* Test-only: runs the loops as isa from now on, process-wide; false (nothing changed) when
 * this build or processor has no such variant. */
bool rt_cpu_use_isa(rt_cpu_isa isa);

/* dnnl_engine.c: sets the calling thread's OpenMP team to latch's thread count (one under
 * ThreadSanitizer) for the oneDNN calls that follow; returns the size it had, for
 * omp_set_num_threads after. */
int rt_cpu_dnnl_team_begin(void);
/* That team's size. A primitive made for one team size runs with that many threads (oneDNN
 * splits its work when it is made): a kept primitive is kept per team size, so that a forked
 * child (a team of one: libgomp's pool does not survive fork) never runs its parent's. */
int rt_cpu_dnnl_team(void);
/* The instruction set oneDNN's kernels use on this host ("avx2", "avx512_core", ...). */
const char *rt_cpu_dnnl_isa_name(void);

#endif
