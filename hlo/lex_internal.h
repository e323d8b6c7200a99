/* lex.c: the HLO text lexer: tokens on demand over a byte range of one NUL-terminated buffer.
 * Positions are byte offsets into that buffer; line and column are worked out only when a
 * message needs them, so lexing never counts lines. */
#ifndef HLO_LEX_H
#define HLO_LEX_H
#include <stdbool.h>
#include <stddef.h>

typedef enum hlo_tok {
  HLO_TOK_EOF = 0,
  HLO_TOK_ERROR,  /* lexer->error says what was wrong, at lexer->error_pos */
  HLO_TOK_NAME,   /* [%][A-Za-z_][A-Za-z0-9_.-]*; pos/len leave out the '%' */
  HLO_TOK_NUMBER, /* a digit, or '-' and a digit, then [A-Za-z0-9_.] (and a sign after e/E):
                     the reader decides whether it is an integer or a float */
  HLO_TOK_STRING, /* "...": pos/len cover the contents without the quotes, escapes as written */
  HLO_TOK_LPAREN, HLO_TOK_RPAREN, HLO_TOK_LBRACE, HLO_TOK_RBRACE,
  HLO_TOK_LBRACKET, HLO_TOK_RBRACKET,
  HLO_TOK_COMMA, HLO_TOK_COLON, HLO_TOK_EQUAL,
  HLO_TOK_ARROW,    /* -> */
  HLO_TOK_LEQ,      /* <= (bounded dimensions) */
  HLO_TOK_QUESTION, /* ? (unbounded dimensions) */
} hlo_tok;

typedef struct hlo_token {
  hlo_tok kind;
  size_t start;    /* first byte, '%' included: where messages point */
  size_t pos, len; /* the token's text */
} hlo_token;

typedef struct hlo_lexer {
  const char *text; /* the whole buffer; text[end] is readable (NUL or a later byte) */
  size_t pos;       /* just past the current token */
  size_t end;       /* lexing stops here */
  hlo_token tok;    /* the current token */
  const char *error; /* set with HLO_TOK_ERROR or a failed raw scan */
  size_t error_pos;
} hlo_lexer;

/* Positions the lexer at begin and reads the first token. */
void hlo_lex_init(hlo_lexer *lx, const char *text, size_t begin, size_t end);
/* Reads the next token into lx->tok and returns its kind. */
hlo_tok hlo_lex_next(hlo_lexer *lx);
/* Skips whitespace and comments from lx->pos; false (with lx->error) on an open comment. */
bool hlo_lex_skip_space(hlo_lexer *lx);
/* The next byte after whitespace and comments, without moving; 0 at the end. */
char hlo_lex_peek_char(hlo_lexer *lx);

/* Raw scanning: reads one value as text from lx->pos, balancing {} () [] and treating
 * "strings" as atoms, up to (not including) an unmatched closing bracket, the end, or, at the
 * top level, a comment or whatever the stop flags name. Leading blanks are skipped and
 * trailing whitespace is trimmed. False with lx->error on a mismatched bracket, an unclosed
 * string or bracket. lx->tok is stale afterwards: call hlo_lex_next. */
enum { HLO_RAW_STOP_COMMA = 1, HLO_RAW_STOP_NEWLINE = 2 };
bool hlo_lex_raw(hlo_lexer *lx, int stop, size_t *begin, size_t *end);

/* 1-based line and column of a byte offset. */
void hlo_lex_line_col(const char *text, size_t pos, int *line, int *col);

#endif
