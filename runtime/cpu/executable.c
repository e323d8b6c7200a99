/* The cpu backend: compile runs the hlo/ passes over a copy of the module and builds a plan
 * (plan.c); execute walks the plan with per-call state only, so one executable
 * may run on many threads at once. Parallelism is inside kernels (OpenMP, runtime/parallel.c);
 * OpenBLAS is held to one thread so the two never oversubscribe the cores: big matrix
 * products are split across latch's parallel loops instead (dot.c). Its serialized form
 * (serialize.c) is the optimized module and the plan, with the module it was compiled from
 * (before the passes), encoded: deserialize runs no pass and plans nothing, and decodes that
 * module only when the executable is first bound to other sizes (bind.c), so a loaded
 * executable binds as a compiled one does: origins are positions in that module. */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "runtime/runtime.h"
#include "blob_internal.h"
#include "exec_internal.h"
#include "hlo/hlo.h"

/* Executables keep their arena between executes: a fresh allocation that large is an mmap
 * whose pages fault in (zeroed by the kernel) on every step, which cost more than small
 * steps' arithmetic and gigabytes of page faults for a big training step. What all
 * executables keep together is bounded (rt_compile_options.keep_arena_bytes, default half
 * the machine's memory): past it an arena is freed after its execute, so the compile cache
 * cannot hold more than that in idle arenas. */
static _Atomic int64_t kept_arena_bytes;

static int64_t keep_arena_budget(const rt_compile_options *options) {
  if (options->keep_arena_bytes >= 0) return options->keep_arena_bytes;
  static _Atomic int64_t half_memory = -1;
  int64_t known = atomic_load(&half_memory);
  if (known >= 0) return known;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t bytes = pages > 0 && page > 0 ? (int64_t)pages * page / 2 : (int64_t)1 << 30;
  atomic_store(&half_memory, bytes);
  return bytes;
}

struct rt_executable {
  hlo_module *module;   /* what runs: the optimized module, or a bound copy of its entry */
  /* compiled: the module before the passes, origins numbered (deserialized: decoded from
   * source_bytes at the first bind, under source_lock); bound: NULL */
  hlo_module *source;
  /* its encoding (rt_cpu_encode_module), what serialize writes (bound: NULL, its family's
   * is written), inside source_block, the allocation the executable frees: the encoding's
   * own, or the bytes of the blob it was adopted from (cpu_adopt) */
  const char *source_bytes;
  size_t source_len;
  void *source_block;
  pthread_mutex_t source_lock;
  /* deserialized: the plan's oneDNN primitives are made at the first execute, under
   * primitives_lock (rt_cpu_plan_make_primitives); in a forked child (inherited), made again
   * at its first execute there */
  _Atomic bool primitives_pending;
  bool primitives_inherited;
  pthread_mutex_t primitives_lock;
  rt_executable *bound_from; /* bound: the compiled executable sharing its computations */
  /* bound, or loaded from a binding and told to share (cpu_share_buffers): the executable
   * whose pool (below) this one takes its arena from; NULL: its own pool */
  rt_executable *pool_from;
  rt_cpu_plan *plan;
  rt_compile_options options; /* its compile's; a bound executable's are its family's */
  /* executables without pool_from only: one arena kept from a finished execute, of
   * pool_bytes, for this executable and every one whose pool_from it is (bindings of one
   * graph differ in size a little, a cache one longer each step, and should not fault in
   * fresh pages each time). An execute takes it whole when it is large enough (a thread
   * that finds it taken or too small allocates its own): executes running at once never
   * share buffers. */
  pthread_mutex_t pool_lock;
  char *pool;
  int64_t pool_bytes;
  /* where the execute that gave the pool back keeps its kept results (its executable's
   * kept_places: which plan ran is this pointer too) */
  const rt_cpu_kept_places *pool_places;
  rt_cpu_kept_places *kept_places;       /* this executable's plan's (NULL: keeps none) */
  struct rt_executable *next_open, *prev_open; /* every executable, for fork (under open_lock) */
};

/* Values and arenas executes have allocated, process-wide; tests read it to check that an
 * execute allocates what its plan says (arena, results, the reference path's values) and
 * nothing per step. */
static _Atomic int64_t allocations;

int64_t rt_cpu_allocation_count(void) { return atomic_load(&allocations); }

static _Atomic int64_t kept_reuses;

int64_t rt_cpu_kept_reuse_count(void) { return atomic_load(&kept_reuses); }

/* Kept steps computed (their arguments' contents new to them), process-wide. */
static _Atomic int64_t kept_made;

int64_t rt_cpu_kept_made_count(void) { return atomic_load(&kept_made); }

static void counted(int64_t count) { atomic_fetch_add(&allocations, count); }

static char *new_arena(int64_t bytes) {
  counted(1);
  return hlo_aligned_alloc(RT_CPU_ALIGN, (size_t)bytes);
}

/* ---- fork ----
 * A child has only the thread that forked, and another thread may hold an executable's lock
 * at fork: primitives_lock while it makes a loaded plan's oneDNN primitives, source_lock while
 * it decodes the source module, pool_lock while it takes or gives back an arena. Held in the
 * child, the lock would stop that executable's next execute or bind there for good, and what
 * it guards would be half made. So fork waits for each (none is held across anything that
 * waits for another thread or takes another lock), and parent and child let go
 * (pthread_atfork handlers, registered with the first executable).
 *
 * The parent's oneDNN primitives were made for a team of its OpenMP threads, and a primitive
 * runs with the team it was made for; libgomp's pool does not survive fork, so in the child
 * such a team never starts. The child makes every executable's primitives again, for its own
 * team of one (runtime/parallel.c), at its first execute of each. */

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static rt_executable *open_executables;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) {
  rt_test_at(RT_TEST_FORK_WAITS_EXECUTABLES);
  pthread_mutex_lock(&open_lock);
  for (rt_executable *e = open_executables; e; e = e->next_open) {
    pthread_mutex_lock(&e->primitives_lock);
    pthread_mutex_lock(&e->source_lock);
    pthread_mutex_lock(&e->pool_lock);
  }
}

static void fork_parent(void) {
  for (rt_executable *e = open_executables; e; e = e->next_open) {
    pthread_mutex_unlock(&e->pool_lock);
    pthread_mutex_unlock(&e->source_lock);
    pthread_mutex_unlock(&e->primitives_lock);
  }
  pthread_mutex_unlock(&open_lock);
}

static void fork_child(void) {
  for (rt_executable *e = open_executables; e; e = e->next_open) {
    e->primitives_inherited = true;
    atomic_store(&e->primitives_pending, true);
  }
  fork_parent();
}

static void fork_setup(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void list_open(rt_executable *exe) {
  pthread_once(&fork_once, fork_setup);
  pthread_mutex_lock(&open_lock);
  exe->next_open = open_executables;
  if (open_executables) open_executables->prev_open = exe;
  open_executables = exe;
  pthread_mutex_unlock(&open_lock);
}

static void unlist_open(rt_executable *exe) {
  pthread_mutex_lock(&open_lock);
  if (exe->prev_open) exe->prev_open->next_open = exe->next_open;
  else open_executables = exe->next_open;
  if (exe->next_open) exe->next_open->prev_open = exe->prev_open;
  pthread_mutex_unlock(&open_lock);
}

static rt_executable *family_of(rt_executable *exe) { return exe->pool_from ? exe->pool_from : exe; }

/* An arena of at least the plan's bytes, a whole number of RT_CPU_ALIGN (aligned_alloc's
 * rule; a loaded plan's size is whatever its blob says); *capacity is its size. An executable sharing its
 * family's pool (bound, or loaded and shared) allocates a quarter more, so that the next few
 * bindings fit in it too. Its kept results count only if this plan's execute gave it back,
 * or a plan that keeps the same results at the same places (another binding of the graph:
 * switching between batch sizes would otherwise reorder every weight again): otherwise
 * their stamps are cleared. */
static char *take_arena(rt_executable *exe, int64_t *capacity) {
  const rt_cpu_plan *plan = exe->plan;
  int64_t need = plan->arena_bytes;
  *capacity = 0;
  if (!need) return NULL;
  rt_executable *family = family_of(exe);
  char *arena = NULL;
  bool kept = false;
  pthread_mutex_lock(&family->pool_lock);
  rt_test_at(RT_TEST_POOL_LOCKED);
  if (family->pool && family->pool_bytes >= need) {
    arena = family->pool;
    *capacity = family->pool_bytes;
    kept = family->pool_places == exe->kept_places || rt_cpu_kept_places_matches(family->pool_places, plan);
    family->pool = NULL;
    family->pool_bytes = 0;
  }
  pthread_mutex_unlock(&family->pool_lock);
  if (arena) atomic_fetch_sub(&kept_arena_bytes, *capacity);
  else *capacity = rt_cpu_aligned(exe->pool_from ? need + need / 4 : need), arena = new_arena(*capacity);
  if (arena && !kept && plan->kept_count) memset(arena, 0, sizeof(uint64_t) * (size_t)plan->kept_slots);
  return arena;
}

/* Keeps arena in its family's pool if the budget allows and the pool holds none as large;
 * frees whichever is not kept. */
static void give_arena(rt_executable *exe, char *arena, int64_t capacity) {
  if (!arena) return;
  rt_executable *family = family_of(exe);
  char *dropped = arena;
  int64_t dropped_bytes = capacity;
  if (atomic_fetch_add(&kept_arena_bytes, capacity) + capacity <= keep_arena_budget(&family->options)) {
    pthread_mutex_lock(&family->pool_lock);
    if (!family->pool || family->pool_bytes < capacity) {
      dropped = family->pool;
      dropped_bytes = family->pool_bytes;
      family->pool = arena;
      family->pool_bytes = capacity;
      family->pool_places = exe->kept_places;
    }
    pthread_mutex_unlock(&family->pool_lock);
  }
  if (dropped) atomic_fetch_sub(&kept_arena_bytes, dropped_bytes);
  free(dropped);
}

/* One step's result during an execute. Views (of arguments, constants, buffers, other
 * results) live in the cell itself and are never released; owned values are. */
typedef struct cell {
  rt_value *value;
  bool owned;
  bool finite; /* known to hold no inf or NaN (a DNNL step said so this run) */
  rt_value view;
} cell;

static rt_executable *new_executable(hlo_module *module, rt_cpu_plan *plan, const rt_compile_options *options,
                                     hlo_diag *diag) {
  rt_executable *exe = hlo_calloc(1, sizeof *exe);
  if (!exe) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return NULL;
  }
  exe->module = module;
  exe->plan = plan;
  exe->options = *options;
  exe->kept_places = rt_cpu_kept_places_of(plan);
  if (!exe->kept_places && plan->kept_count && !plan->dynamic) {
    free(exe);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return NULL;
  }
  atomic_store(&exe->primitives_pending, plan->primitives_pending);
  pthread_mutex_init(&exe->pool_lock, NULL);
  pthread_mutex_init(&exe->source_lock, NULL);
  pthread_mutex_init(&exe->primitives_lock, NULL);
  list_open(exe);
  return exe;
}

/* OpenBLAS runs single-threaded inside latch's parallel loops (dot.c, conv.c). Its pthread
 * build (Debian's default) starts its worker threads when it is loaded, and each spins for
 * about 2^28 cycles (0.1 s here) before it sleeps: a process that ran steps at once (a bench,
 * `latch run`) had its first steps take 16 ms instead of 0.3 while a worker spun beside
 * OpenMP's threads. Setting the thread count does not stop them; that build's
 * blas_thread_shutdown_ (its own, used at fork) does. Looked up in the library that holds
 * openblas_set_num_threads, so that another BLAS in the process is left alone; other builds
 * (serial, OpenMP) have none. */
static void stop_blas_threads(void) {
  openblas_set_num_threads(1);
  Dl_info info;
  void *lib = dladdr((void *)openblas_set_num_threads, &info) && info.dli_fname
                  ? dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY)
                  : NULL;
  int (*shutdown)(void) = lib ? (int (*)(void))dlsym(lib, "blas_thread_shutdown_") : NULL;
  if (shutdown) shutdown();
  if (lib) dlclose(lib);
}

/* Called before any executable of this backend runs (compile, load). Setting the count starts
 * the stopped workers again in that build (0.3.21's goto_set_num_threads starts its server
 * whatever the count), so it is set only where it is not one already: where the host raised
 * it since (its own BLAS calls on more threads), latch's calls are held to one again. */
static void blas_single_threaded(void) {
  static pthread_once_t stopped = PTHREAD_ONCE_INIT;
  pthread_once(&stopped, stop_blas_threads);
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

static _Atomic int64_t pass_runs;

int64_t rt_cpu_pass_runs(void) { return atomic_load(&pass_runs); }

/* Compiles a module's text: parsed twice, once kept as the source (bind compares a binding
 * with it; serialize writes its encoding, which a load decodes far faster than it could
 * parse the text) and once for the passes, each instruction of both numbered by its
 * position (origin) so that bind can map an optimized instruction to its counterpart in
 * another binding of the source. */
static rt_executable *cpu_compile_text(const char *text, size_t len, const char *where,
                                       const rt_compile_options *options, hlo_diag *diag) {
  static const rt_compile_options defaults = RT_COMPILE_OPTIONS_INIT;
  if (!options) options = &defaults;
  hlo_module *source = hlo_parse_module(text, len, where, diag);
  if (!source) return NULL;
  if (hlo_verify_module(source, diag) != HLO_OK) {
    hlo_module_free(source);
    return NULL;
  }
  hlo_module *module = hlo_parse_module(text, len, where, diag);
  if (!module) {
    hlo_module_free(source);
    return NULL;
  }
  hlo_module_number_origins(source);
  hlo_module_number_origins(module);
  atomic_fetch_add(&pass_runs, 1);
  /* the choices below (passes, then the plan's kernels) are counted and may be refused */
  hlo_choice_ledger ledger = {.limit = options->limit_choices ? options->choice_limit : -1,
                              .avoid = options->choice_avoid, .log = options->choice_log,
                              .log_context = options->choice_log_context};
  hlo_choice_ledger *outer = hlo_choices_install(&ledger);
  hlo_pass_run_all(module);
  /* reassociates sums (the weight summed over repeated inputs first), within rounding of
   * the graph as written, as BLAS's blocking is */
  rt_cpu_pass_dot_of_repeats(module);
  /* batch norm after a convolution folded into its weights and bias, within rounding */
  rt_cpu_pass_fold_affine(module);
  /* a strided convolution over few features as a stride-1 one over space-to-depth blocks,
   * within rounding (oneDNN has only im2col for alexnet's stem) */
  rt_cpu_pass_space_to_depth(module);
  /* an input gradient's reversed kernel read as it is, by oneDNN's backward-data primitive */
  rt_cpu_pass_input_grad(module);
  /* which library runs each product, and where known-finite inputs go unscanned */
  rt_cpu_mark_choices(module);
  rt_cpu_bf16_note(module->entry, options);
  blas_single_threaded();
  /* a pass that ran out of memory mid-rewrite leaves the module's failed flag */
  rt_cpu_plan *plan = hlo_module_check_memory(module, "optimizing the module", diag) ? NULL
                                                                                      : rt_cpu_plan_build(module, options, diag);
  hlo_choices_install(outer);
  hlo_strbuf encoded;
  hlo_sb_init(&encoded);
  if (plan) rt_cpu_encode_module(&encoded, source, false);
  size_t encoded_len = encoded.len;
  char *source_bytes = plan ? hlo_sb_take(&encoded) : NULL;
  if (plan && !source_bytes) hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory encoding the module");
  rt_executable *exe = source_bytes ? new_executable(module, plan, options, diag) : NULL;
  if (!exe) {
    free(source_bytes);
    rt_cpu_plan_free(plan);
    hlo_module_free(module);
    hlo_module_free(source);
    return NULL;
  }
  exe->source = source;
  exe->source_bytes = exe->source_block = source_bytes;
  exe->source_len = encoded_len;
  return exe;
}

static rt_executable *cpu_compile(const hlo_module *module, const rt_compile_options *options, hlo_diag *diag) {
  char *text = hlo_module_to_text(module);
  if (!text) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory printing module %s", module->name);
    return NULL;
  }
  rt_executable *exe = cpu_compile_text(text, strlen(text), "<compile>", options, diag);
  free(text);
  return exe;
}

/* A kept step's slots: slots[0] is its result's version (0: no result in the arena), then
 * the stamps of the arguments it was computed from. Current when each argument still has
 * that stamp (and has one: 0 is unknown). */
static bool kept_current(const rt_cpu_step *step, const uint64_t *slots, rt_value *const *args) {
  if (slots[0] == 0) return false;
  for (int k = 0; k < step->kept_param_count; k++) {
    uint64_t stamp = args[step->kept_params[k]]->stamp;
    if (!stamp || slots[1 + k] != stamp) return false;
  }
  return true;
}

/* A new version each time a kept result is computed: what keeps a reorder of it (a DNNL
 * step's weights) compares versions as it compares an argument's stamps. Unique
 * process-wide, counting up from 1. */
static _Atomic uint64_t last_version;

static void keep_stamps(const rt_cpu_step *step, uint64_t *slots, rt_value *const *args) {
  atomic_fetch_add(&kept_made, 1);
  for (int k = 0; k < step->kept_param_count; k++) slots[1 + k] = args[step->kept_params[k]]->stamp;
  slots[0] = atomic_fetch_add(&last_version, 1) + 1;
}

static void set_view(cell *c, const hlo_shape *shape, void *data) {
  c->view.refcount = 1;
  hlo_shape_set_array(&c->view.shape, shape->dtype, shape->rank, shape->dims);
  c->view.data = data;
  c->view.count = hlo_shape_elements(&c->view.shape);
  c->view.tuple_count = 0;
  c->view.tuple = NULL;
  c->view.stamp = 0;
  c->view.release = NULL;
  c->view.release_ctx = NULL;
  c->value = &c->view;
  c->owned = false;
}

static bool is_view(const cell *cells, int count, const rt_value *value) {
  uintptr_t p = (uintptr_t)value, lo = (uintptr_t)cells, hi = (uintptr_t)(cells + count);
  return p >= lo && p < hi;
}

/* A reference kernel may hand back (retained) one of its operands, or a tuple holding
 * one: views must not outlive their step, so those become copies. */
static rt_value *detach(const cell *cells, int count, rt_value *value) {
  if (!value) return NULL;
  if (is_view(cells, count, value)) {
    rt_value *copy = rt_value_copy(value);
    rt_value_release(value); /* undoes the kernel's retain; a view's count never hits 0 */
    return copy;
  }
  for (int i = 0; i < value->tuple_count; i++) {
    value->tuple[i] = detach(cells, count, value->tuple[i]);
    if (!value->tuple[i]) {
      rt_value_release(value);
      return NULL;
    }
  }
  return value;
}

/* An owned value for the caller: owned cells are passed on, views copied. */
static rt_value *hand_out(cell *c) {
  if (c->owned) return rt_value_retain(c->value);
  counted(1);
  return rt_value_copy(c->value);
}

static hlo_status check_args(const hlo_comp *entry, rt_value *const *args, int arg_count, hlo_diag *diag) {
  if (arg_count != entry->param_count)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "computation %s takes %d arguments, got %d", entry->name,
                        entry->param_count, arg_count);
  for (int i = 0; i < arg_count; i++) {
    const hlo_shape *want = &entry->params[i]->shape;
    const rt_value *have = args[i];
    bool ok = have != NULL;
    if (ok && want->dtype == HLO_TUPLE) ok = have->shape.dtype == HLO_TUPLE && have->tuple_count == want->tuple_count;
    else if (ok) ok = have->shape.dtype == want->dtype && have->shape.rank == want->rank;
    for (int d = 0; ok && want->dtype != HLO_TUPLE && d < want->rank; d++) ok = have->shape.dims[d] == want->dims[d];
    if (!ok) {
      char want_text[128], have_text[128];
      return hlo_diag_set(diag, HLO_ERR_INPUT, "argument %d of %s: expected %s, got %s", i, entry->name,
                          hlo_shape_str(want, want_text, sizeof want_text),
                          have ? hlo_shape_str(&have->shape, have_text, sizeof have_text) : "nothing");
    }
  }
  return HLO_OK;
}

/* Up to this many steps an execute keeps its cells and operands on the stack, and a tuple
 * step of up to this many elements its element list. */
#define FEW_STEPS 8

/* One execute's state, as its steps see it: the cells (one per step; count of them), the
 * arena, the caller's arguments, the current step's operands, the reference path's
 * evaluator. */
typedef struct run_state {
  cell *cells;
  int count;
  char *arena;
  rt_value *const *args;
  rt_value **ops;
  rt_eval *eval;
} run_state;

static hlo_status out_of_memory(run_state *r, const hlo_instr *instr) {
  return hlo_diag_set(r->eval->diag, HLO_ERR_INTERNAL, "out of memory in %s %%%s", hlo_opcode_name(instr->opcode),
                      instr->name);
}

/* Where a step that writes a buffer puts its result: a value of its own when it is a result
 * of the entry (written whole by the kernel, as a buffer of the arena is), else its buffer. */
static hlo_status place_result(const rt_cpu_step *step, run_state *r) {
  const hlo_instr *instr = step->instr;
  cell *c = &r->cells[instr->id];
  if (!step->output) {
    set_view(c, &instr->shape, r->arena + step->offset);
    return HLO_OK;
  }
  c->value = rt_value_new_unfilled(&instr->shape);
  counted(1);
  if (!c->value)
    return hlo_diag_set(r->eval->diag, HLO_ERR_INTERNAL, "out of memory for the result of %%%s", instr->name);
  c->owned = true;
  return HLO_OK;
}

/* A parameter: a view of the caller's argument; a tuple is copied (the caller's elements
 * are not ours to retain). */
static hlo_status run_param(const rt_cpu_step *step, run_state *r) {
  cell *c = &r->cells[step->instr->id];
  rt_value *arg = r->args[step->instr->parameter_number];
  if (arg->shape.dtype != HLO_TUPLE) {
    set_view(c, &arg->shape, arg->data);
    return HLO_OK;
  }
  c->value = rt_value_copy(arg);
  c->owned = true;
  counted(1);
  return HLO_OK;
}

/* A view of operand 0's bytes, or of a tuple operand's element. */
static hlo_status run_alias(const rt_cpu_step *step, run_state *r) {
  const hlo_instr *instr = step->instr;
  cell *c = &r->cells[instr->id];
  if (instr->opcode != HLO_OP_GET_TUPLE_ELEMENT) {
    set_view(c, &instr->shape, r->ops[0]->data);
    return HLO_OK;
  }
  const rt_value *tuple = r->ops[0];
  if (tuple->shape.dtype != HLO_TUPLE || instr->index < 0 || instr->index >= tuple->tuple_count)
    return hlo_diag_set(r->eval->diag, HLO_ERR_INPUT, "get-tuple-element %%%s: index %lld out of range", instr->name,
                        (long long)instr->index);
  c->view = *tuple->tuple[instr->index];
  c->view.refcount = 1;
  c->value = &c->view;
  c->owned = false;
  return HLO_OK;
}

/* A new tuple of its operands, each handed out (views copied). */
static hlo_status run_tuple(const rt_cpu_step *step, run_state *r) {
  const hlo_instr *instr = step->instr;
  cell *c = &r->cells[instr->id];
  rt_value *few[FEW_STEPS], **elements = few;
  if (instr->operand_count > FEW_STEPS) elements = hlo_calloc((size_t)instr->operand_count, sizeof(rt_value *));
  if (!elements) return out_of_memory(r, instr);
  bool ok = true;
  for (int k = 0; k < instr->operand_count; k++) {
    elements[k] = hand_out(&r->cells[instr->operands[k]->id]);
    ok = ok && elements[k];
  }
  c->value = ok ? rt_value_new_tuple(instr->operand_count, elements) : NULL;
  counted(1);
  if (!c->value)
    for (int k = 0; k < instr->operand_count; k++) rt_value_release(elements[k]);
  if (elements != few) free(elements);
  if (!c->value) return out_of_memory(r, instr);
  c->owned = true;
  return HLO_OK;
}

/* A fast step with a tuple result writes each element into its own buffer; the tuple itself
 * is never a value (only its PART steps read it), so it lives on the stack for the call. */
static hlo_status run_parts(const rt_cpu_step *step, run_state *r) {
  enum { MAX_PARTS = 8 };
  const hlo_instr *instr = step->instr;
  rt_value part_cells[MAX_PARTS];
  rt_value *parts[MAX_PARTS];
  if (step->part_count > MAX_PARTS)
    return hlo_diag_set(r->eval->diag, HLO_ERR_INTERNAL, "%%%s: %d tuple elements", instr->name, step->part_count);
  for (int p = 0; p < step->part_count; p++) {
    const hlo_shape *shape = &instr->shape.tuple[p];
    part_cells[p] = (rt_value){.refcount = 1, .data = r->arena + step->part_offsets[p]};
    part_cells[p].shape = hlo_shape_make(shape->dtype, shape->rank, shape->dims);
    part_cells[p].count = hlo_shape_elements(&part_cells[p].shape);
    parts[p] = &part_cells[p];
  }
  rt_value tuple = {.refcount = 1, .shape = {.dtype = HLO_TUPLE}, .tuple_count = step->part_count, .tuple = parts};
  if (!step->fast(instr, (const rt_value *const *)r->ops, &tuple)) return out_of_memory(r, instr);
  return HLO_OK;
}

/* The stamp of the weights a step keeps reordered or packed: the parameter's, or the version
 * of the kept result they are. */
static uint64_t weights_stamp(const rt_cpu_step *step, const run_state *r) {
  const rt_cpu_step *steps = step - step->instr->id; /* the plan's: step i is entry instruction i */
  if (step->weight_param >= 0) return r->args[step->weight_param]->stamp;
  return *(const uint64_t *)(r->arena + steps[step->weight_kept].stamp_offset);
}

/* A fast kernel or a fused group into the step's result; a kept step whose arguments have
 * the stamps it was computed from is skipped. */
static hlo_status run_fast(const rt_cpu_step *step, run_state *r) {
  const hlo_instr *instr = step->instr;
  if (step->part_count) return run_parts(step, r);
  hlo_status status = place_result(step, r);
  if (status != HLO_OK) return status;
  rt_value *out = r->cells[instr->id].value;
  uint64_t *kept = step->kept ? (uint64_t *)(r->arena + step->stamp_offset) : NULL;
  if (kept && kept_current(step, kept, r->args)) { /* computed from these contents already */
    atomic_fetch_add(&kept_reuses, 1);
    return HLO_OK;
  }
  if (kept) kept[0] = 0;
  void *scratch = step->scratch_bytes ? r->arena + step->scratch_offset : NULL;
  const rt_value *const *in = (const rt_value *const *)r->ops;
  rt_cpu_packed packed, *pack = NULL;
  if (rt_cpu_step_keeps_weights(step)) { /* a product's rhs kept packed */
    packed = (rt_cpu_packed){.data = r->arena + step->weight_offset,
                             .slot = (uint64_t *)(r->arena + step->stamp_offset), .stamp = weights_stamp(step, r)};
    pack = &packed;
  }
  bool ok = step->kind == RT_STEP_FUSED ? rt_cpu_fusion_run(step->fusion, in, out, scratch, pack)
            : pack                     ? rt_cpu_dot_with_epilogue(instr, in, out, NULL, scratch, pack)
            : step->fast_scratch       ? step->fast_scratch(instr, in, out, scratch)
                                       : step->fast(instr, in, out);
  if (!ok) return out_of_memory(r, instr);
  if (kept) keep_stamps(step, kept, r->args);
  return HLO_OK;
}

/* A convolution on oneDNN into its result, with its weights kept in the arena when they
 * are a parameter's. */
static hlo_status run_dnnl(const rt_cpu_step *step, run_state *r) {
  const hlo_instr *instr = step->instr;
  char *arena = r->arena;
  hlo_status status = place_result(step, r); /* oneDNN writes all of it */
  if (status != HLO_OK) return status;
  cell *c = &r->cells[instr->id];
  bool kept = rt_cpu_step_keeps_weights(step);
  uint64_t stamp = kept ? weights_stamp(step, r) : 0;
  /* What a scan here finds finite stays known for the value's later readers this run (a
   * residual block's input: the first convolution's source, then the last one's residual). */
  bool in_finite[RT_CPU_DNNL_STEP_INPUTS] = {false};
  int inputs = rt_cpu_step_input_count(step);
  for (int k = 0; k < inputs; k++) in_finite[k] = r->cells[rt_cpu_step_input(step, k)].finite;
  status = rt_cpu_dnnl_step(step->dnnl, (const rt_value *const *)r->ops, c->value->data,
                            step->scratch_bytes ? arena + step->scratch_offset : NULL,
                            kept ? arena + step->weight_offset : NULL,
                            kept ? (uint64_t *)(arena + step->stamp_offset) : NULL, stamp, in_finite, &c->finite,
                            r->eval->diag);
  for (int k = 0; k < inputs; k++) r->cells[rt_cpu_step_input(step, k)].finite |= in_finite[k];
  return status;
}

/* Attention (attention.c) into its result. */
static hlo_status run_attention(const rt_cpu_step *step, run_state *r) {
  hlo_status status = place_result(step, r);
  if (status != HLO_OK) return status;
  rt_cpu_attention_run(step->attention, (const rt_value *const *)r->ops, r->cells[step->instr->id].value);
  return HLO_OK;
}

/* A reference kernel making a new value, detached from the views it may hand back. */
static hlo_status run_slow(const rt_cpu_step *step, run_state *r) {
  const hlo_instr *instr = step->instr;
  rt_value *out = NULL;
  counted(1);
  hlo_status status = step->slow(r->eval, instr, r->ops, &out);
  if (status != HLO_OK) {
    rt_value_release(out);
    return status;
  }
  if (!out)
    return hlo_diag_set(r->eval->diag, HLO_ERR_INTERNAL, "%s %%%s produced no value", hlo_opcode_name(instr->opcode),
                        instr->name);
  cell *c = &r->cells[instr->id];
  c->value = detach(r->cells, r->count, out);
  if (!c->value) return hlo_diag_set(r->eval->diag, HLO_ERR_INTERNAL, "out of memory in %%%s", instr->name);
  c->owned = true;
  return HLO_OK;
}

static hlo_status run_step(const rt_cpu_step *step, run_state *r) {
  const hlo_instr *instr = step->instr;
  for (int k = 0; k < rt_cpu_step_input_count(step); k++) r->ops[k] = r->cells[rt_cpu_step_input(step, k)].value;
  switch (step->kind) {
    case RT_STEP_PARAM: return run_param(step, r);
    case RT_STEP_CONST: set_view(&r->cells[instr->id], &instr->literal->shape, instr->literal->data); return HLO_OK;
    case RT_STEP_ALIAS: return run_alias(step, r);
    case RT_STEP_TUPLE: return run_tuple(step, r);
    case RT_STEP_PART: set_view(&r->cells[instr->id], &instr->shape, r->arena + step->offset); return HLO_OK;
    case RT_STEP_INSIDE: return HLO_OK;
    case RT_STEP_FAST: case RT_STEP_FUSED: return run_fast(step, r);
    case RT_STEP_DNNL: return run_dnnl(step, r);
    case RT_STEP_ATTENTION: return run_attention(step, r);
    case RT_STEP_SLOW: return run_slow(step, r);
  }
  return HLO_OK;
}

/* A deserialized executable's oneDNN primitives, made once by the first execute (others
 * wait for it); in a forked child, every executable's, made again by its first execute there. */
static hlo_status make_primitives(rt_executable *exe, hlo_diag *diag) {
  pthread_mutex_lock(&exe->primitives_lock);
  rt_test_at(RT_TEST_PRIMITIVES_LOCKED);
  hlo_status status = HLO_OK;
  if (atomic_load(&exe->primitives_pending)) {
    status = rt_cpu_plan_make_primitives(exe->plan, exe->primitives_inherited, diag);
    if (status == HLO_OK) atomic_store(&exe->primitives_pending, false), exe->primitives_inherited = false;
  }
  pthread_mutex_unlock(&exe->primitives_lock);
  return status;
}

static hlo_status cpu_execute(rt_executable *exe, rt_value *const *args, int arg_count, rt_value **result,
                              hlo_diag *diag) {
  *result = NULL;
  const hlo_comp *entry = exe->module->entry;
  const rt_cpu_plan *plan = exe->plan;
  hlo_status status = check_args(entry, args, arg_count, diag);
  if (status != HLO_OK) return status;
  rt_eval_options options = {.fp64 = false, .comm = exe->options.comm}; /* collectives run as reference kernels */
  if (plan->dynamic) return rt_evaluate(exe->module, args, arg_count, &options, result, diag);
  if (atomic_load(&exe->primitives_pending) && make_primitives(exe, diag) != HLO_OK) return diag->status;
  rt_eval eval = {.options = &options, .diag = diag, .call_depth = 0};
  int n = plan->step_count;
  /* A small graph's cells and operands on the stack: a call's two callocs were a fifth of a
   * one-op graph's execute (the cells, over 1 KB for four steps, take malloc's slow path) */
  cell few_cells[FEW_STEPS + 1];
  rt_value *few_ops[FEW_STEPS + 1];
  bool few = n <= FEW_STEPS && plan->max_operands <= FEW_STEPS;
  if (few) { /* a cell's view is written whole before it is read: only the rest is cleared */
    for (int i = 0; i <= n; i++) few_cells[i].value = NULL, few_cells[i].owned = few_cells[i].finite = false;
    memset(few_ops, 0, sizeof few_ops);
  }
  cell *cells = few ? few_cells : hlo_calloc((size_t)n + 1, sizeof(cell));
  rt_value **ops = few ? few_ops : hlo_calloc((size_t)plan->max_operands + 1, sizeof(rt_value *));
  int64_t capacity;
  char *arena = take_arena(exe, &capacity);
  if (!cells || !ops || (plan->arena_bytes && !arena))
    status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory: %lld bytes of buffers for %s",
                          (long long)plan->arena_bytes, exe->module->name);
  run_state r = {.cells = cells, .count = n, .arena = arena, .args = args, .ops = ops, .eval = &eval};
  for (int i = 0; i < n && status == HLO_OK; i++) {
    const rt_cpu_step *step = &plan->steps[i];
    status = run_step(step, &r);
    for (int f = 0; f < step->free_count; f++) {
      cell *dead = &cells[step->frees[f]];
      if (dead->owned) rt_value_release(dead->value);
      dead->value = NULL;
      dead->owned = false;
    }
  }
  if (status == HLO_OK) {
    *result = hand_out(&cells[entry->root->id]);
    if (!*result) status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory copying the result");
  }
  for (int i = 0; cells && i < n; i++)
    if (cells[i].owned) rt_value_release(cells[i].value);
  if (!few) free(cells), free(ops);
  give_arena(exe, arena, capacity);
  return status;
}

/* A deserialized executable's source module, decoded at the first bind and checked as a
 * loaded module is (deserialize.c): bytes that passed the checksum may still come from
 * elsewhere. */
static hlo_status decode_source(rt_executable *exe, hlo_diag *diag) {
  pthread_mutex_lock(&exe->source_lock);
  rt_test_at(RT_TEST_SOURCE_LOCKED);
  if (!exe->source && exe->source_bytes) {
    rt_blob_in in;
    rt_blob_in_init(&in, exe->source_bytes, exe->source_len);
    hlo_module *source = rt_cpu_decode_module(&in);
    if (source && in.p != in.end) rt_blob_fail(&in, "the end (bytes left over)");
    if (in.failed) {
      hlo_diag_set(diag, HLO_ERR_INPUT, "bad bytes reading the source module of a cpu executable: %s", in.why);
    } else if (hlo_verify_decoded(source, diag) == HLO_OK) {
      hlo_module_number_origins(source);
      exe->source = source;
    }
    if (!exe->source) hlo_module_free(source);
  }
  bool ok = exe->source || !exe->source_bytes;
  pthread_mutex_unlock(&exe->source_lock);
  return ok ? HLO_OK : diag->status;
}

/* The new executable for binding runs the compiled one's passes' result with shapes,
 * kernels and buffers for the binding's sizes; nothing is compiled. A bound executable
 * binds through the one it was bound from. */
static rt_executable *cpu_bind(rt_executable *exe, const hlo_module *binding, hlo_diag *diag) {
  rt_executable *compiled = exe->bound_from ? exe->bound_from : exe;
  if (decode_source(compiled, diag) != HLO_OK) return NULL;
  hlo_module *bound = rt_cpu_bind_module(compiled->source, compiled->module, binding, diag);
  if (!bound) return NULL;
  rt_cpu_plan *plan = rt_cpu_plan_build(bound, &compiled->options, diag);
  rt_executable *bound_exe = plan ? new_executable(bound, plan, &compiled->options, diag) : NULL;
  if (!bound_exe) {
    rt_cpu_plan_free(plan);
    rt_cpu_bound_module_free(bound);
    return NULL;
  }
  bound_exe->bound_from = bound_exe->pool_from = compiled;
  return bound_exe;
}

/* Only an executable of the family's very optimized graph shares (its arena's kept results
 * are matched step by step, kept_places.c): what a disk entry holds under a binding's key may
 * also be a compile of that graph, whose passes may have decided otherwise. */
static bool cpu_share_buffers(rt_executable *exe, rt_executable *family) {
  rt_executable *owner = family_of(family);
  if (exe == owner || exe->pool_from || exe->pool || !rt_cpu_same_graph(owner->module, exe->module)) return false;
  exe->pool_from = owner;
  return true;
}

static void cpu_destroy(rt_executable *exe) {
  if (!exe) return;
  unlist_open(exe);
  if (exe->pool_from) { /* the family's arena may have come back from this one's execute */
    pthread_mutex_lock(&exe->pool_from->pool_lock);
    if (exe->pool_from->pool_places == exe->kept_places) exe->pool_from->pool_places = NULL;
    pthread_mutex_unlock(&exe->pool_from->pool_lock);
  }
  rt_cpu_kept_places_free(exe->kept_places);
  if (exe->pool) atomic_fetch_sub(&kept_arena_bytes, exe->pool_bytes);
  free(exe->pool);
  pthread_mutex_destroy(&exe->pool_lock);
  pthread_mutex_destroy(&exe->source_lock);
  pthread_mutex_destroy(&exe->primitives_lock);
  rt_cpu_plan_free(exe->plan);
  if (exe->bound_from) rt_cpu_bound_module_free(exe->module);
  else hlo_module_free(exe->module);
  hlo_module_free(exe->source);
  free(exe->source_block);
  free(exe);
}

/* A bound executable is written with the source module of the executable it was bound
 * from: its instructions' origins are positions in that module, so loaded again it binds to
 * other sizes as that one does. */
static hlo_status cpu_serialize(const rt_executable *exe, void **bytes, size_t *len, hlo_diag *diag) {
  const rt_executable *family = exe->bound_from ? exe->bound_from : exe;
  return rt_cpu_serialize(exe->module, exe->plan, family->source_bytes, family->source_len, bytes, len, diag);
}

/* The executable that bytes hold, still without its source module: *source and
 * *source_len say where that module's encoding lies in bytes (NULL: there is none). */
static rt_executable *load(const void *bytes, size_t len, const rt_compile_options *options, const char **source,
                           size_t *source_len, hlo_diag *diag) {
  static const rt_compile_options defaults = RT_COMPILE_OPTIONS_INIT;
  hlo_module *module;
  rt_cpu_plan *plan;
  if (rt_cpu_deserialize(bytes, len, &module, &plan, source, source_len, diag) != HLO_OK) return NULL;
  blas_single_threaded();
  rt_executable *exe = new_executable(module, plan, options ? options : &defaults, diag);
  if (!exe) {
    rt_cpu_plan_free(plan);
    hlo_module_free(module);
  }
  return exe;
}

static rt_executable *cpu_deserialize(const void *bytes, size_t len, const rt_compile_options *options,
                                      hlo_diag *diag) {
  const char *source;
  size_t source_len;
  rt_executable *exe = load(bytes, len, options, &source, &source_len, diag);
  if (!exe || !source) return exe;
  char *copy = hlo_malloc(source_len + 1);
  if (!copy) {
    cpu_destroy(exe);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory keeping a loaded module's source");
    return NULL;
  }
  memcpy(copy, source, source_len);
  exe->source_bytes = exe->source_block = copy;
  exe->source_len = source_len;
  return exe;
}

/* Keeps the blob's bytes instead of copying its source module's encoding out of them: in a
 * fresh process every page a load writes first is a page fault, and the copy was 12 of
 * gpt2's 113. The encoding leads the blob, so the bytes after it go back to malloc. */
static rt_executable *cpu_adopt(void *bytes, size_t len, const rt_compile_options *options, hlo_diag *diag) {
  const char *source;
  size_t source_len;
  rt_executable *exe = load(bytes, len, options, &source, &source_len, diag);
  if (!exe || !source) {
    free(bytes);
    return exe;
  }
  size_t end = (size_t)(source - (const char *)bytes) + source_len; /* < len: the module follows */
  char *kept = hlo_realloc(bytes, end);
  if (!kept) kept = bytes; /* a shrink that failed leaves bytes as they were */
  exe->source_block = kept;
  exe->source_bytes = kept + (end - source_len);
  exe->source_len = source_len;
  return exe;
}

static void cpu_describe(char *out, size_t size) {
  snprintf(out, size, "fused_isa=%s dnnl_isa=%s products=%s", rt_cpu_isa_name(rt_cpu_isa_in_use()),
           rt_cpu_dnnl_isa_name(), rt_cpu_dot_on_dnnl() ? "onednn" : "openblas");
}

/* A load runs no pass and builds no plan: a warm process shows 0 and 0. */
static void cpu_work_so_far(char *out, size_t size) {
  snprintf(out, size, "passes ran %" PRId64 " times, %" PRId64 " plans built", rt_cpu_pass_runs(),
           rt_cpu_plans_built());
}

const rt_backend rt_backend_cpu = {
    .name = "cpu",
    .version = "3",
    .compile = cpu_compile,
    .execute = cpu_execute,
    .destroy = cpu_destroy,
    .serialize = cpu_serialize,
    .deserialize = cpu_deserialize,
    .adopt = cpu_adopt,
    .bind = cpu_bind,
    .share_buffers = cpu_share_buffers,
    .describe = cpu_describe,
    .work_so_far = cpu_work_so_far,
    .libraries = rt_cpu_libraries,
};
