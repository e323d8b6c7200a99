/* A loaded fused program checked against its plan before it may run (deserialize.c calls it
 * for every FUSED step). The builder (fusion_groups.c) makes programs that are right by
 * construction; a blob whose checksums were recomputed after an edit only claims to hold
 * one, and fusion_run.c trusts what it runs: registers read after they are written, loads
 * whose element type and count are the value's, tiles on the worker's stack, a head whose
 * operands are the head's own, a reduce tail that reads its init and writes its result.
 * Each of those is checked here, once, so a crafted program is refused at load with what
 * is wrong, never read outside a buffer at execute. */
#include "fusion_internal.h"

/* The value input k of f is: the step it names (inputs_hold put it before the group). */
static const rt_cpu_step *input_step(const rt_cpu_plan *plan, const rt_cpu_fusion *f, int k) {
  return &plan->steps[f->inputs[k]];
}

static bool plain(const hlo_shape *shape, hlo_dtype dtype) {
  return hlo_shape_is_array(shape) && shape->dtype == dtype;
}

/* The registers in reads an instruction's operands: those it has, in a, b, c order. */
static int operand_regs(const fusion_instr *in, int regs[3]) {
  regs[0] = in->a, regs[1] = in->b, regs[2] = in->c;
  switch (in->code) {
    case FU_LOAD: case FU_IMM: return 0;
    case FU_UNARY: case FU_NONZERO: return 1;
    case FU_BINARY: case FU_COMPARE: return 2;
    default: return 3;
  }
}

/* A load of input in->input: of the type that value has, as many elements as the group
 * (linear) or at least a period of them (through a broadcast); the head's result only as a
 * view of the output, where the head wrote it. */
static const char *check_load(const rt_cpu_plan *plan, const rt_cpu_fusion *f, const fusion_instr *in) {
  bool view = in->linear && in->dtype == HLO_F32;
  if (in->input < 0) return f->head && view ? NULL : "a load of the head's result";
  const rt_cpu_step *from = input_step(plan, f, in->input);
  const hlo_shape *shape = &from->instr->shape;
  if (from->kind == RT_STEP_INSIDE) return "a load of a value no step makes";
  if (!plain(shape, in->dtype) || (in->dtype != HLO_F32 && in->dtype != HLO_PRED && in->dtype != HLO_S32))
    return "a load of another type than its value's";
  int64_t elements = hlo_shape_elements(shape);
  if (in->linear ? elements != f->count : f->count > 0 && in->period > elements)
    return "a load of more elements than its value has";
  return NULL;
}

/* Instruction k: its operands written by earlier instructions (register r is written by
 * instruction r), its result in a stack tile unless it is a view of an f32 input, its op
 * one the runner computes. */
static const char *check_instr(const rt_cpu_plan *plan, const rt_cpu_fusion *f, int k) {
  const fusion_instr *in = &f->instrs[k];
  int regs[3], n = operand_regs(in, regs);
  if (in->dst != k) return "an instruction writing another register than its own";
  for (int i = 0; i < n; i++)
    if (regs[i] >= k) return "a register read before it is written";
  bool view = in->code == FU_LOAD && in->linear && in->dtype == HLO_F32;
  if (view ? in->tile != -1 : in->tile < 0 || in->tile >= f->tiles) return "a tile outside the program's";
  if (in->code == FU_UNARY && !rt_cpu_float_unary(in->op)) return "a unary op the program cannot run";
  if (in->code == FU_BINARY && !rt_cpu_fusion_binary(in->op)) return "a binary op the program cannot run";
  return in->code == FU_LOAD ? check_load(plan, f, in) : NULL;
}

/* A dot or convolution run first into the output: an f32 result the size of the group's,
 * reading the head's own operands (a flat head: its lhs and the weight under its broadcast),
 * with the step's scratch as its working memory. */
static const char *check_head(const rt_cpu_plan *plan, const rt_cpu_fusion *f, const rt_cpu_step *step) {
  const hlo_instr *head = f->head;
  if (f->tail || (head->opcode != HLO_OP_DOT && head->opcode != HLO_OP_CONVOLUTION) || head->operand_count != 2)
    return "a head that is no product";
  if (!plain(&head->shape, HLO_F32) || hlo_shape_elements(&head->shape) != f->count || f->out_dtype != HLO_F32)
    return "a head whose result is not the group's";
  const hlo_instr *rhs = head->operands[1];
  if (f->flat && (rt_cpu_fusion_weight_broadcast(head) != rhs || rhs->operand_count != 1))
    return "a flat head whose rhs is no broadcast weight";
  const hlo_instr *want[2] = {head->operands[0], f->flat ? rhs->operands[0] : rhs};
  for (int k = 0; k < 2; k++)
    if (f->inputs[f->head_args[k]] != want[k]->id || input_step(plan, f, f->head_args[k])->kind == RT_STEP_INSIDE)
      return "a head reading other values than its operands";
  if (step->scratch_bytes < f->head_scratch_bytes) return "a head's scratch larger than the step's";
  return NULL;
}

/* A reduce run by the group: it is the step's own instruction, folds with one of the four
 * reducers, and starts from its own init, an f32 scalar. */
static const char *check_tail(const rt_cpu_plan *plan, const rt_cpu_fusion *f, const rt_cpu_step *step) {
  const hlo_instr *tail = f->tail;
  if (tail != step->instr || tail->opcode != HLO_OP_REDUCE || tail->operand_count != 2 || f->input_count < 1 ||
      !plain(&tail->shape, HLO_F32))
    return "a reduce that is not the step's";
  if (f->reducer != HLO_OP_ADD && f->reducer != HLO_OP_MULTIPLY && f->reducer != HLO_OP_MAXIMUM &&
      f->reducer != HLO_OP_MINIMUM)
    return "a reducer the program cannot run";
  if (f->count != hlo_shape_elements(&tail->operands[0]->shape)) return "a reduce of other values than the group's";
  int64_t per_output = hlo_shape_elements(&tail->shape) * f->inner;
  if (per_output > 0 && f->count / per_output > 1 && f->reducer != HLO_OP_ADD)
    return "a reduce over leading dims that is no sum";
  const rt_cpu_step *init = input_step(plan, f, f->tail_init);
  if (f->inputs[f->tail_init] != tail->operands[1]->id || init->kind == RT_STEP_INSIDE ||
      !plain(&init->instr->shape, HLO_F32) || hlo_shape_elements(&init->instr->shape) != 1)
    return "a reduce's init that is not its own";
  return NULL;
}

const char *rt_cpu_fusion_check(const rt_cpu_plan *plan, const rt_cpu_step *step) {
  const rt_cpu_fusion *f = step->fusion;
  const hlo_shape *shape = &step->instr->shape;
  if (f->instr_count < 1 || f->reg_count != f->instr_count || f->result >= f->instr_count)
    return "no result register";
  bool overflow = false;
  /* a tail's values are [outer, kept, inner], kept its result's elements */
  int64_t want = f->tail ? hlo_ck_mul(&overflow, hlo_shape_elements(shape), f->inner) : hlo_shape_elements(shape);
  bool fits = f->tail && want > 0 ? f->count % want == 0 : f->count == want;
  if (overflow || !fits) return "a size other than its result's";
  if (!f->tail && !(plain(shape, f->out_dtype) &&
                    (f->out_dtype == HLO_F32 || f->out_dtype == HLO_PRED || f->out_dtype == HLO_BF16)))
    return "a result type other than its step's";
  for (int k = 0; k < f->instr_count; k++) {
    const char *what = check_instr(plan, f, k);
    if (what) return what;
  }
  if (f->head) {
    const char *what = check_head(plan, f, step);
    if (what) return what;
  }
  return f->tail ? check_tail(plan, f, step) : NULL;
}
