/* A guard set: every fact about a call's inputs that one trace relied on. Tracing adds to it
 * (input dtypes and ranks, each dim static or symbolic, constraints between symbolic sizes,
 * static arguments' values); guard_program_compile (program.h) turns it into the flat check a
 * later call runs before reusing the trace.
 *
 * Symbolic sizes follow PyTorch's conventions: sizes 0 and 1 are always specialized; a
 * symbolic size is assumed to be at least 2 (a guard says so); input dims observed with equal
 * sizes share one symbol ("duck sizing") unless the caller marks a dim independent. Every
 * symbol keeps the value it had in the trace (its hint), so tracing can decide comparisons
 * and then record the decision as a guard. */
#ifndef GUARD_GUARD_SET_H
#define GUARD_GUARD_SET_H
#include <stdbool.h>
#include <stdint.h>

#include "expr.h"
#include "hlo/diag.h"
#include "hlo/dtype.h"
#include "hlo/strbuf.h"

typedef struct guard_set guard_set;

/* A static argument's value: what the traced function's behaviour may depend on. */
typedef enum guard_static_kind { GUARD_STATIC_INT, GUARD_STATIC_FLOAT, GUARD_STATIC_BYTES } guard_static_kind;
typedef struct guard_static {
  guard_static_kind kind;
  int64_t i;
  double f;          /* compared bit for bit, so -0.0 != 0.0 and NaN == the same NaN */
  const void *bytes;
  size_t len;
} guard_static;

/* Relations for guard_set_compare. */
typedef enum guard_rel { GUARD_EQ, GUARD_NE, GUARD_LT, GUARD_LE, GUARD_GT, GUARD_GE } guard_rel;
bool guard_rel_holds(int64_t a, guard_rel rel, int64_t b);

guard_set *guard_set_new(void);
void guard_set_free(guard_set *set);

/* Input facts. Each input's dtype and rank must be set before its dims. */
void guard_set_input(guard_set *set, int input, hlo_dtype dtype, int rank);
/* The dim is exactly value. */
void guard_set_dim_static(guard_set *set, int input, int dim, int64_t value);
/* The dim as a symbolic size: a constant for 0 and 1 (specialized), an existing symbol when
 * another non-independent input dim had the same size in this trace, else a new symbol bound
 * to this dim. */
guard_expr guard_set_dim_symbolic(guard_set *set, int input, int dim, int64_t observed, bool independent);

/* Constraints. Each returns the outcome under the trace's values and records a guard that
 * keeps that outcome; expressions may only use symbols of this set. */
bool guard_set_compare(guard_set *set, guard_expr a, guard_rel rel, guard_expr b);
/* Whether k divides a in the trace; records a guard keeping that outcome. */
bool guard_set_divisible(guard_set *set, guard_expr a, int64_t k);
/* A new symbol t = a / k (k > 0) for a size a reshape divides out; records a % k == 0 (the
 * caller must have checked that it holds) and t's definition. Returns t as an expression;
 * when a / k is already a polynomial, that polynomial instead of a new symbol. */
guard_expr guard_set_define_quotient(guard_set *set, guard_expr a, int64_t k);
/* floor(a / k) (k > 0, a >= 0 in the trace) without requiring divisibility: the output
 * size of a strided convolution or pooling window. A constant when a is; a polynomial when
 * every coefficient divides; 0 and 1 specialized (guards bound a); else a new symbol. */
guard_expr guard_set_define_floor(guard_set *set, guard_expr a, int64_t k);

/* The static argument at index must equal value (bytes are copied). */
void guard_set_static(guard_set *set, int index, const guard_static *value);

/* An expression's value in the trace. */
int64_t guard_set_hint(const guard_set *set, const guard_expr *a);
int guard_set_symbol_count(const guard_set *set);
int guard_set_input_count(const guard_set *set);
/* False, with a message, when the set ran out of memory or an expression overflowed while
 * it was built: such a set must not be used (the trace is then kept static). */
bool guard_set_ok(const guard_set *set, hlo_diag *diag);

/* Readable form, one fact per line (LATCH_LOG=guards). */
void guard_set_print(const guard_set *set, hlo_strbuf *sb);

/* ---- what program.c reads ---- */

typedef enum guard_fact_kind {
  GUARD_FACT_DTYPE, GUARD_FACT_RANK, GUARD_FACT_DIM, GUARD_FACT_BIND, GUARD_FACT_DIM_SYM,
  GUARD_FACT_DEFINE, GUARD_FACT_REL, GUARD_FACT_DIVISIBLE, GUARD_FACT_NOT_DIVISIBLE, GUARD_FACT_STATIC,
  GUARD_FACT_DEFINE_FLOOR,
} guard_fact_kind;

typedef struct guard_fact {
  guard_fact_kind kind;
  int input, dim;    /* DTYPE, RANK, DIM, BIND, DIM_SYM */
  int64_t value;     /* DTYPE (as hlo_dtype), RANK, DIM; divisor of DEFINE(_FLOOR) and DIVISIBLE */
  int sym;           /* BIND, DIM_SYM, DEFINE */
  guard_rel rel;     /* REL: a rel b */
  guard_expr a, b;   /* REL; a of DEFINE and DIVISIBLE */
  int static_index;  /* STATIC */
  guard_static static_value;
} guard_fact;

int guard_set_fact_count(const guard_set *set);
const guard_fact *guard_set_fact(const guard_set *set, int index);

#endif
