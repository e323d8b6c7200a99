#include "lex_internal.h"

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }

void hlo_lex_init(hlo_lexer *lx, const char *text, size_t begin, size_t end) {
  lx->text = text;
  lx->pos = begin;
  lx->end = end;
  lx->error = NULL;
  lx->error_pos = begin;
  hlo_lex_next(lx);
}

static bool fail(hlo_lexer *lx, size_t pos, const char *message) {
  lx->error = message;
  lx->error_pos = pos;
  return false;
}

bool hlo_lex_skip_space(hlo_lexer *lx) {
  const char *t = lx->text;
  size_t i = lx->pos, end = lx->end;
  for (;;) {
    while (i < end && is_space(t[i])) i++;
    if (i + 1 < end && t[i] == '/' && t[i + 1] == '/') {
      while (i < end && t[i] != '\n') i++;
    } else if (i + 1 < end && t[i] == '/' && t[i + 1] == '*') {
      size_t open = i;
      i += 2;
      while (i + 1 < end && !(t[i] == '*' && t[i + 1] == '/')) i++;
      if (i + 1 >= end) {
        lx->pos = end;
        return fail(lx, open, "unterminated /* comment");
      }
      i += 2;
    } else {
      break;
    }
  }
  lx->pos = i;
  return true;
}

char hlo_lex_peek_char(hlo_lexer *lx) {
  size_t saved = lx->pos;
  const char *saved_error = lx->error;
  size_t saved_error_pos = lx->error_pos;
  char c = 0;
  if (hlo_lex_skip_space(lx) && lx->pos < lx->end) c = lx->text[lx->pos];
  lx->pos = saved;
  lx->error = saved_error;
  lx->error_pos = saved_error_pos;
  return c;
}

/* Past a "string" that starts at i: the index after the closing quote, or 0 when it never
 * closes (the caller reports that; 0 cannot be a real answer). */
static size_t skip_string(const char *t, size_t i, size_t end) {
  for (i++; i < end; i++) {
    if (t[i] == '\\') i++;
    else if (t[i] == '"') return i + 1;
  }
  return 0;
}

static size_t lex_name(const char *t, size_t i, size_t end) {
  while (i < end) {
    char c = t[i];
    if (is_alnum(c) || c == '.') i++;
    else if (c == '-' && !(i + 1 < end && t[i + 1] == '>')) i++; /* "a->b" is a name, an arrow */
    else break;
  }
  return i;
}

/* Numbers are read loosely (3x3, 1e-05, 0x7f, 2.5 all come out as one token) and checked by
 * whoever converts them: that is where the right message can be given. */
static size_t lex_number(const char *t, size_t i, size_t end) {
  size_t first = i;
  if (t[i] == '-') i++;
  while (i < end) {
    char c = t[i];
    if (is_alnum(c) || c == '.') i++;
    else if ((c == '-' || c == '+') && i > first && (t[i - 1] == 'e' || t[i - 1] == 'E') &&
             i + 1 < end && is_digit(t[i + 1]))
      i++;
    else break;
  }
  return i;
}

static hlo_tok set(hlo_lexer *lx, hlo_tok kind, size_t start, size_t pos, size_t len, size_t next) {
  lx->tok.kind = kind;
  lx->tok.start = start;
  lx->tok.pos = pos;
  lx->tok.len = len;
  lx->pos = next;
  return kind;
}

static hlo_tok error_token(hlo_lexer *lx, size_t at, const char *message) {
  fail(lx, at, message);
  return set(lx, HLO_TOK_ERROR, at, at, 0, lx->end);
}

hlo_tok hlo_lex_next(hlo_lexer *lx) {
  if (!hlo_lex_skip_space(lx)) return set(lx, HLO_TOK_ERROR, lx->error_pos, lx->error_pos, 0, lx->end);
  const char *t = lx->text;
  size_t i = lx->pos, end = lx->end;
  if (i >= end) return set(lx, HLO_TOK_EOF, end, end, 0, end);
  char c = t[i];
  char next = i + 1 < end ? t[i + 1] : 0;
  switch (c) {
    case '(': return set(lx, HLO_TOK_LPAREN, i, i, 1, i + 1);
    case ')': return set(lx, HLO_TOK_RPAREN, i, i, 1, i + 1);
    case '{': return set(lx, HLO_TOK_LBRACE, i, i, 1, i + 1);
    case '}': return set(lx, HLO_TOK_RBRACE, i, i, 1, i + 1);
    case '[': return set(lx, HLO_TOK_LBRACKET, i, i, 1, i + 1);
    case ']': return set(lx, HLO_TOK_RBRACKET, i, i, 1, i + 1);
    case ',': return set(lx, HLO_TOK_COMMA, i, i, 1, i + 1);
    case ':': return set(lx, HLO_TOK_COLON, i, i, 1, i + 1);
    case '=': return set(lx, HLO_TOK_EQUAL, i, i, 1, i + 1);
    case '?': return set(lx, HLO_TOK_QUESTION, i, i, 1, i + 1);
    case '<':
      if (next == '=') return set(lx, HLO_TOK_LEQ, i, i, 2, i + 2);
      break;
    case '-':
      if (next == '>') return set(lx, HLO_TOK_ARROW, i, i, 2, i + 2);
      if (is_digit(next)) {
        size_t stop = lex_number(t, i, end);
        return set(lx, HLO_TOK_NUMBER, i, i, stop - i, stop);
      }
      break;
    case '"': {
      size_t stop = skip_string(t, i, end);
      if (!stop) return error_token(lx, i, "unterminated string");
      return set(lx, HLO_TOK_STRING, i, i + 1, stop - i - 2, stop);
    }
    case '%':
      if (i + 1 < end && is_alpha(next)) {
        size_t stop = lex_name(t, i + 1, end);
        return set(lx, HLO_TOK_NAME, i, i + 1, stop - i - 1, stop);
      }
      return error_token(lx, i, "expected a name after '%'");
    default:
      if (is_alpha(c)) {
        size_t stop = lex_name(t, i, end);
        return set(lx, HLO_TOK_NAME, i, i, stop - i, stop);
      }
      if (is_digit(c)) {
        size_t stop = lex_number(t, i, end);
        return set(lx, HLO_TOK_NUMBER, i, i, stop - i, stop);
      }
      break;
  }
  return error_token(lx, i, "unexpected character");
}

static char closer_of(char open) { return open == '(' ? ')' : open == '[' ? ']' : '}'; }

enum { RAW_MAX_DEPTH = 256 };

bool hlo_lex_raw(hlo_lexer *lx, int stop, size_t *begin, size_t *end_out) {
  const char *t = lx->text;
  size_t i = lx->pos, end = lx->end;
  while (i < end && (t[i] == ' ' || t[i] == '\t')) i++;
  *begin = i;
  char opens[RAW_MAX_DEPTH];
  size_t open_at[RAW_MAX_DEPTH];
  int depth = 0;
  while (i < end) {
    char c = t[i];
    char next = i + 1 < end ? t[i + 1] : 0;
    if (c == '"') {
      size_t after = skip_string(t, i, end);
      if (!after) {
        lx->pos = end;
        return fail(lx, i, "unterminated string");
      }
      i = after;
      continue;
    }
    if (c == '/' && (next == '/' || next == '*')) {
      if (depth == 0) break; /* a comment after the value is not part of it */
      lx->pos = i;
      if (!hlo_lex_skip_space(lx)) return false;
      i = lx->pos;
      continue;
    }
    if (c == '{' || c == '(' || c == '[') {
      if (depth == RAW_MAX_DEPTH) return fail(lx, i, "brackets nested too deeply");
      opens[depth] = c;
      open_at[depth++] = i;
    } else if (c == '}' || c == ')' || c == ']') {
      if (depth == 0) break; /* closes something the value sits in */
      if (c != closer_of(opens[depth - 1])) {
        lx->pos = i;
        return fail(lx, i, opens[depth - 1] == '{'   ? "mismatched bracket: expected '}'"
                           : opens[depth - 1] == '(' ? "mismatched bracket: expected ')'"
                                                     : "mismatched bracket: expected ']'");
      }
      depth--;
    } else if (depth == 0 && ((c == ',' && (stop & HLO_RAW_STOP_COMMA)) ||
                              (c == '\n' && (stop & HLO_RAW_STOP_NEWLINE)))) {
      break;
    }
    i++;
  }
  if (depth > 0) {
    lx->pos = end;
    return fail(lx, open_at[depth - 1], opens[depth - 1] == '{'   ? "unclosed '{'"
                                        : opens[depth - 1] == '(' ? "unclosed '('"
                                                                  : "unclosed '['");
  }
  lx->pos = i;
  while (i > *begin && is_space(t[i - 1])) i--;
  *end_out = i;
  return true;
}

void hlo_lex_line_col(const char *text, size_t pos, int *line, int *col) {
  int l = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < pos; i++) {
    if (text[i] == '\n') {
      l++;
      line_start = i + 1;
    }
  }
  *line = l;
  *col = (int)(pos - line_start) + 1;
}
