/* Runs a fused group's program (built by fusion_groups.c) tile by tile: each
 * instruction is one plain loop over a tile of floats, so the switch on its code is paid once
 * per tile, never per element. Tiles are split across threads; a group too small for that
 * runs on the caller's thread. The formulas are the elementwise kernels' (and so the
 * reference's): maximum and minimum pass NaN on and order -0 below +0.
 *
 * The loops are native vector code for the processor that runs them: the two per-thread
 * entry points (run_range, reduce_outputs) are compiled three times, for AVX-512, AVX2 and
 * the build's baseline (GCC's target attribute, everything they call inlined into each),
 * and the widest the processor has is picked at the first run, so the build stays portable
 * (no -march). Each lane computes what the scalar loop would: the same IEEE operations in
 * the same order, no contraction into fused multiply-adds (-std=c11 turns it off), library
 * calls for log and the like, erf, exp and tanh as plain arithmetic (erf_f32_internal.h,
 * exp_f32_internal.h, tanh_f32_internal.h); so every variant gives the same bits. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "fusion_internal.h"
#include "erf_f32_internal.h"
#include "exp_f32_internal.h"
#include "tanh_f32_internal.h"
#include "runtime/runtime.h"

/* Element i of a broadcast load reads (i / inner) % period: runs of one repeated element
 * (inner > 1) or runs of consecutive elements (inner == 1). */
#define FILL(T, CAST)                                                                        \
  do {                                                                                       \
    const T *src = (const T *)data;                                                          \
    if (in->linear) {                                                                        \
      src += begin;                                                                          \
      for (int j = 0; j < len; j++) dst[j] = CAST(src[j]);                                   \
      break;                                                                                 \
    }                                                                                        \
    int64_t q = (begin / in->inner) % in->period, r = begin % in->inner;                     \
    for (int j = 0; j < len;) {                                                              \
      if (in->inner == 1) {                                                                  \
        int run = (int)(in->period - q < len - j ? in->period - q : len - j);                \
        for (int e = 0; e < run; e++) dst[j + e] = CAST(src[q + e]);                         \
        j += run;                                                                            \
        q = (q + run) % in->period;                                                          \
      } else {                                                                               \
        int run = (int)(in->inner - r < len - j ? in->inner - r : len - j);                  \
        float v = CAST(src[q]);                                                              \
        for (int e = 0; e < run; e++) dst[j + e] = v;                                        \
        j += run;                                                                            \
        r += run;                                                                            \
        if (r == in->inner) r = 0, q = (q + 1) % in->period;                                 \
      }                                                                                      \
    }                                                                                        \
  } while (0)

#define AS_FLOAT(x) ((float)(x))
#define AS_BIT(x) ((x) != 0 ? 1.0f : 0.0f)

static void load(const fusion_instr *in, const void *data, int64_t begin, int len, float *dst) {
  switch (in->dtype) {
    case HLO_F32: FILL(float, AS_FLOAT); break;
    case HLO_PRED: FILL(uint8_t, AS_BIT); break;
    default: FILL(int32_t, AS_FLOAT); break;
  }
}

static void unary(hlo_opcode op, const float *a, int len, float *r) {
#define LOOP(expr) for (int j = 0; j < len; j++) { float x = a[j]; r[j] = (expr); } break
  switch (op) {
    case HLO_OP_ABS: LOOP(fabsf(x));
    case HLO_OP_NEGATE: LOOP(-x);
    case HLO_OP_SQRT: LOOP(sqrtf(x));
    case HLO_OP_RSQRT: LOOP(1.0f / sqrtf(x));
    case HLO_OP_EXP: LOOP(rt_exp_f32(x));
    case HLO_OP_LOG: LOOP(logf(x));
    case HLO_OP_TANH: LOOP(rt_tanh_f32(x));
    case HLO_OP_LOGISTIC: LOOP(1.0f / (1.0f + rt_exp_f32(-x)));
    case HLO_OP_FLOOR: LOOP(floorf(x));
    case HLO_OP_CEIL: LOOP(ceilf(x));
    case HLO_OP_SIN: LOOP(sinf(x));
    case HLO_OP_COS: LOOP(cosf(x));
    case HLO_OP_EXPM1: LOOP(expm1f(x));
    case HLO_OP_LOG1P: LOOP(log1pf(x));
    case HLO_OP_ERF: LOOP(rt_erf_f32(x));
    case HLO_OP_ROUND_NEAREST_EVEN: LOOP(nearbyintf(x));
    case HLO_OP_ROUND_NEAREST_AFZ: LOOP(roundf(x));
    case HLO_OP_SIGN: LOOP(isnan(x) ? x : copysignf(x != 0 ? 1.0f : 0.0f, x));
    default: break;
  }
#undef LOOP
}

static void binary(hlo_opcode op, const float *a, const float *b, int len, float *r) {
#define LOOP(expr) for (int j = 0; j < len; j++) { float x = a[j], y = b[j]; r[j] = (expr); } break
  switch (op) {
    case HLO_OP_ADD: LOOP(x + y);
    case HLO_OP_SUBTRACT: LOOP(x - y);
    case HLO_OP_MULTIPLY: LOOP(x * y);
    case HLO_OP_DIVIDE: LOOP(x / y);
    case HLO_OP_MAXIMUM: LOOP(rt_max_f32(x, y));
    case HLO_OP_MINIMUM: LOOP(rt_min_f32(x, y));
    default: break;
  }
#undef LOOP
}

static void compare(hlo_direction dir, const float *a, const float *b, int len, float *r) {
#define LOOP(expr) for (int j = 0; j < len; j++) { float x = a[j], y = b[j]; r[j] = (expr) ? 1.0f : 0.0f; } break
  switch (dir) {
    case HLO_DIR_EQ: LOOP(x == y);
    case HLO_DIR_NE: LOOP(x != y);
    case HLO_DIR_LT: LOOP(x < y);
    case HLO_DIR_LE: LOOP(x <= y);
    case HLO_DIR_GT: LOOP(x > y);
    default: LOOP(x >= y);
  }
#undef LOOP
}

typedef struct fused_job {
  const rt_cpu_fusion *f;
  const rt_value *const *in;
  void *out;
  void (*range)(const void *ctx, int64_t begin, int64_t end); /* run_range, in the variant in use */
  int64_t outer, kept; /* a tail's input as [outer, kept, f->inner] */
} fused_job;

/* One tile: elements [begin, begin + len) of the group's value, which the last instruction
 * writes straight into direct when it is not NULL. Returns where the value is. */
static const float *run_tile(const rt_cpu_fusion *f, const rt_value *const *inputs, void *out, int64_t begin,
                             int len, float (*tiles)[FUSION_TILE], const float **reg, float *direct) {
  for (int k = 0; k < f->instr_count; k++) {
    const fusion_instr *in = &f->instrs[k];
    bool last = k == f->instr_count - 1 && in->dst == f->result && in->tile >= 0;
    float *dst = last && direct ? direct : in->tile >= 0 ? tiles[in->tile] : NULL;
    switch (in->code) {
      case FU_LOAD:
        if (!dst) { /* linear f32: the input itself, or the head's result in the output */
          reg[in->dst] = (const float *)(in->input < 0 ? out : inputs[in->input]->data) + begin;
          continue;
        }
        load(in, inputs[in->input]->data, begin, len, dst);
        break;
      case FU_IMM:
        for (int j = 0; j < len; j++) dst[j] = in->imm;
        break;
      case FU_UNARY: unary(in->op, reg[in->a], len, dst); break;
      case FU_BINARY: binary(in->op, reg[in->a], reg[in->b], len, dst); break;
      case FU_COMPARE: compare(in->dir, reg[in->a], reg[in->b], len, dst); break;
      case FU_NONZERO: {
        const float *a = reg[in->a];
        for (int j = 0; j < len; j++) dst[j] = a[j] != 0 ? 1.0f : 0.0f;
        break;
      }
      case FU_SELECT: {
        const float *p = reg[in->a], *t = reg[in->b], *e = reg[in->c];
        for (int j = 0; j < len; j++) dst[j] = p[j] != 0 ? t[j] : e[j];
        break;
      }
      case FU_CLAMP: {
        const float *lo = reg[in->a], *x = reg[in->b], *hi = reg[in->c];
        for (int j = 0; j < len; j++) dst[j] = rt_min_f32(rt_max_f32(x[j], lo[j]), hi[j]);
        break;
      }
    }
    reg[in->dst] = dst;
  }
  return reg[f->result];
}

/* f32 to bf16 to nearest even, NaN kept quiet: hlo_f32_to_bf16's rounding, inline so the
 * store loop vectorizes. */
static inline uint16_t bf16_bits(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  uint32_t rounded = (bits + 0x7FFFu + (bits >> 16 & 1u)) >> 16, nan = (bits >> 16 & 0x8000u) | 0x7FC0u;
  return (uint16_t)((bits & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

/* Elements [begin, end) on this thread, a tile at a time. */
static inline void run_range(const void *ctx, int64_t begin, int64_t end) {
  const fused_job *job = ctx;
  float tiles[FUSION_MAX_TILES][FUSION_TILE];
  const float *reg[FUSION_MAX_REGS];
  const rt_cpu_fusion *f = job->f;
  for (int64_t at = begin; at < end; at += FUSION_TILE) {
    int len = (int)(end - at < FUSION_TILE ? end - at : FUSION_TILE);
    float *direct = f->out_dtype == HLO_F32 ? (float *)job->out + at : NULL;
    const float *value = run_tile(f, job->in, job->out, at, len, tiles, reg, direct);
    if (direct) {
      if (value != direct) memcpy(direct, value, sizeof(float) * (size_t)len);
    } else if (f->out_dtype == HLO_BF16) {
      uint16_t *halves = (uint16_t *)job->out + at;
      for (int j = 0; j < len; j++) halves[j] = bf16_bits(value[j]);
    } else {
      uint8_t *bits = (uint8_t *)job->out + at;
      for (int j = 0; j < len; j++) bits[j] = value[j] != 0;
    }
  }
}

/* Reduce outputs [first, end): each folds its run of the group's values in order, so the
 * sums round as the plain reduce kernel's do. */
static inline void reduce_outputs(void *ctx, int64_t first, int64_t end) {
  const fused_job *job = ctx;
  const rt_cpu_fusion *f = job->f;
  float tiles[FUSION_MAX_TILES][FUSION_TILE];
  const float *reg[FUSION_MAX_REGS];
  float init = *(const float *)job->in[f->tail_init]->data, *y = job->out;
  for (int64_t o = first; o < end; o++) {
    float acc = init;
    for (int64_t at = o * f->inner; at < (o + 1) * f->inner; at += FUSION_TILE) {
      int len = (int)((o + 1) * f->inner - at < FUSION_TILE ? (o + 1) * f->inner - at : FUSION_TILE);
      const float *v = run_tile(f, job->in, job->out, at, len, tiles, reg, NULL);
      switch (f->reducer) {
        case HLO_OP_ADD: for (int j = 0; j < len; j++) acc = acc + v[j]; break;
        case HLO_OP_MULTIPLY: for (int j = 0; j < len; j++) acc = acc * v[j]; break;
        case HLO_OP_MAXIMUM: for (int j = 0; j < len; j++) acc = rt_max_f32(acc, v[j]); break;
        default: for (int j = 0; j < len; j++) acc = rt_min_f32(acc, v[j]); break;
      }
    }
    y[o] = acc;
  }
}

/* Outputs [first, end) of a middle tail (the reduce's input [outer, kept, inner], an f32
 * sum): output o adds the runs [a][o] for a in turn into lanes, as reduce.c's middle reduce
 * does (rt_cpu_lanes_add), so both give the same bits. A tile spans the runs of as many
 * consecutive outputs as fit (they are contiguous for one a), so short runs do not pay the
 * program's dispatch each. */
static inline void middle_outputs(void *ctx, int64_t first, int64_t end) {
  const fused_job *job = ctx;
  const rt_cpu_fusion *f = job->f;
  float tiles[FUSION_MAX_TILES][FUSION_TILE], lanes[FUSION_TILE];
  const float *reg[FUSION_MAX_REGS];
  float init = *(const float *)job->in[f->tail_init]->data, *y = job->out;
  int64_t inner = f->inner, group = inner < FUSION_TILE ? FUSION_TILE / inner : 1;
  int width = rt_cpu_lanes_width(inner);
  for (int64_t o0 = first; o0 < end; o0 += group) {
    int64_t g = end - o0 < group ? end - o0 : group; /* g * width <= FUSION_TILE */
    rt_cpu_lanes_clear(lanes, g * width);
    for (int64_t a = 0; a < job->outer; a++) {
      int64_t base = (a * job->kept + o0) * inner;
      if (inner <= FUSION_TILE) {
        const float *v = run_tile(f, job->in, job->out, base, (int)(g * inner), tiles, reg, NULL);
        for (int64_t k = 0; k < g; k++) rt_cpu_lanes_add(lanes + k * width, width, v + k * inner, inner);
        continue;
      }
      for (int64_t b = 0; b < inner; b += FUSION_TILE) { /* one output (g == 1) */
        int len = (int)(inner - b < FUSION_TILE ? inner - b : FUSION_TILE);
        rt_cpu_lanes_add(lanes, width, run_tile(f, job->in, job->out, base + b, len, tiles, reg, NULL), len);
      }
    }
    for (int64_t k = 0; k < g; k++) y[o0 + k] = rt_cpu_lanes_total(lanes + k * width, width, init);
  }
}

/* ---- the variants, and which one runs ---- */

typedef struct variant {
  void (*range)(const void *ctx, int64_t begin, int64_t end);
  void (*outputs)(void *ctx, int64_t first, int64_t end);
  void (*middle)(void *ctx, int64_t first, int64_t end);
} variant;

#define VARIANT(name, attributes)                                                                  \
  attributes static void range_##name(const void *ctx, int64_t begin, int64_t end) {              \
    run_range(ctx, begin, end);                                                                    \
  }                                                                                                \
  attributes static void outputs_##name(void *ctx, int64_t first, int64_t end) {                  \
    reduce_outputs(ctx, first, end);                                                               \
  }                                                                                                \
  attributes static void middle_##name(void *ctx, int64_t first, int64_t end) {                   \
    middle_outputs(ctx, first, end);                                                               \
  }

VARIANT(portable, __attribute__((flatten)))
#if RT_CPU_X86_VARIANTS
VARIANT(avx2, __attribute__((target("avx2"), flatten)))
VARIANT(avx512, __attribute__((target("avx512f"), flatten)))
#endif

static const variant variants[RT_CPU_ISA_COUNT] = {
    [RT_CPU_ISA_PORTABLE] = {range_portable, outputs_portable, middle_portable},
#if RT_CPU_X86_VARIANTS
    [RT_CPU_ISA_AVX2] = {range_avx2, outputs_avx2, middle_avx2},
    [RT_CPU_ISA_AVX512] = {range_avx512, outputs_avx512, middle_avx512},
#endif
};

static void run_tiles(void *ctx, int64_t first, int64_t end) {
  const fused_job *job = ctx;
  int64_t count = job->f->count, last = end * FUSION_TILE;
  job->range(ctx, first * FUSION_TILE, last < count ? last : count);
}

/* The head into out (viewed in the head's own dims); a dot runs the program on each block
 * it finishes. */
static bool run_head(const fused_job *job, const rt_value *const *in, rt_value *out, void *scratch,
                     const rt_cpu_packed *packed, bool *done) {
  const rt_cpu_fusion *f = job->f;
  const hlo_shape *shape = &f->head->shape;
  rt_value view = {.refcount = 1, .shape = hlo_shape_make(shape->dtype, shape->rank, shape->dims),
                   .count = out->count, .data = out->data};
  const rt_value *args[2] = {in[f->head_args[0]], in[f->head_args[1]]};
  /* nothing to run after the product when the program only names it */
  bool bare = f->instr_count == 1 && f->instrs[0].code == FU_LOAD && f->instrs[0].input < 0;
  rt_cpu_epilogue epilogue = {.run = job->range, .ctx = job};
  if (f->flat) { /* [rows, k] x the weight, into [rows, n] */
    const rt_value *lhs = args[0];
    int64_t k = lhs->shape.dims[lhs->shape.rank - 1], flat[2] = {f->flat_rows, k};
    int64_t out_flat[2] = {f->flat_rows, f->flat_rows ? out->count / f->flat_rows : 0};
    rt_value lhs_view = {.refcount = 1, .shape = hlo_shape_make(HLO_F32, 2, flat), .count = lhs->count,
                         .data = lhs->data};
    rt_value out_view = {.refcount = 1, .shape = hlo_shape_make(HLO_F32, 2, out_flat), .count = out->count,
                         .data = out->data};
    const rt_value *flat_args[2] = {&lhs_view, args[1]};
    *done = true;
    return rt_cpu_dot_with_epilogue(&f->flat_instr, flat_args, &out_view, bare ? NULL : &epilogue, scratch, NULL);
  }
  if (rt_cpu_is_dot_kernel(f->head_kernel)) {
    *done = true;
    return rt_cpu_dot_with_epilogue(f->head, args, &view, bare ? NULL : &epilogue, scratch, packed);
  }
  return f->head_kernel(f->head, args, &view, scratch);
}

bool rt_cpu_fusion_run(const rt_cpu_fusion *fusion, const rt_value *const *in, rt_value *out, void *scratch,
                       const rt_cpu_packed *packed) {
  fused_job job = {.f = fusion, .in = in, .out = out->data, .range = variants[rt_cpu_isa_in_use()].range};
  bool done = false;
  if (fusion->head && !run_head(&job, in, out, scratch, packed, &done)) return false;
  if (done) return true;
  if (fusion->tail) {
    /* the group's values are outer x kept x inner, kept the reduce's outputs (fusion_check.c) */
    job.kept = out->count;
    job.outer = out->count && fusion->inner ? fusion->count / (out->count * fusion->inner) : 1;
    int64_t per_output = job.outer * fusion->inner;
    int64_t grain = RT_CPU_GRAIN / (per_output ? per_output : 1) / (fusion->instr_count < 4 ? 1 : fusion->instr_count / 4);
    const variant *v = &variants[rt_cpu_isa_in_use()];
    rt_parallel_for(out->count, grain < 1 ? 1 : grain, job.outer > 1 ? v->middle : v->outputs, &job);
    return true;
  }
  int64_t tiles = (fusion->count + FUSION_TILE - 1) / FUSION_TILE;
  /* more work per element than one plain kernel: a smaller grain pays for a task */
  int64_t grain = RT_CPU_GRAIN / FUSION_TILE / (fusion->instr_count < 4 ? 1 : fusion->instr_count / 4);
  rt_parallel_for(tiles, grain < 1 ? 1 : grain, run_tiles, &job);
  return true;
}
