/* Symbolic dimension sizes: small polynomials with integer coefficients over symbols s0, s1,
 * ... (the sizes a trace left symbolic). A reshape multiplies sizes, a concatenate adds them,
 * so sums of products cover what tracing produces; a size that would need a division becomes
 * a new symbol defined by that division (guard_set_define), so expressions stay polynomials
 * and evaluating one is a few multiply-adds.
 *
 * Expressions are values (no allocation) in a canonical form: terms sorted, like terms merged,
 * no zero coefficients. Two expressions are equal exactly when their canonical forms are. */
#ifndef GUARD_EXPR_H
#define GUARD_EXPR_H
#include <stdbool.h>
#include <stdint.h>

#include "hlo/strbuf.h"

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

#endif
