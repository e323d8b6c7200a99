/* Reading HLO text as XLA prints it (see shared/HLO-TEXT.md) into the IR of ir.h.
 *
 * What a parsed module looks like:
 * - Attributes ir.h has a field for are decoded into it; every other one is in raw_attrs with
 *   its value text exactly as written. Header attributes go to module->raw_attrs, except
 *   entry_computation_layout (the printer derives it).
 * - instr->called holds computations in attribute order, except that fixed roles keep fixed
 *   places whatever the text's order: while (condition, body), select-and-scatter (select,
 *   scatter), conditional (true, false). An inline body `to_apply={...}` becomes a
 *   computation named "<instruction>.<attribute>" (with ".N" added if that is taken).
 * - Operands may be used before their definition; instructions are sorted operands first,
 *   computations callees first. Without ROOT the last instruction is the root; without ENTRY
 *   the last top-level computation is the entry; without HloModule the module is named after
 *   its entry.
 * - dot, gather and scatter always have their dims structs; a gather or scatter that does not
 *   write index_vector_dim gets the rank of its indices. */
#ifndef HLO_PARSE_H
#define HLO_PARSE_H
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "ir.h"

/* Parses one module from text (which need not be NUL-terminated). filename is used in
 * messages. NULL on error, with diag->message "FILE:LINE:COL: error: ..." and diag->status
 * HLO_ERR_INPUT. */
hlo_module *hlo_parse_module(const char *text, size_t len, const char *filename, hlo_diag *diag);

/* Parses a file that may hold several modules separated by a line `// -----`; returns the
 * count (>= 1) and a malloc'd array of modules in *modules (free each module, then the
 * array), or -1 with diag. */
int hlo_parse_modules(const char *text, size_t len, const char *filename, hlo_module ***modules,
                      hlo_diag *diag);

/* Reads a whole file and parses it (multi-module aware). Same returns. */
int hlo_parse_file(const char *path, hlo_module ***modules, hlo_diag *diag);

/* Deterministic filler for elided constants `constant({...})`: fills literal->data (already
 * allocated for its shape) from seed, recursing into tuple elements. Values are small and
 * finite: floats in [-1, 1), integers in [0, 8), pred alternating. The parser seeds it with
 * hlo_fill_seed(instruction name). Literals without data (uncomputable types) are left alone.
 * Elided constants over 1 GiB are a parse error rather than a huge allocation. */
void hlo_fill_elided(hlo_literal *literal, uint64_t seed);
/* The seed the parser uses for an instruction's elided constant: a hash of its name. */
uint64_t hlo_fill_seed(const char *name);

#endif
