/* The HLO text parser's structure: modules, computations, instructions, operands, and the
 * name resolution that lets operands and computations be used before they are defined.
 * Shapes, attributes and constants have their own files. */
#include "hlo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "parse_internal.h"

/* ---- one computation body ---- */

typedef struct operand_ref {
  hlo_instr *instr;
  int index;
  hlo_span name;
} operand_ref;

typedef struct param_seen {
  hlo_instr *instr;
  size_t pos;
} param_seen;

/* What reading one body collects until its closing brace, when names can be resolved. */
typedef struct body {
  hlo_comp *comp;
  hlo_name_map names;
  operand_ref *refs;
  int ref_count, ref_cap;
  param_seen *params;
  int param_count, param_cap;
  hlo_instr *root; /* the one marked ROOT */
  hlo_instr *last; /* the last one in the text: the root when none is marked */
  size_t root_pos;
} body;

static void body_free(body *b) {
  hlo_names_free(&b->names);
  free(b->refs);
  free(b->params);
}

/* operand := [shape] name. Older dumps print each operand's shape before its name; the shape
 * is implied by the operand, so it is read and dropped. */
static bool parse_operands(hlo_parser *p, int *count) {
  int n = 0;
  if (!hlo_p_accept(p, HLO_TOK_RPAREN)) {
    for (;;) {
      const hlo_token *tok = &p->lx.tok;
      size_t after = tok->pos + tok->len;
      if (tok->kind == HLO_TOK_LPAREN ||
          (tok->kind == HLO_TOK_NAME && after < p->lx.end && p->lx.text[after] == '[')) {
        hlo_shape ignored;
        if (!hlo_p_shape(p, &ignored)) return false;
      }
      if (p->lx.tok.kind != HLO_TOK_NAME) return hlo_p_expected(p, "an operand name");
      if (!hlo_p_grow(&p->operands, &p->operand_cap, n + 1, sizeof *p->operands)) return hlo_p_oom(p);
      p->operands[n++] = hlo_p_tok_span(p);
      hlo_p_next(p);
      if (hlo_p_accept(p, HLO_TOK_RPAREN)) break;
      if (!hlo_p_expect(p, HLO_TOK_COMMA, "',' or ')' after an operand")) return false;
    }
  }
  *count = n;
  return true;
}

/* The typed parts some opcodes always have, so users need not test for NULL. False when
 * memory runs out. */
static bool give_defaults(hlo_parser *p, hlo_instr *instr) {
  switch (instr->opcode) {
    case HLO_OP_DOT:
      instr->dot = hlo_arena_alloc(p->arena, sizeof *instr->dot);
      return instr->dot || hlo_p_oom(p);
    case HLO_OP_GATHER:
      instr->gather = hlo_arena_alloc(p->arena, sizeof *instr->gather);
      if (!instr->gather) return hlo_p_oom(p);
      instr->gather->index_vector_dim = -1; /* filled in from the indices once resolved */
      return true;
    case HLO_OP_SCATTER:
      instr->scatter = hlo_arena_alloc(p->arena, sizeof *instr->scatter);
      if (!instr->scatter) return hlo_p_oom(p);
      instr->scatter->index_vector_dim = -1;
      return true;
    default:
      return true;
  }
}

/* Copies what the attributes collected into the instruction. Computations named by
 * attributes are looked up when the module is complete: they may come later in the text. */
static bool settle_attributes(hlo_parser *p, hlo_instr *instr, hlo_attr_sink *sink) {
  if (sink->called_count) {
    instr->called = hlo_arena_alloc(p->arena, sizeof(hlo_comp *) * (size_t)sink->called_count);
    if (!instr->called) return hlo_p_oom(p);
    instr->called_count = sink->called_count;
    for (int i = 0; i < sink->called_count; i++) {
      instr->called[i] = sink->called[i].comp;
      if (sink->called[i].comp) continue;
      if (!hlo_p_grow(&p->comp_refs, &p->comp_ref_cap, p->comp_ref_count + 1, sizeof *p->comp_refs))
        return hlo_p_oom(p);
      hlo_comp_ref ref = {instr, i, sink->called[i].name};
      p->comp_refs[p->comp_ref_count++] = ref;
    }
  }
  if (sink->raw_count) {
    instr->raw_attrs = hlo_arena_memdup(p->arena, sink->raw, sizeof(hlo_raw_attr) * (size_t)sink->raw_count);
    if (!instr->raw_attrs) return hlo_p_oom(p);
    instr->raw_attr_count = sink->raw_count;
  }
  return true;
}

/* The 1-based line and byte column of pos, counted on from the last position asked for
 * (instructions come in order, so the whole file is walked once). */
static void locate(hlo_parser *p, size_t pos, int32_t *line, int32_t *col) {
  if (pos < p->loc_pos || p->loc_line == 0) p->loc_pos = 0, p->loc_line_start = 0, p->loc_line = 1;
  for (; p->loc_pos < pos; p->loc_pos++)
    if (p->lx.text[p->loc_pos] == '\n') p->loc_line++, p->loc_line_start = p->loc_pos + 1;
  *line = p->loc_line;
  *col = (int32_t)(pos - p->loc_line_start) + 1;
}

/* instruction := ['ROOT'] name '=' shape opcode '(' operands ')' (',' attribute)* */
static bool parse_instruction(hlo_parser *p, body *b) {
  bool is_root = false;
  size_t root_pos = p->lx.tok.start;
  if (hlo_p_is_word(p, "ROOT") && hlo_p_peek(p) == HLO_TOK_NAME) {
    is_root = true;
    hlo_p_next(p);
  }
  if (p->lx.tok.kind != HLO_TOK_NAME) return hlo_p_expected(p, "an instruction name or '}'");
  hlo_span name = hlo_p_tok_span(p);
  size_t name_pos = p->lx.tok.start;
  hlo_p_next(p);
  if (!hlo_p_expect(p, HLO_TOK_EQUAL, "'=' after the instruction name")) return false;
  hlo_shape shape;
  if (!hlo_p_shape(p, &shape)) return false;
  if (p->lx.tok.kind != HLO_TOK_NAME) return hlo_p_expected(p, "an opcode");
  hlo_opcode opcode = hlo_opcode_from_name(p->lx.text + p->lx.tok.pos, p->lx.tok.len);
  if (opcode == HLO_OP_COUNT) {
    return hlo_p_error(p, p->lx.tok.start, "unknown opcode '%.*s'", (int)p->lx.tok.len,
                       p->lx.text + p->lx.tok.pos);
  }
  hlo_p_next(p);
  if (p->lx.tok.kind != HLO_TOK_LPAREN) return hlo_p_expected(p, "'(' after the opcode");

  char *name_text = hlo_p_strdup(p, name);
  if (!name_text) return false;
  if (hlo_names_get(&b->names, name_text, name.len)) {
    return hlo_p_error(p, name_pos, "duplicate instruction name '%s' in computation '%s'",
                       name_text, b->comp->name);
  }
  int64_t parameter_number = 0;
  hlo_literal *literal = NULL;
  int operand_count = 0;
  if (opcode == HLO_OP_CONSTANT) {
    if (!hlo_p_literal(p, &shape, name_text, &literal)) return false;
    if (!hlo_p_expect(p, HLO_TOK_RPAREN, "')' after the constant's value")) return false;
  } else {
    hlo_p_next(p);
    if (opcode == HLO_OP_PARAMETER) {
      size_t number_pos = p->lx.tok.start;
      if (!hlo_p_int(p, &parameter_number)) return false;
      if (parameter_number < 0) return hlo_p_error(p, number_pos, "negative parameter number");
      if (!hlo_p_expect(p, HLO_TOK_RPAREN, "')' after the parameter number")) return false;
    } else if (!parse_operands(p, &operand_count)) {
      return false;
    }
  }

  hlo_instr *instr = hlo_comp_append(b->comp, opcode, name_text, operand_count, NULL);
  if (!instr || !hlo_names_put(&b->names, instr->name, name.len, instr)) return hlo_p_oom(p);
  locate(p, name_pos, &instr->line, &instr->col);
  instr->shape = shape;
  instr->literal = literal;
  instr->parameter_number = parameter_number;
  if (!give_defaults(p, instr)) return false;
  for (int i = 0; i < operand_count; i++) {
    if (!hlo_p_grow(&b->refs, &b->ref_cap, b->ref_count + 1, sizeof *b->refs)) return hlo_p_oom(p);
    operand_ref ref = {instr, i, p->operands[i]};
    b->refs[b->ref_count++] = ref;
  }
  if (opcode == HLO_OP_PARAMETER) {
    if (!hlo_p_grow(&b->params, &b->param_cap, b->param_count + 1, sizeof *b->params)) return hlo_p_oom(p);
    param_seen seen = {instr, name_pos};
    b->params[b->param_count++] = seen;
  }

  hlo_attr_sink sink;
  memset(&sink, 0, sizeof sink);
  bool ok = true;
  while (ok && hlo_p_accept(p, HLO_TOK_COMMA)) ok = hlo_p_attribute(p, instr, &sink);
  if (ok) ok = settle_attributes(p, instr, &sink);
  hlo_sink_free(&sink);
  if (!ok) return false;

  if (is_root) {
    if (b->root) {
      return hlo_p_error(p, root_pos, "second ROOT in computation '%s' (the first is '%s')",
                         b->comp->name, b->root->name);
    }
    b->root = instr;
    b->root_pos = root_pos;
  }
  b->last = instr;
  return true;
}

/* Parameter numbers must be 0..n-1, each once. Registering them from the highest down makes
 * hlo_comp_set_param allocate its table once. */
static bool settle_params(hlo_parser *p, body *b) {
  int n = b->param_count;
  hlo_instr **by_number = hlo_calloc((size_t)n + 1, sizeof *by_number);
  if (!by_number) return hlo_p_oom(p);
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    hlo_instr *param = b->params[i].instr;
    int64_t number = param->parameter_number;
    if (number >= n) {
      ok = hlo_p_error(p, b->params[i].pos,
                       "parameter number %lld is out of range: computation '%s' has %d parameters",
                       (long long)number, b->comp->name, n);
    } else if (by_number[number]) {
      ok = hlo_p_error(p, b->params[i].pos, "parameter number %lld is used twice (also by '%s')",
                       (long long)number, by_number[number]->name);
    } else {
      by_number[number] = param;
    }
  }
  for (int i = n - 1; i >= 0 && ok; i--)
    if (!hlo_comp_set_param(b->comp, by_number[i])) ok = hlo_p_oom(p);
  free(by_number);
  return ok;
}

/* index_vector_dim is written in every dump; when it is not, the usual meaning is "the
 * indices' rank" (each index is a trailing scalar), which needs the resolved operand. */
static void settle_index_vector_dims(hlo_comp *comp) {
  for (int i = 0; i < comp->instr_count; i++) {
    hlo_instr *instr = comp->instrs[i];
    if (instr->gather && instr->gather->index_vector_dim < 0 && instr->operand_count > 1)
      instr->gather->index_vector_dim = instr->operands[1]->shape.rank;
    if (instr->scatter && instr->scatter->index_vector_dim < 0 && instr->operand_count >= 3)
      instr->scatter->index_vector_dim = instr->operands[(instr->operand_count - 1) / 2]->shape.rank;
  }
}

static bool finish_body(hlo_parser *p, body *b, size_t open_pos, size_t close_pos) {
  hlo_comp *comp = b->comp;
  if (comp->instr_count == 0)
    return hlo_p_error(p, close_pos, "computation '%s' has no instructions", comp->name);
  for (int i = 0; i < b->ref_count; i++) {
    operand_ref *ref = &b->refs[i];
    hlo_instr *target = hlo_names_get(&b->names, hlo_p_text(p, ref->name), ref->name.len);
    if (!target) {
      return hlo_p_error(p, ref->name.pos, "undefined operand '%.*s' in computation '%s'",
                         (int)ref->name.len, hlo_p_text(p, ref->name), comp->name);
    }
    ref->instr->operands[ref->index] = target;
  }
  comp->root = b->root ? b->root : b->last;
  if (!settle_params(p, b)) return false;
  settle_index_vector_dims(comp);
  hlo_diag sort_diag;
  hlo_diag_clear(&sort_diag);
  if (!hlo_comp_sort(comp, &sort_diag))
    return sort_diag.status == HLO_ERR_INTERNAL ? hlo_p_oom(p) : hlo_p_error(p, open_pos, "%s", sort_diag.message);
  return true;
}

/* Reads instructions up to and including the closing '}'; the current token is the first
 * one after the '{' at open_pos. */
static bool parse_body(hlo_parser *p, hlo_comp *comp, size_t open_pos) {
  body b;
  memset(&b, 0, sizeof b);
  b.comp = comp;
  hlo_names_init(&b.names);
  bool ok = true;
  while (ok && p->lx.tok.kind != HLO_TOK_RBRACE) {
    if (p->lx.tok.kind == HLO_TOK_EOF) {
      int line, col;
      hlo_lex_line_col(p->lx.text, open_pos, &line, &col);
      ok = hlo_p_error(p, p->lx.tok.start,
                       "expected '}' to close computation '%s' (opened at line %d), found end of input",
                       comp->name, line);
    } else {
      ok = parse_instruction(p, &b);
    }
  }
  if (ok) {
    size_t close_pos = p->lx.tok.start;
    hlo_p_next(p);
    ok = finish_body(p, &b, open_pos, close_pos);
  }
  body_free(&b);
  return ok;
}

/* ---- computations and modules ---- */

static hlo_comp *new_comp(hlo_parser *p, const char *name, size_t len, size_t pos) {
  if (hlo_names_get(&p->comps, name, len)) {
    hlo_p_error(p, pos, "duplicate computation name '%.*s'", (int)len, name);
    return NULL;
  }
  char *copy = hlo_arena_strndup(p->arena, name, len);
  hlo_comp *comp = copy ? hlo_module_add_comp(p->module, copy) : NULL;
  if (!comp || !hlo_names_put(&p->comps, comp->name, len, comp)) {
    hlo_p_oom(p);
    return NULL;
  }
  return comp;
}

bool hlo_p_inline_comp(hlo_parser *p, const hlo_instr *owner, const char *attr, hlo_comp **out) {
  size_t open_pos = p->lx.tok.start;
  if (p->depth >= HLO_PARSE_MAX_DEPTH)
    return hlo_p_error(p, open_pos, "computations nested too deeply");
  /* The body has no name in the text; make one from its owner that is not taken yet. */
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  hlo_sb_printf(&sb, "%s.%s", owner->name, attr);
  size_t base_len = sb.len;
  for (int n = 1; hlo_names_get(&p->comps, sb.data, sb.len); n++) {
    sb.len = base_len;
    hlo_sb_printf(&sb, ".%d", n);
  }
  hlo_comp *comp = sb.failed ? NULL : new_comp(p, sb.data, sb.len, open_pos);
  if (sb.failed) hlo_p_oom(p);
  hlo_sb_free(&sb);
  if (!comp) return false;
  hlo_p_next(p);
  p->depth++;
  bool ok = parse_body(p, comp, open_pos);
  p->depth--;
  *out = comp;
  return ok;
}

/* '(' name ':' shape, ... ')' '->' shape. The parameters' real shapes are on their
 * instructions, so the signature is checked for form and dropped. */
static bool skip_signature(hlo_parser *p) {
  hlo_p_next(p);
  if (!hlo_p_accept(p, HLO_TOK_RPAREN)) {
    for (;;) {
      if (!hlo_p_expect(p, HLO_TOK_NAME, "a parameter name")) return false;
      if (!hlo_p_expect(p, HLO_TOK_COLON, "':' after the parameter name")) return false;
      hlo_shape ignored;
      if (!hlo_p_shape(p, &ignored)) return false;
      if (hlo_p_accept(p, HLO_TOK_RPAREN)) break;
      if (!hlo_p_expect(p, HLO_TOK_COMMA, "',' or ')' in the parameter list")) return false;
    }
  }
  if (!hlo_p_expect(p, HLO_TOK_ARROW, "'->' after the parameter list")) return false;
  hlo_shape ignored;
  return hlo_p_shape(p, &ignored);
}

typedef struct module_state {
  hlo_span name;     /* from the HloModule line, or empty */
  hlo_comp *entry;   /* marked ENTRY */
  hlo_comp *last;    /* the last top-level computation: the entry when none is marked */
  hlo_raw_attr *attrs;
  int attr_count, attr_cap;
} module_state;

/* computation := ['ENTRY'] name [signature] '{' instruction* '}' (',' attribute)* */
static bool parse_computation(hlo_parser *p, module_state *m) {
  bool is_entry = false;
  size_t entry_pos = p->lx.tok.start;
  if (hlo_p_is_word(p, "ENTRY") && hlo_p_peek(p) == HLO_TOK_NAME) {
    is_entry = true;
    hlo_p_next(p);
  }
  if (hlo_p_is_word(p, "HloModule"))
    return hlo_p_error(p, p->lx.tok.start, "a second HloModule: separate modules with a line '// -----'");
  if (p->lx.tok.kind != HLO_TOK_NAME) return hlo_p_expected(p, "a computation name");
  hlo_span name = hlo_p_tok_span(p);
  size_t name_pos = p->lx.tok.start;
  hlo_p_next(p);
  if (p->lx.tok.kind == HLO_TOK_LPAREN && !skip_signature(p)) return false;
  if (p->lx.tok.kind != HLO_TOK_LBRACE) return hlo_p_expected(p, "'{' to start the computation's body");
  size_t open_pos = p->lx.tok.start;
  hlo_comp *comp = new_comp(p, hlo_p_text(p, name), name.len, name_pos);
  if (!comp) return false;
  if (is_entry) {
    if (m->entry) {
      return hlo_p_error(p, entry_pos, "second ENTRY computation (the first is '%s')",
                         m->entry->name);
    }
    m->entry = comp;
  }
  m->last = comp;
  hlo_p_next(p);
  if (!parse_body(p, comp, open_pos)) return false;
  /* `} , execution_thread="..."`: computation attributes latch has no use for. */
  while (hlo_p_accept(p, HLO_TOK_COMMA)) {
    hlo_span attr_name, value;
    if (!hlo_p_raw_attribute(p, &attr_name, &value)) return false;
  }
  return true;
}

/* 'HloModule' name [':'] (',' attribute)*; entry_computation_layout is dropped because the
 * printer derives it from the entry computation. */
static bool parse_header(hlo_parser *p, module_state *m) {
  hlo_p_next(p);
  if (p->lx.tok.kind != HLO_TOK_NAME) return hlo_p_expected(p, "the module's name");
  m->name = hlo_p_tok_span(p);
  hlo_p_next(p);
  hlo_p_accept(p, HLO_TOK_COLON);
  while (hlo_p_accept(p, HLO_TOK_COMMA)) {
    hlo_span name, value;
    if (!hlo_p_raw_attribute(p, &name, &value)) return false;
    if (name.len == 24 && memcmp(hlo_p_text(p, name), "entry_computation_layout", 24) == 0) continue;
    if (!hlo_p_grow(&m->attrs, &m->attr_cap, m->attr_count + 1, sizeof *m->attrs)) return hlo_p_oom(p);
    hlo_raw_attr attr = {hlo_p_strdup(p, name), hlo_p_strdup(p, value)};
    if (!attr.name || !attr.value) return false;
    m->attrs[m->attr_count++] = attr;
  }
  return true;
}

static bool finish_module(hlo_parser *p, module_state *m, size_t begin) {
  hlo_module *module = p->module;
  for (int i = 0; i < p->comp_ref_count; i++) {
    hlo_comp_ref *ref = &p->comp_refs[i];
    hlo_comp *comp = hlo_names_get(&p->comps, hlo_p_text(p, ref->name), ref->name.len);
    if (!comp) {
      return hlo_p_error(p, ref->name.pos, "undefined computation '%.*s'", (int)ref->name.len,
                         hlo_p_text(p, ref->name));
    }
    ref->instr->called[ref->slot] = comp;
  }
  hlo_comp *entry = m->entry ? m->entry : m->last;
  entry->is_entry = true;
  module->entry = entry;
  if (m->name.len) module->name = hlo_p_strdup(p, m->name);
  else module->name = entry->name;
  if (!module->name) return false;
  if (m->attr_count) {
    module->raw_attrs = hlo_arena_memdup(p->arena, m->attrs, sizeof(hlo_raw_attr) * (size_t)m->attr_count);
    if (!module->raw_attrs) return hlo_p_oom(p);
    module->raw_attr_count = m->attr_count;
  }
  hlo_diag sort_diag;
  hlo_diag_clear(&sort_diag);
  if (!hlo_module_sort(module, &sort_diag))
    return sort_diag.status == HLO_ERR_INTERNAL ? hlo_p_oom(p) : hlo_p_error(p, begin, "%s", sort_diag.message);
  return true;
}

/* Parses text[begin, end) as one module; text is NUL-terminated past end. */
static hlo_module *parse_range(const char *text, size_t begin, size_t end, const char *filename,
                               hlo_diag *diag) {
  hlo_parser parser;
  memset(&parser, 0, sizeof parser);
  hlo_parser *p = &parser;
  p->filename = filename ? filename : "<input>";
  p->diag = diag;
  p->module = hlo_module_new(NULL);
  if (!p->module) {
    hlo_p_oom(p);
    return NULL;
  }
  p->arena = &p->module->arena;
  if (filename) p->module->source = hlo_arena_strdup(p->arena, filename);
  hlo_names_init(&p->comps);
  hlo_lex_init(&p->lx, text, begin, end);

  module_state m;
  memset(&m, 0, sizeof m);
  bool ok = true;
  if (hlo_p_is_word(p, "HloModule")) ok = parse_header(p, &m);
  if (ok && p->lx.tok.kind == HLO_TOK_EOF) ok = hlo_p_expected(p, "a computation");
  while (ok && p->lx.tok.kind != HLO_TOK_EOF) ok = parse_computation(p, &m);
  if (ok) ok = finish_module(p, &m, begin);
  if (ok && p->module->arena.failed) ok = hlo_p_oom(p); /* a helper that had no parser to tell */

  free(m.attrs);
  hlo_names_free(&p->comps);
  free(p->comp_refs);
  free(p->operands);
  free(p->ints);
  if (ok) return p->module;
  hlo_module_free(p->module);
  return NULL;
}

/* ---- entry points ---- */

/* Whether text[begin, end) is a separator line: '// -----' and blanks. */
static bool is_separator(const char *text, size_t begin, size_t end) {
  while (begin < end && (text[begin] == ' ' || text[begin] == '\t')) begin++;
  while (end > begin && (text[end - 1] == ' ' || text[end - 1] == '\t' || text[end - 1] == '\r')) end--;
  return end - begin == 8 && memcmp(text + begin, "// -----", 8) == 0;
}

/* Whether a stretch holds nothing but blanks and comments (a separator at the very end, or a
 * file of RUN lines before the first module, leaves such a stretch). */
static bool is_blank(const char *text, size_t begin, size_t end) {
  hlo_lexer lx;
  hlo_lex_init(&lx, text, begin, end);
  return lx.tok.kind == HLO_TOK_EOF;
}

static size_t segment_end_of(bool separator, size_t line, size_t len) { return separator ? line : len; }

void hlo_parsed_free(hlo_parsed *results, int count) {
  for (int i = 0; results && i < count; i++) hlo_module_free(results[i].module);
  free(results);
}

/* Each module of a buffer NUL-terminated at len on its own: results[i] holds segment i's
 * module or its parse error, so one bad module does not hide the others. The count, or -1
 * with diag when the text holds no module at all. */
static int parse_each_buffer(const char *text, size_t len, const char *filename, hlo_parsed **out, hlo_diag *diag) {
  hlo_parsed *results = NULL;
  int count = 0, cap = 0;
  size_t segment = 0, line = 0;
  while (line <= len) {
    const char *newline = memchr(text + line, '\n', len - line);
    size_t line_end = newline ? (size_t)(newline - text) : len;
    bool separator = is_separator(text, line, line_end);
    if ((separator || line_end >= len) && !is_blank(text, segment, segment_end_of(separator, line, len))) {
      if (!hlo_p_grow(&results, &cap, count + 1, sizeof *results)) {
        hlo_parsed_free(results, count);
        hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: error: out of memory parsing", filename ? filename : "<input>");
        *out = NULL;
        return -1;
      }
      hlo_parsed *r = &results[count++];
      hlo_diag_clear(&r->diag);
      r->module = parse_range(text, segment, segment_end_of(separator, line, len), filename, &r->diag);
    }
    if (separator || line_end >= len) segment = line_end + 1;
    line = line_end + 1;
  }
  if (count == 0) {
    int l, c;
    hlo_lex_line_col(text, len, &l, &c);
    hlo_diag_set(diag, HLO_ERR_INPUT, "%s:%d:%d: error: expected a module, found end of input",
                 filename ? filename : "<input>", l, c);
    *out = NULL;
    return -1;
  }
  *out = results;
  return count;
}

/* The parsing work of hlo_parse_modules: every module or the first error. */
static int parse_buffer(const char *text, size_t len, const char *filename, hlo_module ***out,
                        hlo_diag *diag) {
  hlo_parsed *results = NULL;
  int count = parse_each_buffer(text, len, filename, &results, diag);
  *out = NULL;
  if (count < 0) return -1;
  int failed = -1;
  for (int i = 0; i < count && failed < 0; i++)
    if (!results[i].module) failed = i;
  if (failed >= 0) {
    hlo_diag_set(diag, results[failed].diag.status, "%s", results[failed].diag.message);
    hlo_parsed_free(results, count);
    return -1;
  }
  hlo_module **modules = hlo_malloc(sizeof *modules * (size_t)count);
  if (!modules) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: error: out of memory parsing", filename ? filename : "<input>");
    hlo_parsed_free(results, count);
    return -1;
  }
  for (int i = 0; i < count; i++) modules[i] = results[i].module;
  free(results);
  *out = modules;
  return count;
}

/* NULL when memory runs out. */
static char *copy_terminated(const char *text, size_t len) {
  char *copy = hlo_malloc(len + 1);
  if (!copy) return NULL;
  if (len) memcpy(copy, text, len);
  copy[len] = 0;
  return copy;
}

hlo_module *hlo_parse_module(const char *text, size_t len, const char *filename, hlo_diag *diag) {
  hlo_diag local;
  hlo_diag_clear(&local);
  char *copy = copy_terminated(text ? text : "", text ? len : 0);
  if (!copy) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: error: out of memory parsing", filename ? filename : "<input>");
    return NULL;
  }
  hlo_module *module = parse_range(copy, 0, text ? len : 0, filename, &local);
  free(copy);
  if (!module) hlo_diag_set(diag, local.status, "%s", local.message);
  return module;
}

int hlo_parse_modules(const char *text, size_t len, const char *filename, hlo_module ***modules,
                      hlo_diag *diag) {
  char *copy = copy_terminated(text ? text : "", text ? len : 0);
  if (!copy) {
    *modules = NULL;
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: error: out of memory parsing", filename ? filename : "<input>");
    return -1;
  }
  int count = parse_buffer(copy, text ? len : 0, filename, modules, diag);
  free(copy);
  return count;
}

/* The whole file, NUL-terminated, in *text (malloc'd); false with diag. */
static bool read_file(const char *path, char **text, size_t *len, hlo_diag *diag) {
  *text = NULL;
  *len = 0;
  FILE *file = fopen(path, "rb");
  if (!file) return hlo_diag_set(diag, HLO_ERR_INPUT, "%s: error: cannot open: %s", path, strerror(errno)), false;
  /* fopen opens a directory for reading on Linux; only the read fails (EISDIR), which
   * would look like an I/O error rather than the caller's mistake. */
  struct stat st;
  if (fstat(fileno(file), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(file);
    return hlo_diag_set(diag, HLO_ERR_INPUT, "%s: error: is a directory, not an HLO file", path), false;
  }
  size_t n = 0, cap = 1 << 16;
  char *buffer = hlo_malloc(cap + 1);
  bool out_of_memory = buffer == NULL;
  while (!out_of_memory) {
    n += fread(buffer + n, 1, cap - n, file);
    if (n < cap) break;
    cap *= 2;
    char *grown = hlo_realloc(buffer, cap + 1);
    if (!grown) out_of_memory = true;
    else buffer = grown;
  }
  int read_errno = errno;
  bool failed = out_of_memory || ferror(file);
  fclose(file);
  if (failed) {
    free(buffer);
    if (out_of_memory) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: error: out of memory reading it", path), false;
    return hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: error: read failed: %s", path, strerror(read_errno)), false;
  }
  buffer[n] = 0;
  *text = buffer;
  *len = n;
  return true;
}

int hlo_parse_file(const char *path, hlo_module ***modules, hlo_diag *diag) {
  *modules = NULL;
  char *text;
  size_t len;
  if (!read_file(path, &text, &len, diag)) return -1;
  int count = parse_buffer(text, len, path, modules, diag);
  free(text);
  return count;
}

int hlo_parse_file_each(const char *path, hlo_parsed **results, hlo_diag *diag) {
  *results = NULL;
  char *text;
  size_t len;
  if (!read_file(path, &text, &len, diag)) return -1;
  int count = parse_each_buffer(text, len, path, results, diag);
  free(text);
  return count;
}
