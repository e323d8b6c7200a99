/* A dot whose lhs repeats its values along the contracting dim, rewritten to sum the rhs
 * over the repeats first:
 *
 *   dot(L, W) with L[m, k] = V[m, c(k)], each c taken by J values of k
 *     -> dot(V, W') with W'[c, n] = the sum of W[k, n] over the k of c
 *
 * L is V made larger by reshapes and by concatenations (or broadcasts) of one operand with
 * itself, the way an adaptive average pool grows a 1x1 feature map to 6x6 or 7x7 before a
 * classifier flattens it (alexnet, vgg16 at small images): the product then reads a weight
 * J times larger than the values it multiplies. The rewrite reads the weight once, in a
 * streaming reduce, and multiplies a J-times smaller one. A single row (M = 1) is rewritten
 * only when the weight is a parameter: its product already reads the weight once, at the
 * same cost as the reduce, but a reduce of a parameter alone can be kept across calls.
 *
 * Not exact: the sum over each group of k is taken before the products, so results differ
 * by rounding (a reassociated float sum, as a BLAS's own blocking does). Backends opt in;
 * the reference evaluator runs the graph as written.
 *
 * How L repeats is described by a "repeat form": a list of dims whose row-major order is
 * L's, each either real (one of V's dims, in V's order) or a repeat (L's value does not
 * depend on the index). A reshape keeps its operand's form; a concatenation of r copies of
 * x along a dim inserts a repeat of r where x's form splits at that dim; a broadcast
 * inserts a repeat for each new dim. */
#include <stdlib.h>
#include <string.h>

#include "exec_internal.h"
#include "hlo/hlo.h"

#include <assert.h>

enum { MAX_FORM = 2 * HLO_MAX_RANK };

typedef struct repeat_form {
  int count;
  int64_t size[MAX_FORM];
  bool repeat[MAX_FORM];
} repeat_form;

static bool plain_array(const hlo_instr *instr) {
  const hlo_shape *s = &instr->shape;
  return hlo_shape_is_array(s) && hlo_shape_is_default_layout(s) && !hlo_shape_is_dynamic(s);
}

/* Forms leave out size-1 dims: they change no order. */
static void form_of_dims(const hlo_shape *s, repeat_form *form) {
  form->count = 0;
  for (int d = 0; d < s->rank; d++)
    if (s->dims[d] != 1) form->size[form->count] = s->dims[d], form->repeat[form->count++] = false;
}

/* The entry of form that starts after entries whose sizes multiply to before; -1 when no
 * entry boundary falls there. */
static int split_at(const repeat_form *form, int64_t before) {
  int64_t product = 1;
  for (int i = 0; i <= form->count; i++) {
    if (product == before) return i;
    if (i < form->count) product *= form->size[i];
  }
  return -1;
}

static bool insert(repeat_form *form, int at, int64_t size) {
  if (form->count == MAX_FORM || at < 0 || at > form->count) return false;
  memmove(form->size + at + 1, form->size + at, sizeof(int64_t) * (size_t)(form->count - at));
  memmove(form->repeat + at + 1, form->repeat + at, sizeof(bool) * (size_t)(form->count - at));
  form->size[at] = size, form->repeat[at] = true;
  form->count++;
  return true;
}

static int64_t product(const int64_t *dims, int count) {
  int64_t p = 1;
  for (int i = 0; i < count; i++) p *= dims[i];
  return p;
}

static const hlo_instr *source_of(const hlo_instr *instr, repeat_form *form, int depth);

/* How many reshapes, concatenations and broadcasts are followed back from a dot's lhs. */
enum { MAX_DEPTH = 32 };

/* concatenate(x, x, ..., x) along d: x's form with a repeat of r where x's dim d starts. */
static const hlo_instr *through_concat(const hlo_instr *instr, repeat_form *form, int depth) {
  const hlo_instr *x = instr->operands[0];
  for (int k = 1; k < instr->operand_count; k++)
    if (instr->operands[k] != x) return NULL;
  if (instr->operand_count < 2 || instr->dimensions.count != 1 || !plain_array(x)) return NULL;
  int64_t d = instr->dimensions.values[0];
  if (d < 0 || d >= x->shape.rank) return NULL;
  const hlo_instr *source = source_of(x, form, depth + 1);
  return insert(form, split_at(form, product(x->shape.dims, (int)d)), instr->operand_count) ? source : NULL;
}

/* broadcast(x) with x's dims in order: x's form with a repeat for each new dim, x's dims
 * each a run of its form's entries. */
static const hlo_instr *through_broadcast(const hlo_instr *instr, repeat_form *form, int depth) {
  const hlo_instr *x = instr->operands[0];
  const hlo_ints *map = &instr->dimensions;
  if (!plain_array(x) || map->count != x->shape.rank) return NULL;
  for (int i = 1; i < map->count; i++)
    if (map->values[i] <= map->values[i - 1]) return NULL; /* a transposing broadcast */
  repeat_form inner;
  const hlo_instr *source = source_of(x, &inner, depth + 1);
  form->count = 0;
  int next = 0; /* x's next dim */
  int at = 0;   /* inner's next entry */
  for (int d = 0; d < instr->shape.rank; d++) {
    bool mapped = next < map->count && map->values[next] == d;
    if (!mapped && instr->shape.dims[d] == 1) continue;
    if (!mapped) {
      if (form->count == MAX_FORM) return NULL;
      form->size[form->count] = instr->shape.dims[d], form->repeat[form->count++] = true;
      continue;
    }
    /* x's dim `next` is inner's entries from `at` to where their product reaches it */
    int64_t want = x->shape.dims[next++], have = 1;
    while (have < want) {
      if (at == inner.count || form->count == MAX_FORM) return NULL;
      have *= inner.size[at];
      form->size[form->count] = inner.size[at], form->repeat[form->count++] = inner.repeat[at];
      at++;
    }
    if (have != want) return NULL;
  }
  return at == inner.count && next == map->count ? source : NULL;
}

/* The instruction whose values instr repeats, and the form; instr itself (all dims real)
 * when it is no reshape, concatenation of copies or broadcast whose operand repeats. */
static const hlo_instr *source_of(const hlo_instr *instr, repeat_form *form, int depth) {
  const hlo_instr *source = NULL;
  if (depth < MAX_DEPTH && plain_array(instr) && instr->operand_count >= 1 && plain_array(instr->operands[0])) {
    if (instr->opcode == HLO_OP_RESHAPE && instr->operand_count == 1) source = source_of(instr->operands[0], form, depth + 1);
    else if (instr->opcode == HLO_OP_CONCATENATE) source = through_concat(instr, form, depth);
    else if (instr->opcode == HLO_OP_BROADCAST && instr->operand_count == 1) source = through_broadcast(instr, form, depth);
  }
  if (source) return source;
  form_of_dims(&instr->shape, form);
  return instr;
}

/* Whether dot is a plain matrix product the rewrite handles and gains on: lhs [M, K] . rhs
 * [K, N] or [N, K], floats, nothing empty, and M > 1 or a weight that is a parameter.
 * *k_first: the rhs is [K, N]. */
static bool plain_product(const hlo_instr *dot, bool *k_first) {
  const hlo_dot_dims *dd = dot->dot;
  if (!dd || dot->operand_count != 2 || dd->lhs_batch.count || dd->rhs_batch.count) return false;
  const hlo_instr *lhs = dot->operands[0], *rhs = dot->operands[1];
  hlo_dtype t = dot->shape.dtype;
  if ((t != HLO_F32 && t != HLO_F64) || lhs->shape.dtype != t || rhs->shape.dtype != t) return false;
  if (!plain_array(dot) || !plain_array(lhs) || !plain_array(rhs) || lhs->shape.rank != 2 || rhs->shape.rank != 2)
    return false;
  if (hlo_shape_elements(&lhs->shape) == 0 || hlo_shape_elements(&rhs->shape) == 0) return false;
  if (dd->lhs_contracting.count != 1 || dd->lhs_contracting.values[0] != 1 || dd->rhs_contracting.count != 1)
    return false;
  *k_first = dd->rhs_contracting.values[0] == 0;
  /* One row reads the weight once either way, one multiply-add per element against one
   * add, unless the sum is kept: a backend may keep a reduce of a parameter alone from one
   * call to the next while the argument's contents are the same (the cpu backend does), and
   * then only the summed weight is read. */
  return lhs->shape.dims[0] > 1 || hlo_under_views(rhs)->opcode == HLO_OP_PARAMETER;
}

/* The contracting entries of form (those after the lhs rows) with adjacent entries of one
 * kind merged; false when the rows are not V's first dim or nothing repeats. */
static bool contracting_part(const repeat_form *form, const hlo_instr *source, int64_t rows, repeat_form *merged) {
  if (source->shape.rank < 2 || source->shape.dims[0] != rows) return false;
  /* the entries before begin multiply to V's first dim, so they are that dim alone: a
   * repeat among them would make the product larger */
  int begin = split_at(form, rows);
  if (begin < 0) return false;
  merged->count = 0;
  bool repeats = false;
  for (int i = begin; i < form->count; i++) {
    repeats = repeats || form->repeat[i];
    if (merged->count && merged->repeat[merged->count - 1] == form->repeat[i])
      merged->size[merged->count - 1] *= form->size[i];
    else
      merged->size[merged->count] = form->size[i], merged->repeat[merged->count++] = form->repeat[i];
  }
  return repeats;
}

/* rhs summed over the repeats and shaped as [V's contracting dims..., N] (or N first). */
static hlo_instr *summed_rhs(hlo_comp *comp, hlo_instr *rhs, const repeat_form *k, const hlo_instr *source,
                             bool k_first, hlo_diag *diag) {
  int64_t n = rhs->shape.dims[k_first ? 1 : 0];
  int64_t view[MAX_FORM + 1], reduced[MAX_FORM], wanted[HLO_MAX_RANK];
  int view_rank = 0, reduced_count = 0, wanted_rank = 0;
  if (!k_first) view[view_rank++] = n;
  for (int i = 0; i < k->count; i++) {
    if (k->repeat[i]) reduced[reduced_count++] = view_rank;
    view[view_rank++] = k->size[i];
  }
  if (k_first) view[view_rank++] = n;
  if (!k_first) wanted[wanted_rank++] = n;
  for (int d = 1; d < source->shape.rank; d++) wanted[wanted_rank++] = source->shape.dims[d];
  if (k_first) wanted[wanted_rank++] = n;
  if (view_rank > HLO_MAX_RANK) return NULL;
  hlo_instr *grouped = hlo_build_reshape(comp, rhs, view_rank, view, diag);
  hlo_instr *zero = grouped ? hlo_build_constant_scalar(comp, rhs->shape.dtype, 0, diag) : NULL;
  hlo_comp *add = zero ? hlo_shared_scalar_reducer(comp->module, HLO_OP_ADD, rhs->shape.dtype) : NULL;
  hlo_instr *sum = add ? hlo_build_reduce(comp, grouped, zero, reduced_count, reduced, add, diag) : NULL;
  return sum ? hlo_build_reshape(comp, sum, wanted_rank, wanted, diag) : NULL;
}

/* The rewritten dot, or NULL when dot is not one to rewrite. */
static hlo_instr *rewrite(hlo_comp *comp, hlo_instr *dot, hlo_diag *diag) {
  bool k_first;
  if (!plain_product(dot, &k_first)) return NULL;
  repeat_form form, k;
  const hlo_instr *source = source_of(dot->operands[0], &form, 0);
  if (source == dot->operands[0] || !contracting_part(&form, source, dot->operands[0]->shape.dims[0], &k))
    return NULL;
  hlo_instr *rhs = summed_rhs(comp, dot->operands[1], &k, source, k_first, diag);
  if (!rhs) return NULL;
  int contracting = source->shape.rank - 1;
  int64_t lhs_dims[HLO_MAX_RANK], rhs_dims[HLO_MAX_RANK];
  for (int i = 0; i < contracting; i++) lhs_dims[i] = 1 + i, rhs_dims[i] = k_first ? i : 1 + i;
  hlo_arena *arena = &comp->module->arena;
  hlo_dot_dims dims = {.lhs_contracting = hlo_ints_copy(arena, contracting, lhs_dims),
                       .rhs_contracting = hlo_ints_copy(arena, contracting, rhs_dims)};
  hlo_instr *product = hlo_build_dot(comp, (hlo_instr *)source, rhs, &dims, diag);
  if (!product || !hlo_shape_equal(&product->shape, &dot->shape)) return NULL;
  product->origin = dot->origin; /* the same result: binding takes its shape from the dot's */
  return product;
}

int rt_cpu_pass_dot_of_repeats(hlo_module *module) {
  /* the computations as they are now: a rewrite may add a reducer in front of them */
  int comp_count = module->comp_count, rewrites = 0;
  hlo_comp **comps = hlo_malloc(sizeof *comps * ((size_t)comp_count + 1));
  if (!comps) return 0;
  memcpy(comps, module->comps, sizeof *comps * (size_t)comp_count);
  for (int c = 0; c < comp_count; c++) {
    hlo_comp *comp = comps[c];
    int count = comp->instr_count, before = rewrites;
    for (int i = 0; i < count; i++) {
      hlo_instr *dot = comp->instrs[i];
      if (dot->opcode != HLO_OP_DOT) continue;
      hlo_diag diag;
      hlo_instr *product = hlo_choice("dot_of_repeats", dot->name) ? rewrite(comp, dot, &diag) : NULL;
      if (!product) continue;
      hlo_replace_uses(comp, dot, product);
      rewrites++;
    }
    hlo_diag diag = {HLO_OK, ""};
    if (rewrites > before && !hlo_comp_sort(comp, &diag)) {
      assert(diag.status == HLO_ERR_INTERNAL); /* no cycle was made; memory ran out (arena.failed set) */
      break;
    }
  }
  free(comps);
  if (rewrites && !module->arena.failed) hlo_pass_dce(module);
  return rewrites;
}
