/* Compiling a guard set into its check order, and running the checks. */
#include "guards.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The common checks in 16 bytes each, so a call's guards touch little memory; the full
 * facts are kept for the rest and for failure messages. */
typedef struct guard_op {
  uint8_t kind;
  int8_t dim;
  int16_t input;
  int32_t sym;
  int64_t value;
} guard_op;

struct guard_program {
  int input_count, symbol_count, check_count;
  guard_fact *checks;
  guard_op *ops;
};

/* Cheap checks that most often tell two entries apart go first: a call with the wrong dtype
 * or rank fails on its first few checks. Symbol facts keep their recorded order within the
 * last phase, since a definition must run before the constraints that use it. */
static int phase(guard_fact_kind kind) {
  switch (kind) {
  case GUARD_FACT_DTYPE:
  case GUARD_FACT_RANK: return 0;
  case GUARD_FACT_STATIC: return 1;
  case GUARD_FACT_DIM: return 2;
  case GUARD_FACT_BIND: return 3;
  case GUARD_FACT_DIM_SYM: return 4;
  default: return 5;
  }
}

static bool expr_symbols_below(const guard_expr *e, int limit) {
  for (int i = 0; i < e->count; i++)
    for (int d = 0; d < e->terms[i].degree; d++)
      if (e->terms[i].syms[d] < 0 || e->terms[i].syms[d] >= limit) return false;
  return true;
}

/* Rejects sets whose dims or symbols point nowhere, so checking never reads out of bounds. */
static bool validate(const guard_set *set, hlo_diag *diag) {
  int inputs = guard_set_input_count(set), symbols = guard_set_symbol_count(set);
  int64_t *ranks = hlo_calloc((size_t)inputs + 1, sizeof *ranks);
  if (!ranks) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory"), false;
  for (int i = 0; i <= inputs; i++) ranks[i] = -1;
  bool ok = true;
  for (int i = 0; i < guard_set_fact_count(set) && ok; i++) {
    const guard_fact *f = guard_set_fact(set, i);
    bool about_dim = f->kind == GUARD_FACT_DIM || f->kind == GUARD_FACT_BIND || f->kind == GUARD_FACT_DIM_SYM;
    if (f->kind == GUARD_FACT_RANK) ranks[f->input] = f->value;
    if (about_dim) ok = f->input >= 0 && f->input < inputs && f->dim >= 0 && f->dim < ranks[f->input];
    bool defines = f->kind == GUARD_FACT_DEFINE || f->kind == GUARD_FACT_DEFINE_FLOOR;
    if (f->kind == GUARD_FACT_BIND || f->kind == GUARD_FACT_DIM_SYM || defines)
      ok = ok && f->sym >= 0 && f->sym < symbols;
    if (defines || f->kind == GUARD_FACT_DIVISIBLE || f->kind == GUARD_FACT_NOT_DIVISIBLE)
      ok = ok && f->value > 0;
    ok = ok && expr_symbols_below(&f->a, symbols) && expr_symbols_below(&f->b, symbols);
    if (!ok) {
      hlo_strbuf sb;
      hlo_sb_init(&sb);
      guard_fact_print(&sb, f);
      hlo_diag_set(diag, HLO_ERR_INTERNAL, "malformed guard '%s'", sb.data ? sb.data : "");
      hlo_sb_free(&sb);
    }
  }
  free(ranks);
  return ok;
}

guard_program *guard_program_compile(const guard_set *set, hlo_diag *diag) {
  if (!guard_set_ok(set, diag) || !validate(set, diag)) return NULL;
  guard_program *program = hlo_calloc(1, sizeof *program);
  int count = guard_set_fact_count(set);
  guard_fact *checks = hlo_calloc((size_t)count + 1, sizeof *checks);
  if (!program || !checks) {
    free(program);
    free(checks);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory compiling guards");
    return NULL;
  }
  int n = 0;
  for (int p = 0; p <= 5; p++)
    for (int i = 0; i < count; i++) {
      const guard_fact *f = guard_set_fact(set, i);
      if (phase(f->kind) != p) continue;
      checks[n] = *f;
      if (f->kind == GUARD_FACT_STATIC && f->static_value.kind == GUARD_STATIC_BYTES) {
        void *copy = hlo_malloc(f->static_value.len ? f->static_value.len : 1);
        if (copy && f->static_value.len) memcpy(copy, f->static_value.bytes, f->static_value.len);
        checks[n].static_value.bytes = copy;
        if (!copy) checks[n].kind = GUARD_FACT_RANK, checks[n].value = -1; /* never passes */
      }
      n++;
    }
  program->ops = hlo_calloc((size_t)n + 1, sizeof *program->ops);
  if (!program->ops) {
    for (int i = 0; i < n; i++)
      if (checks[i].kind == GUARD_FACT_STATIC) free((void *)checks[i].static_value.bytes);
    free(checks);
    free(program);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory compiling guards");
    return NULL;
  }
  for (int i = 0; i < n; i++)
    program->ops[i] = (guard_op){(uint8_t)checks[i].kind, (int8_t)checks[i].dim, (int16_t)checks[i].input,
                                 checks[i].sym, checks[i].value};
  program->checks = checks;
  program->check_count = n;
  program->input_count = guard_set_input_count(set);
  program->symbol_count = guard_set_symbol_count(set);
  return program;
}

void guard_program_free(guard_program *program) {
  if (!program) return;
  for (int i = 0; i < program->check_count; i++)
    if (program->checks[i].kind == GUARD_FACT_STATIC) free((void *)program->checks[i].static_value.bytes);
  free(program->checks);
  free(program->ops);
  free(program);
}

int guard_program_symbol_count(const guard_program *program) { return program->symbol_count; }

static bool static_equal(const guard_static *want, const guard_static *have) {
  if (want->kind != have->kind) return false;
  switch (want->kind) {
  case GUARD_STATIC_INT: return want->i == have->i;
  case GUARD_STATIC_FLOAT: return memcmp(&want->f, &have->f, sizeof want->f) == 0;
  case GUARD_STATIC_BYTES:
    return want->len == have->len && (want->len == 0 || memcmp(want->bytes, have->bytes, want->len) == 0);
  }
  return false;
}

/* Fills why for a failed check: the check in words, then what the call had. */
static bool failed(const guard_fact *check, int index, const char *detail, int64_t expected, int64_t got,
                   guard_failure *why) {
  if (!why) return false;
  why->check = index;
  bool about_dim = check->kind == GUARD_FACT_DIM || check->kind == GUARD_FACT_DIM_SYM ||
                   check->kind == GUARD_FACT_DTYPE || check->kind == GUARD_FACT_RANK;
  why->input = about_dim ? check->input : -1;
  why->dim = check->kind == GUARD_FACT_DIM || check->kind == GUARD_FACT_DIM_SYM ? check->dim : -1;
  why->expected = expected;
  why->got = got;
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  hlo_sb_puts(&sb, "guard '");
  guard_fact_print(&sb, check);
  hlo_sb_printf(&sb, "' failed: %s", detail);
  snprintf(why->message, sizeof why->message, "%s", sb.data ? sb.data : "guard failed");
  hlo_sb_free(&sb);
  return false;
}

/* "s0 = 6, s1 = 3" for the symbols an expression uses, so a failed constraint says why. */
static void describe_values(char *out, size_t size, const guard_fact *check, const int64_t *bindings) {
  size_t used = 0;
  out[0] = 0;
  bool seen[GUARD_MAX_SYMBOLS] = {false};
  const guard_expr *exprs[2] = {&check->a, &check->b};
  for (int e = 0; e < 2; e++)
    for (int i = 0; i < exprs[e]->count; i++)
      for (int d = 0; d < exprs[e]->terms[i].degree; d++) {
        int s = exprs[e]->terms[i].syms[d];
        if (seen[s] || used >= size) continue;
        seen[s] = true;
        used += (size_t)snprintf(out + used, size - used, "%ss%d = %" PRId64, used ? ", " : "", s, bindings[s]);
      }
}

/* The hot path: every check, no messages. On a failure the caller runs check_explained,
 * which fails at the same check and says why. */
static bool check_fast(const guard_program *program, const guard_tensor *inputs, const guard_static *statics,
                       int static_count, int64_t *bindings) {
  const guard_op *op = program->ops;
  for (int c = 0; c < program->check_count; c++, op++) {
    switch ((guard_fact_kind)op->kind) {
    case GUARD_FACT_DTYPE:
      if (inputs[op->input].dtype != (hlo_dtype)op->value) return false;
      break;
    case GUARD_FACT_RANK:
      if (inputs[op->input].rank != op->value) return false;
      break;
    case GUARD_FACT_DIM:
      if (inputs[op->input].dims[op->dim] != op->value) return false;
      break;
    case GUARD_FACT_BIND: bindings[op->sym] = inputs[op->input].dims[op->dim]; break;
    case GUARD_FACT_DIM_SYM:
      if (inputs[op->input].dims[op->dim] != bindings[op->sym]) return false;
      break;
    default: {
      const guard_fact *k = &program->checks[c];
      int64_t a = 0, b = 0;
      switch (k->kind) {
      case GUARD_FACT_DEFINE:
        if (!guard_expr_eval(&k->a, bindings, &a)) return false;
        bindings[k->sym] = a / k->value;
        break;
      case GUARD_FACT_DEFINE_FLOOR:
        if (!guard_expr_eval(&k->a, bindings, &a)) return false;
        bindings[k->sym] = a >= 0 ? a / k->value : -((-a + k->value - 1) / k->value);
        break;
      case GUARD_FACT_REL:
        if (!guard_expr_eval(&k->a, bindings, &a) || !guard_expr_eval(&k->b, bindings, &b) || !guard_rel_holds(a, k->rel, b))
          return false;
        break;
      case GUARD_FACT_DIVISIBLE:
      case GUARD_FACT_NOT_DIVISIBLE:
        if (!guard_expr_eval(&k->a, bindings, &a) || (a % k->value == 0) != (k->kind == GUARD_FACT_DIVISIBLE))
          return false;
        break;
      case GUARD_FACT_STATIC:
        if (k->static_index >= static_count || !static_equal(&k->static_value, &statics[k->static_index])) return false;
        break;
      default: break;
      }
    }
    }
  }
  return true;
}

static bool check_explained(const guard_program *program, const guard_tensor *inputs, const guard_static *statics,
                            int static_count, int64_t *bindings, guard_failure *why);

bool guard_program_check(const guard_program *program, const guard_tensor *inputs, int input_count,
                         const guard_static *statics, int static_count, int64_t *bindings,
                         guard_failure *why) {
  if (input_count != program->input_count) {
    if (why) {
      *why = (guard_failure){.check = -1, .input = -1, .dim = -1, .expected = program->input_count, .got = input_count};
      snprintf(why->message, sizeof why->message, "expected %d inputs, got %d", program->input_count, input_count);
    }
    return false;
  }
  if (check_fast(program, inputs, statics, static_count, bindings)) return true;
  return check_explained(program, inputs, statics, static_count, bindings, why);
}

static bool check_explained(const guard_program *program, const guard_tensor *inputs, const guard_static *statics,
                            int static_count, int64_t *bindings, guard_failure *why) {
  char detail[160];
  for (int c = 0; c < program->check_count; c++) {
    const guard_fact *k = &program->checks[c];
    const guard_tensor *in = k->kind <= GUARD_FACT_DIM_SYM ? &inputs[k->input] : NULL;
    int64_t a = 0, b = 0;
    switch (k->kind) {
    case GUARD_FACT_DTYPE:
      if (in->dtype != (hlo_dtype)k->value) {
        snprintf(detail, sizeof detail, "got %s", hlo_dtype_name(in->dtype));
        return failed(k, c, detail, k->value, in->dtype, why);
      }
      break;
    case GUARD_FACT_RANK:
      if (in->rank != k->value) {
        snprintf(detail, sizeof detail, "got rank %d", in->rank);
        return failed(k, c, detail, k->value, in->rank, why);
      }
      break;
    case GUARD_FACT_DIM:
      if (in->dims[k->dim] != k->value) {
        snprintf(detail, sizeof detail, "got %" PRId64, in->dims[k->dim]);
        return failed(k, c, detail, k->value, in->dims[k->dim], why);
      }
      break;
    case GUARD_FACT_BIND: bindings[k->sym] = in->dims[k->dim]; break;
    case GUARD_FACT_DIM_SYM:
      if (in->dims[k->dim] != bindings[k->sym]) {
        snprintf(detail, sizeof detail, "got %" PRId64 ", s%d = %" PRId64, in->dims[k->dim], k->sym, bindings[k->sym]);
        return failed(k, c, detail, bindings[k->sym], in->dims[k->dim], why);
      }
      break;
    case GUARD_FACT_DEFINE:
      if (!guard_expr_eval(&k->a, bindings, &a)) return failed(k, c, "overflow", 0, 0, why);
      bindings[k->sym] = a / k->value;
      break;
    case GUARD_FACT_DEFINE_FLOOR:
      if (!guard_expr_eval(&k->a, bindings, &a)) return failed(k, c, "overflow", 0, 0, why);
      bindings[k->sym] = a >= 0 ? a / k->value : -((-a + k->value - 1) / k->value);
      break;
    case GUARD_FACT_REL:
      if (!guard_expr_eval(&k->a, bindings, &a) || !guard_expr_eval(&k->b, bindings, &b))
        return failed(k, c, "overflow", 0, 0, why);
      if (!guard_rel_holds(a, k->rel, b)) {
        describe_values(detail, sizeof detail, k, bindings);
        return failed(k, c, detail, b, a, why);
      }
      break;
    case GUARD_FACT_DIVISIBLE:
    case GUARD_FACT_NOT_DIVISIBLE:
      if (!guard_expr_eval(&k->a, bindings, &a)) return failed(k, c, "overflow", 0, 0, why);
      if ((a % k->value == 0) != (k->kind == GUARD_FACT_DIVISIBLE)) {
        describe_values(detail, sizeof detail, k, bindings);
        return failed(k, c, detail, 0, a % k->value, why);
      }
      break;
    case GUARD_FACT_STATIC:
      if (k->static_index >= static_count || !static_equal(&k->static_value, &statics[k->static_index])) {
        snprintf(detail, sizeof detail, k->static_index >= static_count ? "missing" : "differs");
        return failed(k, c, detail, 0, 0, why);
      }
      break;
    }
  }
  return true;
}
