/* A fused group's program, shared by the file that builds it (fusion_groups.c) and the
 * file that runs it (fusion_run.c).
 *
 * The program is a list of instructions over numbered registers, each register the value of
 * one group member (or one load) for one tile of FUSION_TILE consecutive elements. It runs
 * once per tile, so the dispatch on an instruction's code costs once per tile and op, and
 * the loops inside run over plain float arrays. Every register computes in f32: pred values
 * are 0 or 1, s32 inputs are converted on load (only converts read them). */
#ifndef RT_BACKEND_CPU_FUSION_H
#define RT_BACKEND_CPU_FUSION_H
#include "plan_internal.h"

enum {
  FUSION_TILE = 512,     /* elements per tile: a few tiles stay in L1 */
  FUSION_MAX_TILES = 24, /* tiles a program may hold at once (on the worker's stack) */
  FUSION_MAX_MEMBERS = 64,
  FUSION_MAX_REGS = 4 * FUSION_MAX_MEMBERS, /* registers (and instructions) of one program */
};

typedef enum fusion_code {
  FU_LOAD,     /* input `input` read linearly, or through a broadcast: index (i / inner) % period;
                  input -1: the head's result, already in the output (read in place) */
  FU_IMM,      /* the constant imm in every element */
  FU_UNARY,    /* op (an elementwise unary opcode) of a */
  FU_BINARY,   /* op (add, subtract, multiply, divide, maximum, minimum) of a, b */
  FU_COMPARE,  /* a dir b, as 0 or 1 */
  FU_NONZERO,  /* convert to pred: a != 0 */
  FU_SELECT,   /* a != 0 ? b : c */
  FU_CLAMP,    /* min(max(b, a), c) */
} fusion_code;

typedef struct fusion_instr {
  fusion_code code;
  hlo_opcode op;
  hlo_direction dir;
  int dst, a, b, c;    /* registers */
  int tile;            /* the stack tile dst lives in; -1: a view of the input (linear f32 load) */
  /* FU_LOAD */
  int input;           /* index into the fusion's inputs */
  hlo_dtype dtype;     /* F32, PRED or S32 */
  bool linear;
  float imm;           /* FU_IMM (here, not last: 64 bytes, not 72) */
  int64_t inner, period;
} fusion_instr;

struct rt_cpu_fusion {
  int input_count;
  int *inputs;          /* instruction ids of the steps read, in load order */
  int instr_count;
  fusion_instr *instrs;
  int reg_count;
  int result;           /* the register holding the group's value */
  int tiles;            /* stack tiles the program needs */
  int64_t count;        /* elements of the result */
  hlo_dtype out_dtype;  /* F32 or PRED */
  int members;          /* instructions of the module the group computes (for reports) */
  /* A dot or convolution whose one user is the group (else NULL): it runs first, into the
   * output, and the program is its epilogue, in the dot's own tasks block by block. */
  const hlo_instr *head;
  rt_cpu_scratch_kernel head_kernel;
  int64_t head_scratch_bytes; /* its working memory: the FUSED step's scratch */
  int head_args[2];     /* its operands, as indices into inputs */
  /* A dot head whose rhs was a weight broadcast along the leading batch dims: it runs as one
   * plain [rows, k] x weight product, reading the weight itself (head_args[1]); the flat_*
   * fields at the end. */
  bool flat;
  /* A reduce whose operand is the group's value (else NULL): the FUSED step is the reduce's,
   * and each output folds its run of `inner` consecutive values as the program makes them,
   * tile by tile, in the reduce kernel's order. */
  const hlo_instr *tail;
  hlo_opcode reducer;   /* add, multiply, maximum or minimum */
  int64_t inner;
  int tail_init;        /* the init value, as an index into inputs */
  /* flat heads only (last, so that other groups' fresh allocations never write them) */
  int64_t flat_rows;
  int64_t flat_contracting[2];
  hlo_dot_dims flat_dims;
  hlo_instr *flat_operand_list[2];
  hlo_instr flat_instr; /* the head with flat_dims, reading flat_operands */
  hlo_instr flat_operands[2]; /* the lhs seen as [rows, k], and the weight */
};

/* (fusion_groups.c) Whether op is one FU_BINARY computes: add, subtract, multiply, divide,
 * maximum, minimum. */
bool rt_cpu_fusion_binary(hlo_opcode op);
/* (fusion_groups.c) The rhs of dot when dot is the batched matmul of [batch..., m, k] by a
 * [k, n] (or [n, k]) f32 weight broadcast along the batch dims (its shapes alone), else
 * NULL: the product a flat head runs as one plain [batch * m, k] x weight. */
const hlo_instr *rt_cpu_fusion_weight_broadcast(const hlo_instr *dot);
/* (fusion_groups.c) Fills f's flat_* fields for its dot head (f->head) read as one plain
 * [rows, k] x weight product, weight being the array under the head's broadcast rhs: the
 * planner's choice, and a deserialized group's. */
void rt_cpu_fusion_flat_head(rt_cpu_fusion *f, const hlo_instr *weight);

/* (fusion_check.c) What is wrong with step's loaded fused program (step->fusion) in plan, as
 * a phrase, or NULL when it reads and writes only inside the values it is given: the
 * builder's guarantees, which a blob only claims, checked at load. */
const char *rt_cpu_fusion_check(const rt_cpu_plan *plan, const rt_cpu_step *step);

#endif
