/* Guards in words, for logs and failure messages. */
#include <inttypes.h>
#include <string.h>

#include "guards.h"

const char *guard_rel_name(guard_rel rel) {
  static const char *const names[] = {"==", "!=", "<", "<=", ">", ">="};
  return (unsigned)rel < sizeof names / sizeof names[0] ? names[rel] : "?";
}

static void print_static(hlo_strbuf *sb, const guard_static *value) {
  switch (value->kind) {
  case GUARD_STATIC_INT: hlo_sb_printf(sb, "%" PRId64, value->i); break;
  case GUARD_STATIC_FLOAT: hlo_sb_printf(sb, "%.17g", value->f); break;
  case GUARD_STATIC_BYTES: {
    const unsigned char *bytes = value->bytes;
    hlo_sb_printf(sb, "%zu bytes \"", value->len);
    for (size_t i = 0; i < value->len && i < 32; i++)
      hlo_sb_printf(sb, bytes[i] >= 32 && bytes[i] < 127 && bytes[i] != '"' ? "%c" : "\\x%02x", bytes[i]);
    hlo_sb_puts(sb, value->len > 32 ? "...\"" : "\"");
    break;
  }
  }
}

void guard_fact_print(hlo_strbuf *sb, const guard_fact *fact) {
  switch (fact->kind) {
  case GUARD_FACT_DTYPE:
    hlo_sb_printf(sb, "input %d dtype == %s", fact->input, hlo_dtype_name((hlo_dtype)fact->value));
    break;
  case GUARD_FACT_RANK: hlo_sb_printf(sb, "input %d rank == %" PRId64, fact->input, fact->value); break;
  case GUARD_FACT_DIM:
    hlo_sb_printf(sb, "input %d dim %d == %" PRId64, fact->input, fact->dim, fact->value);
    break;
  case GUARD_FACT_BIND: hlo_sb_printf(sb, "s%d := input %d dim %d", fact->sym, fact->input, fact->dim); break;
  case GUARD_FACT_DIM_SYM: hlo_sb_printf(sb, "input %d dim %d == s%d", fact->input, fact->dim, fact->sym); break;
  case GUARD_FACT_DEFINE:
    hlo_sb_printf(sb, "s%d := (", fact->sym);
    guard_expr_print(sb, &fact->a);
    hlo_sb_printf(sb, ") / %" PRId64, fact->value);
    break;
  case GUARD_FACT_DEFINE_FLOOR:
    hlo_sb_printf(sb, "s%d := floor((", fact->sym);
    guard_expr_print(sb, &fact->a);
    hlo_sb_printf(sb, ") / %" PRId64 ")", fact->value);
    break;
  case GUARD_FACT_REL:
    guard_expr_print(sb, &fact->a);
    hlo_sb_printf(sb, " %s ", guard_rel_name(fact->rel));
    guard_expr_print(sb, &fact->b);
    break;
  case GUARD_FACT_DIVISIBLE:
  case GUARD_FACT_NOT_DIVISIBLE: {
    bool paren = fact->a.count > 1;
    hlo_sb_puts(sb, paren ? "(" : "");
    guard_expr_print(sb, &fact->a);
    hlo_sb_printf(sb, "%s %% %" PRId64 " %s 0", paren ? ")" : "", fact->value,
                  fact->kind == GUARD_FACT_DIVISIBLE ? "==" : "!=");
    break;
  }
  case GUARD_FACT_STATIC:
    hlo_sb_printf(sb, "static %d == ", fact->static_index);
    print_static(sb, &fact->static_value);
    break;
  }
}

void guard_set_print(const guard_set *set, hlo_strbuf *sb) {
  for (int i = 0; i < guard_set_fact_count(set); i++) {
    guard_fact_print(sb, guard_set_fact(set, i));
    hlo_sb_puts(sb, "\n");
  }
}
