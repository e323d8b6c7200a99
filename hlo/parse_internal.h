/* Shared by the parser's files; not part of the library's interface.
 *   parse.c          modules, computations, instructions, name resolution, entry points
 *   parse_util.c     located errors, token steps, numbers, raw values
 *   parse_shape.c    shapes and layouts
 *   parse_attrs.c    instruction attributes, typed and raw
 *   parse_literal.c  constants and the filler for elided ones
 *   parse_names.c    the name -> pointer hash map */
#ifndef HLO_PARSE_INTERNAL_H
#define HLO_PARSE_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hlo.h"
#include "lex_internal.h"

/* A stretch of the input text. */
typedef struct hlo_span {
  size_t pos, len;
} hlo_span;

/* Names to pointers, open addressing with linear probing. Keys are NUL-terminated strings
 * that outlive the map (arena copies); lookups take a span of the input. */
typedef struct hlo_name_slot {
  const char *key;
  size_t len;
  uint64_t hash;
  void *value;
} hlo_name_slot;

typedef struct hlo_name_map {
  hlo_name_slot *slots;
  size_t mask, count; /* capacity is mask + 1, a power of two */
} hlo_name_map;

void hlo_names_init(hlo_name_map *map);
void hlo_names_free(hlo_name_map *map);
void *hlo_names_get(const hlo_name_map *map, const char *key, size_t len);
/* Adds key -> value unless key is there already; returns the value now stored under key,
 * or NULL when memory runs out (value must not be NULL). */
void *hlo_names_put(hlo_name_map *map, const char *key, size_t len, void *value);
uint64_t hlo_names_hash(const char *key, size_t len);

/* A computation named by an attribute, resolved once the whole module has been read. */
typedef struct hlo_comp_ref {
  hlo_instr *instr;
  int slot; /* index into instr->called */
  hlo_span name;
} hlo_comp_ref;

/* What one instruction's attributes collect before they are copied into it. */
typedef struct hlo_called {
  hlo_comp *comp;  /* an inline body, already parsed */
  hlo_span name;   /* otherwise the name to look up later */
  int role;        /* its place in instr->called: condition before body whatever the text's
                      order (see ir.h); 2 for attributes that keep the text's order */
} hlo_called;

typedef struct hlo_attr_sink {
  int called_count, called_cap;
  hlo_called *called;
  int raw_count, raw_cap;
  hlo_raw_attr *raw;
} hlo_attr_sink;

typedef struct hlo_parser {
  hlo_lexer lx;
  const char *filename;
  hlo_diag *diag;
  hlo_module *module;
  hlo_arena *arena;
  hlo_name_map comps;
  hlo_comp_ref *comp_refs;
  int comp_ref_count, comp_ref_cap;
  hlo_span *operands; /* operand names of the instruction being read */
  int operand_cap;
  int64_t *ints;      /* an integer list being read */
  int int_cap;
  int depth;          /* inline computations and tuple shapes being read, for a bound */
  /* Where the instructions' line and column are counted up to, so each is found from the
   * last one instead of from the start (parse.c: locate). */
  size_t loc_pos, loc_line_start;
  int loc_line;
  /* Where dimension numbers are read when their allocation failed: the parse still fails
   * (hlo_p_oom), but the attribute reader needs somewhere to write. */
  union {
    hlo_dot_dims dot;
    hlo_gather_dims gather;
    hlo_scatter_dims scatter;
  } lost;
} hlo_parser;

/* Most nesting of tuple shapes, tuple constants and inline computations, so deep input is an
 * error instead of a stack overflow. */
enum { HLO_PARSE_MAX_DEPTH = 64 };

/* parse_util.c. Errors: each records "FILE:LINE:COL: error: ..." (the first one wins) and returns false. */
bool hlo_p_error(hlo_parser *p, size_t pos, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* "expected WHAT, found <the current token>", or the lexer's own message. */
bool hlo_p_expected(hlo_parser *p, const char *what);
/* Reports a failed raw scan or comment (lx->error). */
bool hlo_p_lex_error(hlo_parser *p);
/* Out of memory: HLO_ERR_INTERNAL "FILE: error: out of memory parsing", false. */
bool hlo_p_oom(hlo_parser *p);

void hlo_p_next(hlo_parser *p);
bool hlo_p_accept(hlo_parser *p, hlo_tok kind);
bool hlo_p_expect(hlo_parser *p, hlo_tok kind, const char *what);
/* Whether the current token is a name spelled exactly word. */
bool hlo_p_is_word(const hlo_parser *p, const char *word);
/* The kind of the token after the current one, without moving. */
hlo_tok hlo_p_peek(const hlo_parser *p);
const char *hlo_p_text(const hlo_parser *p, hlo_span span);
hlo_span hlo_p_tok_span(const hlo_parser *p);
/* NULL (after hlo_p_oom) when memory runs out. */
char *hlo_p_strdup(hlo_parser *p, hlo_span span);

/* Numbers: the current token must be a NUMBER; it is converted exactly or it is an error. */
bool hlo_p_int(hlo_parser *p, int64_t *out);
bool hlo_p_double(hlo_parser *p, double *out);
/* Converts text[pos, pos+len) exactly; false (no message) when it is not a whole number. */
bool hlo_p_convert_int(const char *text, size_t pos, size_t len, int64_t *out);

/* Reads one raw value starting right after the current token (which must be the '=' or
 * bracket before it), then moves to the token after the value. */
bool hlo_p_raw_value(hlo_parser *p, int stop, hlo_span *out);

/* Grows the array *items_ptr (a T **, passed as void *) of *cap items to hold needed;
 * false, the array as it was, when memory runs out. */
bool hlo_p_grow(void *items_ptr, int *cap, int needed, size_t item_size);

/* parse_shape.c: a shape (array with dims and layout, tuple, token). */
bool hlo_p_shape(hlo_parser *p, hlo_shape *out);

/* parse_literal.c: the payload of constant(...), read from just after the '(' up to the
 * matching ')' (left as the current token). */
bool hlo_p_literal(hlo_parser *p, const hlo_shape *shape, const char *instr_name,
                   hlo_literal **out);

/* parse_attrs.c: one `name=value` attribute; the current token is the name. */
bool hlo_p_attribute(hlo_parser *p, hlo_instr *instr, hlo_attr_sink *sink);
/* Header or computation attributes: only kept raw. */
bool hlo_p_raw_attribute(hlo_parser *p, hlo_span *name, hlo_span *value);
void hlo_sink_free(hlo_attr_sink *sink);

/* parse.c: an inline computation `{ ... }` used as an attribute value; the current token is
 * the '{'. */
bool hlo_p_inline_comp(hlo_parser *p, const hlo_instr *owner, const char *attr, hlo_comp **out);

#endif
