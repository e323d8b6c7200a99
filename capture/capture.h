/* capture/: lazy tensors, sync, traced functions: the implementation of include/latch.h.
 * Internal to latch: embedders use latch.h; tools/ and tests/ may use this header.
 *
 * The shared structures come first, then what each file exports to the others, under its
 * name. The files: the runtime (open.c, settings.c, remote_config.c, backends.c); nodes and handles (node.c,
 * node_pool.c, tensor.c, promote.c, precision.c); the ops of latch.h (ops_elementwise.c, ops_nn.c,
 * ops_shape.c, ops_comm.c, random.c, borrow.c); graphs and their HLO (graph.c, lower.c, lower_nn.c);
 * sync (sync.c, sync_check.c); traced functions (trace.c, symbolic.c, function.c, entry.c,
 * bindings.c, segments.c, reasons.c). ops_nn.c, ops_shape.c, ops_comm.c, borrow.c and function.c
 * define latch.h's functions only, so they have no heading here. */
#ifndef CAP_CAPTURE_H
#define CAP_CAPTURE_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cache/cache.h"
#include "hlo/hlo.h"
#include "include/latch.h"
#include "runtime/runtime.h"
#include "guards/guards.h"

/* ---- nodes, handles, the runtime ----
 *
 * A latch_tensor is a handle; what it holds is a cap_node. A node is immutable once made
 * (op, attributes, operands, shape, hash) except for its state: PENDING until a sync
 * computes it, then READY with a value (and its operands dropped), or ERROR from the
 * start. Handles and nodes are separate so that an in-place update (latch_assign) can
 * point a handle at a new node while pending users of the old value keep the old node.
 *
 * Hashes: a node's hash is computed when it is made, from its op, attributes, shape and
 * its operands' hashes, where a READY operand counts as device data: its dtype and dims
 * only (data_hash). So a training step that reads last step's weights hashes the same as
 * the step before, and a sync never rehashes node contents: it hashes its roots' hashes
 * and a small record of the graph's cut and sharing (see graph.c).
 *
 * Trace-once functions (function.c, entry.c, trace.c, symbolic.c, random.c) build on these
 * pieces: a trace runs the function with its inputs as READY nodes and a cap_trace on this
 * thread's context (hooks in cap_wrap, cap_node_like, latch_dim and the reads record
 * symbolic dims, weights and value reads), cuts the graph of its outputs and in-place
 * updates with cap_graph_collect, and keeps the executable's cache entry beside its guards;
 * a hit runs that executable on the new inputs' values without tracing. Random numbers are
 * a graph op (CAP_RNG_UNIFORM) whose seed is a graph input. */

/* Node ops. The numbers are part of every graph key: never renumber, only append. */
typedef enum cap_op {
  CAP_DATA = 1,    /* device data: a READY leaf */
  CAP_CONST = 2,   /* scalar[0] broadcast to the shape */
  CAP_IOTA = 3,    /* attrs: dim */
  CAP_UNARY = 4,   /* sub: latch_unop */
  CAP_BINARY = 5,  /* sub: latch_binop */
  CAP_COMPARE = 6, /* sub: latch_cmp */
  CAP_WHERE = 7,
  CAP_CLAMP = 8, /* scalar: low, high */
  CAP_CAST = 9,
  CAP_RELU = 10,
  CAP_GELU = 11, /* sub: 1 for the tanh form */
  CAP_MATMUL = 12,
  CAP_CONV2D = 13,     /* attrs: stride h w, pad h w, dilation h w, groups */
  /* CAP_MATMUL and CAP_CONV2D take sub CAP_PRODUCT_BF16 when the f32 product runs on bf16
   * operands (precision.c) */
  CAP_POOL = 14,       /* sub: 0 max, 1 avg, 2 max's gradient (operands x, grad); attrs: kernel h w,
                        * stride h w, pad h w */
  CAP_REDUCE = 15,     /* sub: latch_reduce_op; attrs: dim mask, keepdim */
  CAP_ARGMAX = 16,     /* attrs: dim, keepdim */
  CAP_SOFTMAX = 17,    /* sub: 1 for log_softmax; attrs: dim */
  CAP_LAYER_NORM = 18, /* attrs: normalized rank, has weight, has bias; scalar: eps */
  CAP_BATCH_NORM = 19, /* attrs: has weight, has bias; scalar: eps */
  CAP_EMBEDDING = 20,
  CAP_RESHAPE = 21,
  CAP_PERMUTE = 22, /* attrs: perm */
  CAP_SLICE = 23,   /* attrs: dim, start, stop, step */
  CAP_CONCAT = 24,  /* attrs: dim */
  CAP_PAD = 25,     /* attrs: low[rank], high[rank]; scalar: value */
  CAP_BROADCAST = 26,
  CAP_RNG_UNIFORM = 27, /* operand: the seed (u32[2]); attrs: stream; scalar: low, high */
  CAP_ALL_REDUCE = 28,  /* sub: latch_reduce_op; attrs: the world's size */
  CAP_FLIP = 29,        /* attrs: the mask of the dims reversed */
  CAP_CONV2D_INPUT_GRAD = 30, /* operands: the result's gradient, the kernel; attrs: stride h w, pad h w,
                               * dilation h w, input h w (sub as CAP_CONV2D's) */
  CAP_CONV2D_WEIGHT_GRAD = 31, /* operands: the source, the result's gradient; attrs: stride h w, pad h w,
                                * dilation h w, kernel h w (sub as CAP_CONV2D's) */
} cap_op;

typedef enum cap_state { CAP_PENDING = 0, CAP_READY, CAP_ERROR } cap_state;

/* Bump when a lowering changes what a node computes: it seeds every node hash. */
#define CAP_HASH_FORMAT     1
/* Bump when the HLO a graph lowers to changes, even to an equal function (reducers shared,
 * instructions reordered): it is part of every graph key, since a cached executable keeps
 * the HLO it was compiled from and binding it to other sizes compares that HLO with the
 * graph lowered anew. 2: reducers shared within a module. 3: a mean divides by its dims' sizes
 * read when the graph runs (get-dimension-size), so it binds to other sizes. 4: x @ W with a
 * matrix W is one dot whose lhs keeps x's batch dims as free dims (no broadcast of W). */
#define CAP_LOWERING_FORMAT 4
#define CAP_INLINE_OPERANDS 3

typedef struct cap_node {
  atomic_int refs; /* handles, users (operand edges), alias records */
  uint16_t op, sub;
  uint8_t dtype; /* hlo_dtype */
  uint8_t rank;
  uint8_t state;    /* cap_state; written only by the owning thread while PENDING */
  uint8_t reported; /* ERROR: a sync has reported it */
  int operand_count, attr_count;
  /* READY: the hash new users see, of dtype and dims only (cap_operand_hash), computed by
   * the first reader: most values (a call's inputs and results) are never an operand of a
   * traced op. Readers on several threads may fill it at once, with the same words. */
  atomic_bool data_hash_known;
  int64_t dims[HLO_MAX_RANK];
  double scalar[2];
  cache_key hash;             /* PENDING and ERROR: as computed at creation */
  _Atomic uint64_t data_hash[2];
  struct cap_node **operands; /* inline_operands or malloc'd */
  struct cap_node *inline_operands[CAP_INLINE_OPERANDS];
  rt_value *value; /* READY */
  char *error;     /* ERROR: the message, malloc'd */
  /* Scratch for the owning thread's sync while PENDING: which walk saw it last, and its
   * index in that walk's post-order. */
  uint64_t walk;
  int32_t walk_index;
  /* Set while PENDING by the trace that made it (trace.c): which trace, and where its
   * symbolic dims are kept (-1: all static). */
  uint32_t trace_id;
  int32_t trace_sym;
  int64_t attrs[]; /* attr_count */
} cap_node;

/* Per-thread tracing state: the handles whose nodes may still be pending or in error. */
struct cap_trace;
typedef struct cap_ctx {
  latch_tensor *head, *tail;
  uint64_t ops_traced; /* since the last sync flushed it into a runtime's stats */
  struct cap_trace *trace; /* the traced function call running on this thread, or NULL */
  bool eager;              /* a latch_call in eager mode: run every op at once */
  bool call_seeded;        /* inside latch_call: random ops draw from call_seed */
  uint64_t call_seed;
  int rng_stream;          /* random ops so far in this call */
  int reshape_infer;       /* latch_reshape tells the trace which dim was -1 (+1; 0: none) */
  const struct cap_node *trace_like; /* latch_rand_uniform_like tells the trace its shape source */
  /* The first op error since this thread's last sync of error_rt, kept even if its tensor
   * is released at once, so the sync still reports it. */
  latch_runtime *error_rt;
  char error[1024];
} cap_ctx;

struct latch_tensor {
  atomic_int refs;
  latch_runtime *rt;
  cap_node *node;
  cap_node *alias_of; /* the READY node whose buffer an in-place update writes back to */
  cap_ctx *owner;     /* the list it is in, or NULL */
  latch_tensor *prev, *next;
  uint32_t made_in_trace; /* the id of the trace that made this handle, or 0 */
};

typedef struct cap_exe {
  const rt_backend *backend;
  rt_executable *exe;
  int param_count, output_count;
  /* Loaded from the disk or remote tier and not yet run well once: a failure of its first
   * run takes it out of the table and compiles afresh (cap_exe_recompile). */
  atomic_bool on_trial;
} cap_exe;

struct latch_runtime {
  latch_options options;
  char backend_name[64];
  const rt_backend *backend;
  cache_table *cache;
  cache_disk *disk; /* NULL unless options.cache is "disk" */
  cache_remote *remote; /* NULL unless options.cache_url is set */
  char cache_mode[8], cache_dir[4096];
  char fingerprint[RT_FINGERPRINT_MAX]; /* the disk cache's other key half */
  rt_compile_options compile_options;   /* from options: what every compile here is told */
  rt_comm *comm; /* options.mpi: the world, shared by every runtime of the process; NULL without */
  atomic_uint_fast64_t syncs, ops_traced, nodes_synced, key_ns, execute_ns, compiles, disk_loads, remote_loads;
  atomic_uint_fast64_t rng_counter; /* seeds of random ops made outside latch_call */
  int check_mode;   /* min_check_mode from options.check */
  double check_tol;
  double check_timeout; /* seconds; the checking child is killed past it */
  double check_budget;  /* seconds for one graph's check and repro together */
  atomic_uint_fast64_t check_failures;
  pthread_mutex_t repro_lock; /* fork waits for it (open.c's pthread_atfork handlers) */
  char last_repro[4096];      /* the newest repro directory, "" when none */
  latch_runtime *next_open, *prev_open; /* the open runtimes (open.c), for those handlers */
  unsigned log;          /* CAP_LOG_ flags from options.log */
  bool bf16_products;    /* options.precision is "bf16" */
  char repro_dir[4096];  /* options.repro_dir, "" when none */
};

/* What options.log asks to print (cap_log_flags). */
enum { CAP_LOG_RECOMPILES = 1, CAP_LOG_GUARDS = 2, CAP_LOG_COMPILES = 4 };

/* ---- open.c ---- */
/* The settings besides the graph, the backend and the build that change what a compile
 * makes, as the fingerprint's options ("threads=8 fusion=on"): the process's thread count and
 * options (NULL: the defaults); returns the length needed, like snprintf. */
size_t cap_code_options(const rt_compile_options *options, char *out, size_t size);
void cap_set_error(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* ---- settings.c ---- */
/* The one place the library reads the environment (latch_options_init and
 * latch_function_options_init live there too); tools/ asks it for the command's settings. */

/* What the layers below are told of options: the cpu backend's fusion and arena budget. */
void cap_compile_options(const latch_options *options, rt_compile_options *out);
/* The CAP_LOG_ flags of options.log's comma-separated words. A word it does not know gets
 * one warning per process, listing the known ones. */
unsigned cap_log_flags(const char *text);
/* inner wrapped with the test-only fault text names (rt_fault_backend: LATCH_FAULT's syntax),
 * inner when text is NULL or empty, NULL with diag when it does not parse. */
const rt_backend *cap_fault_wrap(const rt_backend *inner, const char *text, hlo_diag *diag);
/* LATCH_CACHE: off, memory or disk; unset or empty gives default_mode. Anything else is
 * HLO_ERR_INPUT naming the value, rather than a typo silently turning the cache off. */
hlo_status cap_env_cache_mode(cache_mode default_mode, cache_mode *mode, hlo_diag *diag);
/* The disk cache's directory: LATCH_CACHE_DIR, else cap_default_cache_dir's. */
hlo_status cap_env_cache_dir(char *out, size_t size, hlo_diag *diag);
/* The directory latch_open uses when options.cache_dir is NULL: $XDG_CACHE_HOME/latch, else
 * $HOME/.cache/latch. */
hlo_status cap_default_cache_dir(char *out, size_t size, hlo_diag *diag);
/* LATCH_CACHE_MAX_BYTES (a byte count, with an optional K, M, G or T suffix: powers of 1024),
 * else CACHE_DISK_DEFAULT_MAX_BYTES. */
hlo_status cap_env_cache_max_bytes(uint64_t *max_bytes, hlo_diag *diag);

/* ---- remote_config.c ---- */
/* The remote tier's configuration: url (options->cache_url, or the command's --cache-url)
 * parsed, then options' namespace and password (or password file: refused unless a regular
 * file of this user's that group and others cannot read or write) applied. */
hlo_status cap_remote_config(const latch_options *options, const char *url, cache_remote_config *config,
                             hlo_diag *diag);

/* ---- backends.c ---- */
/* The backend called name, or NULL. */
const rt_backend *cap_backend_find(const char *name);
/* Names of every backend, comma-separated, for messages ("reference, cpu"). */
const char *cap_backend_names(void);

/* ---- node.c ---- */
cap_ctx *cap_ctx_current(void);
/* A PENDING node with room for attr_count attrs and its operands (retained); the caller
 * fills shape and attrs, then calls cap_node_finish. NULL when memory runs out. */
cap_node *cap_node_new(cap_op op, int sub, int operand_count, cap_node *const *operands, int attr_count);
/* Computes the hash; a node is immutable after this. False when memory runs out (a node of
 * very many operands hashes a buffer of its own): the caller releases the node. */
bool cap_node_finish(cap_node *node);
bool cap_node_hash(const cap_node *node, cache_key *key);
cache_key cap_data_hash(hlo_dtype dtype, int rank, const int64_t *dims);
/* The hash a new user sees: of dtype and dims when READY (filled in at the first read),
 * else hash. */
cache_key cap_operand_hash(const cap_node *node);
cap_node *cap_node_retain(cap_node *node);
void cap_node_release(cap_node *node);
/* A READY leaf holding value (the reference is taken over). */
cap_node *cap_node_data(rt_value *value);
/* A READY leaf of dtype and dims without a value: a graph parameter standing for a value
 * that comes at run time. NULL when memory runs out. */
cap_node *cap_node_stand_in(uint8_t dtype, int rank, const int64_t *dims);
/* An ERROR node with a formatted message. */
cap_node *cap_node_error(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* Marks node READY with value (reference taken over), dropping its operands. */
void cap_node_set_value(cap_node *node, rt_value *value);
hlo_shape cap_node_shape(const cap_node *node);
const char *cap_node_shape_str(const cap_node *node, char *buffer, int size);
uint64_t cap_now_ns(void); /* a monotonic clock */

/* ---- node_pool.c ---- */
/* Per-thread caches of nodes and handles. */
#define CAP_POOL_ATTRS 8
cap_node *cap_pool_node(int attr_count);
void cap_pool_free_node(cap_node *node);
latch_tensor *cap_pool_handle(void);
void cap_pool_free_handle(latch_tensor *t);
/* Frees this thread's caches (latch_close does, so leak checkers see nothing held). */
void cap_pool_drain(void);

/* ---- tensor.c ---- */
/* Wraps node (reference taken over) in a handle of rt; pending and error handles go on
 * this thread's list; in eager mode a pending node is run at once. NULL node -> NULL. */
latch_tensor *cap_wrap(latch_runtime *rt, cap_node *node);
/* The error tensor for an op, message formatted; also sets latch_last_error. */
latch_tensor *cap_error(latch_runtime *rt, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* Whether non-negative dims hold at most HLO_MAX_ELEMENTS elements; false with the error
 * set, naming op, when their product is past it (or would overflow). */
bool cap_dims_fit(const char *op, int rank, const int64_t *dims);
/* A poisoned result when any operand is an error tensor, or operands of two runtimes, else NULL. */
latch_tensor *cap_poisoned(const char *op, int count, latch_tensor *const *operands);
void cap_list_remove(latch_tensor *t);
/* t takes from's value as latch_assign would: the same node, and when that node is still
 * pending, a write-back into t's own buffer once it is computed. */
void cap_handle_follow(latch_tensor *t, const latch_tensor *from);

/* ---- precision.c ---- */
enum { CAP_PRODUCT_BF16 = 1 };
/* "f32" (also NULL or "") or "bf16" into *bf16; false, with the error set naming where, for
 * anything else. */
bool cap_precision_parse(const char *where, const char *text, bool *bf16);
/* Whether a dot or convolution of f32 tensors traced now on this thread for rt takes bf16
 * operands: the traced function's precision inside a trace, else the runtime's. */
bool cap_products_bf16(const latch_runtime *rt);

/* ---- promote.c ---- */
hlo_dtype cap_hlo_dtype(latch_dtype dtype);
latch_dtype cap_latch_dtype(hlo_dtype dtype);
/* The promotion table of latch.h; HLO_INVALID when no type holds both. */
hlo_dtype cap_promote(hlo_dtype a, hlo_dtype b);
/* NumPy broadcasting of two shapes into out; false when they do not broadcast. */
bool cap_broadcast_dims(int rank_a, const int64_t *a, int rank_b, const int64_t *b, int *rank_out, int64_t *out);
/* A dim index with negatives from the end; -1 when out of range. */
int cap_norm_dim(int dim, int rank);

/* ---- ops_elementwise.c ---- */
/* Helpers shared by the files that trace ops (ops_*.c). */
/* A PENDING node of the given result type and dims over the operands' nodes; NULL when
 * memory runs out. */
cap_node *cap_node_like(cap_op op, int sub, int count, latch_tensor *const *operands, int attrs, hlo_dtype dtype,
                        int rank, const int64_t *dims);
/* Hashes node and wraps it (NULL: the out-of-memory error tensor). */
latch_tensor *cap_traced(latch_runtime *rt, cap_node *node);
/* "f32[2,3]" for messages. */
const char *cap_shape_text(const latch_tensor *t, char *buffer, int size);

/* ---- random.c ---- */
cap_node *cap_seed_node(uint64_t seed); /* the seed input of a call's random ops */
hlo_instr *cap_lower_rng(hlo_comp *comp, const cap_node *node, hlo_instr *seed, hlo_diag *diag);

/* ---- graphs: what a sync or a traced function runs (graph.c) ----
 * Roots in order, the READY leaves they read as parameters in canonical order, the pending
 * nodes between them in post-order, and the key. */
typedef struct cap_alias {
  int output, param;
} cap_alias;

typedef struct cap_graph {
  int root_count, param_count, node_count, alias_count;
  cap_node **roots;  /* distinct pending nodes, outputs in this order */
  cap_node **params; /* READY leaves in first-visit order */
  cap_node **nodes;  /* pending nodes, operands before users */
  cap_alias *aliases;
  uint32_t *events; /* the walk's record of cut and sharing, hashed into the key */
  int event_count;
  struct cap_leaf_map *leaves; /* READY leaf -> parameter number */
  cache_key key;
  const rt_backend *backend;
} cap_graph;

/* ---- graph.c ---- */
/* Walks from roots (pending nodes of this thread; READY and ERROR roots are skipped) and
 * hashes the key. alias_of[i] (may be NULL, or entries NULL): the READY node root i writes
 * back to. LATCH_ERR_INTERNAL when memory runs out. */
latch_status cap_graph_collect(cap_graph *graph, const rt_backend *backend, int count, cap_node *const *roots,
                               cap_node *const *alias_of);
void cap_graph_free(cap_graph *graph);
/* The parameter number of a READY node in the graph, or -1 when the graph does not read it. */
int cap_graph_param_of(const cap_graph *graph, const cap_node *node);
/* The HLO module computing the graph: parameter i is params[i], the root a tuple of the
 * roots' values. NULL with diag on failure (a lowering bug: ops are checked when traced). */
hlo_module *cap_graph_lower(const cap_graph *graph, hlo_diag *diag);

/* ---- lower.c ---- */
/* One node to HLO, operands already lowered (lower_nn.c the nn ops, random.c the random
 * ones), and helpers for the lowerings. */
hlo_instr *cap_lower_node(hlo_comp *comp, const cap_node *node, hlo_instr *const *operands, hlo_diag *diag);
hlo_instr *cap_lower_convert(hlo_comp *comp, hlo_instr *x, hlo_dtype dtype, hlo_diag *diag);
hlo_instr *cap_lower_broadcast(hlo_comp *comp, hlo_instr *x, int rank, const int64_t *dims, hlo_diag *diag);
hlo_instr *cap_lower_scalar(hlo_comp *comp, hlo_dtype dtype, double value, hlo_diag *diag);
hlo_instr *cap_lower_full(hlo_comp *comp, hlo_dtype dtype, int rank, const int64_t *dims, double value,
                          hlo_diag *diag);
/* The module's shared (x, y) -> op(x, y) reducer; NULL with diag (out of memory, or no such
 * reducer) otherwise. */
hlo_comp *cap_lower_reducer(hlo_comp *comp, hlo_opcode op, hlo_dtype dtype, hlo_diag *diag);
hlo_instr *cap_lower_reduce(hlo_comp *comp, hlo_instr *x, hlo_opcode op, double init, int count, const int64_t *dims,
                            hlo_diag *diag);

/* ---- lower_nn.c ---- */
hlo_instr *cap_lower_nn(hlo_comp *comp, const cap_node *node, hlo_instr *const *operands, hlo_diag *diag);

/* ---- sync.c ---- */
/* The executable for a collected graph, from the cache or compiled now: a reference the
 * caller drops with cache_table_release. NULL with the error set. *compiled tells whether
 * this call compiled it (a backend compile, not a load from the disk or remote tier);
 * *status the failure's code. */
cache_entry *cap_graph_executable(latch_runtime *rt, const cap_graph *g, bool *compiled, latch_status *status);
/* A binding of a symbolic entry's executable to g's sizes (rt_backend.bind) kept in the disk
 * cache under g's own key, where compiling g would be saved: an earlier process's binding,
 * or a compile of g, loaded (NULL: none on disk, no disk cache, or LATCH_CHECK on, which
 * compiles every binding), and a new binding saved without the fsync (it is made again in
 * a millisecond if a power cut loses it). The remote tier is left out: a round trip to it
 * costs what binding does. */
rt_executable *cap_graph_load_binding(latch_runtime *rt, const cap_graph *g);
void cap_graph_save_binding(latch_runtime *rt, const cap_graph *g, const rt_executable *bound);
/* A private shell around a shared value for one run (see sync.c), and an output taken from
 * a run: copied when it is one of the run's shells. */
rt_value *cap_value_view(const rt_value *value);
rt_value *cap_take_output(rt_value *out, rt_value *const *views, int view_count);
/* Runs the graph of these roots on rt and attaches the values. */
latch_status cap_sync_nodes(latch_runtime *rt, int count, cap_node *const *roots, latch_tensor *const *handles);
/* The key and HLO text a sync of these tensors would use (tests, tools, debugging). */
latch_status cap_graph_key(latch_runtime *rt, int count, latch_tensor *const *tensors, cache_key *key);
char *cap_graph_text(latch_runtime *rt, int count, latch_tensor *const *tensors);
/* The compiled graph for g's key, compiling g on a miss (once however many threads miss);
 * release it with cache_table_release(rt->cache, entry). NULL with *status on failure. */
cache_entry *cap_exe_lookup(latch_runtime *rt, const cap_graph *g, latch_status *status);
/* Runs exe on args[exe->param_count] (borrowed, possibly shared with other threads) and
 * fills outputs[exe->output_count] with new references. */
latch_status cap_exe_run(latch_runtime *rt, const cap_exe *exe, rt_value *const *args, rt_value **outputs);
/* entry (a reference, given up here) held an executable loaded from a cache tier whose first
 * run just failed (latch_last_error says why): out of the table, compiled afresh from source
 * (NULL: g lowered; else g need only carry the key, backend and counts) through
 * cap_compile_afresh, and the new entry returned, or NULL with *status. */
cache_entry *cap_exe_recompile(latch_runtime *rt, const cap_graph *g, const hlo_module *source, cache_entry *entry,
                               latch_status *status);
/* The compile of cap_exe_recompile alone, for a caller that took the failed entry out of the
 * table itself (failure: why its first run failed). */
cache_entry *cap_exe_compile_afresh(latch_runtime *rt, const cap_graph *g, const hlo_module *source,
                                    const char *failure, latch_status *status);
/* After a sync: an assigned handle's new value goes into its old buffer when no one else
 * can see that buffer. */
void cap_write_back(latch_tensor *handle);

/* ---- first_run.c ---- */
/* A loaded entry failed its first run (failure: why): said once per process, compiled afresh
 * with codec, and written to the tiers (disk or remote may be NULL) in the entry's place. The
 * new value, or NULL with diag when the compile fails. The lazy sync, traced functions and
 * latch run all recover through here. */
void *cap_compile_afresh(cache_disk *disk, cache_remote *remote, cache_key key, const char *fingerprint,
                         const cache_codec *codec, const char *failure, hlo_diag *diag);
/* The warning alone, once per process: what (a "graph", a "binding") of this key, loaded from
 * a cache tier, failed its first run, and what is done instead (remedy). */
void cap_first_run_warn(const char *what, cache_key key, const char *failure, const char *remedy);
/* Test-only: say the next such failure again. */
void cap_first_run_reset_warning(void);
/* In a world of several ranks, a run of an executable on trial is marked first (the
 * collectives this rank reached: cap_first_run_mark, 0 without a world); after it failed,
 * cap_first_run_in_step says whether compiling afresh keeps the ranks in step: true when the
 * run reached no collective (the other ranks wait at the first while this one compiles),
 * else false, with latch_last_error naming the entry (key) and the commands that remove it. */
unsigned cap_first_run_mark(latch_runtime *rt);
bool cap_first_run_in_step(latch_runtime *rt, cache_key key, unsigned mark);

/* ---- sync_check.c ---- */
#define CAP_CHECK_DEFAULT_TIMEOUT 30.0
#define CAP_CHECK_DEFAULT_BUDGET 60.0
/* A cap_exe for graph g compiled under LATCH_CHECK: the backend's when it compiles (and,
 * for accuracy, agrees with the fp64 reference on the graph's inputs), else the reference
 * backend's after writing a repro and warning. NULL with diag only when both fail. */
void *cap_compile_checked(latch_runtime *rt, const cap_graph *g, hlo_diag *diag);

/* ---- trace contexts (trace.c, symbolic.c) ----
 * What a traced function call collects while the frontend function runs on this thread (see
 * function.c for what is done with it).
 *
 * Symbolic dims live beside the nodes, not in them: node hashes and lowering keep using the
 * concrete sizes of this call (the symbols' hints), and a node made by this trace points at
 * its rank expressions in dims[] through node->trace_sym. A node not made by this trace
 * (an input, a weight, a constant) has the dims of its data, guarded elsewhere. */

/* A tensor the function reached that was not an input: kept by handle, so the next call
 * reads what the handle holds then (a weight updated in place is seen). */
typedef struct cap_captured {
  latch_tensor *handle; /* retained */
  cap_node *node;       /* what it held when the trace read it (not retained) */
} cap_captured;

typedef struct cap_trace {
  latch_runtime *rt;
  uint32_t id;
  guard_set *guards;
  bool symbolic; /* some input dim is symbolic: infer dims of every new node */
  bool bf16_products; /* the function's precision is bf16 (cap_products_bf16) */
  int input_count;
  /* The function is given handles of its own for its inputs (one per distinct caller
   * handle), so that a caller's handle it reaches another way (a weight also passed as an
   * input) is told apart and guarded. latch_assign on either one is mirrored onto the
   * other: to the function they are one tensor, as in eager mode. */
  latch_tensor **inputs;         /* retained; NULL once dropped */
  latch_tensor *const *callers;  /* the call's own handles */
  cap_node **input_nodes;        /* what each input held when the trace began */
  guard_expr (*input_dims)[HLO_MAX_RANK];
  guard_expr *dims;              /* symbolic dims of the nodes this trace made */
  int dim_count, dim_capacity;
  cap_captured *captured;
  int captured_count, captured_capacity;
  guard_expr *sizes;             /* latch_size table */
  int size_count, size_capacity;
  cap_node *seed;                /* the random ops' seed, a graph input; NULL when none */
  const char *value_read;        /* why this function must be traced every call, or NULL */
  bool failed;                   /* out of memory while tracing: keep no entry */
} cap_trace;

/* ---- trace.c ---- */
/* Begins a trace on this thread: the inputs' dims static or symbolic as marked
 * (symbolic[i * HLO_MAX_RANK + d], independent[...] likewise; both may be NULL). */
latch_status cap_trace_begin(cap_trace *trace, latch_runtime *rt, int input_count, latch_tensor *const *inputs,
                             const bool *symbolic, const bool *independent);
void cap_trace_end(cap_trace *trace); /* detaches it from the thread */
void cap_trace_drop_inputs(cap_trace *trace); /* releases the function's input handles */
/* After the function returned: data it made during the trace (latch_from_host and the like)
 * and no longer holds is a temporary, made afresh by every eager call, not a weight. Such
 * handles leave the captured list, so the entry reads their data as a constant and replays
 * no in-place update onto them; a handle the function keeps (state made on its first call)
 * stays a weight. Out of memory marks the trace failed (no entry is kept). */
void cap_trace_forget_temporaries(cap_trace *trace, latch_tensor *const *outputs, int output_count);
void cap_trace_free(cap_trace *trace);

/* Hooks called by the op and tensor code while a trace is active on this thread. */
void cap_trace_new_node(cap_trace *trace, cap_node *node);       /* a new PENDING node */
void cap_trace_operands(cap_trace *trace, int count, latch_tensor *const *operands);
void cap_trace_assigned(cap_trace *trace, latch_tensor *dst); /* after latch_assign(dst, ...) */
void cap_trace_value_read(cap_trace *trace, const char *what);
void cap_trace_dim_read(cap_trace *trace, const cap_node *node, int dim);
/* The symbolic dims of any node as seen by this trace; its attrs (a slice's start and stop
 * may be symbolic; every other attr is a plain number). */
void cap_trace_node_dims(cap_trace *trace, const cap_node *node, guard_expr *out);
bool cap_trace_node_attrs(cap_trace *trace, const cap_node *node, guard_expr *out); /* false: all plain */

/* The sizes latch_reshape_sized passed to the reshape being traced, or NULL; a size's
 * expression. */
const latch_size *cap_trace_reshape_sizes(void);
const latch_size *cap_trace_slice_sizes(void); /* latch_slice_sized's start and stop */
guard_expr cap_trace_size_expr(cap_trace *trace, latch_size s);

/* ---- symbolic.c ---- */
/* Infers a new node's symbolic dims from its operands', recording as guards
 * every equality, divisibility and bound the op's shape check relied on. For a slice, out
 * has room for rank + 4 expressions: the dims, then the attrs. */
void cap_symbolic_infer(cap_trace *trace, cap_node *node, guard_expr *out);

/* ---- traced functions' cache entries (function.c, entry.c, bindings.c, segments.c) ----
 * One entry is what one trace left: its guard program, the graph's executable, where each graph parameter comes from on a
 * later call, where each output and in-place update goes, and, for a trace with symbolic
 * dims, the graph as a template whose dims are expressions over the guard symbols. */

/* Where a graph parameter or a function output comes from on a call. */
typedef enum cap_src_kind {
  CAP_SRC_INPUT,    /* index: the call's input */
  CAP_SRC_CAPTURED, /* index: the entry's captured handle (a weight) */
  CAP_SRC_CONST,    /* node: data the function made itself, kept */
  CAP_SRC_SEED,     /* the call's random seed */
  CAP_SRC_ROOT,     /* outputs only; index: a graph output */
} cap_src_kind;

typedef struct cap_src {
  cap_src_kind kind;
  int index;
  cap_node *node; /* CONST: retained */
} cap_src;

typedef struct cap_entry_captured {
  latch_tensor *handle; /* retained */
  uint8_t dtype, rank;  /* checked on every call: a weight replaced by another shape misses */
  int64_t dims[HLO_MAX_RANK];
  /* Its relation to the inputs in the trace, checked on every call (a weight also passed
   * as an input reads and writes that input's buffer): the input it was passed as (the
   * same handle), and the first input holding its data (the same node); -1: none. */
  int passed_as, shares_data_with;
} cap_entry_captured;

typedef struct cap_tmpl_node {
  uint16_t op, sub;
  uint8_t dtype, rank;
  int operand_count, attr_count;
  int *operands;    /* >= 0: an earlier template node; < 0: parameter -1 - operand */
  int64_t *attrs;
  double scalar[2];
  guard_expr *dims; /* rank expressions over the entry's symbols */
  guard_expr *attr_exprs; /* a slice's attrs when its start or stop is symbolic, else NULL */
} cap_tmpl_node;

/* What runs one moved segment at one binding (segments.c): an executable compiled or
 * loaded for the segment's graph at these sizes (cached), or the segment's first compiled
 * executable bound to them (bound; it shares that executable, kept by the plan, so it is
 * destroyed first). Segments whose graphs are the same at a binding (a decoder's layers)
 * share one bound executable; owns_bound marks the one that destroys it. */
typedef struct cap_segment_run {
  cache_entry *_Atomic cached; /* replaced when, loaded from a tier, it fails its first run */
  rt_executable *bound;
  const rt_backend *bound_by;
  bool owns_bound;
} cap_segment_run;

/* What runs one binding of a symbolic entry other than the trace's own: the entry's
 * executable bound to it (backends with bind; it shares the entry's executable, so it is
 * destroyed first), the binding's module itself (backends with execute_module), or else a
 * compiled specialization. */
typedef struct cap_segments cap_segments;
typedef struct cap_spec {
  int64_t *bindings;
  cache_entry *cached;
  hlo_module *module;
  rt_executable *bound;
  const rt_backend *bound_by; /* the backend whose executable bound is */
  bool loaded;                /* bound was loaded from the disk cache: its first run may fail */
  /* an entry run in segments (segments.c): what runs the moved segments at this binding,
   * by segment (the still ones are the entry's) */
  cap_segment_run *segment_runs;
  int segment_count;
} cap_spec;

/* A binding's spec as an entry keeps it (bindings.c): counted, since a call may still run it
 * after it was dropped from the entry. */
typedef struct cap_kept {
  cap_spec spec;
  atomic_bool on_trial; /* spec.loaded and no run of it has succeeded yet */
  atomic_int refs;    /* the entry's list holds one, each call running it one */
  uint64_t last_used; /* under the entry's spec_lock */
} cap_kept;

/* Bindings an entry keeps, least recently used dropped past it: each holds a bound
 * executable (its plan and module copy), a module or a compiled specialization, so a
 * function called with ever new sizes would otherwise grow without bound. */
enum { CAP_BINDINGS_KEPT = 64 };

typedef struct cap_entry {
  guard_program *program;
  int symbol_count;
  int64_t *hint_bindings;        /* the symbols' values in the trace */
  cache_entry *cached;           /* the executable for hint_bindings (NULL: no graph) */
  int param_count, root_count, output_count, alias_count, captured_count, input_count;
  cap_src *params, *outputs;
  struct { int root; cap_src target; } *aliases; /* target: INPUT or CAPTURED */
  cap_entry_captured *captured;
  /* Per input, the first input in the trace holding the same data (node) and the first
   * passed as the same handle: input i itself when none before it. */
  int *same_data_as, *same_handle_as;
  /* The inputs' dtypes, ranks and dims in the trace (the automatic shape policy compares
   * a missing call against them). */
  uint8_t *dtypes, *ranks;
  int64_t (*dims)[HLO_MAX_RANK];
  /* Symbolic entries only. */
  int node_count;
  cap_tmpl_node *nodes;
  int *roots;
  cap_segments *segments; /* NULL: bindings other than the trace's bind the whole graph */
  /* The trace's graph lowered, kept only while cached is on trial (loaded from a cache tier)
   * and the entry has not run yet: what a failed first run compiles afresh. */
  hlo_module *source;
  pthread_mutex_t spec_lock;
  cap_kept **kept; /* at most CAP_BINDINGS_KEPT */
  int kept_count, kept_capacity;
  uint64_t kept_clock, kept_dropped; /* under spec_lock */
} cap_entry;

/* ---- entry.c ---- */
/* Builds the entry for a finished trace whose outputs are outputs[] and whose
 * in-place updates are on the trace's inputs and captured handles. Leaves the graph's
 * parameter nodes for the first run in *first_params (malloc'd). NULL with the error set. */
cap_entry *cap_entry_build(cap_trace *trace, latch_tensor *const *outputs, int output_count,
                           cap_node ***first_params, bool *compiled, latch_status *status);
void cap_entry_free(latch_runtime *rt, cap_entry *entry);
/* Whether the call's inputs pass the entry (guards, captured shapes, and how inputs and
 * weights share tensors). */
bool cap_entry_check(const cap_entry *entry, const guard_tensor *inputs, latch_tensor *const *handles, int input_count,
                     const guard_static *statics, int static_count, int64_t *bindings, guard_failure *why);
/* What a call of an entry did beyond running it. */
typedef enum cap_run_kind {
  CAP_RUN_PLAIN,        /* the trace's executable, or one made for this binding before */
  CAP_RUN_SPECIALIZED,  /* a new binding: a backend compile of the instantiated template */
  CAP_RUN_INSTANTIATED, /* a new binding: the template's module built, run or bound without compiling */
} cap_run_kind;

/* Runs the entry on a call. params: the parameter nodes to use (the trace's first run), or
 * NULL to take them from the sources. */
latch_status cap_entry_run(latch_runtime *rt, cap_entry *entry, latch_tensor *const *inputs, uint64_t seed,
                           const int64_t *bindings, cap_node *const *params, latch_tensor **outputs,
                           cap_run_kind *kind, uint64_t *instantiate_ns);
/* Template node t's dims at bindings; false when one does not evaluate or is
 * negative. */
bool cap_tmpl_dims(const cap_tmpl_node *t, const int64_t *bindings, int64_t *dims);
/* Template node t at bindings, reading operands (t->operand_count of them); NULL when a dim
 * or slice bound does not evaluate, or memory runs out. */
cap_node *cap_tmpl_instantiate(const cap_tmpl_node *t, cap_node *const *operands, const int64_t *bindings);

/* ---- bindings.c ---- */
/* The kept spec for these bindings, retained, or NULL. */
cap_kept *cap_bindings_find(cap_entry *e, const int64_t *bindings);
/* Keeps made (its fields move into the result) and returns it retained; past
 * CAP_BINDINGS_KEPT the least recently used one is dropped. NULL when out of memory (made
 * is then freed). */
cap_kept *cap_bindings_keep(latch_runtime *rt, cap_entry *e, const cap_spec *made);
void cap_bindings_release(latch_runtime *rt, cap_kept *kept);
/* Takes kept out of the entry's list (the list's reference released; the caller's kept). */
void cap_bindings_forget(latch_runtime *rt, cap_entry *e, cap_kept *kept);
/* Drops every kept binding (they share the entry's executable: before it goes). */
void cap_bindings_free(latch_runtime *rt, cap_entry *e);
/* Bindings kept now, and dropped so far. */
void cap_bindings_count(cap_entry *e, uint64_t *kept, uint64_t *dropped);

/* ---- segments.c ---- */
/* A symbolic entry whose template has few symbolic nodes (a cache growing by
 * one position: its concatenations and the attention over it), cut into segments: the still
 * ones are the same graphs at every binding, compiled once for the entry; the moved ones,
 * small graphs of their own, are compiled at the entry's first run and bound to each later
 * binding's sizes (rt_backend.bind), compiled only where binding is refused. The plan is
 * NULL when segments do not pay (nothing symbolic, most of the graph, or too many
 * segments) or memory runs out; param_symbolic: which graph parameters have symbolic dims. */
cap_segments *cap_segments_plan(const cap_entry *e, const bool *param_symbolic);
void cap_segments_free(latch_runtime *rt, cap_segments *s);
/* In a child after fork (function.c's handler): the plan's lock, held through the compiles
 * of its segments, starts free; NULL is ignored. */
void cap_segments_fork_child(cap_segments *s);
int cap_segments_count(const cap_segments *s);
/* "3 still, 2 moved; 45 of 578 nodes move" (LATCH_LOG=guards). */
void cap_segments_describe(const cap_segments *s, char *out, size_t size);
/* What runs the moved segments at bindings (e->segments->count entries, empty for the still
 * ones), making the still ones first if this is the entry's first run. NULL when a segment
 * did not compile (*status says why) or did not come out as planned: the caller runs the
 * whole graph. *compiled: some segment was compiled. */
cap_segment_run *cap_segments_bind(latch_runtime *rt, const cap_entry *e, const int64_t *bindings,
                                   cap_node *const *params, bool *compiled, latch_status *status);
void cap_segment_runs_free(latch_runtime *rt, cap_segment_run *runs, int count);
/* Runs e's segments on the call's parameter values (params; param_nodes and bindings, the
 * call's, make a segment's graph again when its loaded executable fails its first run, and
 * its new executable replaces it in moved or the plan); results[r] gets a READY node
 * holding the value of template node e->roots[r]. */
latch_status cap_segments_run(latch_runtime *rt, const cap_entry *e, cap_segment_run *moved,
                              const int64_t *bindings, cap_node *const *param_nodes, rt_value *const *params,
                              cap_node **results);

/* ---- reasons.c ---- */
/* The guards that failed at a function's recompiles, counted per guard. */
enum { CAP_REASONS = 16 };
typedef struct cap_reason {
  int input, dim; /* the input dim the guard is on, or -1 */
  int times;
  char message[256]; /* the latest failure of this guard */
} cap_reason;
typedef struct cap_reasons {
  int count, total; /* distinct guards kept; failures noted */
  cap_reason items[CAP_REASONS];
} cap_reasons;
void cap_reasons_note(cap_reasons *reasons, const guard_failure *why);
/* The guard that failed most often, or NULL when none was noted. */
const cap_reason *cap_reasons_top(const cap_reasons *reasons);

/* ---- statuses ---- */
/* latch_status (the API's) and hlo_status (every layer's below) are the same codes; the
 * build fails if they ever drift apart, so passing one on as the other is exact. */
_Static_assert(LATCH_OK == (int)HLO_OK, "latch_status and hlo_status must agree");
_Static_assert(LATCH_ERR_INPUT == (int)HLO_ERR_INPUT, "latch_status and hlo_status must agree");
_Static_assert(LATCH_ERR_UNSUPPORTED == (int)HLO_ERR_UNSUPPORTED, "latch_status and hlo_status must agree");
_Static_assert(LATCH_ERR_INTERNAL == (int)HLO_ERR_INTERNAL, "latch_status and hlo_status must agree");
static inline latch_status cap_status(hlo_status status) {
  return (latch_status)status;
}

#endif
