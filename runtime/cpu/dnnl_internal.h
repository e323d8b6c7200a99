/* The cpu backend's convolutions through oneDNN (libdnnl, C API), shared by
 * dnnl_plan.c (which convolutions, which epilogues, which layouts), dnnl_conv.c (the
 * primitives and running them), the pools and concatenations that read their blocked
 * results (dnnl_pool.c, dnnl_concat.c), wino.c, and the files that keep (kept_places.c) and
 * store (serialize.c, deserialize.c) DNNL steps.
 *
 * A DNNL step sits at the last instruction of a convolution's epilogue (the convolution
 * itself when nothing follows it): the convolution and the elementwise ops it absorbed as
 * post-ops are INSIDE steps. Its inputs are the convolution's two operands, then the
 * operand of each post-op that reads one. Its result is in the arena in out_md's layout:
 * oneDNN's blocked layout when every reader is another DNNL step, the HLO's row-major
 * layout otherwise. */
#ifndef RT_CPU_DNNL_INTERNAL_H
#define RT_CPU_DNNL_INTERNAL_H
#include <dnnl.h>

#include "plan_internal.h"

/* What an absorbed instruction does to the value so far (x) with its operand (y). A
 * per-feature y is a full-shape value made only of broadcasts along the feature dim of [C]
 * arrays, scalar constants and elementwise ops over them (an unfolded batch norm's
 * rsqrt(var + eps)): the step computes it over [C] (terms) before the convolution. */
typedef enum rt_dnnl_post_kind {
  RT_DNNL_BIAS,     /* x + y[feature], the convolution's own bias argument */
  RT_DNNL_ADD_C,    /* x + y[feature], a binary post-op over a [1, C, 1, 1] operand */
  RT_DNNL_SUB_C,    /* x - y[feature] */
  RT_DNNL_MUL_C,    /* x * y[feature] */
  RT_DNNL_ADD_FULL, /* x + y, y of the result's shape (the residual add) */
  RT_DNNL_RELU,     /* max(x, 0) */
  RT_DNNL_CLIP,     /* clamp(lo, x, hi) */
} rt_dnnl_post_kind;

enum { RT_DNNL_MAX_POSTS = 8, RT_DNNL_MAX_TERMS = 32, RT_DNNL_MAX_INPUTS = 16, RT_DNNL_MAX_MEMBERS = 64 };
_Static_assert(2 + RT_DNNL_MAX_INPUTS == RT_CPU_DNNL_STEP_INPUTS, "a DNNL step's inputs fit in_finite");

/* A node of a per-feature value: an input's [C] array (op PARAMETER), a scalar (CONSTANT),
 * or an elementwise op over nodes a and b. */
typedef struct rt_dnnl_term {
  hlo_opcode op;
  int a, b, input;
  float value;
} rt_dnnl_term;

typedef struct rt_dnnl_post {
  rt_dnnl_post_kind kind;
  const hlo_instr *instr;   /* the absorbed instruction */
  int term;                 /* per-feature kinds: y's root term */
  int input;                /* ADD_FULL: y's input; per-feature y that is one input's array: that input; else -1 */
  int64_t values_offset;    /* per-feature y computed over [C]: where, in the step's scratch */
  float lo, hi;             /* CLIP */
} rt_dnnl_post;

/* A reorder from one memory descriptor to another, or none (prim NULL). */
typedef struct rt_dnnl_reorder {
  dnnl_primitive_t prim;
  int64_t offset; /* where its result goes in the step's scratch (the weights': kept) */
} rt_dnnl_reorder;

struct rt_cpu_dnnl {
  /* a convolution and its epilogue; or, conv NULL, a max or min pool (pool, its root too)
   * reading a blocked result (dnnl_pool.c), or a concatenation along the channels of
   * results in either layout (concat, dnnl_concat.c), run by latch's own kernels */
  const hlo_instr *conv, *root, *pool, *concat;
  int block;                 /* pool, concat: the channel block of their blocked layout (8, 16), 0: none */
  bool operand_blocked[RT_DNNL_MAX_INPUTS]; /* concat: which operands arrive blocked */
  int post_count;
  rt_dnnl_post posts[RT_DNNL_MAX_POSTS];
  int term_count, input_count, member_count;
  rt_dnnl_term terms[RT_DNNL_MAX_TERMS];
  const hlo_instr *inputs[RT_DNNL_MAX_INPUTS];   /* read besides the convolution's operands */
  const hlo_instr *members[RT_DNNL_MAX_MEMBERS]; /* instructions of per-feature values */
  bool blocked_out;          /* the result stays in oneDNN's layout (every reader is a DNNL step) */
  /* built by rt_cpu_dnnl_build */
  dnnl_memory_desc_t src_in_md;  /* how the source arrives: its producer's out_md, or row-major */
  dnnl_memory_desc_t src_md, weights_in_md, weights_md, bias_md, dst_md, out_md, scratchpad_md;
  /* A residual that arrives row-major while the result is blocked is reordered into the
   * result's layout first (oneDNN's fast kernels read a residual only in the result's
   * layout; with a row-major one they fall back to a much slower one): from post_in_md. */
  rt_dnnl_reorder post_reorder[RT_DNNL_MAX_POSTS];
  dnnl_primitive_t conv_prim;
  /* with an activation last: the convolution without it, for inputs not all finite */
  dnnl_primitive_t safe_prim;
  dnnl_memory_desc_t safe_scratchpad_md;
  rt_dnnl_reorder src_reorder, weights_reorder, dst_reorder;
  int64_t weights_bytes;     /* the reordered weights (kept in the arena when they are a parameter's) */
  int64_t out_bytes;         /* the result's buffer in out_md */
  int64_t scratch_bytes;     /* scratchpad, reordered source, the result before its reorder, weights */
  int64_t scratchpad_offset, dst_offset, weights_scratch_offset;
  int weight_param;          /* plan: the parameter the weights view (kept), or -1 */
  /* the primitives built (RT_DNNL_HAS_*): a deserialized step has the bits, and makes the
   * primitives from the descriptions above at its first run (rt_cpu_dnnl_recreate) */
  unsigned prims;
  /* the algorithm oneDNN runs: direct, or winograd where it picked it (its F(4x4, 3x3)
   * kernel, AVX-512 only). A Winograd step's safe primitive is direct with every post-op
   * but a last activation, reading its own weights layout (safe_weights_md, reordered into
   * the scratch when it runs): a tile mixes its inputs, so an inf or NaN, or an overflow in
   * the transforms, would spread over it */
  dnnl_alg_kind_t alg;
  dnnl_memory_desc_t safe_weights_md;
  rt_dnnl_reorder safe_weights_reorder;
  /* latch's own Winograd (wino.c; nChw8c, so AVX2, where oneDNN has none) runs the
   * convolution instead of the fast primitive when its operands are finite: its kept weights
   * are then the transformed filters (weights_bytes their size), oneDNN's reordered ones go
   * to the scratch for the other runs; wino_workers' tiles in the scratch at wino_offset */
  bool wino;
  int wino_workers;
  int64_t wino_offset;
  /* binary post-ops' operands (last, so that the slots past post_count of a fresh
   * allocation are never written: a loaded plan's pages fault in only where used) */
  dnnl_memory_desc_t post_md[RT_DNNL_MAX_POSTS]; /* as the primitive reads them */
  dnnl_memory_desc_t post_in_md[RT_DNNL_MAX_POSTS]; /* as they arrive */
};

enum {
  RT_DNNL_HAS_SAFE = 1u << 0,
  RT_DNNL_HAS_SRC_REORDER = 1u << 1,
  RT_DNNL_HAS_WEIGHTS_REORDER = 1u << 2,
  RT_DNNL_HAS_DST_REORDER = 1u << 3,
};
#define RT_DNNL_HAS_POST_REORDER(k) (1u << (4 + (k))) /* post k's residual reordered */
#define RT_DNNL_HAS_SAFE_WEIGHTS_REORDER (1u << (4 + RT_DNNL_MAX_POSTS))

/* dnnl_engine.c: the engine every primitive is made on, or NULL when oneDNN has none. */
dnnl_engine_t rt_cpu_dnnl_engine(void);

/* dnnl_plan.c: rt_cpu_dnnl_plan and the step's inputs are in plan_internal.h */

/* dnnl_pool.c */
/* Whether instr is a pool the blocked kernel runs: a reduce-window by maximum, minimum or sum over
 * dims 2 and 3 of an f32 [N, C, H, W] array, no dilation, reversal or negative padding. */
bool rt_cpu_dnnl_pool_supported(const hlo_instr *instr);
/* Plans d's pool for its source arriving as src_in (a blocked [N, C, H, W] layout with one
 * block of 8 or 16 channels); false when src_in is another layout. */
bool rt_cpu_dnnl_build_pool(rt_cpu_dnnl *d, const dnnl_memory_desc_t *src_in);
/* *finite: whether the result holds no inf or NaN (checked as it is written). */
hlo_status rt_cpu_dnnl_pool_step(const rt_cpu_dnnl *d, const rt_value *const *in, void *out, bool *finite,
                                 hlo_diag *diag);
/* (dnnl_pool.c, shared with dnnl_concat.c) The block (8, 16) of a single-block
 * [N, C, H, W] layout md of shape's dims, or 0. */
int rt_cpu_dnnl_block_of(const dnnl_memory_desc_t *md, const hlo_shape *shape);
/* md for shape's [N, C, H, W] dims in the single-block layout of block (0: row-major). */
bool rt_cpu_dnnl_block_md(dnnl_memory_desc_t *md, const hlo_shape *shape, int block);

/* dnnl_concat.c */
/* Whether instr is a concatenation the blocked kernel runs: f32 [N, C, H, W] arrays joined
 * along dim 1, at most RT_DNNL_MAX_INPUTS of them, each a multiple of 16 channels (so a
 * block never straddles two operands). */
bool rt_cpu_dnnl_concat_supported(const hlo_instr *instr);
/* Plans d's concatenation for its operands arriving as arrive[k] (NULL: row-major); its
 * result blocked when d->blocked_out, in the block of its blocked operands. false when
 * those differ or are no single-block layout. */
bool rt_cpu_dnnl_build_concat(rt_cpu_dnnl *d, const dnnl_memory_desc_t *const *arrive);
/* in_finite[k]: operand k is known to hold no inf or NaN. *finite: whether the result holds
 * none (known from the operands, else checked as it is copied). */
hlo_status rt_cpu_dnnl_concat_step(const rt_cpu_dnnl *d, const rt_value *const *in, const bool *in_finite, void *out,
                                   bool *finite, hlo_diag *diag);

/* dnnl_conv.c */
/* Whether oneDNN may run this convolution as a step: f32, 2-D, row-major, no lhs dilation
 * or reversal, no batch groups, padding not negative, and no weights gradient that
 * dnnl_conv_grad.c runs. */
bool rt_cpu_dnnl_conv_supported(const hlo_instr *conv);
/* Builds d's primitives for its source arriving as src_in (NULL: row-major) and its
 * full-shape post-op operands as post_in[k] (NULL: row-major). false when oneDNN refuses
 * or would take its reference implementation (probe: nothing kept), or out of memory. */
bool rt_cpu_dnnl_build(rt_cpu_dnnl *d, const dnnl_memory_desc_t *src_in, const dnnl_memory_desc_t *const *post_in);
void rt_cpu_dnnl_release(rt_cpu_dnnl *d);
/* The row-major layout of conv's source (source) or result as oneDNN's (N, C, H, W), by its
 * dim labels: how such a value arrives, or leaves, when no DNNL step keeps it blocked. */
bool rt_cpu_dnnl_plain_md(dnnl_memory_desc_t *md, const hlo_instr *conv, bool source);
/* Makes a deserialized d's primitives from its descriptions (the layouts rt_cpu_dnnl_build
 * chose, no longer `any`); false when oneDNN refuses them or would want other scratch
 * sizes or layouts than the plan has room for (another oneDNN, another processor). for_child:
 * in a forked child, for its team of one (scratchpads that fit the plan's room will do). */
bool rt_cpu_dnnl_recreate(rt_cpu_dnnl *d, bool for_child);

/* dnnl_check.c */
/* The bytes md describes (INT64_MAX past it). */
int64_t rt_cpu_md_bytes(const dnnl_memory_desc_t *md);
/* The bytes behind value id as an execute holds it: its storage's (a view starts where its
 * storage does), a DNNL result in the arena as large as its layout (a blocked one pads). */
int64_t rt_cpu_value_room(const rt_cpu_plan *plan, int id);
/* What is wrong with a loaded plan's layouts, as a phrase (*bad the step it is about), or
 * NULL: every DNNL step's result described in the layout its kernel writes, every value a
 * step reads taken in the layout it arrives in (a blocked result only by DNNL steps that
 * read it blocked, never by the caller), each pool's source and concatenation's operand as
 * large as what its kernel reads there. */
const char *rt_cpu_dnnl_layouts_check(const rt_cpu_plan *plan, const hlo_comp *entry, int *bad);

/* wino.c: a 3x3 convolution by Winograd's F(4x4, 3x3) over nChw8c layouts */
/* Whether d's convolution is one wino.c runs: 3x3, stride 1, no dilation or groups, source and
 * result nChw8c in multiples of 8 channels, residuals in the result's layout, weights
 * reordered. */
bool rt_cpu_wino_fits(const rt_cpu_dnnl *d);
/* Whether it pays over oneDNN's direct kernel (enough tiles for the channels). */
bool rt_cpu_wino_pays(const rt_cpu_dnnl *d);
/* The workers a step planned now deals its tiles to (the runtime's threads). */
int rt_cpu_wino_workers(void);
int64_t rt_cpu_wino_weights_bytes(const rt_cpu_dnnl *d);
int64_t rt_cpu_wino_scratch_bytes(const rt_cpu_dnnl *d); /* after wino_workers is set */
/* Whether a deserialized d's Winograd fields hold: it fits, and its room is there. */
bool rt_cpu_wino_valid(const rt_cpu_dnnl *d);
/* The filters w (the HLO's weights, through weights_in_md) transformed into u
 * (rt_cpu_wino_weights_bytes). */
void rt_cpu_wino_filters(const rt_cpu_dnnl *d, const float *w, float *u);
/* dst (dst_md) from src (src_md) and the transformed filters u, through d's post-ops, which
 * read post_data[k] (a per-feature [C] array, or a residual in dst_md); scratch at
 * d->wino_offset. false when the result holds an inf or a NaN (then recompute it otherwise). */
bool rt_cpu_wino_run(const rt_cpu_dnnl *d, const float *src, const float *u, const void *const *post_data, float *dst,
                     char *scratch);
#endif
