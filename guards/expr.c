/* Polynomial arithmetic in canonical form. Terms are kept sorted by (degree, symbols), so
 * merging like terms is a sorted merge and equality is a memberwise compare. */
#include "guards.h"

#include <string.h>

static int term_order(const guard_term *a, const guard_term *b) {
  if (a->degree != b->degree) return a->degree < b->degree ? -1 : 1;
  for (int i = 0; i < a->degree; i++)
    if (a->syms[i] != b->syms[i]) return a->syms[i] < b->syms[i] ? -1 : 1;
  return 0;
}

/* Adds term t into the sorted expression e (merging a like term); false when full. */
static bool insert_term(guard_expr *e, const guard_term *t) {
  if (t->coeff == 0) return true;
  int at = 0;
  while (at < e->count && term_order(&e->terms[at], t) < 0) at++;
  if (at < e->count && term_order(&e->terms[at], t) == 0) {
    int64_t sum;
    if (__builtin_add_overflow(e->terms[at].coeff, t->coeff, &sum)) return false;
    if (sum != 0) {
      e->terms[at].coeff = sum;
      return true;
    }
    memmove(&e->terms[at], &e->terms[at + 1], (size_t)(e->count - at - 1) * sizeof(guard_term));
    e->count--;
    return true;
  }
  if (e->count == GUARD_MAX_TERMS) return false;
  memmove(&e->terms[at + 1], &e->terms[at], (size_t)(e->count - at) * sizeof(guard_term));
  e->terms[at] = *t;
  e->count++;
  return true;
}

guard_expr guard_expr_const(int64_t value) {
  guard_expr e = {0};
  guard_term t = {.coeff = value, .degree = 0};
  insert_term(&e, &t);
  return e;
}

guard_expr guard_expr_sym(int sym) {
  guard_expr e = {0};
  guard_term t = {.coeff = 1, .degree = 1, .syms = {(int16_t)sym}};
  insert_term(&e, &t);
  return e;
}

bool guard_expr_add(guard_expr a, guard_expr b, guard_expr *out) {
  for (int i = 0; i < b.count; i++)
    if (!insert_term(&a, &b.terms[i])) return false;
  *out = a;
  return true;
}

/* The product of two terms, symbols merged in ascending order. */
static bool term_mul(const guard_term *x, const guard_term *y, guard_term *out) {
  if (x->degree + y->degree > GUARD_MAX_DEGREE) return false;
  if (__builtin_mul_overflow(x->coeff, y->coeff, &out->coeff)) return false;
  int i = 0, j = 0, k = 0;
  while (i < x->degree || j < y->degree) {
    bool take_x = j == y->degree || (i < x->degree && x->syms[i] <= y->syms[j]);
    out->syms[k++] = take_x ? x->syms[i++] : y->syms[j++];
  }
  out->degree = k;
  return true;
}

bool guard_expr_mul(guard_expr a, guard_expr b, guard_expr *out) {
  guard_expr product = {0};
  for (int i = 0; i < a.count; i++)
    for (int j = 0; j < b.count; j++) {
      guard_term t;
      if (!term_mul(&a.terms[i], &b.terms[j], &t) || !insert_term(&product, &t)) return false;
    }
  *out = product;
  return true;
}

bool guard_expr_scale(guard_expr a, int64_t k, guard_expr *out) {
  return guard_expr_mul(a, guard_expr_const(k), out);
}

bool guard_expr_div_exact(guard_expr a, int64_t k, guard_expr *out) {
  if (k <= 0) return false;
  for (int i = 0; i < a.count; i++) {
    if (a.terms[i].coeff % k != 0) return false;
    a.terms[i].coeff /= k;
  }
  *out = a;
  return true;
}

bool guard_expr_equal(const guard_expr *a, const guard_expr *b) {
  if (a->count != b->count) return false;
  for (int i = 0; i < a->count; i++)
    if (a->terms[i].coeff != b->terms[i].coeff || term_order(&a->terms[i], &b->terms[i]) != 0) return false;
  return true;
}

bool guard_expr_is_const(const guard_expr *a, int64_t *value) {
  if (a->count == 0) {
    if (value) *value = 0;
    return true;
  }
  if (a->count == 1 && a->terms[0].degree == 0) {
    if (value) *value = a->terms[0].coeff;
    return true;
  }
  return false;
}

int guard_expr_as_sym(const guard_expr *a) {
  if (a->count == 1 && a->terms[0].degree == 1 && a->terms[0].coeff == 1) return a->terms[0].syms[0];
  return -1;
}

bool guard_expr_eval(const guard_expr *a, const int64_t *bindings, int64_t *value) {
  int64_t sum = 0;
  for (int i = 0; i < a->count; i++) {
    int64_t term = a->terms[i].coeff;
    for (int d = 0; d < a->terms[i].degree; d++)
      if (__builtin_mul_overflow(term, bindings[a->terms[i].syms[d]], &term)) return false;
    if (__builtin_add_overflow(sum, term, &sum)) return false;
  }
  *value = sum;
  return true;
}

bool guard_expr_substitute(const guard_expr *a, int from, const guard_expr *to, guard_expr *out) {
  guard_expr result = {0};
  for (int i = 0; i < a->count; i++) {
    const guard_term *t = &a->terms[i];
    guard_expr term = guard_expr_const(t->coeff);
    for (int d = 0; d < t->degree; d++) {
      guard_expr factor = t->syms[d] == from ? *to : guard_expr_sym(t->syms[d]);
      if (!guard_expr_mul(term, factor, &term)) return false;
    }
    if (!guard_expr_add(result, term, &result)) return false;
  }
  *out = result;
  return true;
}

void guard_expr_print(hlo_strbuf *sb, const guard_expr *a) {
  if (a->count == 0) {
    hlo_sb_puts(sb, "0");
    return;
  }
  /* Highest degree first reads the way people write polynomials. */
  for (int i = a->count - 1; i >= 0; i--) {
    const guard_term *t = &a->terms[i];
    int64_t coeff = t->coeff;
    if (i != a->count - 1) {
      hlo_sb_puts(sb, coeff < 0 ? " - " : " + ");
      if (coeff < 0) coeff = -coeff;
    } else if (coeff < 0 && t->degree > 0 && coeff == -1) {
      hlo_sb_puts(sb, "-");
      coeff = 1;
    }
    bool wrote = false;
    if (coeff != 1 || t->degree == 0) {
      hlo_sb_printf(sb, "%lld", (long long)coeff);
      wrote = true;
    }
    for (int d = 0; d < t->degree; d++) {
      hlo_sb_printf(sb, "%ss%d", wrote ? "*" : "", t->syms[d]);
      wrote = true;
    }
  }
}
