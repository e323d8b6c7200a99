/* The bindings a symbolic entry keeps (function.h, cap_kept): what runs each binding other
 * than the trace's own, so a size seen again runs at once. At most CAP_BINDINGS_KEPT per
 * entry; past it the least recently used is dropped, so a function called with 10,000
 * sizes holds 64 bound executables, not 10,000. A dropped binding is built again if its
 * sizes come back (microseconds for a bound executable or a module; a compile for a
 * specialization). Lookups scan the list, which the limit keeps short. */
#include <stdlib.h>
#include <string.h>

#include "capture.h"

static bool same_bindings(const int64_t *a, const int64_t *b, int n) {
  return n == 0 || memcmp(a, b, sizeof(int64_t) * (size_t)n) == 0;
}

static void destroy(latch_runtime *rt, cap_spec *spec) {
  if (spec->bound) spec->bound_by->destroy(spec->bound);
  free(spec->bindings);
  if (spec->cached) cache_table_release(rt->cache, spec->cached);
  hlo_module_free(spec->module);
  cap_segment_runs_free(rt, spec->segment_runs, spec->segment_count);
}

void cap_bindings_release(latch_runtime *rt, cap_kept *kept) {
  if (!kept || atomic_fetch_sub(&kept->refs, 1) != 1) return;
  destroy(rt, &kept->spec);
  free(kept);
}

cap_kept *cap_bindings_find(cap_entry *e, const int64_t *bindings) {
  cap_kept *found = NULL;
  pthread_mutex_lock(&e->spec_lock);
  for (int k = 0; k < e->kept_count && !found; k++)
    if (same_bindings(e->kept[k]->spec.bindings, bindings, e->symbol_count)) {
      found = e->kept[k];
      atomic_fetch_add(&found->refs, 1);
      found->last_used = ++e->kept_clock;
    }
  pthread_mutex_unlock(&e->spec_lock);
  return found;
}

/* The slot for a new binding: a free one, or the least recently used one's, whose binding
 * goes to *dropped. -1 when the list cannot grow. */
static int slot(cap_entry *e, cap_kept **dropped) {
  *dropped = NULL;
  if (e->kept_count == CAP_BINDINGS_KEPT) {
    int oldest = 0;
    for (int k = 1; k < e->kept_count; k++)
      if (e->kept[k]->last_used < e->kept[oldest]->last_used) oldest = k;
    *dropped = e->kept[oldest];
    e->kept_dropped++;
    return oldest;
  }
  if (e->kept_count == e->kept_capacity) {
    int capacity = e->kept_capacity ? e->kept_capacity * 2 : 8;
    if (capacity > CAP_BINDINGS_KEPT) capacity = CAP_BINDINGS_KEPT;
    cap_kept **grown = hlo_realloc(e->kept, sizeof *grown * (size_t)capacity);
    if (!grown) return -1;
    e->kept = grown;
    e->kept_capacity = capacity;
  }
  return e->kept_count++;
}

cap_kept *cap_bindings_keep(latch_runtime *rt, cap_entry *e, const cap_spec *made) {
  cap_kept *kept = hlo_malloc(sizeof *kept);
  int64_t *bindings = hlo_malloc(sizeof(int64_t) * ((size_t)e->symbol_count + 1));
  if (!kept || !bindings) {
    free(kept);
    free(bindings);
    cap_spec spec = *made;
    spec.bindings = NULL;
    destroy(rt, &spec);
    return NULL;
  }
  memcpy(bindings, made->bindings, sizeof(int64_t) * (size_t)e->symbol_count);
  kept->spec = *made;
  kept->spec.bindings = bindings;
  atomic_init(&kept->refs, 1); /* the caller's */
  atomic_init(&kept->on_trial, made->loaded);
  cap_kept *dropped = NULL;
  pthread_mutex_lock(&e->spec_lock);
  kept->last_used = ++e->kept_clock;
  int at = slot(e, &dropped);
  if (at >= 0) { /* not kept when the list cannot grow: it runs this once */
    e->kept[at] = kept;
    atomic_fetch_add(&kept->refs, 1);
  }
  pthread_mutex_unlock(&e->spec_lock);
  cap_bindings_release(rt, dropped);
  return kept;
}

void cap_bindings_forget(latch_runtime *rt, cap_entry *e, cap_kept *kept) {
  bool found = false;
  pthread_mutex_lock(&e->spec_lock);
  for (int k = 0; k < e->kept_count && !found; k++)
    if (e->kept[k] == kept) {
      e->kept[k] = e->kept[--e->kept_count];
      found = true;
    }
  pthread_mutex_unlock(&e->spec_lock);
  if (found) cap_bindings_release(rt, kept);
}

void cap_bindings_free(latch_runtime *rt, cap_entry *e) {
  for (int k = 0; k < e->kept_count; k++) cap_bindings_release(rt, e->kept[k]);
  free(e->kept);
  e->kept = NULL;
  e->kept_count = e->kept_capacity = 0;
}

void cap_bindings_count(cap_entry *e, uint64_t *kept, uint64_t *dropped) {
  pthread_mutex_lock(&e->spec_lock);
  *kept = (uint64_t)e->kept_count;
  *dropped = e->kept_dropped;
  pthread_mutex_unlock(&e->spec_lock);
}
