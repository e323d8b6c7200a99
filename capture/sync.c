/* Sync: cut the graph, find or compile its executable by key, run it, attach the values,
 * write in-place updates back. */
#include <stdlib.h>
#include <string.h>

#include <inttypes.h>
#include <stdio.h>

#include "capture.h"
#include "hlo/hlo.h"

typedef struct compile_job {
  latch_runtime *rt;
  const cap_graph *graph;
  uint64_t lower_ns, compile_ns; /* codec_compile's, for LATCH_LOG=compiles */
  bool compiled;                  /* the backend compiled it (not a load from disk or remote) */
  int ranks;                      /* > 1: an SPMD graph shared across the world (compile_once_per_job) */
  int job_compiles;               /* then: 1 when rank 0 compiled it, 0 when it loaded it */
  bool received;                  /* then, on another rank: loaded from rank 0's bytes, on trial */
  size_t shared_bytes;            /* then: the serialized executable rank 0 sent */
  bool fresh;                     /* compile, never load, and replace the tiers' entry */
  const hlo_module *source;       /* with fresh: compile this instead of lowering the graph */
  const char *failure;            /* with fresh: why the loaded entry's first run failed */
} compile_job;

/* The disk cache's codec: lowering and compiling on a miss, the backend's own serialized
 * form in between. The graph key already names the backend; the fingerprint adds latch's
 * version and the CPU. */
static void *codec_compile(void *ctx, hlo_diag *diag) {
  compile_job *job = ctx;
  uint64_t start = cap_now_ns();
  hlo_module *module = job->source ? NULL : cap_graph_lower(job->graph, diag);
  if (!module && !job->source) return NULL;
  uint64_t lowered = cap_now_ns();
  rt_executable *exe = job->graph->backend->compile(module ? module : job->source, &job->rt->compile_options, diag);
  job->lower_ns = lowered - start;
  job->compile_ns = cap_now_ns() - lowered;
  hlo_module_free(module);
  if (exe) atomic_fetch_add(&job->rt->compiles, 1);
  job->compiled = exe != NULL;
  return exe;
}

static hlo_status codec_serialize(void *ctx, const void *value, void **bytes, size_t *len, hlo_diag *diag) {
  const compile_job *job = ctx;
  return job->graph->backend->serialize(value, bytes, len, diag);
}

static void *codec_deserialize(void *ctx, const void *bytes, size_t len, hlo_diag *diag) {
  const compile_job *job = ctx;
  return job->graph->backend->deserialize(bytes, len, &job->rt->compile_options, diag);
}

static void *codec_adopt(void *ctx, void *bytes, size_t len, hlo_diag *diag) {
  const compile_job *job = ctx;
  return job->graph->backend->adopt(bytes, len, &job->rt->compile_options, diag);
}

/* The disk and remote tiers' codec for job's graph. */
static cache_codec codec_of(compile_job *job) {
  return (cache_codec){job, codec_compile, codec_serialize, codec_deserialize,
                       job->graph->backend->adopt ? codec_adopt : NULL};
}

/* LATCH_LOG=compiles: one line per miss answered, saying where the executable came from and
 * how long that took (a compile: the backend's, after lowering, before saving it to the
 * cache; a load: reading the entry and deserializing it); for a backend that tells
 * (rt_backend.work_so_far: the cpu backend's passes and plans), the work its compiles did in
 * this process so far (a load adds nothing). */
static void log_compile(const compile_job *job, cache_origin origin, uint64_t ns) {
  const cap_graph *g = job->graph;
  char work[192] = "", job_text[160] = "";
  if (g->backend->work_so_far) {
    char so_far[96];
    g->backend->work_so_far(so_far, sizeof so_far);
    snprintf(work, sizeof work, " (%s backend so far: %s)", g->backend->name, so_far);
  }
  if (job->ranks > 1)
    snprintf(job_text, sizeof job_text, "; compiles for the job of %d ranks: %d (rank 0's, %zu bytes shared)",
             job->ranks, job->job_compiles, job->shared_bytes);
  if (origin == CACHE_ORIGIN_COMPILED && !job->compiled)
    fprintf(stderr, "latch: graph %016" PRIx64 "%016" PRIx64 " received from rank 0 in %.2f ms%s%s\n", g->key.hi,
            g->key.lo, (double)ns / 1e6, job_text, work);
  else if (origin == CACHE_ORIGIN_COMPILED)
    fprintf(stderr, "latch: graph %016" PRIx64 "%016" PRIx64 " compiled in %.2f ms, lowered in %.2f ms%s%s\n",
            g->key.hi, g->key.lo, (double)job->compile_ns / 1e6, (double)job->lower_ns / 1e6, job_text, work);
  else
    fprintf(stderr, "latch: graph %016" PRIx64 "%016" PRIx64 " loaded from the %s cache in %.2f ms%s%s\n", g->key.hi,
            g->key.lo, origin == CACHE_ORIGIN_DISK ? "disk" : "remote", (double)ns / 1e6, job_text, work);
}

/* The disk or remote cache (when on), else the backend's compile; with job->fresh, a compile
 * that replaces the tiers' entry. */
static rt_executable *find_or_compile(compile_job *job, cache_origin *origin, hlo_diag *diag) {
  const cap_graph *g = job->graph;
  *origin = CACHE_ORIGIN_COMPILED;
  if (!(job->rt->disk || job->rt->remote) || !g->backend->serialize || !g->backend->deserialize)
    return codec_compile(job, diag);
  cache_codec codec = codec_of(job);
  if (job->fresh) /* a loaded entry failed its first run */
    return cap_compile_afresh(job->rt->disk, job->rt->remote, g->key, job->rt->fingerprint, &codec, job->failure, diag);
  rt_executable *exe = cache_tiers_get_or_compile(job->rt->disk, job->rt->remote, g->key, job->rt->fingerprint, &codec,
                                                  origin, NULL, diag);
  if (exe && *origin == CACHE_ORIGIN_DISK) atomic_fetch_add(&job->rt->disk_loads, 1);
  if (exe && *origin == CACHE_ORIGIN_REMOTE) atomic_fetch_add(&job->rt->remote_loads, 1);
  return exe;
}

/* Whether g is shared across the world: an SPMD graph (it has an all-reduce) in a world of
 * several ranks, on a backend that serializes. Every rank runs those graphs in the same
 * order (their collectives need it), so every rank misses on one together. */
static bool shared_in_world(const latch_runtime *rt, const cap_graph *g) {
  if (!rt->comm || rt_comm_size(rt->comm) < 2 || !g->backend->serialize || !g->backend->deserialize) return false;
  for (int i = 0; i < g->node_count; i++)
    if (g->nodes[i]->op == CAP_ALL_REDUCE) return true;
  return false;
}

/* Rank 0 finds or compiles the graph and sends its serialized executable, with one byte
 * saying whether it compiled it, to the others (rt_comm_share), which load it: the job
 * compiles each graph once. A rank 0 that failed sends nothing, and the others fail too.
 * What another rank loads is on trial like an entry of a cache tier (rank 0 may have loaded
 * it from one, or made it for another processor): if its first run fails, that rank
 * compiles the graph itself (cap_exe_recompile, which shares nothing). */
static rt_executable *compile_once_per_job(compile_job *job, cache_origin *origin, hlo_diag *diag) {
  rt_comm *comm = job->rt->comm;
  const rt_backend *backend = job->graph->backend;
  bool first = rt_comm_rank(comm) == 0;
  void *bytes = NULL;
  size_t len = 0;
  rt_executable *exe = NULL;
  job->ranks = rt_comm_size(comm);
  *origin = CACHE_ORIGIN_COMPILED;
  if (first && (exe = find_or_compile(job, origin, diag))) {
    hlo_diag unused = {0};
    void *grown = NULL;
    if (backend->serialize(exe, &bytes, &len, &unused) == HLO_OK && (grown = realloc(bytes, len + 1))) {
      bytes = grown;
      ((char *)bytes)[len++] = job->compiled;
    } else {
      free(bytes), bytes = NULL, len = 0;
    }
  }
  hlo_diag shared = {0};
  hlo_status status = rt_comm_share(comm, &bytes, &len, "sharing a compiled graph with the ranks", &shared);
  if (!first && status == HLO_OK) {
    job->compiled = false;
    job->received = true;
    exe = backend->deserialize(bytes, len - 1, &job->rt->compile_options, diag);
  } else if (!first) {
    *diag = shared;
  }
  job->job_compiles = status == HLO_OK && len ? ((char *)bytes)[len - 1] : job->compiled;
  job->shared_bytes = status == HLO_OK && len ? len - 1 : 0;
  free(bytes);
  return exe;
}

/* Called by the memory table on a miss, with no lock held: the disk cache (when on) or the
 * backend's compile. */
static void *compile_graph(void *ctx, hlo_diag *diag) {
  compile_job *job = ctx;
  const cap_graph *g = job->graph;
  if (job->rt->check_mode != 0) {
    job->compiled = true; /* checked graphs bypass the disk and remote tiers */
    return cap_compile_checked(job->rt, g, diag);
  }
  uint64_t start = cap_now_ns();
  cache_origin origin;
  rt_executable *exe = !job->fresh && shared_in_world(job->rt, g) ? compile_once_per_job(job, &origin, diag)
                                                   : find_or_compile(job, &origin, diag);
  if (!exe) return NULL;
  if (job->rt->log & CAP_LOG_COMPILES) log_compile(job, origin, cap_now_ns() - start);
  cap_exe *value = hlo_malloc(sizeof *value);
  if (!value) {
    g->backend->destroy(exe);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return NULL;
  }
  bool on_trial = origin != CACHE_ORIGIN_COMPILED || job->received;
  *value = (cap_exe){g->backend, exe, g->param_count, g->root_count, on_trial};
  return value;
}

/* A READY value may be read by several threads' graphs at once, and rt_value's count is
 * not atomic: each run gets its own shell around the same data, so the backend's retains
 * and releases touch only this thread's memory. */
rt_value *cap_value_view(const rt_value *value) {
  rt_value *view = hlo_malloc(sizeof *view);
  if (!view) return NULL;
  *view = *value;
  view->refcount = 1;
  return view;
}

/* An output the backend returned as one of our views (a parameter passed through) gets
 * its own copy, since the view does not own its data. */
rt_value *cap_take_output(rt_value *out, rt_value *const *views, int view_count) {
  for (int i = 0; i < view_count; i++)
    if (views[i] == out) return rt_value_copy(out);
  return rt_value_retain(out);
}

/* The new value goes into the old buffer when no one else can see that buffer, so a
 * pointer from latch_data stays valid across the update. */
void cap_write_back(latch_tensor *handle) {
  cap_node *target = handle->alias_of, *node = handle->node;
  handle->alias_of = NULL;
  if (node->state == CAP_READY && atomic_load(&target->refs) == 1 && target->value->refcount == 1 &&
      target->value != node->value && node->value->refcount == 1) {
    memcpy(target->value->data, node->value->data, (size_t)hlo_shape_bytes(&target->value->shape));
    rt_value_touch(target->value);
    cap_node_release(node);
    handle->node = target;
    return;
  }
  cap_node_release(target);
}

cache_entry *cap_exe_lookup(latch_runtime *rt, const cap_graph *g, latch_status *status) {
  return cap_graph_executable(rt, g, NULL, status);
}

cache_entry *cap_graph_executable(latch_runtime *rt, const cap_graph *g, bool *compiled, latch_status *status) {
  hlo_diag diag = {0};
  compile_job job = {.rt = rt, .graph = g};
  bool hit = false;
  cache_entry *entry = cache_table_get_or_compile(rt->cache, g->key, compile_graph, &job, &diag, &hit);
  if (compiled) *compiled = entry && !hit && job.compiled;
  *status = LATCH_OK;
  if (!entry) {
    cap_set_error("sync: %s", diag.message[0] ? diag.message : "compile failed");
    *status = diag.status ? cap_status(diag.status) : LATCH_ERR_INTERNAL;
  }
  return entry;
}

static bool keeps_bindings(const latch_runtime *rt, const cap_graph *g) {
  return rt->disk && rt->check_mode == 0 && g->backend->serialize && g->backend->deserialize;
}

rt_executable *cap_graph_load_binding(latch_runtime *rt, const cap_graph *g) {
  if (!keeps_bindings(rt, g)) return NULL;
  compile_job job = {.rt = rt, .graph = g};
  cache_codec codec = codec_of(&job);
  uint64_t start = cap_now_ns();
  rt_executable *exe = cache_disk_load(rt->disk, g->key, rt->fingerprint, &codec);
  if (!exe) return NULL;
  atomic_fetch_add(&rt->disk_loads, 1);
  if (rt->log & CAP_LOG_COMPILES)
    fprintf(stderr, "latch: binding %016" PRIx64 "%016" PRIx64 " loaded from the disk cache in %.2f ms\n", g->key.hi,
            g->key.lo, (double)(cap_now_ns() - start) / 1e6);
  return exe;
}

void cap_graph_save_binding(latch_runtime *rt, const cap_graph *g, const rt_executable *bound) {
  if (!keeps_bindings(rt, g)) return;
  compile_job job = {.rt = rt, .graph = g};
  cache_codec codec = codec_of(&job);
  cache_disk_save_copy(rt->disk, g->key, rt->fingerprint, &codec, bound);
}

latch_status cap_exe_run(latch_runtime *rt, const cap_exe *exe, rt_value *const *args, rt_value **outputs) {
  hlo_diag diag = {0};
  rt_value **views = hlo_calloc((size_t)exe->param_count + 1, sizeof *views);
  latch_status status = views ? LATCH_OK : LATCH_ERR_INTERNAL;
  for (int i = 0; status == LATCH_OK && i < exe->param_count; i++)
    if (!(views[i] = cap_value_view(args[i]))) status = LATCH_ERR_INTERNAL;
  rt_value *result = NULL;
  if (status == LATCH_OK) {
    uint64_t start = cap_now_ns();
    status = cap_status(exe->backend->execute(exe->exe, views, exe->param_count, &result, &diag));
    atomic_fetch_add(&rt->execute_ns, cap_now_ns() - start);
    if (status != LATCH_OK) cap_set_error("sync: %s", diag.message);
  } else {
    cap_set_error("sync: out of memory");
  }
  if (status == LATCH_OK &&
      (!result || result->shape.dtype != HLO_TUPLE || result->tuple_count != exe->output_count)) {
    cap_set_error("sync: the backend returned %d outputs for %d roots", result ? result->tuple_count : -1,
                  exe->output_count);
    status = LATCH_ERR_INTERNAL;
  }
  int taken = 0;
  for (; status == LATCH_OK && taken < exe->output_count; taken++) {
    if (!(outputs[taken] = cap_take_output(result->tuple[taken], views, exe->param_count))) {
      cap_set_error("sync: out of memory");
      status = LATCH_ERR_INTERNAL;
    }
  }
  if (status != LATCH_OK)
    while (taken > 0) rt_value_release(outputs[--taken]);
  rt_value_release(result);
  for (int i = 0; views && i < exe->param_count; i++) free(views[i]); /* shells only */
  free(views);
  return status;
}

cache_entry *cap_exe_recompile(latch_runtime *rt, const cap_graph *g, const hlo_module *source, cache_entry *entry,
                               latch_status *status) {
  char failure[sizeof ((hlo_diag *)0)->message];
  snprintf(failure, sizeof failure, "%s", latch_last_error());
  cache_table_remove(rt->cache, entry); /* false when a racing thread took it out first */
  cache_table_release(rt->cache, entry);
  return cap_exe_compile_afresh(rt, g, source, failure, status);
}

cache_entry *cap_exe_compile_afresh(latch_runtime *rt, const cap_graph *g, const hlo_module *source,
                                    const char *failure, latch_status *status) {
  hlo_diag diag = {0};
  compile_job job = {.rt = rt, .graph = g, .fresh = true, .source = source, .failure = failure};
  cache_entry *fresh = cache_table_get_or_compile(rt->cache, g->key, compile_graph, &job, &diag, NULL);
  if (!fresh) {
    cap_set_error("sync: %s", diag.message[0] ? diag.message : "compile failed");
    *status = diag.status ? cap_status(diag.status) : LATCH_ERR_INTERNAL;
  }
  return fresh;
}

static latch_status run_graph(latch_runtime *rt, cap_graph *g) {
  latch_status status;
  cache_entry *entry = cap_exe_lookup(rt, g, &status);
  if (!entry) return status;
  cap_exe *exe = cache_entry_value(entry);
  enum { FEW = 16 };
  rt_value *arg_buffer[FEW], *out_buffer[FEW];
  rt_value **args = g->param_count > FEW ? hlo_malloc(sizeof(rt_value *) * (size_t)g->param_count) : arg_buffer;
  rt_value **outs = g->root_count > FEW ? hlo_malloc(sizeof(rt_value *) * (size_t)g->root_count) : out_buffer;
  if (!args || !outs) status = LATCH_ERR_INTERNAL;
  for (int i = 0; status == LATCH_OK && i < g->param_count; i++) args[i] = g->params[i]->value;
  bool ran = status == LATCH_OK;
  unsigned mark = ran && atomic_load(&exe->on_trial) ? cap_first_run_mark(rt) : 0;
  if (ran) status = cap_exe_run(rt, exe, args, outs);
  if (ran && status != LATCH_OK && atomic_load(&exe->on_trial) && cap_first_run_in_step(rt, g->key, mark) &&
      (entry = cap_exe_recompile(rt, g, NULL, entry, &status))) {
    exe = cache_entry_value(entry);
    status = cap_exe_run(rt, exe, args, outs);
  }
  if (status == LATCH_OK && entry) atomic_store(&exe->on_trial, false);
  for (int i = 0; status == LATCH_OK && i < g->root_count; i++) cap_node_set_value(g->roots[i], outs[i]);
  if (args != arg_buffer) free(args);
  if (outs != out_buffer) free(outs);
  cache_table_release(rt->cache, entry);
  return status;
}

/* Intermediate nodes of the graph that no root names stay PENDING; their users are
 * computed now, so they are freed with them unless something else still holds them. */
latch_status cap_sync_nodes(latch_runtime *rt, int count, cap_node *const *roots, latch_tensor *const *handles) {
  cap_ctx *ctx = cap_ctx_current();
  atomic_fetch_add(&rt->ops_traced, ctx->ops_traced);
  ctx->ops_traced = 0;
  enum { FEW = 16 };
  cap_node *alias_buffer[FEW], **alias_of = alias_buffer;
  if (count > FEW) alias_of = hlo_malloc(sizeof(cap_node *) * (size_t)count);
  if (!alias_of) {
    cap_set_error("sync: out of memory");
    return LATCH_ERR_INTERNAL;
  }
  for (int i = 0; i < count; i++) alias_of[i] = handles && handles[i] ? handles[i]->alias_of : NULL;
  uint64_t start = cap_now_ns();
  cap_graph g;
  latch_status status = cap_graph_collect(&g, rt->backend, count, roots, alias_of);
  atomic_fetch_add(&rt->key_ns, cap_now_ns() - start);
  if (alias_of != alias_buffer) free(alias_of);
  if (status != LATCH_OK) return status;
  if (g.root_count) {
    status = run_graph(rt, &g);
    if (status == LATCH_OK) {
      atomic_fetch_add(&rt->syncs, 1);
      atomic_fetch_add(&rt->nodes_synced, (uint64_t)g.node_count);
    }
  }
  cap_graph_free(&g);
  if (status == LATCH_OK && handles)
    for (int i = 0; i < count; i++)
      if (handles[i] && handles[i]->alias_of) cap_write_back(handles[i]);
  return status;
}

/* The handles of this thread's list for rt, as roots; error handles are reported. */
static int gather(latch_runtime *rt, latch_tensor ***out, const char **error) {
  cap_ctx *ctx = cap_ctx_current();
  int count = 0, capacity = 0;
  latch_tensor **handles = NULL;
  *error = NULL;
  if (ctx->error[0] && ctx->error_rt == rt) *error = ctx->error; /* copied by the caller */
  for (latch_tensor *t = ctx->head, *next; t; t = next) {
    next = t->next;
    if (t->rt != rt) continue;
    cap_node *node = t->node;
    if (node->state == CAP_READY && !t->alias_of) {
      cap_list_remove(t);
      continue;
    }
    if (node->state == CAP_ERROR) {
      if (!node->reported && !*error) *error = node->error;
      node->reported = 1;
      continue;
    }
    if (count == capacity) {
      capacity = capacity ? capacity * 2 : 64;
      latch_tensor **grown = hlo_realloc(handles, sizeof *handles * (size_t)capacity);
      if (!grown) {
        free(handles);
        return -1;
      }
      handles = grown;
    }
    handles[count++] = t;
  }
  *out = handles;
  return count;
}

latch_status latch_sync(latch_runtime *rt) {
  if (!rt) {
    cap_set_error("sync: NULL runtime");
    return LATCH_ERR_INPUT;
  }
  cap_trace *trace = cap_ctx_current()->trace;
  if (trace) cap_trace_value_read(trace, "latch_sync was called");
  latch_tensor **handles = NULL;
  const char *error = NULL;
  int count = gather(rt, &handles, &error);
  if (count < 0) {
    cap_set_error("sync: out of memory");
    return LATCH_ERR_INTERNAL;
  }
  char *message = error ? hlo_strdup(error) : NULL; /* the node may die during the run */
  cap_ctx *ctx = cap_ctx_current();
  if (ctx->error_rt == rt) ctx->error[0] = 0;
  cap_node **roots = hlo_malloc(sizeof(cap_node *) * (size_t)(count ? count : 1));
  latch_status status = roots ? LATCH_OK : LATCH_ERR_INTERNAL;
  for (int i = 0; roots && i < count; i++) roots[i] = handles[i]->node;
  if (status == LATCH_OK && count) status = cap_sync_nodes(rt, count, roots, handles);
  if (status == LATCH_OK)
    for (int i = 0; i < count; i++)
      if (handles[i]->node->state == CAP_READY && !handles[i]->alias_of) cap_list_remove(handles[i]);
  free(roots);
  free(handles);
  if (status == LATCH_OK && message) {
    cap_set_error("%s", message);
    status = LATCH_ERR_INPUT;
  }
  free(message);
  return status;
}

static latch_status collect_for(latch_runtime *rt, int count, latch_tensor *const *tensors, cap_graph *g) {
  cap_node **roots = hlo_malloc(sizeof(cap_node *) * (size_t)(count ? count : 1));
  cap_node **alias_of = hlo_malloc(sizeof(cap_node *) * (size_t)(count ? count : 1));
  latch_status status = roots && alias_of ? LATCH_OK : LATCH_ERR_INTERNAL;
  for (int i = 0; status == LATCH_OK && i < count; i++) {
    roots[i] = tensors[i]->node;
    alias_of[i] = tensors[i]->alias_of;
  }
  if (status == LATCH_OK) status = cap_graph_collect(g, rt->backend, count, roots, alias_of);
  free(roots);
  free(alias_of);
  return status;
}

latch_status cap_graph_key(latch_runtime *rt, int count, latch_tensor *const *tensors, cache_key *key) {
  cap_graph g;
  latch_status status = collect_for(rt, count, tensors, &g);
  if (status != LATCH_OK) return status;
  *key = g.key;
  cap_graph_free(&g);
  return LATCH_OK;
}

char *cap_graph_text(latch_runtime *rt, int count, latch_tensor *const *tensors) {
  cap_graph g;
  if (collect_for(rt, count, tensors, &g) != LATCH_OK) return NULL;
  hlo_diag diag = {0};
  hlo_module *module = cap_graph_lower(&g, &diag);
  cap_graph_free(&g);
  if (!module) {
    cap_set_error("graph_text: %s", diag.message);
    return NULL;
  }
  char *text = hlo_module_to_text(module);
  hlo_module_free(module);
  return text;
}
