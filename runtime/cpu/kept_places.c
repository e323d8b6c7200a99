/* Where a plan keeps its kept results (kept.c; plan.c's place_kept puts them first in the
 * arena), so that the arena of one executable's family can hand them from one plan to
 * another: bindings of a graph to other sizes (a batch of 2, then of 3) share one arena, so
 * a switch between them keeps the kept results, a whole network's reordered weights
 * included, instead of making them again.
 *
 * Two plans of one family (the same optimized graph: instruction i is the same operation in
 * both) hand their kept results on when every kept result lies at the same offsets: the
 * same steps, each with its stamps at the same place, each result of the same shape at the
 * same offset, and a DNNL step's weights in the same oneDNN layout, or both its filters
 * transformed for wino.c (a batch of 8 may run a layer by Winograd that a batch of 1 leaves
 * to oneDNN). The stamps then say, as
 * they do within one plan, whether a result is still current for this execute's arguments.
 * They say nothing of sizes that are not shapes: a kept slice whose bounds move with the
 * binding (a position embedding's row at the current position) reads other elements of the
 * same parameter, so each kept step's instruction must match in its size attributes too. */
#include <stdlib.h>

#include "dnnl_internal.h"

typedef struct kept_item {
  int step;
  int param_count;
  int64_t stamp_offset, offset;
  const hlo_instr *instr;          /* a kept step's (its plan's module outlives the places) */
  const dnnl_memory_desc_t *weights; /* a DNNL step's reordered weights, or NULL */
  bool wino;                         /* ... transformed for wino.c instead */
  int64_t packed_bytes;              /* a product's rhs packed (instr the product), or 0 */
} kept_item;

struct rt_cpu_kept_places {
  int count;
  kept_item items[];
};

/* Whether step i keeps a result: its own (a kept step) or its reordered weights. */
static bool keeps(const rt_cpu_plan *plan, int i) {
  return plan->steps[i].kept || rt_cpu_step_keeps_weights(&plan->steps[i]);
}

/* Step i's kept item as plan lays it out. */
static kept_item item_of(const rt_cpu_plan *plan, int i) {
  const rt_cpu_step *step = &plan->steps[i];
  if (rt_cpu_step_keeps_weights(step) && step->dnnl)
    return (kept_item){.step = i, .stamp_offset = step->stamp_offset, .offset = step->weight_offset,
                       .weights = &step->dnnl->weights_md, .wino = step->dnnl->wino};
  /* a packed rhs: its layout follows from the product's shape and dimension numbers */
  if (rt_cpu_step_keeps_weights(step))
    return (kept_item){.step = i, .stamp_offset = step->stamp_offset, .offset = step->weight_offset,
                       .instr = rt_cpu_step_packed_dot(step), .packed_bytes = step->weight_bytes};
  return (kept_item){.step = i, .param_count = step->kept_param_count, .stamp_offset = step->stamp_offset,
                     .offset = step->offset, .instr = step->instr};
}

static bool same_item(const kept_item *a, const kept_item *b) {
  if (a->step != b->step || a->param_count != b->param_count || a->stamp_offset != b->stamp_offset ||
      a->offset != b->offset || !a->weights != !b->weights || a->packed_bytes != b->packed_bytes)
    return false;
  if (a->weights) return a->wino == b->wino && dnnl_memory_desc_equal(a->weights, b->weights) != 0;
  const char *which;
  return hlo_shape_equal(&a->instr->shape, &b->instr->shape) && hlo_instr_same_attrs(a->instr, b->instr, true, &which);
}

/* NULL when plan keeps nothing (or runs on the reference evaluator), or memory ran out. */
rt_cpu_kept_places *rt_cpu_kept_places_of(const rt_cpu_plan *plan) {
  if (!plan->kept_count || plan->dynamic) return NULL;
  int count = 0;
  for (int i = 0; i < plan->step_count; i++) count += keeps(plan, i);
  rt_cpu_kept_places *places = hlo_malloc(sizeof *places + sizeof(kept_item) * (size_t)count);
  if (!places) return NULL;
  places->count = 0;
  for (int i = 0; i < plan->step_count; i++)
    if (keeps(plan, i)) places->items[places->count++] = item_of(plan, i);
  return places;
}

bool rt_cpu_kept_places_matches(const rt_cpu_kept_places *places, const rt_cpu_plan *plan) {
  if (!places || !plan->kept_count || plan->dynamic) return false;
  int k = 0;
  for (int i = 0; i < plan->step_count; i++) {
    if (!keeps(plan, i)) continue;
    kept_item item = item_of(plan, i);
    if (k == places->count || !same_item(&places->items[k++], &item)) return false;
  }
  return k == places->count;
}

void rt_cpu_kept_places_free(rt_cpu_kept_places *places) { free(places); }
