/* guards/: symbolic dimension expressions, guard sets and the guard programs a traced
 * function's later calls evaluate. The layer's one header; uses hlo/. Declarations sit under
 * the file that defines them. */
#ifndef GUARDS_H
#define GUARDS_H
#include <stdbool.h>
#include <stdint.h>

#include "hlo/hlo.h"

/* ---- expr.c ---- */
/* Symbolic dimension sizes: small polynomials with integer coefficients over symbols s0, s1,
 * ... (the sizes a trace left symbolic). A reshape multiplies sizes, a concatenate adds them,
 * so sums of products cover what tracing produces; a size that would need a division becomes
 * a new symbol defined by that division (guard_set_define), so expressions stay polynomials
 * and evaluating one is a few multiply-adds.
 *
 * Expressions are values (no allocation) in a canonical form: terms sorted, like terms merged,
 * no zero coefficients. Two expressions are equal exactly when their canonical forms are. */

enum {
  GUARD_MAX_TERMS = 8,  /* terms in one expression */
  GUARD_MAX_DEGREE = 4, /* symbols multiplied in one term */
  GUARD_MAX_SYMBOLS = 64,
};

typedef struct guard_term {
  int64_t coeff;
  int degree;                      /* 0 for the constant term */
  int16_t syms[GUARD_MAX_DEGREE];  /* ascending, repeats allowed: s0*s0 */
} guard_term;

typedef struct guard_expr {
  int count;                       /* 0 means the constant 0 */
  guard_term terms[GUARD_MAX_TERMS];
} guard_expr;

guard_expr guard_expr_const(int64_t value);
guard_expr guard_expr_sym(int sym);
/* a + b and a * b; false when the result has too many terms, too high a degree, or a
 * coefficient overflows (the caller then specializes the size instead). */
bool guard_expr_add(guard_expr a, guard_expr b, guard_expr *out);
bool guard_expr_mul(guard_expr a, guard_expr b, guard_expr *out);
/* a * k for a constant k; same failures. */
bool guard_expr_scale(guard_expr a, int64_t k, guard_expr *out);
/* a / k when every coefficient of a is a multiple of k (k > 0), so the quotient is exact
 * for every binding; false otherwise. */
bool guard_expr_div_exact(guard_expr a, int64_t k, guard_expr *out);

bool guard_expr_equal(const guard_expr *a, const guard_expr *b);
bool guard_expr_is_const(const guard_expr *a, int64_t *value);
/* The single symbol a is (coefficient 1, degree 1), or -1. */
int guard_expr_as_sym(const guard_expr *a);
/* Value under bindings[sym]; false on overflow. */
bool guard_expr_eval(const guard_expr *a, const int64_t *bindings, int64_t *value);
/* Replaces every use of symbol from by the expression to; false when the result does not
 * fit (see guard_expr_add). */
bool guard_expr_substitute(const guard_expr *a, int from, const guard_expr *to, guard_expr *out);
/* "2*s0*s1 + s2 + 3"; the constant 0 prints as "0". */
void guard_expr_print(hlo_strbuf *sb, const guard_expr *a);

/* ---- guard_set.c ---- */
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

/* ---- describe.c ---- */
/* Readable form, one fact per line (LATCH_LOG=guards). */
void guard_set_print(const guard_set *set, hlo_strbuf *sb);

/* ---- guard_set.c: what program.c reads ---- */

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

/* ---- program.c ---- */
/* Guard programs: a guard set compiled into a flat list of checks, ordered cheapest and most
 * discriminating first (input count, dtypes and ranks, static arguments, static dims, then
 * symbol bindings and the constraints between them), evaluated until the first failure.
 * A passing check leaves every symbol's value for this call in bindings, which is what a
 * symbolic executable needs to size its buffers. */

typedef struct guard_program guard_program;

/* What a call passes in, per tensor input. */
typedef struct guard_tensor {
  hlo_dtype dtype;
  int rank;
  const int64_t *dims;
} guard_tensor;

/* Why a check failed, for LATCH_LOG=recompiles and the recompile-limit warning. */
typedef struct guard_failure {
  int check;              /* index of the failing check in the program */
  int input, dim;         /* the input dim involved, or -1 */
  int64_t expected, got;  /* for dtype, rank and dim checks */
  char message[256];      /* "input 0 dim 1: expected 784, got 785" */
} guard_failure;

/* NULL with diag when the set is unusable (see guard_set_ok) or memory runs out. The
 * program is independent of the set afterwards. */
guard_program *guard_program_compile(const guard_set *set, hlo_diag *diag);
void guard_program_free(guard_program *program);
int guard_program_symbol_count(const guard_program *program);

/* True when every check passes; bindings (guard_program_symbol_count entries, may be NULL
 * when there are none) then hold the symbols' values. False with why filled (may be NULL)
 * otherwise. Never allocates. */
bool guard_program_check(const guard_program *program, const guard_tensor *inputs, int input_count,
                         const guard_static *statics, int static_count, int64_t *bindings,
                         guard_failure *why);

/* ---- describe.c ---- */
/* One fact in the same words: "input 0 dim 1 == 784", "s0 % 4 == 0". */
void guard_fact_print(hlo_strbuf *sb, const guard_fact *fact);
const char *guard_rel_name(guard_rel rel);

#endif
