/* Instruction attributes. Those ir.h has a field for are decoded into it; every other one is
 * kept verbatim (name and value text as written) so printing loses nothing. An attribute
 * latch does not know is never an error; a known one with a bad value is. */
#include <stdlib.h>
#include <string.h>

#include "parse_internal.h"

void hlo_sink_free(hlo_attr_sink *sink) {
  free(sink->called);
  free(sink->raw);
  memset(sink, 0, sizeof *sink);
}

static bool add_raw(hlo_parser *p, hlo_attr_sink *sink, hlo_span name, hlo_span value) {
  if (!hlo_p_grow(&sink->raw, &sink->raw_cap, sink->raw_count + 1, sizeof *sink->raw)) return hlo_p_oom(p);
  hlo_raw_attr attr = {hlo_p_strdup(p, name), hlo_p_strdup(p, value)};
  if (!attr.name || !attr.value) return false;
  sink->raw[sink->raw_count++] = attr;
  return true;
}

/* Attributes that name a computation with a fixed role go to a fixed place in
 * instr->called (while: condition, body; select-and-scatter: select, scatter; conditional:
 * true, false), since the text may write them in either order. */
static int role_of(const char *name, size_t len) {
  static const char *const first[] = {"condition", "select", "true_computation"};
  static const char *const second[] = {"body", "scatter", "false_computation"};
  for (int i = 0; i < 3; i++) {
    if (strlen(first[i]) == len && memcmp(name, first[i], len) == 0) return 0;
    if (strlen(second[i]) == len && memcmp(name, second[i], len) == 0) return 1;
  }
  return 2;
}

static bool add_called(hlo_parser *p, hlo_attr_sink *sink, hlo_comp *comp, hlo_span name, hlo_span attr) {
  if (!hlo_p_grow(&sink->called, &sink->called_cap, sink->called_count + 1, sizeof *sink->called))
    return hlo_p_oom(p);
  hlo_called called = {comp, name, role_of(hlo_p_text(p, attr), attr.len)};
  /* insertion keeps equal roles in the text's order */
  int at = sink->called_count++;
  while (at > 0 && sink->called[at - 1].role > called.role) {
    sink->called[at] = sink->called[at - 1];
    at--;
  }
  sink->called[at] = called;
  return true;
}

/* ---- values read as tokens; each starts with the current token on the '=' ---- */

/* '{' [int (',' int)*] '}' */
static bool read_ints(hlo_parser *p, hlo_ints *out) {
  hlo_p_next(p);
  if (!hlo_p_expect(p, HLO_TOK_LBRACE, "'{' to start a list of integers")) return false;
  int count = 0;
  if (!hlo_p_accept(p, HLO_TOK_RBRACE)) {
    for (;;) {
      if (!hlo_p_grow(&p->ints, &p->int_cap, count + 1, sizeof *p->ints)) return hlo_p_oom(p);
      if (!hlo_p_int(p, &p->ints[count])) return false;
      count++;
      if (hlo_p_accept(p, HLO_TOK_RBRACE)) break;
      if (!hlo_p_expect(p, HLO_TOK_COMMA, "',' or '}' in a list of integers")) return false;
    }
  }
  *out = hlo_ints_copy(p->arena, count, p->ints);
  return out->values || hlo_p_oom(p);
}

static bool read_int(hlo_parser *p, int64_t *out) {
  hlo_p_next(p);
  return hlo_p_int(p, out);
}

static bool read_double(hlo_parser *p, double *out) {
  hlo_p_next(p);
  return hlo_p_double(p, out);
}

static bool read_bool(hlo_parser *p, bool *out) {
  hlo_p_next(p);
  if (hlo_p_is_word(p, "true")) *out = true;
  else if (hlo_p_is_word(p, "false")) *out = false;
  else return hlo_p_expected(p, "true or false");
  hlo_p_next(p);
  return true;
}

/* A name from a fixed set; its index in words goes to *out. */
static bool read_word(hlo_parser *p, const char *const *words, int count, const char *what, int *out) {
  hlo_p_next(p);
  for (int i = 0; i < count; i++) {
    if (hlo_p_is_word(p, words[i])) {
      *out = i;
      hlo_p_next(p);
      return true;
    }
  }
  return hlo_p_expected(p, what);
}

static bool read_name(hlo_parser *p, const char **out) {
  hlo_p_next(p);
  if (p->lx.tok.kind != HLO_TOK_NAME) return hlo_p_expected(p, "a name");
  *out = hlo_p_strdup(p, hlo_p_tok_span(p));
  if (!*out) return false;
  hlo_p_next(p);
  return true;
}

/* Undoes the escapes XLA's printer writes in strings (C-style). NULL (after hlo_p_oom) when
 * memory runs out. */
static char *unescape(hlo_parser *p, hlo_span span) {
  const char *s = hlo_p_text(p, span);
  char *out = hlo_arena_alloc(p->arena, span.len + 1);
  if (!out) {
    hlo_p_oom(p);
    return NULL;
  }
  size_t n = 0;
  for (size_t i = 0; i < span.len; i++) {
    char c = s[i];
    if (c != '\\' || i + 1 == span.len) {
      out[n++] = c;
      continue;
    }
    c = s[++i];
    switch (c) {
      case 'n': out[n++] = '\n'; break;
      case 't': out[n++] = '\t'; break;
      case 'r': out[n++] = '\r'; break;
      case 'x': {
        int value = 0, digits = 0;
        while (digits < 2 && i + 1 < span.len) {
          char h = s[i + 1];
          int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (d < 0) break;
          value = value * 16 + d;
          digits++;
          i++;
        }
        out[n++] = (char)value;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          int value = c - '0', digits = 1;
          while (digits < 3 && i + 1 < span.len && s[i + 1] >= '0' && s[i + 1] <= '7') {
            value = value * 8 + (s[++i] - '0');
            digits++;
          }
          out[n++] = (char)value;
        } else {
          out[n++] = c; /* \" \\ \' and anything else stand for themselves */
        }
    }
  }
  out[n] = 0;
  return out;
}

static bool read_string(hlo_parser *p, const char **out) {
  hlo_p_next(p);
  if (p->lx.tok.kind != HLO_TOK_STRING) return hlo_p_expected(p, "a string");
  *out = unescape(p, hlo_p_tok_span(p));
  if (!*out) return false;
  hlo_p_next(p);
  return true;
}

/* One computation: a name, or an inline body '{ ... }'. */
static bool read_one_comp(hlo_parser *p, hlo_instr *instr, hlo_span attr, hlo_attr_sink *sink) {
  hlo_span none = {0, 0};
  if (p->lx.tok.kind == HLO_TOK_LBRACE) {
    hlo_comp *comp = NULL;
    const char *name = hlo_p_strdup(p, attr);
    if (!name || !hlo_p_inline_comp(p, instr, name, &comp)) return false;
    return add_called(p, sink, comp, none, attr);
  }
  if (p->lx.tok.kind != HLO_TOK_NAME) return hlo_p_expected(p, "a computation name or '{'");
  if (!add_called(p, sink, NULL, hlo_p_tok_span(p), attr)) return false;
  hlo_p_next(p);
  return true;
}

static bool read_comp(hlo_parser *p, hlo_instr *instr, hlo_span attr, hlo_attr_sink *sink) {
  hlo_p_next(p);
  return read_one_comp(p, instr, attr, sink);
}

/* '{' [computation (',' computation)*] '}' */
static bool read_comps(hlo_parser *p, hlo_instr *instr, hlo_span attr, hlo_attr_sink *sink) {
  hlo_p_next(p);
  if (!hlo_p_expect(p, HLO_TOK_LBRACE, "'{' to start a list of computations")) return false;
  if (hlo_p_accept(p, HLO_TOK_RBRACE)) return true;
  for (;;) {
    if (!read_one_comp(p, instr, attr, sink)) return false;
    if (hlo_p_accept(p, HLO_TOK_RBRACE)) return true;
    if (!hlo_p_expect(p, HLO_TOK_COMMA, "',' or '}' in a list of computations")) return false;
  }
}

/* slice={[start:limit], [start:limit:stride], ...} */
static bool read_slice(hlo_parser *p, hlo_instr *instr) {
  hlo_p_next(p);
  if (!hlo_p_expect(p, HLO_TOK_LBRACE, "'{' to start the slice")) return false;
  int count = 0;
  if (!hlo_p_accept(p, HLO_TOK_RBRACE)) {
    for (;;) {
      if (!hlo_p_grow(&p->ints, &p->int_cap, 3 * (count + 1), sizeof *p->ints)) return hlo_p_oom(p);
      int64_t *triple = &p->ints[3 * count];
      triple[2] = 1;
      if (!hlo_p_expect(p, HLO_TOK_LBRACKET, "'[' to start a slice dimension")) return false;
      if (!hlo_p_int(p, &triple[0])) return false;
      if (!hlo_p_expect(p, HLO_TOK_COLON, "':' between the slice start and limit")) return false;
      if (!hlo_p_int(p, &triple[1])) return false;
      if (hlo_p_accept(p, HLO_TOK_COLON) && !hlo_p_int(p, &triple[2])) return false;
      if (!hlo_p_expect(p, HLO_TOK_RBRACKET, "']' to end a slice dimension")) return false;
      count++;
      if (hlo_p_accept(p, HLO_TOK_RBRACE)) break;
      if (!hlo_p_expect(p, HLO_TOK_COMMA, "',' or '}' in the slice")) return false;
    }
  }
  /* Spread the (start, limit, stride) triples over the three lists in place. */
  hlo_ints *lists[3] = {&instr->slice_starts, &instr->slice_limits, &instr->slice_strides};
  for (int k = 0; k < 3; k++) {
    lists[k]->values = hlo_arena_alloc(p->arena, sizeof(int64_t) * (size_t)(count ? count : 1));
    if (!lists[k]->values) return hlo_p_oom(p);
    lists[k]->count = count;
    for (int i = 0; i < count; i++) lists[k]->values[i] = p->ints[3 * i + k];
  }
  return true;
}

/* ---- values read as text: window, padding and dim_labels are single words to XLA's lexer
 * (3x3, 1_1x0_2, b01f_01io->b01f), so they are decoded by hand from the raw value ---- */

typedef struct cursor {
  hlo_parser *p;
  const char *text;
  size_t pos, end;
} cursor;

static bool cursor_int(cursor *c, int64_t *out, const char *what) {
  size_t start = c->pos;
  if (c->pos < c->end && c->text[c->pos] == '-') c->pos++;
  while (c->pos < c->end && c->text[c->pos] >= '0' && c->text[c->pos] <= '9') c->pos++;
  if (!hlo_p_convert_int(c->text, start, c->pos - start, out))
    return hlo_p_error(c->p, start, "expected an integer in %s", what);
  return true;
}

static bool cursor_at(const cursor *c, char ch) { return c->pos < c->end && c->text[c->pos] == ch; }

/* Dimension items separated by 'x', each of `parts` integers separated by '_' (the last
 * `optional` of them may be left out). Returns the item count in *rank. */
static bool read_x_list(cursor *c, int parts, int optional, int64_t values[][3], int *rank,
                        const char *what) {
  int n = 0;
  for (;;) {
    if (n == HLO_MAX_RANK) return hlo_p_error(c->p, c->pos, "%s has more than %d dimensions", what, HLO_MAX_RANK);
    for (int k = 0; k < parts; k++) {
      if (k > 0) {
        if (!cursor_at(c, '_')) {
          if (k >= parts - optional) break;
          return hlo_p_error(c->p, c->pos, "expected '_' in %s", what);
        }
        c->pos++;
      }
      if (!cursor_int(c, &values[n][k], what)) return false;
    }
    n++;
    if (!cursor_at(c, 'x')) break;
    c->pos++;
  }
  *rank = n;
  return true;
}

/* padding=low_high[_interior]x... */
static bool read_padding(hlo_parser *p, hlo_instr *instr) {
  hlo_span value;
  if (!hlo_p_raw_value(p, HLO_RAW_STOP_COMMA | HLO_RAW_STOP_NEWLINE, &value)) return false;
  hlo_padding *padding = hlo_arena_alloc(p->arena, sizeof *padding);
  if (!padding) return hlo_p_oom(p);
  cursor c = {p, p->lx.text, value.pos, value.pos + value.len};
  if (value.len) {
    int64_t items[HLO_MAX_RANK][3] = {{0}};
    if (!read_x_list(&c, 3, 1, items, &padding->rank, "padding")) return false;
    if (c.pos != c.end) return hlo_p_error(p, c.pos, "unexpected text in padding");
    for (int i = 0; i < padding->rank; i++) {
      padding->low[i] = items[i][0];
      padding->high[i] = items[i][1];
      padding->interior[i] = items[i][2];
    }
  }
  instr->padding = padding;
  return true;
}

/* window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=.. rhs_reversal=0x1} */
static bool read_window(hlo_parser *p, hlo_instr *instr) {
  hlo_span value;
  if (!hlo_p_raw_value(p, HLO_RAW_STOP_COMMA | HLO_RAW_STOP_NEWLINE, &value)) return false;
  cursor c = {p, p->lx.text, value.pos, value.pos + value.len};
  if (!cursor_at(&c, '{') || c.end - c.pos < 2 || c.text[c.end - 1] != '}')
    return hlo_p_error(p, value.pos, "expected '{...}' after window=");
  c.pos++;
  c.end--;
  hlo_window *window = hlo_arena_alloc(p->arena, sizeof *window);
  if (!window) return hlo_p_oom(p);
  for (int i = 0; i < HLO_MAX_RANK; i++) {
    hlo_window_dim *d = &window->dims[i];
    d->size = d->stride = d->lhs_dilate = d->rhs_dilate = 1;
  }
  static const char *const keys[] = {"size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"};
  bool have_size = false, have_any = false;
  for (;;) {
    while (c.pos < c.end && (c.text[c.pos] == ' ' || c.text[c.pos] == '\t' || c.text[c.pos] == '\n' || c.text[c.pos] == '\r')) c.pos++;
    if (c.pos >= c.end) break;
    size_t key_pos = c.pos;
    while (c.pos < c.end && c.text[c.pos] != '=' && c.text[c.pos] != ' ') c.pos++;
    int key = -1;
    for (int k = 0; k < 6; k++)
      if (strlen(keys[k]) == c.pos - key_pos && memcmp(c.text + key_pos, keys[k], c.pos - key_pos) == 0) key = k;
    if (key < 0 || !cursor_at(&c, '='))
      return hlo_p_error(p, key_pos, "expected size=, stride=, pad=, lhs_dilate=, rhs_dilate= or rhs_reversal= in window");
    c.pos++;
    int64_t items[HLO_MAX_RANK][3] = {{0}};
    int rank = 0;
    if (!read_x_list(&c, key == 2 ? 2 : 1, 0, items, &rank, "window")) return false;
    if (have_any && rank != window->rank)
      return hlo_p_error(p, key_pos, "window %s has %d dimensions, earlier fields have %d", keys[key], rank, window->rank);
    window->rank = rank;
    have_any = true;
    for (int i = 0; i < rank; i++) {
      hlo_window_dim *d = &window->dims[i];
      switch (key) {
        case 0: d->size = items[i][0]; have_size = true; break;
        case 1: d->stride = items[i][0]; break;
        case 2: d->pad_low = items[i][0]; d->pad_high = items[i][1]; break;
        case 3: d->lhs_dilate = items[i][0]; break;
        case 4: d->rhs_dilate = items[i][0]; break;
        default: d->reversal = items[i][0] != 0; break;
      }
    }
    if (c.pos < c.end && c.text[c.pos] != ' ' && c.text[c.pos] != '\t' && c.text[c.pos] != '\n' && c.text[c.pos] != '\r')
      return hlo_p_error(p, c.pos, "unexpected character in window");
  }
  if (have_any && !have_size) return hlo_p_error(p, value.pos, "window has no size=");
  instr->window = window;
  return true;
}

/* One side of dim_labels: batch-like label, feature-like label, and digits for the spatial
 * dims, each letter's position being that dimension's number. */
static bool decode_labels(hlo_parser *p, size_t pos, size_t len, const char *letters,
                          int64_t *first, int64_t *second, int64_t *spatial, int *spatial_count) {
  const char *s = p->lx.text + pos;
  if (len < 2 || len > HLO_MAX_RANK)
    return hlo_p_error(p, pos, "dim_labels part '%.*s' must have 2 to %d labels", (int)len, s, HLO_MAX_RANK);
  int n = (int)len - 2;
  unsigned seen = 0;
  for (size_t i = 0; i < len; i++) {
    int slot;
    if (s[i] == letters[0]) slot = HLO_MAX_RANK;
    else if (s[i] == letters[1]) slot = HLO_MAX_RANK + 1;
    else if (s[i] >= '0' && s[i] - '0' < n) slot = s[i] - '0';
    else return hlo_p_error(p, pos + i, "unexpected label '%c' in dim_labels", s[i]);
    if (seen & (1u << slot)) return hlo_p_error(p, pos + i, "label '%c' appears twice in dim_labels", s[i]);
    seen |= 1u << slot;
    if (slot == HLO_MAX_RANK) *first = (int64_t)i;
    else if (slot == HLO_MAX_RANK + 1) *second = (int64_t)i;
    else spatial[slot] = (int64_t)i;
  }
  *spatial_count = n;
  return true;
}

/* dim_labels=b01f_01io->b01f: input, kernel and output dimension numbers. */
static bool read_dim_labels(hlo_parser *p, hlo_instr *instr) {
  hlo_span value;
  if (!hlo_p_raw_value(p, HLO_RAW_STOP_COMMA | HLO_RAW_STOP_NEWLINE, &value)) return false;
  const char *s = hlo_p_text(p, value);
  const char *underscore = memchr(s, '_', value.len);
  const char *arrow = NULL;
  for (size_t i = 0; i + 1 < value.len; i++)
    if (s[i] == '-' && s[i + 1] == '>') arrow = s + i;
  if (!underscore || !arrow || arrow < underscore)
    return hlo_p_error(p, value.pos, "expected dim_labels like b01f_01io->b01f");
  hlo_conv_dims *conv = hlo_arena_alloc(p->arena, sizeof *conv);
  if (!conv) return hlo_p_oom(p);
  size_t in_len = (size_t)(underscore - s);
  size_t kernel_pos = in_len + 1, kernel_len = (size_t)(arrow - s) - kernel_pos;
  size_t out_pos = (size_t)(arrow - s) + 2, out_len = value.len - out_pos;
  int n_in, n_kernel, n_out;
  if (!decode_labels(p, value.pos, in_len, "bf", &conv->input_batch, &conv->input_feature,
                     conv->input_spatial, &n_in) ||
      !decode_labels(p, value.pos + kernel_pos, kernel_len, "io", &conv->kernel_input_feature,
                     &conv->kernel_output_feature, conv->kernel_spatial, &n_kernel) ||
      !decode_labels(p, value.pos + out_pos, out_len, "bf", &conv->output_batch,
                     &conv->output_feature, conv->output_spatial, &n_out))
    return false;
  if (n_in != n_kernel || n_in != n_out)
    return hlo_p_error(p, value.pos, "dim_labels sides have different numbers of spatial dimensions");
  conv->spatial_count = n_in;
  instr->conv = conv;
  return true;
}

/* frontend_attributes stay raw; a composite's name is also pulled out of them. */
static bool read_frontend_attributes(hlo_parser *p, hlo_instr *instr, hlo_span name, hlo_attr_sink *sink) {
  hlo_span value;
  if (!hlo_p_raw_value(p, HLO_RAW_STOP_COMMA | HLO_RAW_STOP_NEWLINE, &value)) return false;
  if (!add_raw(p, sink, name, value)) return false;
  const char *s = hlo_p_text(p, value);
  static const char key[] = "composite.name=";
  size_t key_len = sizeof key - 1;
  for (size_t i = 1; i + key_len < value.len; i++) {
    if ((s[i - 1] != '{' && s[i - 1] != ',' && s[i - 1] != ' ') || memcmp(s + i, key, key_len) != 0) continue;
    size_t start = i + key_len, end = start;
    if (s[start] == '"') {
      start++;
      for (end = start; end < value.len && s[end] != '"'; end++)
        if (s[end] == '\\') end++;
      if (end > value.len) end = value.len;
    } else {
      while (end < value.len && s[end] != ',' && s[end] != '}' && s[end] != ' ') end++;
    }
    hlo_span text = {value.pos + start, end - start};
    instr->composite_name = unescape(p, text);
    if (!instr->composite_name) return false;
    break;
  }
  return true;
}

/* ---- dispatch ---- */

/* The dimension numbers an attribute fills, made on first use; out of memory, the parser's
 * stand-in, after hlo_p_oom has made the parse fail. */
static hlo_dot_dims *dot_of(hlo_parser *p, hlo_instr *instr) {
  if (!instr->dot) instr->dot = hlo_arena_alloc(p->arena, sizeof *instr->dot);
  if (!instr->dot) return hlo_p_oom(p), &p->lost.dot;
  return instr->dot;
}

static hlo_gather_dims *gather_of(hlo_parser *p, hlo_instr *instr) {
  if (!instr->gather) {
    instr->gather = hlo_arena_alloc(p->arena, sizeof *instr->gather);
    if (!instr->gather) return hlo_p_oom(p), &p->lost.gather;
    instr->gather->index_vector_dim = -1;
  }
  return instr->gather;
}

static hlo_scatter_dims *scatter_of(hlo_parser *p, hlo_instr *instr) {
  if (!instr->scatter) {
    instr->scatter = hlo_arena_alloc(p->arena, sizeof *instr->scatter);
    if (!instr->scatter) return hlo_p_oom(p), &p->lost.scatter;
    instr->scatter->index_vector_dim = -1;
  }
  return instr->scatter;
}

/* The opcodes whose single dimension ir.h keeps in `index` as well as in `dimensions`. */
static bool dimension_is_index(hlo_opcode opcode) {
  return opcode == HLO_OP_GET_DIMENSION_SIZE || opcode == HLO_OP_SET_DIMENSION_SIZE ||
         opcode == HLO_OP_ALL_GATHER || opcode == HLO_OP_ALL_GATHER_START || opcode == HLO_OP_ALL_TO_ALL;
}

static bool named(const char *name, size_t len, const char *word) {
  return strlen(word) == len && memcmp(name, word, len) == 0;
}

static const char *const directions[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
static const char *const compare_types[] = {"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
static const char *const algorithms[] = {"rng_default", "rng_three_fry", "rng_philox"};
static const char *const distributions[] = {"rng_uniform", "rng_normal"};

/* Decodes the attribute `name` into its typed field. Returns 1 when done, 0 on error, and -1
 * without reading anything when latch keeps this attribute raw (for this opcode). The
 * current token is the '='. */
static int read_typed(hlo_parser *p, hlo_instr *in, hlo_span name_span, hlo_attr_sink *sink) {
  const char *name = hlo_p_text(p, name_span);
  size_t len = name_span.len;
  hlo_opcode op = in->opcode;
#define IS(word) named(name, len, word)
  bool ok;
  int choice = 0;
  if (IS("dimensions")) {
    ok = read_ints(p, &in->dimensions);
    if (ok && in->dimensions.count == 1 && dimension_is_index(op)) in->index = in->dimensions.values[0];
  } else if (IS("dynamic_slice_sizes")) ok = read_ints(p, &in->dimensions);
  else if (IS("index") || IS("iota_dimension") || IS("feature_index")) ok = read_int(p, &in->index);
  else if (IS("slice")) ok = read_slice(p, in);
  else if (IS("padding")) ok = read_padding(p, in);
  else if (IS("window")) ok = read_window(p, in);
  else if (IS("dim_labels")) ok = read_dim_labels(p, in);
  else if (IS("feature_group_count")) ok = read_int(p, &in->feature_group_count);
  else if (IS("batch_group_count")) ok = read_int(p, &in->batch_group_count);
  else if (IS("lhs_batch_dims")) ok = read_ints(p, &dot_of(p, in)->lhs_batch);
  else if (IS("lhs_contracting_dims")) ok = read_ints(p, &dot_of(p, in)->lhs_contracting);
  else if (IS("rhs_batch_dims")) ok = read_ints(p, &dot_of(p, in)->rhs_batch);
  else if (IS("rhs_contracting_dims")) ok = read_ints(p, &dot_of(p, in)->rhs_contracting);
  else if (IS("offset_dims")) ok = read_ints(p, &gather_of(p, in)->offset_dims);
  else if (IS("collapsed_slice_dims")) ok = read_ints(p, &gather_of(p, in)->collapsed_slice_dims);
  else if (IS("start_index_map")) ok = read_ints(p, &gather_of(p, in)->start_index_map);
  else if (IS("operand_batching_dims")) ok = read_ints(p, &gather_of(p, in)->operand_batching_dims);
  else if (IS("start_indices_batching_dims")) ok = read_ints(p, &gather_of(p, in)->start_indices_batching_dims);
  else if (IS("slice_sizes")) ok = read_ints(p, &in->gather_slice_sizes);
  else if (IS("update_window_dims")) ok = read_ints(p, &scatter_of(p, in)->update_window_dims);
  else if (IS("inserted_window_dims")) ok = read_ints(p, &scatter_of(p, in)->inserted_window_dims);
  else if (IS("scatter_dims_to_operand_dims")) ok = read_ints(p, &scatter_of(p, in)->scatter_dims_to_operand_dims);
  else if (IS("input_batching_dims")) ok = read_ints(p, &scatter_of(p, in)->input_batching_dims);
  else if (IS("scatter_indices_batching_dims")) ok = read_ints(p, &scatter_of(p, in)->scatter_indices_batching_dims);
  else if (IS("unique_indices") && op == HLO_OP_SCATTER) ok = read_bool(p, &scatter_of(p, in)->unique_indices);
  else if (IS("index_vector_dim") && op == HLO_OP_GATHER) ok = read_int(p, &gather_of(p, in)->index_vector_dim);
  else if (IS("index_vector_dim") && op == HLO_OP_SCATTER) ok = read_int(p, &scatter_of(p, in)->index_vector_dim);
  else if (IS("indices_are_sorted") && op == HLO_OP_GATHER) ok = read_bool(p, &gather_of(p, in)->indices_are_sorted);
  else if (IS("indices_are_sorted") && op == HLO_OP_SCATTER) ok = read_bool(p, &scatter_of(p, in)->indices_are_sorted);
  else if (IS("direction")) {
    ok = read_word(p, directions, 6, "a comparison direction (EQ, NE, LT, LE, GT, GE)", &choice);
    in->direction = (hlo_direction)(HLO_DIR_EQ + choice);
  } else if (IS("type") && op == HLO_OP_COMPARE) {
    ok = read_word(p, compare_types, 4, "a comparison type (FLOAT, TOTALORDER, SIGNED, UNSIGNED)", &choice);
    in->compare_type = (hlo_compare_type)(HLO_CMP_FLOAT + choice);
  } else if (IS("algorithm") && op == HLO_OP_RNG_BIT_GENERATOR) {
    ok = read_word(p, algorithms, 3, "rng_default, rng_three_fry or rng_philox", &choice);
    in->rng_algorithm = (hlo_rng_algorithm)choice;
  } else if (IS("distribution") && op == HLO_OP_RNG) {
    ok = read_word(p, distributions, 2, "rng_uniform or rng_normal", &choice);
    in->rng_distribution = (hlo_rng_distribution)choice;
  } else if (IS("epsilon")) ok = read_double(p, &in->epsilon);
  else if (IS("is_stable")) ok = read_bool(p, &in->is_stable);
  else if (IS("exponent_bits")) ok = read_int(p, &in->exponent_bits);
  else if (IS("mantissa_bits")) ok = read_int(p, &in->mantissa_bits);
  else if (IS("custom_call_target")) ok = read_string(p, &in->custom_call_target);
  else if (IS("kind") && op == HLO_OP_FUSION) ok = read_name(p, &in->fusion_kind);
  else if (IS("is_composite")) ok = read_bool(p, &in->is_composite);
  else if (IS("frontend_attributes")) ok = read_frontend_attributes(p, in, name_span, sink);
  else if (IS("to_apply") || IS("calls") || IS("condition") || IS("body") || IS("select") ||
           IS("scatter") || IS("true_computation") || IS("false_computation"))
    ok = read_comp(p, in, name_span, sink);
  else if (IS("branch_computations") || IS("called_computations"))
    ok = read_comps(p, in, name_span, sink);
  else return -1;
#undef IS
  return ok ? 1 : 0;
}

bool hlo_p_attribute(hlo_parser *p, hlo_instr *instr, hlo_attr_sink *sink) {
  if (p->lx.tok.kind != HLO_TOK_NAME) return hlo_p_expected(p, "an attribute name");
  hlo_span name = hlo_p_tok_span(p);
  hlo_p_next(p);
  if (p->lx.tok.kind != HLO_TOK_EQUAL) return hlo_p_expected(p, "'=' after the attribute name");
  int done = read_typed(p, instr, name, sink);
  if (done >= 0) return done == 1;
  hlo_span value;
  if (!hlo_p_raw_value(p, HLO_RAW_STOP_COMMA | HLO_RAW_STOP_NEWLINE, &value)) return false;
  return add_raw(p, sink, name, value);
}

bool hlo_p_raw_attribute(hlo_parser *p, hlo_span *name, hlo_span *value) {
  if (p->lx.tok.kind != HLO_TOK_NAME) return hlo_p_expected(p, "an attribute name");
  *name = hlo_p_tok_span(p);
  hlo_p_next(p);
  if (p->lx.tok.kind != HLO_TOK_EQUAL) return hlo_p_expected(p, "'=' after the attribute name");
  return hlo_p_raw_value(p, HLO_RAW_STOP_COMMA | HLO_RAW_STOP_NEWLINE, value);
}
