/* Collecting guards while a trace runs. Facts are appended in the order tracing learns them;
 * program.c orders them for checking. */
#include "guards.h"

#include <stdlib.h>
#include <string.h>

typedef struct guard_symbol {
  int64_t hint;
  bool from_input;  /* bound to an input dim, so duck sizing may reuse it */
  bool independent;
} guard_symbol;

struct guard_set {
  guard_fact *facts;
  int fact_count, fact_capacity;
  guard_symbol symbols[GUARD_MAX_SYMBOLS];
  int symbol_count;
  int input_count;
  bool failed; /* out of memory, too many symbols, or an overflow: the set is unusable */
  const char *failure;
};

guard_set *guard_set_new(void) {
  return hlo_calloc(1, sizeof(guard_set));
}

void guard_set_free(guard_set *set) {
  if (!set) return;
  for (int i = 0; i < set->fact_count; i++)
    if (set->facts[i].kind == GUARD_FACT_STATIC) free((void *)set->facts[i].static_value.bytes);
  free(set->facts);
  free(set);
}

static void fail(guard_set *set, const char *why) {
  if (!set->failed) set->failure = why;
  set->failed = true;
}

static guard_fact *add_fact(guard_set *set, guard_fact_kind kind) {
  if (set->fact_count == set->fact_capacity) {
    int capacity = set->fact_capacity ? set->fact_capacity * 2 : 16;
    guard_fact *grown = hlo_realloc(set->facts, (size_t)capacity * sizeof *grown);
    if (!grown) {
      fail(set, "out of memory");
      return NULL;
    }
    set->facts = grown;
    set->fact_capacity = capacity;
  }
  guard_fact *fact = &set->facts[set->fact_count++];
  memset(fact, 0, sizeof *fact);
  fact->kind = kind;
  return fact;
}

static int new_symbol(guard_set *set, int64_t hint, bool from_input, bool independent) {
  if (set->symbol_count == GUARD_MAX_SYMBOLS) {
    fail(set, "too many symbolic sizes");
    return -1;
  }
  set->symbols[set->symbol_count] = (guard_symbol){hint, from_input, independent};
  return set->symbol_count++;
}

void guard_set_input(guard_set *set, int input, hlo_dtype dtype, int rank) {
  guard_fact *fact = add_fact(set, GUARD_FACT_DTYPE);
  if (fact) *fact = (guard_fact){.kind = GUARD_FACT_DTYPE, .input = input, .value = dtype};
  fact = add_fact(set, GUARD_FACT_RANK);
  if (fact) *fact = (guard_fact){.kind = GUARD_FACT_RANK, .input = input, .value = rank};
  if (input + 1 > set->input_count) set->input_count = input + 1;
}

void guard_set_dim_static(guard_set *set, int input, int dim, int64_t value) {
  guard_fact *fact = add_fact(set, GUARD_FACT_DIM);
  if (fact) *fact = (guard_fact){.kind = GUARD_FACT_DIM, .input = input, .dim = dim, .value = value};
}

/* Records that a symbol is at least 2: the assumption that made 0 and 1 special. */
static void assume_at_least_two(guard_set *set, int sym) {
  guard_fact *fact = add_fact(set, GUARD_FACT_REL);
  if (fact)
    *fact = (guard_fact){.kind = GUARD_FACT_REL, .rel = GUARD_GE, .a = guard_expr_sym(sym), .b = guard_expr_const(2)};
}

guard_expr guard_set_dim_symbolic(guard_set *set, int input, int dim, int64_t observed, bool independent) {
  if (observed == 0 || observed == 1) {
    guard_set_dim_static(set, input, dim, observed);
    return guard_expr_const(observed);
  }
  for (int s = 0; !independent && s < set->symbol_count; s++) {
    const guard_symbol *symbol = &set->symbols[s];
    if (!symbol->from_input || symbol->independent || symbol->hint != observed) continue;
    guard_fact *fact = add_fact(set, GUARD_FACT_DIM_SYM);
    if (fact) *fact = (guard_fact){.kind = GUARD_FACT_DIM_SYM, .input = input, .dim = dim, .sym = s};
    return guard_expr_sym(s);
  }
  int sym = new_symbol(set, observed, true, independent);
  if (sym < 0) return guard_expr_const(observed);
  guard_fact *fact = add_fact(set, GUARD_FACT_BIND);
  if (fact) *fact = (guard_fact){.kind = GUARD_FACT_BIND, .input = input, .dim = dim, .sym = sym};
  assume_at_least_two(set, sym);
  return guard_expr_sym(sym);
}

int64_t guard_set_hint(const guard_set *set, const guard_expr *a) {
  int64_t hints[GUARD_MAX_SYMBOLS];
  for (int s = 0; s < set->symbol_count; s++) hints[s] = set->symbols[s].hint;
  int64_t value = 0;
  if (!guard_expr_eval(a, hints, &value)) fail((guard_set *)set, "a symbolic size overflowed");
  return value;
}

bool guard_rel_holds(int64_t a, guard_rel rel, int64_t b) {
  switch (rel) {
  case GUARD_EQ: return a == b;
  case GUARD_NE: return a != b;
  case GUARD_LT: return a < b;
  case GUARD_LE: return a <= b;
  case GUARD_GT: return a > b;
  case GUARD_GE: return a >= b;
  }
  return false;
}

static guard_rel negate(guard_rel rel) {
  switch (rel) {
  case GUARD_EQ: return GUARD_NE;
  case GUARD_NE: return GUARD_EQ;
  case GUARD_LT: return GUARD_GE;
  case GUARD_LE: return GUARD_GT;
  case GUARD_GT: return GUARD_LE;
  case GUARD_GE: return GUARD_LT;
  }
  return rel;
}

bool guard_set_compare(guard_set *set, guard_expr a, guard_rel rel, guard_expr b) {
  bool outcome = guard_rel_holds(guard_set_hint(set, &a), rel, guard_set_hint(set, &b));
  bool constant = guard_expr_is_const(&a, NULL) && guard_expr_is_const(&b, NULL);
  if (constant || guard_expr_equal(&a, &b)) return outcome; /* true for every binding */
  guard_fact *fact = add_fact(set, GUARD_FACT_REL);
  if (fact) *fact = (guard_fact){.kind = GUARD_FACT_REL, .rel = outcome ? rel : negate(rel), .a = a, .b = b};
  return outcome;
}

bool guard_set_divisible(guard_set *set, guard_expr a, int64_t k) {
  if (k == 0) return false;
  bool outcome = guard_set_hint(set, &a) % k == 0;
  guard_expr exact;
  if (guard_expr_div_exact(a, k < 0 ? -k : k, &exact)) return true; /* every coefficient divides */
  if (guard_expr_is_const(&a, NULL)) return outcome;
  guard_fact *fact = add_fact(set, outcome ? GUARD_FACT_DIVISIBLE : GUARD_FACT_NOT_DIVISIBLE);
  if (fact)
    *fact = (guard_fact){.kind = outcome ? GUARD_FACT_DIVISIBLE : GUARD_FACT_NOT_DIVISIBLE, .a = a, .value = k};
  return outcome;
}

guard_expr guard_set_define_quotient(guard_set *set, guard_expr a, int64_t k) {
  guard_expr exact;
  if (guard_expr_div_exact(a, k, &exact)) return exact;
  guard_set_divisible(set, a, k);
  int64_t quotient = guard_set_hint(set, &a) / k;
  if (quotient == 0 || quotient == 1) { /* specialized like an input size would be */
    guard_set_compare(set, a, GUARD_EQ, guard_expr_const(quotient * k));
    return guard_expr_const(quotient);
  }
  int sym = new_symbol(set, quotient, false, false);
  if (sym < 0) return guard_expr_const(quotient);
  guard_fact *fact = add_fact(set, GUARD_FACT_DEFINE);
  if (fact) *fact = (guard_fact){.kind = GUARD_FACT_DEFINE, .sym = sym, .a = a, .value = k};
  assume_at_least_two(set, sym);
  return guard_expr_sym(sym);
}

void guard_set_static(guard_set *set, int index, const guard_static *value) {
  guard_fact *fact = add_fact(set, GUARD_FACT_STATIC);
  if (!fact) return;
  *fact = (guard_fact){.kind = GUARD_FACT_STATIC, .static_index = index, .static_value = *value};
  if (value->kind != GUARD_STATIC_BYTES) {
    fact->static_value.bytes = NULL;
    fact->static_value.len = 0;
    return;
  }
  void *copy = hlo_malloc(value->len ? value->len : 1);
  if (!copy) {
    fact->kind = GUARD_FACT_DIM; /* harmless placeholder; the set is marked unusable */
    fail(set, "out of memory");
    return;
  }
  if (value->len) memcpy(copy, value->bytes, value->len);
  fact->static_value.bytes = copy;
}

int guard_set_symbol_count(const guard_set *set) { return set->symbol_count; }
int guard_set_input_count(const guard_set *set) { return set->input_count; }
int guard_set_fact_count(const guard_set *set) { return set->fact_count; }
const guard_fact *guard_set_fact(const guard_set *set, int index) { return &set->facts[index]; }

bool guard_set_ok(const guard_set *set, hlo_diag *diag) {
  if (!set->failed) return true;
  hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "guard set unusable: %s", set->failure);
  return false;
}

guard_expr guard_set_define_floor(guard_set *set, guard_expr a, int64_t k) {
  int64_t constant;
  if (k <= 0) {
    fail(set, "floor division by a non-positive number");
    return guard_expr_const(0);
  }
  if (guard_expr_is_const(&a, &constant)) return guard_expr_const(constant >= 0 ? constant / k : -((-constant + k - 1) / k));
  guard_expr exact;
  if (guard_expr_div_exact(a, k, &exact)) return exact;
  int64_t hint = guard_set_hint(set, &a);
  int64_t quotient = hint >= 0 ? hint / k : -((-hint + k - 1) / k);
  if (quotient == 0 || quotient == 1) { /* specialized: a stays in [q*k, q*k + k) */
    guard_set_compare(set, a, GUARD_GE, guard_expr_const(quotient * k));
    guard_set_compare(set, a, GUARD_LT, guard_expr_const(quotient * k + k));
    return guard_expr_const(quotient);
  }
  int sym = new_symbol(set, quotient, false, false);
  if (sym < 0) return guard_expr_const(quotient);
  guard_fact *fact = add_fact(set, GUARD_FACT_DEFINE_FLOOR);
  if (fact) *fact = (guard_fact){.kind = GUARD_FACT_DEFINE_FLOOR, .sym = sym, .a = a, .value = k};
  assume_at_least_two(set, sym);
  return guard_expr_sym(sym);
}
