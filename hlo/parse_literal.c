/* Constants: constant(2.5), constant({{1, 2}, {3, 4}}), constant({}), elided constant({...}),
 * tuples constant((1, 2)), and the text of types latch does not compute with. Values are read
 * a character at a time: a constant can hold millions of them, and forms like nan(0x7f) are
 * not tokens anyway. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo.h"
#include "parse_internal.h"

/* Elided constants are filled, not read, so nothing in the text bounds their size. */
#ifndef HLO_PARSE_MAX_CONSTANT_BYTES
#define HLO_PARSE_MAX_CONSTANT_BYTES ((int64_t)1 << 30)
#endif

/* ---- the deterministic filler ---- */

static uint64_t mix64(uint64_t x) { /* splitmix64's finalizer */
  x += 0x9e3779b97f4a7c15u;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

uint64_t hlo_fill_seed(const char *name) { return hlo_names_hash(name, strlen(name)); }

void hlo_fill_elided(hlo_literal *literal, uint64_t seed) {
  const hlo_shape *shape = &literal->shape;
  if (shape->dtype == HLO_TUPLE) {
    for (int i = 0; literal->elements && i < shape->tuple_count; i++)
      hlo_fill_elided(&literal->elements[i], mix64(seed + (uint64_t)i + 1));
    return;
  }
  if (!literal->data || !hlo_dtype_is_computable(shape->dtype)) return;
  int64_t count = hlo_shape_elements(shape);
  for (int64_t i = 0; i < count; i++) {
    uint64_t r = mix64(seed ^ ((uint64_t)i * 0xd1b54a32d192ed03u));
    /* 24 random bits make a float in [-1, 1) that f32 holds exactly; halfs get a 1/128 grid
     * so rounding to 8 or 11 significant bits cannot reach 1.0. */
    double wide = ((double)(r >> 40) - 8388608.0) / 8388608.0;
    double half = ((double)(r >> 56) - 128.0) / 128.0;
    int64_t small = (int64_t)(r & 7);
    void *d = literal->data;
    switch (shape->dtype) {
      case HLO_PRED: ((uint8_t *)d)[i] = (uint8_t)((i + (int64_t)(seed & 1)) & 1); break;
      case HLO_S8: case HLO_U8: ((uint8_t *)d)[i] = (uint8_t)small; break;
      case HLO_S16: case HLO_U16: ((uint16_t *)d)[i] = (uint16_t)small; break;
      case HLO_S32: case HLO_U32: ((uint32_t *)d)[i] = (uint32_t)small; break;
      case HLO_S64: case HLO_U64: ((uint64_t *)d)[i] = (uint64_t)small; break;
      case HLO_F16: ((uint16_t *)d)[i] = hlo_f64_to_f16(half); break;
      case HLO_BF16: ((uint16_t *)d)[i] = hlo_f64_to_bf16(half); break;
      case HLO_F32: ((float *)d)[i] = (float)wide; break;
      case HLO_F64: ((double *)d)[i] = wide; break;
      default: return;
    }
  }
}

/* ---- reading values ---- */

static const char *text_of(hlo_parser *p) { return p->lx.text; }

static bool skip_space(hlo_parser *p) {
  return hlo_lex_skip_space(&p->lx) || hlo_p_lex_error(p);
}

static char current(hlo_parser *p) { return p->lx.pos < p->lx.end ? p->lx.text[p->lx.pos] : 0; }

static bool expect_char(hlo_parser *p, char c, const char *what) {
  if (!skip_space(p)) return false;
  if (current(p) == c) {
    p->lx.pos++;
    return true;
  }
  if (p->lx.pos >= p->lx.end) return hlo_p_error(p, p->lx.pos, "expected %s, found end of input", what);
  return hlo_p_error(p, p->lx.pos, "expected %s, found '%c'", what, current(p));
}

static bool is_word_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.';
}

/* One value's extent: [sign] word, where a word may hold an exponent sign (1e-05) and nan may
 * carry a payload in parentheses (nan(0x7f)). */
static bool scan_value(hlo_parser *p, hlo_span *out) {
  if (!skip_space(p)) return false;
  const char *t = text_of(p);
  size_t i = p->lx.pos, end = p->lx.end, start = i;
  if (i < end && (t[i] == '-' || t[i] == '+')) i++;
  size_t word = i;
  while (i < end) {
    if (is_word_char(t[i])) i++;
    else if ((t[i] == '-' || t[i] == '+') && i > word && (t[i - 1] == 'e' || t[i - 1] == 'E') &&
             t[word] >= '0' && t[word] <= '9')
      i++;
    else break;
  }
  if (i == word) {
    if (i >= end) return hlo_p_error(p, start, "expected a number, found end of input");
    return hlo_p_error(p, start, "expected a number, found '%c'", t[i]);
  }
  if (i - word == 3 && memcmp(t + word, "nan", 3) == 0 && i < end && t[i] == '(') {
    while (i < end && t[i] != ')') i++;
    if (i >= end) return hlo_p_error(p, start, "unclosed nan payload");
    i++;
  }
  out->pos = start;
  out->len = i - start;
  p->lx.pos = i;
  return true;
}

static bool span_is(const char *t, hlo_span s, const char *word) {
  return s.len == strlen(word) && memcmp(t + s.pos, word, s.len) == 0;
}

static bool to_double(hlo_parser *p, hlo_span s, double *out) {
  const char *t = text_of(p) + s.pos;
  size_t i = (t[0] == '-' || t[0] == '+');
  bool negative = t[0] == '-';
  if (s.len - i >= 3 && memcmp(t + i, "inf", 3) == 0 && s.len - i == 3) {
    *out = negative ? -INFINITY : INFINITY;
    return true;
  }
  if (s.len - i >= 3 && memcmp(t + i, "nan", 3) == 0 && (s.len - i == 3 || t[i + 3] == '(')) {
    *out = negative ? -NAN : NAN; /* a payload is accepted and not kept */
    return true;
  }
  char *end = NULL;
  *out = strtod(t, &end);
  if (end != t + s.len)
    return hlo_p_error(p, s.pos, "'%.*s' is not a number", (int)s.len, t);
  return true;
}

/* Integers with the range of their type: u64 up to 18446744073709551615, s8 from -128... */
static bool to_bits(hlo_parser *p, hlo_dtype dtype, hlo_span s, uint64_t *out) {
  const char *t = text_of(p);
  if (dtype == HLO_PRED) {
    if (span_is(t, s, "true") || span_is(t, s, "1")) *out = 1;
    else if (span_is(t, s, "false") || span_is(t, s, "0")) *out = 0;
    else return hlo_p_error(p, s.pos, "expected true, false, 0 or 1 for a pred, found '%.*s'", (int)s.len, t + s.pos);
    return true;
  }
  int bits = hlo_dtype_bits(dtype);
  if (hlo_dtype_is_unsigned(dtype)) {
    uint64_t value = 0;
    bool ok = s.len > 0;
    for (size_t i = 0; i < s.len && ok; i++) {
      char c = t[s.pos + i];
      unsigned digit = (unsigned)(c - '0');
      ok = c >= '0' && c <= '9' && value <= (UINT64_MAX - digit) / 10;
      value = value * 10 + digit;
    }
    if (!ok || (bits < 64 && value >> bits))
      return hlo_p_error(p, s.pos, "'%.*s' is not a %s", (int)s.len, t + s.pos, hlo_dtype_name(dtype));
    *out = value;
    return true;
  }
  int64_t value;
  int64_t limit = bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
  if (!hlo_p_convert_int(t, s.pos, s.len, &value) || value > limit || value < -limit - 1)
    return hlo_p_error(p, s.pos, "'%.*s' is not a %s", (int)s.len, t + s.pos, hlo_dtype_name(dtype));
  *out = (uint64_t)value;
  return true;
}

static bool read_value(hlo_parser *p, hlo_dtype dtype, void *data, int64_t index) {
  hlo_span s = {0, 0};
  if (!scan_value(p, &s)) return false;
  if (hlo_dtype_is_float(dtype)) {
    double v;
    if (!to_double(p, s, &v)) return false;
    switch (dtype) {
      case HLO_F16: ((uint16_t *)data)[index] = hlo_f64_to_f16(v); break;
      case HLO_BF16: ((uint16_t *)data)[index] = hlo_f64_to_bf16(v); break;
      case HLO_F32: ((float *)data)[index] = (float)v; break;
      default: ((double *)data)[index] = v; break;
    }
    return true;
  }
  uint64_t bits = 0;
  if (!to_bits(p, dtype, s, &bits)) return false;
  switch (hlo_dtype_size(dtype)) {
    case 1: ((uint8_t *)data)[index] = (uint8_t)bits; break;
    case 2: ((uint16_t *)data)[index] = (uint16_t)bits; break;
    case 4: ((uint32_t *)data)[index] = (uint32_t)bits; break;
    default: ((uint64_t *)data)[index] = bits; break;
  }
  return true;
}

static const char *shape_text(const hlo_shape *shape, char *buffer, int size) {
  return hlo_shape_str(shape, buffer, size);
}

/* '{' item (',' item)* '}' for dimension d, items being values in the last dimension and
 * nested lists before it. The count must match the shape exactly. */
static bool read_dim(hlo_parser *p, const hlo_shape *shape, void *data, int d, int64_t *index) {
  if (!skip_space(p)) return false;
  size_t open = p->lx.pos;
  char shape_buf[128];
  if (current(p) != '{') {
    return hlo_p_error(p, open, "expected '{' for dimension %d of a %s constant", d,
                       shape_text(shape, shape_buf, sizeof shape_buf));
  }
  p->lx.pos++;
  int64_t count = 0;
  if (!skip_space(p)) return false;
  if (current(p) == '}') {
    p->lx.pos++;
  } else {
    for (;;) {
      if (!skip_space(p)) return false;
      if (count == shape->dims[d]) {
        return hlo_p_error(p, p->lx.pos, "too many values in dimension %d of a %s constant", d,
                           shape_text(shape, shape_buf, sizeof shape_buf));
      }
      bool ok = d == shape->rank - 1 ? read_value(p, shape->dtype, data, (*index)++)
                                     : read_dim(p, shape, data, d + 1, index);
      if (!ok) return false;
      count++;
      if (!skip_space(p)) return false;
      char c = current(p);
      if (c == ',') {
        p->lx.pos++;
      } else if (c == '}') {
        p->lx.pos++;
        break;
      } else if (!c) {
        return hlo_p_error(p, p->lx.pos, "expected ',' or '}' in the constant, found end of input");
      } else {
        return hlo_p_error(p, p->lx.pos, "expected ',' or '}' in the constant, found '%c'", c);
      }
    }
  }
  if (count != shape->dims[d]) {
    return hlo_p_error(p, open, "dimension %d of the constant has %lld values, its shape %s needs %lld",
                       d, (long long)count, shape_text(shape, shape_buf, sizeof shape_buf),
                       (long long)shape->dims[d]);
  }
  return true;
}

/* Whether `{...}` (blanks allowed inside) starts at the cursor; moves past it if so. */
static bool accept_elided(hlo_parser *p) {
  const char *t = text_of(p);
  size_t i = p->lx.pos, end = p->lx.end;
  if (i >= end || t[i] != '{') return false;
  for (i++; i < end && (t[i] == ' ' || t[i] == '\n' || t[i] == '\t' || t[i] == '\r'); i++) {}
  if (end - i < 3 || memcmp(t + i, "...", 3) != 0) return false;
  for (i += 3; i < end && (t[i] == ' ' || t[i] == '\n' || t[i] == '\t' || t[i] == '\r'); i++) {}
  if (i >= end || t[i] != '}') return false;
  p->lx.pos = i + 1;
  return true;
}

static bool read_literal(hlo_parser *p, const hlo_shape *shape, hlo_literal *lit, uint64_t seed, bool in_tuple);

static bool read_tuple(hlo_parser *p, const hlo_shape *shape, hlo_literal *lit, uint64_t seed) {
  if (!skip_space(p)) return false;
  if (p->depth >= HLO_PARSE_MAX_DEPTH) return hlo_p_error(p, p->lx.pos, "tuple constant nested too deeply");
  if (!expect_char(p, '(', "'(' to start a tuple constant")) return false;
  lit->elements = hlo_arena_alloc(p->arena, sizeof(hlo_literal) * (size_t)(shape->tuple_count ? shape->tuple_count : 1));
  if (!lit->elements) return hlo_p_oom(p);
  p->depth++;
  bool ok = true;
  for (int i = 0; i < shape->tuple_count && ok; i++) {
    if (i > 0) ok = expect_char(p, ',', "',' between tuple elements");
    if (ok) ok = read_literal(p, &shape->tuple[i], &lit->elements[i], mix64(seed + (uint64_t)i + 1), true);
  }
  p->depth--;
  return ok && expect_char(p, ')', "')' to end the tuple constant");
}

/* Types latch does not compute with keep their value as text. */
static bool read_raw(hlo_parser *p, hlo_literal *lit, bool in_tuple) {
  size_t begin, end;
  if (!hlo_lex_raw(&p->lx, in_tuple ? HLO_RAW_STOP_COMMA : 0, &begin, &end)) return hlo_p_lex_error(p);
  if (begin == end) return hlo_p_error(p, begin, "expected a constant value");
  hlo_span span = {begin, end - begin};
  lit->raw_text = hlo_p_strdup(p, span);
  if (!lit->raw_text) return false;
  size_t saved = p->lx.pos;
  p->lx.pos = begin;
  lit->elided = accept_elided(p) && p->lx.pos == end;
  p->lx.pos = saved;
  return true;
}

static bool read_literal(hlo_parser *p, const hlo_shape *shape, hlo_literal *lit, uint64_t seed, bool in_tuple) {
  lit->shape = *shape;
  if (shape->dtype == HLO_TUPLE) return read_tuple(p, shape, lit, seed);
  if (!hlo_dtype_is_computable(shape->dtype)) return read_raw(p, lit, in_tuple);
  if (!skip_space(p)) return false;
  size_t start = p->lx.pos;
  if (hlo_shape_is_dynamic(shape)) return hlo_p_error(p, start, "a constant cannot have a dynamic shape");
  int64_t count = hlo_shape_elements(shape);
  int64_t bytes = hlo_shape_bytes(shape);
  if (accept_elided(p)) {
    if (bytes > HLO_PARSE_MAX_CONSTANT_BYTES)
      return hlo_p_error(p, start, "elided constant of %lld bytes is too large to fill", (long long)bytes);
    lit->data = hlo_arena_alloc(p->arena, (size_t)bytes);
    if (!lit->data) return hlo_p_oom(p);
    lit->elided = true;
    hlo_fill_elided(lit, seed);
    return true;
  }
  /* Every value takes at least one character: a shape bigger than the rest of the text cannot
   * be right, and refusing it here keeps a short bad input from asking for a huge buffer. */
  if (count > (int64_t)(p->lx.end - start)) {
    char shape_buf[128];
    return hlo_p_error(p, start, "the constant's text is too short for its shape %s",
                       shape_text(shape, shape_buf, sizeof shape_buf));
  }
  lit->data = hlo_arena_alloc(p->arena, (size_t)bytes);
  if (!lit->data) return hlo_p_oom(p);
  int64_t index = 0;
  if (shape->rank == 0) return read_value(p, shape->dtype, lit->data, 0);
  return read_dim(p, shape, lit->data, 0, &index);
}

bool hlo_p_literal(hlo_parser *p, const hlo_shape *shape, const char *instr_name, hlo_literal **out) {
  hlo_literal *lit = hlo_arena_alloc(p->arena, sizeof *lit);
  if (!lit) return hlo_p_oom(p);
  if (!read_literal(p, shape, lit, hlo_fill_seed(instr_name), false)) return false;
  hlo_p_next(p);
  *out = lit;
  return true;
}
