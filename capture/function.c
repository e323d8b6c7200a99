/* Traced functions: registration, the call path (guards, then a cached entry or a trace),
 * the shape policy, the recompile limit, logs and statistics.
 *
 * Entries are only ever added while the function lives, as an immutable snapshot: a writer
 * publishes a longer copy and keeps the older lists until the function is freed, so a
 * reader's snapshot stays valid (the statistics read it without any lock).
 *
 * Calls of one function exclude each other where they could see each other's writes
 * (calls_lock): a trace may assign any tensor it reaches, and a hit of an entry that
 * updates a weight (a captured handle) does a read-modify-write of it; both run alone. A
 * hit of an entry that updates no weight shares the lock with other such hits. A miss
 * looks again once it holds the lock alone, so threads missing on the same inputs at once
 * trace once: the first adds the entry, the rest hit it.
 *
 * fork: a child has only the thread that forked, and a call another thread had in flight (a
 * trace holds calls_lock through its compile) never ends there. fork waits for each
 * function's lock and its entries' spec_lock (bookkeeping only, never held across a compile),
 * so the entry list, the kept bindings and the shape policy's dims are whole in the child,
 * and there calls_lock and the segment plans' locks start free, unless the forking thread
 * holds calls_lock itself (a fork from inside a call, as LATCH_CHECK's isolated check does).
 * The call that was in flight is the parent's; the child traces again if it needs that entry
 * (pthread_atfork handlers, registered with the first function). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "runtime/runtime.h"

typedef struct entry_list {
  int count;
  struct entry_list *older;
  cap_entry *items[]; /* oldest first */
} entry_list;

struct latch_function {
  latch_runtime *rt;
  latch_fn fn;
  latch_step_fn step;
  void *user;
  latch_function_options options;
  char name[64];
  latch_dim_mark *marks;
  bool log_recompiles, log_guards;
  pthread_mutex_t lock;           /* writers: adding entries, the automatic policy's dims */
  pthread_rwlock_t calls_lock;    /* shared: hits that update no weight; alone: the rest */
  atomic_bool updates_weights;    /* some entry assigns a weight: calls take calls_lock alone */
  _Atomic(struct entry_list *) list;
  atomic_int mru;      /* the entry that passed last: tried first */
  /* Automatic policy: input dims seen to change (input * HLO_MAX_RANK + dim), under lock. */
  bool *auto_dynamic;
  int auto_inputs;
  atomic_bool trace_every, warned;
  cap_reasons reasons; /* why each recompile missed; under calls_lock held alone */
  atomic_uint_fast64_t call_counter;
  atomic_uint_fast64_t calls, hits, traces, recompiles, fallback_calls, specializations, instantiations, instantiate_ns, guard_checks, guard_ns,
      guard_timed, trace_ns;
  struct latch_function *next_open, *prev_open; /* every function, for fork (under open_lock) */
};

/* ---- calls_lock, and fork ---- */

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static latch_function *open_functions;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
/* The functions whose calls_lock this thread holds, innermost last (calls may nest: a
 * function's trace may call another). */
enum { HELD_MAX = 16 };
static _Thread_local latch_function *held[HELD_MAX];
static _Thread_local int held_count;

static void init_calls_lock(latch_function *f) {
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
#ifdef __GLIBC__
  /* A steady stream of hits must not starve a trace waiting to run alone. */
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
  pthread_rwlock_init(&f->calls_lock, &attr);
  pthread_rwlockattr_destroy(&attr);
}

static void lock_calls(latch_function *f, bool alone) {
  if (alone)
    pthread_rwlock_wrlock(&f->calls_lock);
  else
    pthread_rwlock_rdlock(&f->calls_lock);
  if (held_count < HELD_MAX) held[held_count] = f;
  held_count++;
}

static void unlock_calls(latch_function *f) {
  held_count--;
  pthread_rwlock_unlock(&f->calls_lock);
}

static bool held_here(const latch_function *f) {
  for (int i = 0; i < held_count && i < HELD_MAX; i++)
    if (held[i] == f) return true;
  return false;
}

/* Each function's lock, then its entries' spec_lock (bookkeeping of kept bindings). */
static void fork_prepare(void) {
  pthread_mutex_lock(&open_lock);
  for (latch_function *f = open_functions; f; f = f->next_open) {
    pthread_mutex_lock(&f->lock);
    entry_list *list = atomic_load(&f->list);
    for (int i = 0; list && i < list->count; i++) pthread_mutex_lock(&list->items[i]->spec_lock);
  }
}

static void fork_parent(void) {
  for (latch_function *f = open_functions; f; f = f->next_open) {
    entry_list *list = atomic_load(&f->list);
    for (int i = 0; list && i < list->count; i++) pthread_mutex_unlock(&list->items[i]->spec_lock);
    pthread_mutex_unlock(&f->lock);
  }
  pthread_mutex_unlock(&open_lock);
}

/* calls_lock and a segment plan's lock, held through compiles, start free: the threads that
 * held them are the parent's. */
static void fork_child(void) {
  for (latch_function *f = open_functions; f; f = f->next_open) {
    if (!held_here(f)) init_calls_lock(f);
    entry_list *list = atomic_load(&f->list);
    for (int i = 0; list && i < list->count; i++) {
      pthread_mutex_unlock(&list->items[i]->spec_lock);
      cap_segments_fork_child(list->items[i]->segments);
    }
    pthread_mutex_unlock(&f->lock);
  }
  pthread_mutex_unlock(&open_lock);
}

static void fork_setup(void) {
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void list_open(latch_function *f) {
  pthread_once(&fork_once, fork_setup);
  pthread_mutex_lock(&open_lock);
  f->next_open = open_functions;
  if (open_functions) open_functions->prev_open = f;
  open_functions = f;
  pthread_mutex_unlock(&open_lock);
}

static void unlist_open(latch_function *f) {
  pthread_mutex_lock(&open_lock);
  if (f->prev_open) f->prev_open->next_open = f->next_open;
  else open_functions = f->next_open;
  if (f->next_open) f->next_open->prev_open = f->prev_open;
  pthread_mutex_unlock(&open_lock);
}

enum { GUARD_SAMPLE = 8 };

static latch_function *make(latch_runtime *rt, latch_fn fn, latch_step_fn step, void *user,
                            const latch_function_options *options) {
  latch_function_options defaults;
  if (!options) {
    if (latch_function_options_init(&defaults) != LATCH_OK) return NULL;
    options = &defaults;
  }
  if (!rt || (!fn && !step)) {
    cap_set_error("function_new: NULL runtime or function");
    return NULL;
  }
  if ((unsigned)options->mode > LATCH_TRACE_EAGER || (unsigned)options->shapes > LATCH_SHAPES_MARKED ||
      options->recompile_limit < 0 || options->mark_count < 0 || (options->mark_count && !options->marks)) {
    cap_set_error("function_new: bad options (mode, shape policy, recompile limit or marks)");
    return NULL;
  }
  for (int i = 0; i < options->mark_count; i++)
    if (options->marks[i].input < 0 || options->marks[i].dim < 0 || options->marks[i].dim >= HLO_MAX_RANK) {
      cap_set_error("function_new: mark %d names input %d dim %d", i, options->marks[i].input, options->marks[i].dim);
      return NULL;
    }
  bool bf16_products = rt->bf16_products;
  if (options->precision && !cap_precision_parse("function_new", options->precision, &bf16_products)) return NULL;
  latch_function *f = hlo_calloc(1, sizeof *f);
  if (!f) {
    cap_set_error("function_new: out of memory");
    return NULL;
  }
  f->rt = rt;
  f->fn = fn;
  f->step = step;
  f->user = user;
  f->options = *options;
  snprintf(f->name, sizeof f->name, "%s", options->name ? options->name : "function");
  f->options.name = f->name;
  if (options->mark_count) {
    f->marks = hlo_malloc(sizeof *f->marks * (size_t)options->mark_count);
    if (!f->marks) {
      free(f);
      cap_set_error("function_new: out of memory");
      return NULL;
    }
    memcpy(f->marks, options->marks, sizeof *f->marks * (size_t)options->mark_count);
  }
  f->options.marks = f->marks;
  f->options.precision = bf16_products ? "bf16" : "f32";
  f->log_recompiles = rt->log & CAP_LOG_RECOMPILES;
  f->log_guards = rt->log & CAP_LOG_GUARDS;
  pthread_mutex_init(&f->lock, NULL);
  init_calls_lock(f);
  list_open(f);
  return f;
}

latch_function *latch_function_new(latch_runtime *rt, latch_fn fn, void *user, const latch_function_options *options) {
  return make(rt, fn, NULL, user, options);
}

latch_function *latch_function_new_step(latch_runtime *rt, latch_step_fn step, void *user,
                                        const latch_function_options *options) {
  return make(rt, NULL, step, user, options);
}

void latch_function_free(latch_function *f) {
  if (!f) return;
  unlist_open(f);
  entry_list *list = atomic_load(&f->list);
  for (int i = 0; list && i < list->count; i++) cap_entry_free(f->rt, list->items[i]);
  while (list) {
    entry_list *older = list->older;
    free(list);
    list = older;
  }
  free(f->auto_dynamic);
  free(f->marks);
  pthread_mutex_destroy(&f->lock);
  pthread_rwlock_destroy(&f->calls_lock);
  free(f);
}

void latch_function_get_stats(latch_function *f, latch_function_stats *s) {
  memset(s, 0, sizeof *s);
  if (!f) return;
  s->calls = atomic_load(&f->calls);
  s->hits = atomic_load(&f->hits);
  s->traces = atomic_load(&f->traces);
  s->recompiles = atomic_load(&f->recompiles);
  s->fallback_calls = atomic_load(&f->fallback_calls);
  s->specializations = atomic_load(&f->specializations);
  s->instantiations = atomic_load(&f->instantiations);
  s->instantiate_ns = atomic_load(&f->instantiate_ns);
  s->guard_checks = atomic_load(&f->guard_checks);
  s->guard_ns = atomic_load(&f->guard_ns);
  s->guard_timed = atomic_load(&f->guard_timed);
  s->trace_ns = atomic_load(&f->trace_ns);
  s->trace_every = atomic_load(&f->trace_every);
  entry_list *list = atomic_load_explicit(&f->list, memory_order_acquire);
  s->entries = list ? (uint64_t)list->count : 0;
  for (int i = 0; list && i < list->count; i++) {
    uint64_t kept, dropped;
    cap_bindings_count(list->items[i], &kept, &dropped);
    s->bindings_kept += kept;
    s->bindings_dropped += dropped;
  }
}

static latch_status invoke(latch_function *f, latch_tensor *const *inputs, int input_count, const latch_static *statics,
                           int static_count, latch_tensor **outputs, int output_count) {
  if (f->fn) return f->fn(f->user, inputs, input_count, statics, static_count, outputs, output_count);
  return f->step(f->user, inputs, input_count, outputs, output_count);
}

static void release_outputs(latch_tensor **outputs, int count) {
  for (int j = 0; j < count; j++) {
    latch_release(outputs[j]);
    outputs[j] = NULL;
  }
}

/* ---- the shape policy ---- */

/* Which input dims the next trace keeps symbolic; false when memory runs out. */
static bool plan_dims(latch_function *f, latch_tensor *const *inputs, int input_count, bool *symbolic,
                      bool *independent) {
  memset(symbolic, 0, sizeof(bool) * (size_t)input_count * HLO_MAX_RANK);
  memset(independent, 0, sizeof(bool) * (size_t)input_count * HLO_MAX_RANK);
  if (f->options.shapes == LATCH_SHAPES_STATIC) return true;
  for (int m = 0; m < f->options.mark_count; m++) {
    const latch_dim_mark *mark = &f->marks[m];
    if (mark->input >= input_count) continue;
    int at = mark->input * HLO_MAX_RANK + mark->dim;
    if (mark->dynamic) symbolic[at] = true;
    if (mark->independent) independent[at] = true;
  }
  if (f->options.shapes != LATCH_SHAPES_AUTOMATIC) return true;
  /* A dim that differs from what an earlier trace with the same dtypes and ranks saw has
   * changed once: it becomes symbolic, now and in every later trace. */
  pthread_mutex_lock(&f->lock);
  if (f->auto_inputs < input_count) {
    bool *grown = hlo_realloc(f->auto_dynamic, sizeof(bool) * (size_t)input_count * HLO_MAX_RANK);
    if (!grown) {
      pthread_mutex_unlock(&f->lock);
      return false;
    }
    memset(grown + f->auto_inputs * HLO_MAX_RANK, 0, sizeof(bool) * (size_t)(input_count - f->auto_inputs) * HLO_MAX_RANK);
    f->auto_dynamic = grown;
    f->auto_inputs = input_count;
  }
  entry_list *list = atomic_load_explicit(&f->list, memory_order_acquire);
  for (int k = 0; list && k < list->count; k++) {
    const cap_entry *e = list->items[k];
    if (e->input_count != input_count) continue;
    bool alike = true;
    for (int i = 0; i < input_count && alike; i++)
      alike = e->dtypes[i] == inputs[i]->node->dtype && e->ranks[i] == inputs[i]->node->rank;
    for (int i = 0; alike && i < input_count; i++)
      for (int d = 0; d < e->ranks[i]; d++)
        if (e->dims[i][d] != inputs[i]->node->dims[d]) f->auto_dynamic[i * HLO_MAX_RANK + d] = true;
  }
  for (int i = 0; i < input_count * HLO_MAX_RANK; i++) symbolic[i] = symbolic[i] || f->auto_dynamic[i];
  pthread_mutex_unlock(&f->lock);
  return true;
}

/* ---- logs ---- */

static void log_guards(latch_function *f, const cap_trace *trace, const cap_entry *e, int entry_number) {
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  guard_set_print(trace->guards, &sb);
  fprintf(stderr, "latch: '%s' entry %d guards:\n%s", f->name, entry_number, sb.data ? sb.data : "");
  hlo_sb_free(&sb);
  if (e->segments) {
    char what[160];
    cap_segments_describe(e->segments, what, sizeof what);
    fprintf(stderr, "latch: '%s' entry %d runs in segments: %s\n", f->name, entry_number, what);
  }
}

static void log_recompile(latch_function *f, uint64_t number, const guard_failure *why, bool have_why,
                          latch_tensor *const *inputs, int input_count) {
  if (!have_why) {
    fprintf(stderr, "latch: '%s' recompile %llu\n", f->name, (unsigned long long)number);
    return;
  }
  fprintf(stderr, "latch: '%s' recompile %llu (limit %d): %s", f->name, (unsigned long long)number,
          f->options.recompile_limit, why->message);
  if (why->input >= 0 && why->dim >= 0 && why->input < input_count)
    fprintf(stderr, " (input %d dim %d: %lld -> %lld)", why->input, why->dim, (long long)why->expected,
            (long long)inputs[why->input]->node->dims[why->dim]);
  fputc('\n', stderr);
}

/* ---- the call ---- */

static latch_status run_eager(latch_function *f, latch_tensor *const *inputs, int input_count,
                              const latch_static *statics, int static_count, latch_tensor **outputs, int output_count,
                              uint64_t seed) {
  cap_ctx *ctx = cap_ctx_current();
  ctx->eager = true;
  ctx->call_seeded = true;
  ctx->call_seed = seed;
  ctx->rng_stream = 0;
  latch_status status = invoke(f, inputs, input_count, statics, static_count, outputs, output_count);
  ctx->eager = false;
  ctx->call_seeded = false;
  return status;
}

/* Outputs that are the function's own input handles become the caller's, and those
 * handles are dropped: the caller's then alone hold their old buffers, which an input
 * updated in place is written back into. */
static void give_back_inputs(cap_trace *trace, latch_tensor **outputs, int output_count) {
  for (int j = 0; j < output_count; j++)
    for (int i = 0; i < trace->input_count; i++)
      if (outputs[j] == trace->inputs[i]) {
        latch_release(outputs[j]);
        outputs[j] = latch_retain((latch_tensor *)trace->callers[i]);
        break;
      }
  cap_trace_drop_inputs(trace);
}

/* One call being traced: the call's arguments and the trace that records it. */
enum { TRACE_FEW = 8 };
typedef struct traced_call {
  latch_function *f;
  latch_tensor *const *inputs;
  int input_count;
  const latch_static *statics;
  int static_count;
  latch_tensor **outputs;
  int output_count;
  uint64_t seed;
  cap_trace trace;
} traced_call;

/* The function's statics as guards see them (in buffer when few); NULL when memory runs out. */
static guard_static *guard_statics(const traced_call *c, guard_static *buffer) {
  guard_static *gs = c->static_count > TRACE_FEW ? hlo_malloc(sizeof *gs * (size_t)c->static_count) : buffer;
  for (int s = 0; gs && s < c->static_count; s++) {
    const latch_static *st = &c->statics[s];
    gs[s] = (guard_static){(guard_static_kind)st->kind, st->i, st->f, st->bytes, st->len};
  }
  return gs;
}

/* Begins the trace: the inputs' dims static or symbolic as the shape policy says, the
 * statics guarded by value. */
static latch_status trace_begin(traced_call *c) {
  bool symbolic_buffer[TRACE_FEW * HLO_MAX_RANK], independent_buffer[TRACE_FEW * HLO_MAX_RANK];
  bool *symbolic = symbolic_buffer, *independent = independent_buffer;
  if (c->input_count > TRACE_FEW) {
    symbolic = hlo_malloc(sizeof(bool) * (size_t)c->input_count * HLO_MAX_RANK);
    independent = hlo_malloc(sizeof(bool) * (size_t)c->input_count * HLO_MAX_RANK);
  }
  latch_status status = symbolic && independent && plan_dims(c->f, c->inputs, c->input_count, symbolic, independent)
                            ? LATCH_OK : LATCH_ERR_INTERNAL;
  if (status == LATCH_OK)
    status = cap_trace_begin(&c->trace, c->f->rt, c->input_count, c->inputs, symbolic, independent);
  if (status == LATCH_OK) c->trace.bf16_products = strcmp(c->f->options.precision, "bf16") == 0;
  if (symbolic != symbolic_buffer) free(symbolic);
  if (independent != independent_buffer) free(independent);
  if (status != LATCH_OK) {
    if (status == LATCH_ERR_INTERNAL && !*latch_last_error()) cap_set_error("call: out of memory");
    return status;
  }
  for (int s = 0; s < c->static_count; s++) {
    const latch_static *st = &c->statics[s];
    guard_static value = {(guard_static_kind)st->kind, st->i, st->f, st->bytes, st->len};
    guard_set_static(c->trace.guards, s, &value);
  }
  return LATCH_OK;
}

/* Runs the function under the trace and checks what it returned: no NULL and no error
 * output. Pending work from before the call returned as is is computed now, data the entry
 * returns like a weight; a weight returned as is stays the weight (a later call returns its
 * value then), while data the function made itself stays a constant. */
static latch_status trace_run(traced_call *c) {
  cap_ctx *ctx = cap_ctx_current();
  ctx->call_seeded = true;
  ctx->call_seed = c->seed;
  ctx->rng_stream = 0;
  latch_status status =
      invoke(c->f, c->trace.inputs, c->input_count, c->statics, c->static_count, c->outputs, c->output_count);
  cap_trace_end(&c->trace);
  ctx->call_seeded = false;
  for (int j = 0; status == LATCH_OK && j < c->output_count; j++) {
    latch_tensor **out = &c->outputs[j];
    cap_node *n = *out ? (*out)->node : NULL;
    if (n && n->state == CAP_PENDING && n->trace_id != c->trace.id) {
      if (cap_sync_nodes(c->f->rt, 1, &n, out) != LATCH_OK) c->trace.failed = true;
      else cap_trace_operands(&c->trace, 1, out);
    } else if (n && n->state == CAP_READY && (*out)->made_in_trace != c->trace.id) {
      cap_trace_operands(&c->trace, 1, out);
    }
    if (!*out) {
      cap_set_error("call: '%s' left output %d NULL", c->f->name, j);
      status = LATCH_ERR_INPUT;
    } else if ((*out)->node->state == CAP_ERROR) {
      cap_set_error("call: '%s' output %d: %s", c->f->name, j, (*out)->node->error);
      (*out)->node->reported = 1;
      status = LATCH_ERR_INPUT;
    }
  }
  return status;
}

/* A trace not kept (a value was read, or memory ran out): what the function left pending is
 * computed the ordinary way, its inputs through the caller's handles (which mirror every
 * assignment). */
static latch_status sync_untraced(traced_call *c) {
  cap_trace *trace = &c->trace;
  give_back_inputs(trace, c->outputs, c->output_count);
  if (trace->value_read && !atomic_exchange(&c->f->trace_every, true))
    fprintf(stderr, "latch: '%s' is traced on every call from now on: %s while it was traced\n", c->f->name,
            trace->value_read);
  int count = c->output_count + c->input_count + trace->captured_count, n = 0;
  latch_tensor **handles = hlo_malloc(sizeof *handles * (size_t)(count + 1));
  cap_node **roots = hlo_malloc(sizeof *roots * (size_t)(count + 1));
  latch_status status = handles && roots ? LATCH_OK : LATCH_ERR_INTERNAL;
  for (int j = 0; status == LATCH_OK && j < c->output_count; j++) handles[n++] = c->outputs[j];
  for (int i = 0; status == LATCH_OK && i < c->input_count; i++) handles[n++] = c->inputs[i];
  for (int k = 0; status == LATCH_OK && k < trace->captured_count; k++) handles[n++] = trace->captured[k].handle;
  for (int k = 0; status == LATCH_OK && k < n; k++) roots[k] = handles[k]->node;
  if (status == LATCH_OK) status = cap_sync_nodes(c->f->rt, n, roots, handles);
  for (int k = 0; status == LATCH_OK && k < n; k++)
    if (handles[k]->node->state == CAP_READY && !handles[k]->alias_of) cap_list_remove(handles[k]);
  free(handles);
  free(roots);
  return status;
}

/* The trace's own inputs must pass its guards; this also leaves the symbols' values in the
 * entry's hint_bindings. */
static latch_status check_own_guards(traced_call *c, cap_entry *e) {
  guard_tensor gin_buffer[TRACE_FEW], *gin = gin_buffer;
  if (c->input_count > TRACE_FEW) gin = hlo_malloc(sizeof *gin * (size_t)c->input_count);
  for (int i = 0; gin && i < c->input_count; i++) {
    const cap_node *n = c->trace.input_nodes[i];
    gin[i] = (guard_tensor){(hlo_dtype)n->dtype, n->rank, n->dims};
  }
  guard_static static_buffer[TRACE_FEW], *gs = guard_statics(c, static_buffer);
  guard_failure why;
  bool pass = gin && gs &&
              guard_program_check(e->program, gin, c->input_count, gs, c->static_count, e->hint_bindings, &why);
  if (gin != gin_buffer) free(gin);
  if (gs != static_buffer) free(gs);
  if (pass) return LATCH_OK;
  cap_set_error("call: '%s': a trace fails its own guards (a latch bug)", c->f->name);
  return LATCH_ERR_INTERNAL;
}

/* Runs the new entry now, as a hit would, so the first call already checks the entry's plan;
 * the function's own output handles are dropped first: then no pending node still reads an
 * assigned input's old buffer, and its new value can be written into that buffer. The
 * parameters stay alive through their handles and the entry. */
static latch_status run_first(traced_call *c, cap_entry *e, cap_node *const *first_params) {
  latch_tensor *traced_buffer[TRACE_FEW], **traced = traced_buffer;
  if (c->output_count > TRACE_FEW) traced = hlo_malloc(sizeof *traced * (size_t)c->output_count);
  if (!traced) return LATCH_ERR_INTERNAL;
  memcpy(traced, c->outputs, sizeof *traced * (size_t)c->output_count);
  memset(c->outputs, 0, sizeof *c->outputs * (size_t)c->output_count);
  release_outputs(traced, c->output_count);
  if (traced != traced_buffer) free(traced);
  cap_trace_drop_inputs(&c->trace);
  cap_run_kind kind;
  uint64_t unused = 0;
  return cap_entry_run(c->f->rt, e, c->inputs, c->seed, e->hint_bindings, first_params, c->outputs, &kind, &unused);
}

/* Builds the entry of a finished trace, checks it against its own inputs and runs it: *made
 * on success. */
static latch_status keep_entry(traced_call *c, cap_entry **made, bool print_guards) {
  cap_node **first_params = NULL;
  bool compiled = false;
  latch_status status = LATCH_OK;
  cap_entry *e = cap_entry_build(&c->trace, c->outputs, c->output_count, &first_params, &compiled, &status);
  if (e) status = check_own_guards(c, e);
  if (e && status == LATCH_OK) status = run_first(c, e, first_params);
  free(first_params);
  if (e && status != LATCH_OK) cap_entry_free(c->f->rt, e);
  if (!e || status != LATCH_OK) return status;
  *made = e;
  if (print_guards) {
    entry_list *list = atomic_load_explicit(&c->f->list, memory_order_acquire);
    log_guards(c->f, &c->trace, e, list ? list->count + 1 : 1);
  }
  return LATCH_OK;
}

/* Traces the call: runs the function under a trace, then keeps an entry for it (*made), or
 * computes its results the ordinary way when the trace cannot be kept. */
static latch_status trace_call(traced_call *c, cap_entry **made, bool print_guards) {
  *made = NULL;
  latch_status status = trace_begin(c);
  if (status != LATCH_OK) return status;
  status = trace_run(c);
  if (status == LATCH_OK) {
    cap_trace_forget_temporaries(&c->trace, c->outputs, c->output_count);
    status = c->trace.value_read || c->trace.failed ? sync_untraced(c) : keep_entry(c, made, print_guards);
  }
  if (status != LATCH_OK) release_outputs(c->outputs, c->output_count);
  cap_trace_free(&c->trace);
  return status;
}

/* Whether the entry writes a weight when it runs: an in-place update replayed, or (the
 * caller left it pending) computing it first. Such a run is not shared with other calls. */
static bool assigns_weight(const cap_entry *e) {
  for (int a = 0; a < e->alias_count; a++) {
    const cap_src *target = &e->aliases[a].target;
    if (target->kind == CAP_SRC_CAPTURED) return true;
    for (int c = 0; c < e->captured_count; c++) /* a weight passed as the input updated */
      if (e->captured[c].passed_as == target->index) return true;
  }
  return false;
}

static bool runs_alone(const cap_entry *e) {
  if (assigns_weight(e)) return true;
  for (int c = 0; c < e->captured_count; c++)
    if (e->captured[c].handle->node->state == CAP_PENDING) return true;
  return false;
}

/* The entry whose guards the call passes, the last hit first, then newest first; NULL when
 * none does (*why then says what failed first) or memory ran out (*status). Fills
 * bindings with the hit's symbol values. */
static cap_entry *look_up(latch_function *f, latch_tensor *const *inputs, int input_count, const latch_static *statics,
                          int static_count, int output_count, int64_t *bindings, guard_failure *why, bool *have_why,
                          latch_status *status) {
  enum { FEW = 16 };
  guard_tensor gin_buffer[FEW], *gin = gin_buffer;
  guard_static gs_buffer[FEW], *gs = gs_buffer;
  if (input_count > FEW) gin = hlo_malloc(sizeof *gin * (size_t)input_count);
  if (static_count > FEW) gs = hlo_malloc(sizeof *gs * (size_t)static_count);
  if (!gin || !gs) {
    if (gin != gin_buffer) free(gin);
    if (gs != gs_buffer) free(gs);
    cap_set_error("call: out of memory");
    *status = LATCH_ERR_INTERNAL;
    return NULL;
  }
  /* Guard time is sampled (one call in GUARD_SAMPLE, scaled): two clock reads per call
   * would cost about as much as the guards themselves. */
  static _Thread_local unsigned sample_tick;
  bool timed = (sample_tick++ % GUARD_SAMPLE) == 0;
  uint64_t start = timed ? cap_now_ns() : 0;
  for (int i = 0; i < input_count; i++) {
    const cap_node *n = inputs[i]->node;
    gin[i] = (guard_tensor){(hlo_dtype)n->dtype, n->rank, n->dims};
  }
  for (int s = 0; s < static_count; s++)
    gs[s] = (guard_static){(guard_static_kind)statics[s].kind, statics[s].i, statics[s].f, statics[s].bytes, statics[s].len};
  cap_entry *hit = NULL;
  int hit_index = -1, checks = 0;
  entry_list *list = atomic_load_explicit(&f->list, memory_order_acquire);
  int count = list ? list->count : 0, first = atomic_load_explicit(&f->mru, memory_order_relaxed);
  for (int k = -1; k < count && !hit; k++) {
    int index = k < 0 ? first : count - 1 - k; /* the last hit, then newest first */
    if (index < 0 || index >= count || (k >= 0 && index == first)) continue;
    cap_entry *e = list->items[index];
    checks++;
    guard_failure failure;
    if (e->output_count != output_count) { /* asked for another number of outputs: not this entry */
      if (!*have_why)
        snprintf(why->message, sizeof why->message, "traced with %d outputs, called with %d", e->output_count, output_count);
      *have_why = true;
      continue;
    }
    if (cap_entry_check(e, gin, inputs, input_count, gs, static_count, bindings, *have_why ? &failure : why)) {
      hit = e;
      hit_index = index;
    } else {
      *have_why = true;
    }
  }
  if (timed) {
    atomic_fetch_add(&f->guard_ns, (cap_now_ns() - start) * GUARD_SAMPLE);
    atomic_fetch_add(&f->guard_timed, 1);
  }
  atomic_fetch_add(&f->guard_checks, (uint64_t)checks);
  if (gin != gin_buffer) free(gin);
  if (gs != gs_buffer) free(gs);
  if (hit && hit_index != first) atomic_store_explicit(&f->mru, hit_index, memory_order_relaxed);
  return hit;
}

static latch_status run_hit(latch_function *f, cap_entry *hit, latch_tensor *const *inputs, uint64_t seed,
                            const int64_t *bindings, latch_tensor **outputs, int output_count) {
  atomic_fetch_add(&f->hits, 1);
  cap_run_kind kind = CAP_RUN_PLAIN;
  uint64_t instantiate_ns = 0;
  latch_status status = cap_entry_run(f->rt, hit, inputs, seed, bindings, NULL, outputs, &kind, &instantiate_ns);
  if (instantiate_ns) atomic_fetch_add(&f->instantiate_ns, instantiate_ns);
  if (kind == CAP_RUN_SPECIALIZED) atomic_fetch_add(&f->specializations, 1);
  if (kind == CAP_RUN_INSTANTIATED) atomic_fetch_add(&f->instantiations, 1);
  if (status != LATCH_OK) release_outputs(outputs, output_count);
  return status;
}

/* A trace of this call, kept as a new entry unless the function runs trace-every. Called
 * with calls_lock held alone. */
static latch_status trace_and_keep(latch_function *f, latch_tensor *const *inputs, int input_count,
                                   const latch_static *statics, int static_count, latch_tensor **outputs,
                                   int output_count, uint64_t seed, const guard_failure *why, bool have_why) {
  /* Past the recompile limit a trace is not kept (the function runs trace-every). */
  bool keep = f->options.mode == LATCH_TRACE_ONCE && !atomic_load(&f->trace_every);
  entry_list *current = atomic_load_explicit(&f->list, memory_order_acquire);
  int entries = current ? current->count : 0;
  if (keep && entries > 0 && have_why) cap_reasons_note(&f->reasons, why);
  if (keep && entries > 0 && atomic_load(&f->recompiles) >= (uint64_t)f->options.recompile_limit) {
    keep = false;
    atomic_store(&f->trace_every, true);
    const cap_reason *top = cap_reasons_top(&f->reasons);
    if (!atomic_exchange(&f->warned, true))
      fprintf(stderr,
              "latch: warning: '%s' reached its recompile limit (%d) and is traced on every call from now on; "
              "the guard that keeps failing: %s (at %d of %d recompiles)\n",
              f->name, f->options.recompile_limit, top ? top->message : "(none recorded)", top ? top->times : 0,
              f->reasons.total);
  }
  if (!keep) atomic_fetch_add(&f->fallback_calls, f->options.mode == LATCH_TRACE_ONCE);
  if (keep && entries > 0 && f->log_recompiles)
    log_recompile(f, atomic_load(&f->recompiles) + 1, why, have_why, inputs, input_count);
  atomic_fetch_add(&f->traces, 1);
  uint64_t start = cap_now_ns();
  cap_entry *made = NULL;
  traced_call call = {.f = f, .inputs = inputs, .input_count = input_count, .statics = statics,
                      .static_count = static_count, .outputs = outputs, .output_count = output_count, .seed = seed};
  latch_status status = trace_call(&call, &made, keep && f->log_guards);
  atomic_fetch_add(&f->trace_ns, cap_now_ns() - start);
  if (!made) return status;
  if (!keep) {
    cap_entry_free(f->rt, made);
    return status;
  }
  pthread_mutex_lock(&f->lock);
  entry_list *old = atomic_load_explicit(&f->list, memory_order_relaxed);
  int number = old ? old->count : 0;
  entry_list *grown = hlo_malloc(sizeof *grown + sizeof(cap_entry *) * (size_t)(number + 1));
  bool added = grown != NULL;
  if (added) {
    grown->count = number + 1;
    grown->older = old;
    if (number) memcpy(grown->items, old->items, sizeof(cap_entry *) * (size_t)number);
    grown->items[number] = made;
    atomic_store_explicit(&f->list, grown, memory_order_release);
    atomic_store(&f->mru, number);
  }
  pthread_mutex_unlock(&f->lock);
  if (!added) {
    cap_entry_free(f->rt, made);
    return status;
  }
  /* From now on calls take calls_lock alone from the start, not after a look. */
  if (assigns_weight(made)) atomic_store(&f->updates_weights, true);
  if (number > 0) atomic_fetch_add(&f->recompiles, 1);
  return status;
}

/* A call in the traced modes: a hit, or a trace. */
static latch_status call_traced(latch_function *f, latch_tensor *const *inputs, int input_count,
                                const latch_static *statics, int static_count, latch_tensor **outputs, int output_count,
                                uint64_t seed) {
  bool alone = f->options.mode != LATCH_TRACE_ONCE || atomic_load(&f->updates_weights);
  lock_calls(f, alone);
  guard_failure why; /* filled by the first failing entry; read only when have_why */
  why.message[0] = 0;
  bool have_why = false;
  int64_t bindings[GUARD_MAX_SYMBOLS];
  latch_status status = LATCH_OK;
  cap_entry *hit = NULL;
  if (f->options.mode == LATCH_TRACE_ONCE) {
    hit = look_up(f, inputs, input_count, statics, static_count, output_count, bindings, &why, &have_why, &status);
    if (status == LATCH_OK && !alone && (!hit || runs_alone(hit))) {
      /* While this call waits to run alone, another may add the entry it needs (threads
       * that missed on the same inputs at once): look again. */
      unlock_calls(f);
      lock_calls(f, alone = true);
      why.message[0] = 0;
      have_why = false;
      hit = look_up(f, inputs, input_count, statics, static_count, output_count, bindings, &why, &have_why, &status);
    }
  }
  if (status == LATCH_OK)
    status = hit ? run_hit(f, hit, inputs, seed, bindings, outputs, output_count)
                 : trace_and_keep(f, inputs, input_count, statics, static_count, outputs, output_count, seed, &why,
                                  have_why);
  unlock_calls(f);
  return status;
}

latch_status latch_call(latch_function *f, latch_tensor *const *inputs, int input_count, const latch_static *statics,
                        int static_count, latch_tensor **outputs, int output_count) {
  if (!f || input_count < 0 || output_count < 0 || static_count < 0 || (input_count && !inputs) ||
      (output_count && !outputs) || (static_count && !statics)) {
    cap_set_error("call: NULL function, or a count without its array");
    return LATCH_ERR_INPUT;
  }
  for (int j = 0; j < output_count; j++) outputs[j] = NULL;
  latch_runtime *rt = f->rt;
  for (int i = 0; i < input_count; i++) {
    latch_tensor *t = inputs[i];
    if (!t || t->node->state == CAP_ERROR) {
      cap_set_error("call: '%s' input %d %s", f->name, i, t ? t->node->error : "is NULL");
      return LATCH_ERR_INPUT;
    }
    if (t->rt != rt) {
      cap_set_error("call: '%s' input %d belongs to another runtime", f->name, i);
      return LATCH_ERR_INPUT;
    }
  }
  for (int s = 0; s < static_count; s++)
    if ((unsigned)statics[s].kind > LATCH_STATIC_BYTES || (statics[s].kind == LATCH_STATIC_BYTES && statics[s].len && !statics[s].bytes)) {
      cap_set_error("call: '%s' static %d is malformed", f->name, s);
      return LATCH_ERR_INPUT;
    }
  cap_ctx *ctx = cap_ctx_current();
  if (ctx->trace) /* called from a function being traced: part of that trace */
    return invoke(f, inputs, input_count, statics, static_count, outputs, output_count);
  atomic_fetch_add(&f->calls, 1);
  uint64_t seed = rt_mix64(f->options.seed ^ rt_mix64(atomic_fetch_add(&f->call_counter, 1)));
  if (f->options.mode == LATCH_TRACE_EAGER)
    return run_eager(f, inputs, input_count, statics, static_count, outputs, output_count, seed);
  /* Inputs still pending are the caller's work: compute them, so they are data here. */
  for (int i = 0; i < input_count; i++) {
    latch_tensor *t = inputs[i];
    cap_node *n = t->node;
    if (n->state == CAP_PENDING) {
      latch_status status = cap_sync_nodes(rt, 1, &n, &inputs[i]);
      if (status != LATCH_OK) return status;
      if (t->node->state == CAP_READY && !t->alias_of) cap_list_remove(t);
    }
  }
  return call_traced(f, inputs, input_count, statics, static_count, outputs, output_count, seed);
}
