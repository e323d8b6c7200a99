/* latch: lazy tensors for an eager frontend. The one public header.
 *
 * The frontend calls ops one by one; latch records them as a graph instead of running them.
 * latch_sync (or reading a tensor) turns what is pending into one XLA HLO module, looks it
 * up in the compile cache by a 128-bit hash, compiles it on a miss, runs it and attaches the
 * results to the tensors.
 *
 * Ownership, as in Lua's C API, is the same for every function:
 *   - a function that returns a latch_tensor* gives the caller one reference; drop it with
 *     latch_release. It never returns NULL except when memory runs out.
 *   - tensor arguments are borrowed: an op never takes over a reference.
 *   - strings returned by latch are owned by latch and valid until the next latch call on
 *     the same thread (latch_last_error) or while the tensor lives (latch_tensor_error).
 *
 * Errors are values. A bad op (shapes that do not fit, a wrong type) returns an error
 * tensor whose message names the op and the shapes; ops on it return error tensors too
 * (the error "poisons" its users) and the next latch_sync reports it. No function aborts
 * on bad input.
 *
 * Threads: one runtime may be used by many threads at once; the compile cache is shared.
 * Each thread traces into its own pending graph: a tensor whose value is still pending
 * belongs to the thread that made it until it is synced: only that thread may use or
 * release it. Synced tensors may be read, used as operands and released by any thread.
 */
#ifndef LATCH_H
#define LATCH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LATCH_MAX_RANK 12

typedef struct latch_runtime latch_runtime;
typedef struct latch_tensor latch_tensor;

/* The same codes as every latch command's exit status. */
typedef enum latch_status {
  LATCH_OK = 0,
  LATCH_ERR_INPUT = 1,       /* the caller's mistake: bad shapes, types, arguments, files */
  LATCH_ERR_UNSUPPORTED = 2, /* valid, but the backend cannot do it */
  LATCH_ERR_INTERNAL = 3,    /* out of memory, I/O failure, a latch bug */
} latch_status;

typedef enum latch_dtype {
  LATCH_INVALID = 0,
  LATCH_BOOL, LATCH_I8, LATCH_I16, LATCH_I32, LATCH_I64,
  LATCH_U8, LATCH_U16, LATCH_U32, LATCH_U64,
  LATCH_F16, LATCH_BF16, LATCH_F32, LATCH_F64,
} latch_dtype;

/* ---- the runtime ---- */

typedef struct latch_options {
  const char *backend; /* LATCH_BACKEND: "cpu" when that backend exists, else "reference" */
  /* LATCH_THREADS: threads the cpu backend's loops may use; 0 = one per core. The count is
   * process-wide and fixed by the first graph that runs, so the first runtime's counts. */
  int threads;
  int cache_capacity;  /* LATCH_CACHE_CAPACITY: compiled graphs kept (LRU), default 2048 */
  bool eager;          /* LATCH_EAGER=1: run each op at once (the op-by-op baseline) */
  /* LATCH_CACHE: "memory" (the default, also NULL or "") keeps compiled graphs in this
   * process; "disk" also stores them in cache_dir, so a later process running the same
   * program compiles nothing; "off" stores nothing on disk and keeps only the last graph in
   * memory. latch_options_init leaves it NULL when LATCH_CACHE is unset. */
  const char *cache;
  const char *cache_dir; /* LATCH_CACHE_DIR, else $XDG_CACHE_HOME/latch, else ~/.cache/latch */
  /* LATCH_CHECK: "off" (default); "compile" catches a backend's compile errors; "accuracy"
   * also runs each newly compiled graph once and compares it with the reference evaluator
   * in fp64. A graph that fails is shrunk to a repro directory (under LATCH_REPRO_DIR, else
   * /tmp), one warning line names it, and the graph runs on the reference backend from then
   * on: results stay correct. Checked graphs bypass the disk cache. The check (the first
   * compile and first execution of each new graph) runs in a child process, so a backend
   * that crashes or hangs there is a failure like any other, not the end of the program. */
  const char *check;
  double check_tol; /* LATCH_CHECK_TOL: the accuracy check's absolute tolerance, default 1e-3 */
  /* LATCH_CACHE_URL: a Redis server shared by a fleet, under the memory and disk caches:
   * redis[s]://[user:password@]host[:port][/db] or unix:///path/to.sock (README: "Caches";
   * docs/cache-formats.md). NULL or "": none. Ignored when cache is "off". */
  const char *cache_url;
  /* LATCH_CACHE_SECRET: entries written to Redis are signed with it (HMAC-SHA256) and only
   * entries signed with it are used. NULL or "": none. */
  const char *cache_secret;
  /* LATCH_CACHE_NAMESPACE: the remote tier's key prefix (letters, digits, '.', '_', '-'),
   * overriding the URL's namespace=; NULL: the URL's, else the user's name. Maintenance
   * (latch cache clear --remote, verify --fix) acts inside it only. */
  const char *cache_namespace;
  /* LATCH_CACHE_PASSWORD, or LATCH_CACHE_PASSWORD_FILE (a file of this user's with mode 600
   * or stricter; its first line): the Redis password, instead of one in the URL (which shows
   * in ps). NULL: none. */
  const char *cache_password, *cache_password_file;
  /* LATCH_CHECK_TIMEOUT: seconds the checking child may take before it counts as a hang
   * (also each check of the repro's minification), default 30 */
  double check_timeout;
  /* LATCH_CHECK_BUDGET: seconds one graph's check and its automatic repro may take together,
   * default 60. Each check's time limit is cut to what is left; when it is spent the repro
   * is the smallest graph found so far (or the unminified graph, written before minifying
   * starts). */
  double check_budget;
  /* LATCH_CHECK_MAX_RUNS: checks one graph's repro may take while it is minified, besides the
   * seconds of check_budget; 0 (default): no limit. When they are spent the repro is the
   * smallest graph found so far. */
  int check_max_runs;
  /* LATCH_BISECT=1: after a repro is written, `latch bisect`'s search runs on it (which of
   * the backend's own choices makes it fail), and its answer goes into the repro's
   * report.txt and culprit.txt, with the settings that reproduce it. */
  bool check_bisect;
  /* LATCH_CACHE_MAX_BYTES (K, M, G, T suffixes there): the disk cache directory's size limit,
   * least recently used entries removed past it; default (and 0) 1 GiB. */
  uint64_t cache_max_bytes;
  /* LATCH_KEEP_ARENA_MB: MiB of buffers the cpu backend's executables may keep, all together,
   * between executes, so a repeated step reuses its arena instead of faulting it in again;
   * 0 keeps none; default (and any negative) half the machine's memory. */
  int keep_arena_mb;
  bool no_fusion; /* LATCH_NO_FUSION=1: the cpu backend runs each op on its own (to measure fusion) */
  /* LATCH_CHOICES=N: the cpu backend takes only the first N of its optimization choices
   * (pass applications, fusion groups, Winograd, blocked layouts; `latch bisect` lists
   * them) and makes the rest the plain way; -1 (default): all. LATCH_AVOID="KIND@NAME,...":
   * refuses the choices it names ("winograd@convolution.41"; KIND alone: all of a kind).
   * What `latch bisect` answers with. */
  int choice_limit;
  const char *choice_avoid;
  /* LATCH_LOG: what to print on stderr, comma-separated: "recompiles" (each recompile of a
   * traced function, with the guard that failed), "guards" (each new entry's guards),
   * "compiles" (each compile or load, with where it came from). NULL or "": nothing. A word
   * it does not know gets one warning per process that lists the known ones. */
  const char *log;
  const char *repro_dir;  /* LATCH_REPRO_DIR: where LATCH_CHECK leaves repros; NULL or "": /tmp */
  /* LATCH_REPRO_MAX_BYTES: the input bytes a repro may hold (inputs past it are left out);
   * 0: 64 MiB; otherwise at least 1. */
  double repro_max_bytes;
  /* For latch's own tests; NULL or "": none. test_fault (LATCH_FAULT) makes the backend
   * misbehave on demand ("latch run --help" lists the faults); test_cache_fault
   * (LATCH_CACHE_TEST_FAULT, "OP:ERRNO") makes a disk cache operation fail;
   * test_cache_write_delay_ms (LATCH_CACHE_TEST_WRITE_DELAY_MS) pauses halfway through
   * writing a disk cache entry. */
  const char *test_fault, *test_cache_fault, *test_cache_write_delay_ms;
  /* LATCH_MPI=1: join MPI's world (latch initialises MPI with MPI_Init_thread unless the
   * embedder already has, at MPI_THREAD_SERIALIZED or more), so that a module declaring
   * several replicas or partitions runs one device per rank under mpirun, its collectives
   * through Open MPI (docs/distributed.md). Off: such a module's collectives are refused. */
  bool mpi;
  /* LATCH_COLLECTIVE_TIMEOUT: seconds a collective waits for the other ranks before it fails
   * naming the rank and the op (a rank that died or hangs); default (and 0) 60. */
  double collective_timeout;
  /* LATCH_PRECISION: "f32" (the default, also NULL or ""): every op in its declared types;
   * "bf16": dot products and convolutions of f32 tensors traced from now on take their
   * operands rounded to bf16 and sum them in f32 into an f32 result, as PyTorch's autocast
   * does (README, "Precision"; docs/cpu-backend.md, "bf16"). The rounding is part of the
   * graph, so its cache keys and accuracy checks differ from the f32 graph's. */
  const char *precision;
} latch_options;

/* Fills the defaults, then applies the environment variables named above. An unreadable
 * variable (LATCH_THREADS=many) is LATCH_ERR_INPUT with a message naming it; the other
 * fields are still filled. Set fields after this call to override both: below latch_open
 * nothing reads the environment, so what latch_open is given is what the backend and the
 * caches get. */
latch_status latch_options_init(latch_options *options);
/* NULL options means latch_options_init's. NULL on failure (latch_last_error says why). */
latch_runtime *latch_open(const latch_options *options);
/* Release every tensor first. */
void latch_close(latch_runtime *rt);

/* The last error message on this thread ("" when none). */
const char *latch_last_error(void);

typedef struct latch_stats {
  uint64_t syncs;          /* graphs run (each latch_sync, read or eager op that ran one) */
  uint64_t ops_traced;     /* ops recorded, counted at each sync of the thread that traced them */
  uint64_t nodes_synced;   /* pending nodes computed by syncs */
  uint64_t cache_hits, cache_misses, compile_failures, evictions, cache_entries;
  uint64_t compiles;       /* graphs the backend compiled (misses not answered by the disk) */
  uint64_t disk_loads;     /* misses answered by the disk cache: compiled (or bound) by an earlier process */
  uint64_t disk_writes;    /* compiled graphs (and traced functions' bindings) stored in the disk cache */
  uint64_t remote_loads;   /* misses answered by the remote cache (LATCH_CACHE_URL): compiled elsewhere */
  uint64_t remote_writes;  /* compiled graphs stored in the remote cache */
  uint64_t compile_ns;     /* time answering misses: compiling, or loading from disk */
  uint64_t check_failures; /* graphs that failed LATCH_CHECK and run on the reference backend */
  uint64_t key_ns;         /* time walking graphs and hashing their keys */
  uint64_t execute_ns;     /* time inside the backend's execute */
} latch_stats;
void latch_get_stats(latch_runtime *rt, latch_stats *stats);
/* The newest repro directory LATCH_CHECK wrote, or "" when none. Valid until the next call
 * on this thread (a copy, so other threads' failures do not change it under the caller). */
const char *latch_last_repro(latch_runtime *rt);

/* ---- tensors ---- */

/* Copies rank dims and the row-major data (sizeof element * count bytes). */
latch_tensor *latch_from_host(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims,
                              const void *data);
/* Zero copy: a tensor over the caller's row-major memory (rank dims of dtype), which latch
 * reads, and writes when the tensor is assigned in place, instead of copying it. The memory
 * must stay valid until latch calls release(release_ctx), once, when the last user is gone
 * (also when this fails; release may be NULL). Between latch calls the caller may write the
 * memory only if it then calls latch_touch, since latch may keep results computed from it. */
latch_tensor *latch_from_borrowed(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims, void *data,
                                  void (*release)(void *release_ctx), void *release_ctx);
latch_status latch_touch(latch_tensor *t); /* t's memory was written from outside: new contents */
/* A .npy file (the element types read: runtime/npy.c). */
latch_tensor *latch_from_npy(latch_runtime *rt, const char *path);
/* value converted to dtype (a constant of the graph: its value is part of the graph's key). */
latch_tensor *latch_full(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims, double value);
latch_tensor *latch_zeros(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims);
latch_tensor *latch_ones(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims);
latch_tensor *latch_scalar(latch_runtime *rt, latch_dtype dtype, double value); /* rank 0 */
/* Element i along dim holds i. */
latch_tensor *latch_iota(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims, int dim);
/* Uniform in [low, high) (integers: the floor), or normal(mean=low, std=high); the same seed
 * gives the same values on every machine and at any thread count. Made at once, on the host
 * (a large one over latch's threads). */
latch_tensor *latch_rand_uniform(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims,
                                 double low, double high, uint64_t seed);
latch_tensor *latch_rand_normal(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims,
                                double mean, double std, uint64_t seed);

latch_tensor *latch_retain(latch_tensor *t);
void latch_release(latch_tensor *t); /* NULL is ignored */

/* Shape queries never sync. An error tensor has dtype LATCH_INVALID and rank 0. */
latch_dtype latch_tensor_dtype(const latch_tensor *t);
int latch_rank(const latch_tensor *t);
int64_t latch_dim(const latch_tensor *t, int dim); /* negative dims count from the end; -1 if out of range */
int64_t latch_numel(const latch_tensor *t);
size_t latch_dtype_size(latch_dtype dtype);
const char *latch_dtype_name(latch_dtype dtype); /* "f32", "s64", ... as HLO writes them */
/* NULL, or the message of an error tensor. */
const char *latch_tensor_error(const latch_tensor *t);

/* Reading syncs what the tensor needs. bytes must be numel * dtype size. */
latch_status latch_read(latch_tensor *t, void *dst, size_t bytes);
/* The values converted to double; count must be numel. */
latch_status latch_read_f64(latch_tensor *t, double *dst, int64_t count);
latch_status latch_save_npy(latch_tensor *t, const char *path);
/* The tensor's row-major data, synced; valid until the tensor is assigned or released. An
 * in-place update (latch_assign) of a tensor nothing else shares keeps this pointer. */
const void *latch_data(latch_tensor *t);

/* Runs everything pending on this thread for rt as one graph. Returns LATCH_ERR_INPUT
 * (after running the rest) when an op on this thread failed since its last sync, with the
 * first such message in latch_last_error, even if that error tensor was released. */
latch_status latch_sync(latch_runtime *rt);

/* In-place update: dst takes src's value (same dtype and dims). When dst held a synced
 * value, the graph that computes src returns it as an output aliased to dst's buffer
 * (HLO input_output_alias) and latch writes it back into that buffer. */
latch_status latch_assign(latch_tensor *dst, latch_tensor *src);

/* ---- ops ----
 * Binary ops broadcast as NumPy does and promote types as follows (the same table for
 * every op that combines tensors): equal types stay; bool yields to anything; an integer
 * yields to any float type; two floats give the wider (f16 with bf16 gives f32); two
 * signed or two unsigned integers give the wider; signed with unsigned gives the signed
 * type when it is wider, else the signed type of twice the unsigned width (u64 with a
 * signed type is an error). Integer division truncates toward zero. */

typedef enum latch_unop {
  LATCH_NEG, LATCH_ABS, LATCH_SIGN, LATCH_FLOOR, LATCH_CEIL, LATCH_ROUND, LATCH_NOT,
  /* these compute in floats: integer and bool inputs become f32 */
  LATCH_EXP, LATCH_LOG, LATCH_SQRT, LATCH_RSQRT, LATCH_TANH, LATCH_SIGMOID, LATCH_SIN,
  LATCH_COS, LATCH_ERF, LATCH_LOG1P, LATCH_EXPM1,
} latch_unop;

typedef enum latch_binop {
  LATCH_ADD, LATCH_SUB, LATCH_MUL, LATCH_DIV, LATCH_REM, LATCH_POW, LATCH_MAX, LATCH_MIN,
  LATCH_AND, LATCH_OR, LATCH_XOR, /* bool and integer only */
} latch_binop;

typedef enum latch_cmp { LATCH_EQ, LATCH_NE, LATCH_LT, LATCH_LE, LATCH_GT, LATCH_GE } latch_cmp;

typedef enum latch_reduce_op { LATCH_SUM, LATCH_MEAN, LATCH_RMAX, LATCH_RMIN } latch_reduce_op;

latch_tensor *latch_unary(latch_unop op, latch_tensor *x);
latch_tensor *latch_binary(latch_binop op, latch_tensor *a, latch_tensor *b);
latch_tensor *latch_compare(latch_cmp op, latch_tensor *a, latch_tensor *b); /* bool result */
latch_tensor *latch_where(latch_tensor *cond, latch_tensor *a, latch_tensor *b); /* cond bool */
latch_tensor *latch_clamp(latch_tensor *x, double low, double high);
latch_tensor *latch_cast(latch_tensor *x, latch_dtype dtype);
latch_tensor *latch_relu(latch_tensor *x);
latch_tensor *latch_gelu(latch_tensor *x, bool tanh_approximation);

/* NumPy matmul: 1-D operands are vectors, batch dims broadcast. */
latch_tensor *latch_matmul(latch_tensor *a, latch_tensor *b);

typedef struct latch_conv2d_params {
  int64_t stride[2], padding[2], dilation[2]; /* (h, w); zero means stride 1, pad 0, dilation 1 */
  int64_t groups;                             /* zero means 1 */
} latch_conv2d_params;
/* x [N, C, H, W], w [O, C/groups, KH, KW] -> [N, O, H', W']. params may be NULL. */
latch_tensor *latch_conv2d(latch_tensor *x, latch_tensor *w, const latch_conv2d_params *params);
/* The gradient of conv2d(x, w, params) (groups 1) with respect to x [N, C, input_size[0],
 * input_size[1]], from grad [N, O, H', W'] of its result: XLA's form, a convolution of grad
 * dilated by the stride with the kernel reversed and its features swapped. The padding may
 * not exceed the dilated kernel's extent less one. */
latch_tensor *latch_conv2d_input_grad(latch_tensor *grad, latch_tensor *w, const latch_conv2d_params *params,
                                      const int64_t input_size[2]);
/* The gradient of conv2d(x, w, params) (groups 1) with respect to w [O, C, kernel_size[0],
 * kernel_size[1]], from x and grad [N, O, H', W'] of its result: XLA's form, a convolution of
 * x read with its batch as the features, grad as the window dilated by the stride. */
latch_tensor *latch_conv2d_weight_grad(latch_tensor *x, latch_tensor *grad, const latch_conv2d_params *params,
                                       const int64_t kernel_size[2]);
/* NCHW pooling; stride NULL means the kernel size, padding NULL means 0. Max pooling pads
 * with -inf; average pooling counts padding as zeros (divides by kh * kw). */
latch_tensor *latch_max_pool2d(latch_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                               const int64_t padding[2]);
latch_tensor *latch_avg_pool2d(latch_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                               const int64_t padding[2]);
/* The gradient of latch_max_pool2d(x, kernel, stride, padding) given grad, its result's
 * gradient: each window's gradient goes to the window's first maximum of x in row-major order
 * (the element PyTorch's CPU kernel picks; windows that overlap add up), with x's shape. */
latch_tensor *latch_max_pool2d_grad(latch_tensor *x, latch_tensor *grad, const int64_t kernel[2],
                                    const int64_t stride[2], const int64_t padding[2]);

/* Over dims[0..count) (negative from the end); count 0 reduces every dim. Mean needs floats. */
latch_tensor *latch_reduce(latch_reduce_op op, latch_tensor *x, int count, const int *dims, bool keepdim);
/* Index (s64) of the first largest element along dim (NaN is not treated specially). */
latch_tensor *latch_argmax(latch_tensor *x, int dim, bool keepdim);
latch_tensor *latch_softmax(latch_tensor *x, int dim);
latch_tensor *latch_log_softmax(latch_tensor *x, int dim);
/* Normalizes the last normalized_rank dims; weight and bias (of those dims) may be NULL. */
latch_tensor *latch_layer_norm(latch_tensor *x, int normalized_rank, latch_tensor *weight,
                               latch_tensor *bias, double eps);
/* Inference: x [N, C, ...], the others [C]; weight and bias may be NULL. */
latch_tensor *latch_batch_norm(latch_tensor *x, latch_tensor *mean, latch_tensor *var,
                               latch_tensor *weight, latch_tensor *bias, double eps);
/* table [V, D], integer indices of any shape -> indices' shape + [D]. An index out of
 * range is clamped into it (HLO gather semantics), not an error. */
latch_tensor *latch_embedding(latch_tensor *table, latch_tensor *indices);

/* One dim may be -1: it takes what is left. */
latch_tensor *latch_reshape(latch_tensor *x, int rank, const int64_t *dims);
/* Result dim i is x's dim perm[i]. */
latch_tensor *latch_permute(latch_tensor *x, const int *perm);
/* x with the order of its elements reversed along each of dims[0..count) (torch.flip). */
latch_tensor *latch_flip(latch_tensor *x, int count, const int *dims);
/* Elements start, start+step, ... below stop along dim; negative start/stop count from the
 * end and both are clamped to the dim, as Python slices are; step >= 1. */
latch_tensor *latch_slice(latch_tensor *x, int dim, int64_t start, int64_t stop, int64_t step);
latch_tensor *latch_concat(int count, latch_tensor *const *xs, int dim);
/* low[i] and high[i] elements of value added before and after dim i (negative crops). */
latch_tensor *latch_pad(latch_tensor *x, const int64_t *low, const int64_t *high, double value);
latch_tensor *latch_broadcast_to(latch_tensor *x, int rank, const int64_t *dims);

/* ---- collectives across processes (latch_options.mpi, under mpirun: docs/distributed.md) ----
 * This process's rank in the world and the world's size: 0 and 1 without a world. */
void latch_world(latch_runtime *rt, int *rank, int *size);
/* Leaves the world now, as latch_close would (MPI_Finalize when latch initialised MPI), for a
 * program that exits without closing every runtime (an interpreter at exit); collectives
 * after it fail. Every rank calls it, after its last collective. */
void latch_world_leave(latch_runtime *rt);
/* x reduced elementwise over every rank of the world, every rank getting the result:
 * LATCH_SUM, LATCH_MEAN (the sum divided by the size; floating point), LATCH_RMAX, LATCH_RMIN.
 * A graph op (an HLO all-reduce): the data moves when the graph runs, so every rank must run
 * the same graphs in the same order. In a world of one rank it is x. */
latch_tensor *latch_all_reduce(latch_tensor *x, latch_reduce_op op);

/* ---- random numbers inside graphs ----
 * Unlike latch_rand_uniform (host data, made at once), these are graph ops: the numbers come
 * from a counter-based hash of the element index and a seed that is an input of the graph,
 * so a cached graph draws new numbers on every run. Outside a traced function the seed
 * advances on every op; inside one (latch_call) it advances on every call, cache hits
 * included, and the same function seed and call number give the same numbers in every mode.
 * Float dtypes only (others become f32). */
latch_tensor *latch_rand_uniform_like(latch_tensor *like, double low, double high);
/* Inverted dropout: each element kept with probability 1 - p and scaled by 1 / (1 - p). */
latch_tensor *latch_dropout(latch_tensor *x, double p);

/* ---- traced functions (trace once, guard every call) ----
 * A frontend function registered with latch_function_new runs ONCE per distinct guard set:
 * the first call traces it (ops are recorded, not run), latch keeps the graph of its outputs
 * with the guards the trace relied on (input dtypes, ranks, dims, static arguments, and
 * every constraint between symbolic sizes), and later calls whose inputs pass the guards run
 * the cached executable without calling the function. A call that fails every entry's guards
 * traces again (a recompile).
 *
 * What the function may do while traced:
 *   - ops on its inputs, on tensors it creates, and on tensors it reaches through user (model
 *     weights): those are kept by handle, so a weight updated between calls (latch_assign) is
 *     seen by the next call. Their dtypes and dims are checked on every call.
 *   - latch_assign onto an input or a weight: replayed on every call. A weight also passed
 *     as an input is one tensor with it, as in eager mode; calls that pass it so and calls
 *     that do not keep separate entries.
 *   - latch_dim / latch_numel: the size read is guarded (specialized). To keep a size
 *     symbolic, use latch_size_of and the latch_size functions below.
 *   - reading a value (latch_read, latch_data, latch_sync, ...) during a trace works, but
 *     the function is then traced on every call (said once on stderr).
 * Statics are ints, floats or byte strings the function's behaviour depends on; each trace
 * is guarded on their exact values. */

typedef struct latch_function latch_function;

typedef enum latch_static_kind { LATCH_STATIC_INT, LATCH_STATIC_FLOAT, LATCH_STATIC_BYTES } latch_static_kind;
typedef struct latch_static {
  latch_static_kind kind;
  int64_t i;
  double f;          /* compared bit for bit */
  const void *bytes; /* copied when a trace keeps it */
  size_t len;
} latch_static;

/* The function: fill outputs[0..output_count) with new references (latch_release them as
 * any op result). A status other than LATCH_OK is returned by latch_call unchanged. */
typedef latch_status (*latch_fn)(void *user, latch_tensor *const *inputs, int input_count,
                                 const latch_static *statics, int static_count, latch_tensor **outputs,
                                 int output_count);
/* The same without static arguments (the shape of the bench zoo's step functions). */
typedef latch_status (*latch_step_fn)(void *user, latch_tensor *const *inputs, int input_count,
                                      latch_tensor **outputs, int output_count);

typedef enum latch_trace_mode {
  LATCH_TRACE_ONCE = 0, /* guards and cached executables (default) */
  LATCH_TRACE_EVERY,    /* trace on every call; the graph is still compiled once per key */
  LATCH_TRACE_EAGER,    /* run every op at once */
} latch_trace_mode;

typedef enum latch_shape_policy {
  LATCH_SHAPES_AUTOMATIC = 0, /* first trace static; dims that change become symbolic (default) */
  LATCH_SHAPES_STATIC,        /* every dim guarded by value; each new size traces again */
  LATCH_SHAPES_MARKED,        /* the marked dims symbolic from the first trace, the rest static */
} latch_shape_policy;

/* A dim of an input marked symbolic up front (any policy but static), and/or independent:
 * never shares a symbol with another dim of equal size (no duck sizing). */
typedef struct latch_dim_mark {
  int input, dim;
  bool dynamic, independent;
} latch_dim_mark;

typedef struct latch_function_options {
  const char *name;             /* for logs and warnings; copied */
  latch_trace_mode mode;
  latch_shape_policy shapes;
  int recompile_limit;          /* LATCH_RECOMPILE_LIMIT, default 8: traces after the first */
  uint64_t seed;                /* random ops: call n draws from a seed made of this and n */
  int mark_count;
  const latch_dim_mark *marks;  /* copied */
  const char *precision;        /* "f32" or "bf16" (latch_options.precision); NULL: the runtime's */
} latch_function_options;

/* Defaults, then LATCH_RECOMPILE_LIMIT. What a function logs is its runtime's
 * (latch_options.log: recompiles, guards). */
latch_status latch_function_options_init(latch_function_options *options);
/* NULL options means the defaults. NULL on failure (latch_last_error says why). */
latch_function *latch_function_new(latch_runtime *rt, latch_fn fn, void *user, const latch_function_options *options);
latch_function *latch_function_new_step(latch_runtime *rt, latch_step_fn step, void *user,
                                        const latch_function_options *options);
/* Drops the function's entries (and the weights they keep); before latch_close. */
void latch_function_free(latch_function *fn);

/* Runs fn: outputs[0..output_count) receive new references. Thread-safe: many threads may
 * call one function; calls that update a weight in place, and traces, run one at a time
 * (README, "Traced functions"). Inputs still pending are synced first. */
latch_status latch_call(latch_function *fn, latch_tensor *const *inputs, int input_count,
                        const latch_static *statics, int static_count, latch_tensor **outputs, int output_count);

typedef struct latch_function_stats {
  uint64_t calls;
  uint64_t hits;            /* calls that ran a cached entry without calling the function */
  uint64_t traces;          /* calls that ran the function under tracing */
  uint64_t recompiles;      /* traces that added an entry after the first */
  uint64_t fallback_calls;  /* traces past the recompile limit or forced by a value read */
  /* A symbolic entry (one traced with symbolic dims) runs every binding its guards accept.
   * A new binding's module is built from the kept template and, with no compile, either
   * bound to the entry's one executable (the cpu backend: shapes, kernels and buffers are
   * worked out for the binding's sizes; with the disk cache on, the binding is saved there
   * and a later process loads it instead of binding again) or run directly (the reference
   * evaluator): an instantiation. Where neither is possible (a backend with neither, or a
   * binding the compiled graph's decisions do not hold for) the binding is compiled: a
   * specialization, counted in latch_stats.compiles too. An entry with few symbolic nodes
   * (a cache growing by one position a call) runs in segments on the cpu backend: the
   * parts without symbolic sizes are compiled once for the entry, and a new binding
   * compiles (a specialization) or loads from the disk cache (an instantiation) only the
   * small graphs of the symbolic parts. */
  uint64_t specializations;
  uint64_t instantiations;
  uint64_t instantiate_ns;  /* building modules from templates, lowering, verifying, binding or loading */
  uint64_t entries;
  uint64_t guard_checks;    /* guard programs evaluated */
  uint64_t guard_ns;        /* time in guard evaluation, timed on one call in 8 and scaled */
  uint64_t guard_timed;     /* calls whose guard evaluation was timed: with 0, guard_ns is
                               unknown (no call was sampled), not zero */
  uint64_t trace_ns;        /* time running the function under tracing and cutting graphs */
  bool trace_every;         /* fell back for good: limit reached or a value read */
  /* Bindings kept for the symbolic entries (each a bound executable, a module or a compiled
   * specialization): at most 64 per entry, the least recently used dropped past that (and
   * built again if its sizes come back). */
  uint64_t bindings_kept;
  uint64_t bindings_dropped;
} latch_function_stats;
void latch_function_get_stats(latch_function *fn, latch_function_stats *stats);

/* ---- symbolic sizes: sizes read without specializing them ----
 * Inside a trace a latch_size may stand for a symbolic size (sym >= 0); value is its size
 * in this call. Outside a trace every size is plain (sym < 0). */
typedef struct latch_size {
  int64_t value;
  int32_t sym; /* an index into the trace's table, or -1 */
} latch_size;
latch_size latch_size_of(const latch_tensor *t, int dim);
latch_size latch_size_const(int64_t value);
latch_size latch_size_mul(latch_size a, latch_size b);
latch_size latch_size_add(latch_size a, latch_size b);
/* The outcome in this call; a trace records a guard that keeps it. */
bool latch_size_compare(latch_cmp op, latch_size a, latch_size b);
/* latch_reshape with sizes (no -1): the product must equal x's element count. */
latch_tensor *latch_reshape_sized(latch_tensor *x, int rank, const latch_size *dims);
/* latch_slice with sizes, neither wrapped nor clamped: 0 <= start <= stop <= the dim's size
 * must hold (an error otherwise; a trace guards it). */
latch_tensor *latch_slice_sized(latch_tensor *x, int dim, latch_size start, latch_size stop, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
