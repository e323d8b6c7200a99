/* The parser's toolkit, shared by its files: located errors, token steps, exact number
 * conversion, raw values, growable arrays. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse_internal.h"

bool hlo_p_error(hlo_parser *p, size_t pos, const char *format, ...) {
  if (p->diag->status != HLO_OK) return false;
  char message[768];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  int line, col;
  hlo_lex_line_col(p->lx.text, pos, &line, &col);
  hlo_diag_set(p->diag, HLO_ERR_INPUT, "%s:%d:%d: error: %s", p->filename, line, col, message);
  return false;
}

bool hlo_p_oom(hlo_parser *p) {
  hlo_diag_set(p->diag, HLO_ERR_INTERNAL, "%s: error: out of memory parsing", p->filename);
  return false;
}

bool hlo_p_lex_error(hlo_parser *p) {
  return hlo_p_error(p, p->lx.error_pos, "%s", p->lx.error ? p->lx.error : "bad input");
}

bool hlo_p_expected(hlo_parser *p, const char *what) {
  const hlo_token *tok = &p->lx.tok;
  if (tok->kind == HLO_TOK_ERROR) return hlo_p_lex_error(p);
  if (tok->kind == HLO_TOK_EOF) return hlo_p_error(p, tok->start, "expected %s, found end of input", what);
  size_t len = tok->pos + tok->len - tok->start + (tok->kind == HLO_TOK_STRING);
  const char *more = len > 40 ? "..." : "";
  return hlo_p_error(p, tok->start, "expected %s, found '%.*s%s'", what, (int)(len > 40 ? 40 : len),
                     p->lx.text + tok->start, more);
}

void hlo_p_next(hlo_parser *p) { hlo_lex_next(&p->lx); }

bool hlo_p_accept(hlo_parser *p, hlo_tok kind) {
  if (p->lx.tok.kind != kind) return false;
  hlo_lex_next(&p->lx);
  return true;
}

bool hlo_p_expect(hlo_parser *p, hlo_tok kind, const char *what) {
  return hlo_p_accept(p, kind) || hlo_p_expected(p, what);
}

bool hlo_p_is_word(const hlo_parser *p, const char *word) {
  const hlo_token *tok = &p->lx.tok;
  size_t len = strlen(word);
  return tok->kind == HLO_TOK_NAME && tok->len == len && tok->start == tok->pos &&
         memcmp(p->lx.text + tok->pos, word, len) == 0;
}

hlo_tok hlo_p_peek(const hlo_parser *p) {
  hlo_lexer copy = p->lx;
  return hlo_lex_next(&copy);
}

const char *hlo_p_text(const hlo_parser *p, hlo_span span) { return p->lx.text + span.pos; }

hlo_span hlo_p_tok_span(const hlo_parser *p) {
  hlo_span span = {p->lx.tok.pos, p->lx.tok.len};
  return span;
}

char *hlo_p_strdup(hlo_parser *p, hlo_span span) {
  char *copy = hlo_arena_strndup(p->arena, p->lx.text + span.pos, span.len);
  if (!copy) hlo_p_oom(p);
  return copy;
}

bool hlo_p_grow(void *items_ptr, int *cap, int needed, size_t item_size) {
  if (needed <= *cap) return true;
  int grown_cap = *cap ? *cap : 8;
  while (grown_cap < needed) grown_cap *= 2;
  void *items;
  memcpy(&items, items_ptr, sizeof items);
  void *grown = hlo_realloc(items, (size_t)grown_cap * item_size);
  if (!grown) return false;
  memcpy(items_ptr, &grown, sizeof grown);
  *cap = grown_cap;
  return true;
}

bool hlo_p_convert_int(const char *text, size_t pos, size_t len, int64_t *out) {
  const char *s = text + pos;
  bool negative = len > 0 && s[0] == '-';
  size_t i = negative;
  if (i == len) return false;
  uint64_t magnitude = 0;
  for (; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    unsigned digit = (unsigned)(s[i] - '0');
    if (magnitude > (UINT64_MAX - digit) / 10) return false;
    magnitude = magnitude * 10 + digit;
  }
  if (magnitude > (uint64_t)INT64_MAX + negative) return false;
  *out = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
  return true;
}

bool hlo_p_int(hlo_parser *p, int64_t *out) {
  const hlo_token *tok = &p->lx.tok;
  if (tok->kind != HLO_TOK_NUMBER) return hlo_p_expected(p, "an integer");
  if (!hlo_p_convert_int(p->lx.text, tok->pos, tok->len, out)) {
    return hlo_p_error(p, tok->start, "'%.*s' is not an integer in the range of s64", (int)tok->len,
                       p->lx.text + tok->pos);
  }
  hlo_p_next(p);
  return true;
}

bool hlo_p_double(hlo_parser *p, double *out) {
  const hlo_token *tok = &p->lx.tok;
  if (tok->kind != HLO_TOK_NUMBER) return hlo_p_expected(p, "a number");
  char *end = NULL;
  /* The buffer is NUL-terminated, and the token must be all of what strtod reads. strtod
   * follows the C locale's decimal point: latch never calls setlocale, and a program that
   * does should keep LC_NUMERIC at "C". */
  *out = strtod(p->lx.text + tok->pos, &end);
  if (end != p->lx.text + tok->pos + tok->len)
    return hlo_p_error(p, tok->start, "'%.*s' is not a number", (int)tok->len, p->lx.text + tok->pos);
  hlo_p_next(p);
  return true;
}

bool hlo_p_raw_value(hlo_parser *p, int stop, hlo_span *out) {
  size_t begin, end;
  if (!hlo_lex_raw(&p->lx, stop, &begin, &end)) return hlo_p_lex_error(p);
  out->pos = begin;
  out->len = end - begin;
  hlo_p_next(p);
  return true;
}
