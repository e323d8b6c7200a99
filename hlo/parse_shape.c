/* Shapes: f32[2,3]{1,0}, f32[<=4], s32[?,3], bf16[8,128]{1,0:T(8,128)}, token[], and tuples
 * of them, possibly nested or empty. */
#include <stdlib.h>
#include <string.h>

#include "parse_internal.h"


static bool parse_dims(hlo_parser *p, hlo_shape *shape) {
  if (hlo_p_accept(p, HLO_TOK_RBRACKET)) return true;
  int64_t elements = 1;
  for (;;) {
    size_t pos = p->lx.tok.start;
    if (shape->rank == HLO_MAX_RANK)
      return hlo_p_error(p, pos, "shape has more than %d dimensions", HLO_MAX_RANK);
    int64_t size;
    uint8_t kind = HLO_DIM_STATIC;
    if (hlo_p_accept(p, HLO_TOK_QUESTION)) {
      kind = HLO_DIM_UNBOUNDED;
      size = -1;
    } else {
      if (hlo_p_accept(p, HLO_TOK_LEQ)) kind = HLO_DIM_BOUNDED;
      pos = p->lx.tok.start;
      if (p->lx.tok.kind != HLO_TOK_NUMBER) return hlo_p_expected(p, "a dimension size");
      if (!hlo_p_int(p, &size)) return false;
      if (size < 0) return hlo_p_error(p, pos, "dimension sizes cannot be negative");
      if (size > 0 && elements > HLO_MAX_ELEMENTS / size)
        return hlo_p_error(p, pos, "shape has too many elements");
      elements *= size;
    }
    shape->dims[shape->rank] = size;
    shape->dim_kind[shape->rank] = kind;
    shape->rank++;
    if (hlo_p_accept(p, HLO_TOK_RBRACKET)) return true;
    if (!hlo_p_expect(p, HLO_TOK_COMMA, "',' or ']' in the dimensions")) return false;
  }
}

/* '{' minor_to_major [':' extra] '}'. The extra part (tiling, memory space...) is kept as
 * text for the printer. An empty list on a ranked shape means the default order. */
static bool parse_layout(hlo_parser *p, hlo_shape *shape) {
  size_t open = p->lx.tok.start;
  hlo_p_next(p);
  int8_t order[HLO_MAX_RANK];
  unsigned seen = 0;
  int count = 0;
  while (p->lx.tok.kind == HLO_TOK_NUMBER) {
    size_t pos = p->lx.tok.start;
    int64_t dim;
    if (!hlo_p_int(p, &dim)) return false;
    if (dim < 0 || dim >= shape->rank || count >= shape->rank)
      return hlo_p_error(p, pos, "layout entry %lld does not fit a shape of rank %d", (long long)dim, shape->rank);
    if (seen & (1u << dim)) return hlo_p_error(p, pos, "layout names dimension %lld twice", (long long)dim);
    seen |= 1u << dim;
    order[count++] = (int8_t)dim;
    if (!hlo_p_accept(p, HLO_TOK_COMMA)) break;
  }
  if (p->lx.tok.kind == HLO_TOK_COLON) {
    hlo_span extra;
    if (!hlo_p_raw_value(p, 0, &extra)) return false;
    if (extra.len && !(shape->layout_extra = hlo_p_strdup(p, extra))) return false;
  }
  if (!hlo_p_expect(p, HLO_TOK_RBRACE, "'}' to close the layout")) return false;
  if (count == shape->rank) {
    memcpy(shape->minor_to_major, order, (size_t)count);
    shape->has_layout = true;
  } else if (count != 0) {
    return hlo_p_error(p, open, "layout has %d entries for a shape of rank %d", count, shape->rank);
  }
  return true;
}

/* After an array shape, '{' opens a layout only when a dimension number, ':' or '}' follows:
 * in `-> f32[4] {` it opens the computation's body instead. */
static bool layout_follows(hlo_parser *p) {
  if (p->lx.tok.kind != HLO_TOK_LBRACE) return false;
  char c = hlo_lex_peek_char(&p->lx);
  return (c >= '0' && c <= '9') || c == ':' || c == '}';
}

static bool parse_tuple(hlo_parser *p, hlo_shape *shape) {
  size_t open = p->lx.tok.start;
  if (p->depth >= HLO_PARSE_MAX_DEPTH) return hlo_p_error(p, open, "tuple shapes nested too deeply");
  p->depth++;
  hlo_p_next(p);
  hlo_shape *elements = NULL;
  int count = 0, cap = 0;
  bool ok = true;
  if (!hlo_p_accept(p, HLO_TOK_RPAREN)) {
    for (;;) {
      if (!hlo_p_grow(&elements, &cap, count + 1, sizeof *elements)) {
        ok = hlo_p_oom(p);
        break;
      }
      if (!(ok = hlo_p_shape(p, &elements[count]))) break;
      count++;
      if (hlo_p_accept(p, HLO_TOK_RPAREN)) break;
      if (!(ok = hlo_p_expect(p, HLO_TOK_COMMA, "',' or ')' in a tuple shape"))) break;
    }
  }
  p->depth--;
  if (ok) {
    shape->dtype = HLO_TUPLE;
    shape->tuple_count = count;
    shape->tuple = hlo_arena_alloc(p->arena, sizeof(hlo_shape) * (size_t)(count ? count : 1));
    if (!shape->tuple) ok = hlo_p_oom(p), shape->tuple_count = count = 0;
    if (count) memcpy(shape->tuple, elements, sizeof(hlo_shape) * (size_t)count);
  }
  free(elements);
  return ok;
}

bool hlo_p_shape(hlo_parser *p, hlo_shape *shape) {
  memset(shape, 0, sizeof *shape);
  if (p->lx.tok.kind == HLO_TOK_LPAREN) return parse_tuple(p, shape);
  if (p->lx.tok.kind != HLO_TOK_NAME) return hlo_p_expected(p, "a shape");
  hlo_dtype dtype = hlo_dtype_from_name(p->lx.text + p->lx.tok.pos, p->lx.tok.len);
  if (dtype == HLO_INVALID) {
    return hlo_p_error(p, p->lx.tok.start, "unknown element type '%.*s'", (int)p->lx.tok.len,
                       p->lx.text + p->lx.tok.pos);
  }
  shape->dtype = dtype;
  hlo_p_next(p);
  if (!hlo_p_expect(p, HLO_TOK_LBRACKET, "'[' after the element type")) return false;
  if (!parse_dims(p, shape)) return false;
  hlo_shape_default_layout(shape);
  if (layout_follows(p)) return parse_layout(p, shape);
  return true;
}
