/* Writing the IR as HLO text that XLA's own parser accepts. Printing is deterministic, so
 * print(parse(print(parse(x)))) == print(parse(x)). */
#ifndef HLO_PRINT_H
#define HLO_PRINT_H
#include "ir.h"
#include "strbuf.h"

/* The whole module: header with a regenerated entry_computation_layout, then computations
 * callees first, the entry marked ENTRY. */
void hlo_print_module(hlo_strbuf *sb, const hlo_module *module);
/* The same as a malloc'd string (the caller frees it). */
char *hlo_module_to_text(const hlo_module *module);
/* One instruction, "%name = shape opcode(%a, %b), attr=..." without ROOT or indentation. */
void hlo_print_instr(hlo_strbuf *sb, const hlo_instr *instr);
/* A constant's value as it goes between constant( and ): 2.5, {1, 2}, { {1, 2}, {3, 4} },
 * (1, {2, 3}) for tuples. Floats print with the fewest digits that read back to the same
 * bits; pred scalars print true/false and pred arrays 0/1, as XLA prints them. */
void hlo_print_literal(hlo_strbuf *sb, const hlo_literal *literal);

/* The shortest decimal text that reads back (strtof, and strtod then rounding) to exactly
 * value; inf, -inf, nan, -nan, and nan(0x..) for a NaN with a non-default payload. */
void hlo_print_f32(hlo_strbuf *sb, float value);
void hlo_print_f64(hlo_strbuf *sb, double value);

#endif
