/* runtime/: what every backend shares: values and buffers, the backend interface (rt_backend),
 * the parallel-for shim, locks that fork waits for, .npy files, fingerprints, seeded random
 * fill, the accuracy rule, and test-only fault injection and test points. The backends live
 * in its subfolders (reference/, cpu/), each behind its own header; nothing here includes
 * them. Uses hlo/ and OpenMP. Declarations sit under the file that defines them. */
#ifndef RT_RUNTIME_H
#define RT_RUNTIME_H
#include <stdint.h>
#include <stddef.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "hlo/hlo.h"

/* ---- value.c ---- */
/* Runtime values: dense row-major arrays (or tuples of values), reference counted. */

typedef struct rt_value {
  int refcount;
  /* Array values: shape.dtype is the storage type, shape.tuple is unused. The layout is
   * always row-major (logical order), whatever the HLO layout says. */
  hlo_shape shape;
  void *data;     /* hlo_shape_bytes(&shape) bytes, owned */
  int64_t count;  /* elements */
  /* Tuple values: shape.dtype == HLO_TUPLE, elements owned (one reference each). */
  int tuple_count;
  struct rt_value **tuple;
  /* Which contents data holds: a number no other value or contents had, given when the
   * value is made and again by rt_value_touch after each write into an existing value
   * (filling a new value before anyone reads it needs none). 0 (views made by hand) is
   * unknown. Backends may keep results computed from an argument while its stamp is the
   * same (the cpu backend's kept reduces). Copies of the struct (a shell around shared
   * data) carry the data's stamp. */
  uint64_t stamp;
  /* Borrowed data (rt_value_borrow) or a kept buffer (rt_value_new_kept): release(release_ctx)
   * runs instead of free(data) when the last reference goes. NULL for other data latch
   * allocated. */
  void (*release)(void *release_ctx);
  void *release_ctx;
} rt_value;

/* A zero-filled array of this (array) shape; the layout is dropped. NULL if too large. */
rt_value *rt_value_new(const hlo_shape *shape);
/* The same with its bytes left as malloc gives them: for a writer of every element (a
 * kernel's result, a copy), which need not pay for zeroing them first. */
rt_value *rt_value_new_unfilled(const hlo_shape *shape);
/* The same, for a large result made afresh by every call (a collective's): when it is
 * released its buffer is kept (the last four such buffers of the process) and handed to the
 * next value of the same size, whose pages are then already mapped; a fresh buffer's first
 * writes fault once per page, which costs as much as moving the data. */
rt_value *rt_value_new_kept(const hlo_shape *shape);
rt_value *rt_value_new_array(hlo_dtype dtype, int rank, const int64_t *dims);
/* An array over the caller's memory (row-major, dtype's size * elements bytes), not copied;
 * release(release_ctx) is called once the value is gone (not when this returns NULL). */
rt_value *rt_value_borrow(hlo_dtype dtype, int rank, const int64_t *dims, void *data,
                          void (*release)(void *release_ctx), void *release_ctx);
/* A tuple taking over one reference to each element. */
rt_value *rt_value_new_tuple(int count, rt_value **elements);
rt_value *rt_value_retain(rt_value *value);
/* A new stamp for value: call after writing into the data of a value others may have read. */
void rt_value_touch(rt_value *value);
void rt_value_release(rt_value *value);
/* Every element of the array value set to the bytes at element (one element of its type). */
void rt_value_fill(rt_value *value, const void *element);
/* A deep copy with its own data. */
rt_value *rt_value_copy(const rt_value *value);

/* Element access by flat row-major index, converting to and from wide types. Floats read
 * as double (f16/bf16 widened exactly); writing a double rounds to the element type
 * (round-to-nearest-even); writing integers wraps to the element width, as HLO does. */
double rt_get_f64(const rt_value *value, int64_t index);
int64_t rt_get_i64(const rt_value *value, int64_t index);  /* unsigned 64 reinterpreted */
uint64_t rt_get_u64(const rt_value *value, int64_t index);
void rt_set_f64(rt_value *value, int64_t index, double element);
void rt_set_i64(rt_value *value, int64_t index, int64_t element);
void rt_set_u64(rt_value *value, int64_t index, uint64_t element);
/* HLO's maximum and minimum of floats, as every backend computes them: a NaN operand wins
 * (the first one, its payload kept), and -0 orders below +0. */
static inline float rt_max_f32(float a, float b) {
  if (isnan(a)) return a;
  if (isnan(b)) return b;
  if (a == b) return signbit(a) ? b : a;
  return a > b ? a : b;
}
static inline float rt_min_f32(float a, float b) {
  if (isnan(a)) return a;
  if (isnan(b)) return b;
  if (a == b) return signbit(a) ? a : b;
  return a < b ? a : b;
}
static inline double rt_max_f64(double a, double b) {
  if (isnan(a)) return a;
  if (isnan(b)) return b;
  if (a == b) return signbit(a) ? b : a;
  return a > b ? a : b;
}
static inline double rt_min_f64(double a, double b) {
  if (isnan(a)) return a;
  if (isnan(b)) return b;
  if (a == b) return signbit(a) ? a : b;
  return a < b ? a : b;
}
/* Copies one element between values of the same dtype. */
void rt_copy_element(rt_value *dst, int64_t dst_index, const rt_value *src, int64_t src_index);

/* Row-major index helpers. */
int64_t rt_flat_index(const hlo_shape *shape, const int64_t *coords);
/* Advances coords to the next index in row-major order; false after the last. */
int rt_next_coords(const hlo_shape *shape, int64_t *coords);

/* ---- the backend table (filled by runtime/reference/eval_backend.c, runtime/cpu/executable.c) ---- */
/* Backends: what compiles an HLO module into an executable and runs it. capture/ and the
 * minifier see every backend through this table only: each backend fills one rt_backend in
 * its own folder (runtime/reference/, runtime/cpu/), and a new backend is one more entry in
 * the list capture/backends.c keeps, where the runtime is opened.
 *
 * An executable owns everything it needs (its own copy of the module, buffers, plans): the
 * module passed to compile may be freed right after. Executables are immutable once built
 * and may be run by several threads at once. */

typedef struct rt_executable rt_executable;
typedef struct rt_comm rt_comm; /* comm.c: the world of processes an SPMD module runs across */

/* What a compile may be told, by whoever opened the runtime: capture/ fills it from
 * latch_options (latch_open), the command from the environment; backends never read the
 * environment themselves. NULL means RT_COMPILE_OPTIONS_INIT. An executable keeps a copy, so
 * its executes and the executables bound from it follow its compile's settings. */
typedef struct rt_compile_options {
  bool no_fusion; /* cpu: every op its own step (LATCH_NO_FUSION, for measuring what fusion gains) */
  /* cpu: bytes of arenas that executables may keep, all together, between executes
   * (LATCH_KEEP_ARENA_MB); an executable compares the total with its own setting. -1: half
   * the machine's memory; 0: none kept. */
  int64_t keep_arena_bytes;
  /* The optimization choices a compile makes (hlo_choice, hlo/choices.c): with limit_choices
   * only the first choice_limit are taken (LATCH_CHOICES), choice_avoid refuses those it
   * names (LATCH_AVOID), choice_log hears each. What `latch bisect` searches with. */
  bool limit_choices;
  int64_t choice_limit;
  const char *choice_avoid;
  void (*choice_log)(void *context, const char *kind, const char *name, bool taken);
  void *choice_log_context;
  /* The world a module with several replicas or partitions runs across (latch_options.mpi);
   * borrowed, it must outlive the executable. NULL: one device, and such a module's
   * collectives are refused. */
  rt_comm *comm;
  /* LATCH_LOG has "compiles": the cpu backend says once per process when a module's bf16
   * products run converted to f32 because the processor has no bf16 instructions. */
  bool log_compiles;
} rt_compile_options;

#define RT_COMPILE_OPTIONS_INIT {.no_fusion = false, .keep_arena_bytes = -1, .comm = NULL}

typedef struct rt_backend {
  const char *name;    /* "reference", "cpu" */
  const char *version; /* bumped when generated code or serialized form changes */
  /* NULL with diag on failure. A module this backend cannot handle is HLO_ERR_UNSUPPORTED
   * with a message naming the op and the instruction: a compile error the minifier can
   * shrink. */
  rt_executable *(*compile)(const hlo_module *module, const rt_compile_options *options, hlo_diag *diag);
  /* Runs the entry computation: args borrowed, in the parameters' declared types; *result
   * is a new reference (a tuple value when the entry's root is a tuple). */
  hlo_status (*execute)(rt_executable *exe, rt_value *const *args, int arg_count,
                        rt_value **result, hlo_diag *diag);
  void (*destroy)(rt_executable *exe);
  /* Bytes that deserialize gives back as an equal executable (the on-disk cache's value):
   * a malloc'd buffer in *bytes, its length in *len. */
  hlo_status (*serialize)(const rt_executable *exe, void **bytes, size_t *len, hlo_diag *diag);
  rt_executable *(*deserialize)(const void *bytes, size_t len, const rt_compile_options *options, hlo_diag *diag);
  /* Optional (NULL: deserialize, then free bytes): deserialize that takes bytes, a malloc'd
   * buffer, and frees it, on failure too, now or with the executable; an executable that
   * keeps part of its bytes (the cpu backend's source module) need not copy it. */
  rt_executable *(*adopt)(void *bytes, size_t len, const rt_compile_options *options, hlo_diag *diag);
  /* Optional (NULL when the backend must compile first): runs a module directly, with no
   * compile work, as execute would run its executable. A traced function with symbolic dims
   * keeps its graph as a template and, for a binding it has not run yet, builds that
   * binding's module from the template (shapes computed from the symbols) and runs it here;
   * a backend without it binds its compiled executable to the binding's module (bind, below),
 * or failing that compiles one specialization per binding. */
  hlo_status (*execute_module)(const hlo_module *module, rt_value *const *args, int arg_count, rt_value **result,
                               hlo_diag *diag);
  /* Optional (NULL: the backend compiles each size of a graph on its own): an executable
   * for binding, made from exe without compiling. binding is the graph exe was compiled
   * from instantiated at other sizes: the same computations, instruction counts, opcodes,
   * operands and attributes, only shapes and size attributes (slice starts and limits)
   * differ. A traced function with symbolic dims compiles its trace's graph once and binds
   * it for every other binding of its symbols: the passes and their decisions are kept,
   * while shapes, kernel choices and buffer sizes are worked out again for these sizes
   * (microseconds, not a compile). NULL with diag when binding cannot be proven to compute
   * the same function as compiling binding would (another attribute differs, or a pass
   * decision held only at exe's sizes): the caller compiles binding instead.
   * Lifetime: the result shares exe's read-only parts, so exe must outlive it (destroy the
   * bound executable first). binding may be freed once bind returns. */
  rt_executable *(*bind)(rt_executable *exe, const hlo_module *binding, hlo_diag *diag);
  /* Optional (NULL: every executable keeps its own buffers): exe, just deserialized from what
   * a bind of family's graph made (another process saved the binding), shares what family's
   * bindings share as if bind had made it: the buffers kept between executes and the
   * parameter-only results kept in them, so a size loaded from disk does not redo the weight
   * work another size of the graph did. Call it before exe first runs. False (exe keeps its
   * own) when exe is not of family's graph. Lifetime as bind's: destroy exe before family. */
  bool (*share_buffers)(rt_executable *exe, rt_executable *family);
  /* Optional (NULL: nothing to say): the choices this backend makes on this host that change
   * its kernels, as "name=value" words into out ("fused_isa=avx2 dnnl_isa=avx512_core
   * products=openblas"): what a repro from another machine must name to be understood. */
  void (*describe)(char *out, size_t size);
  /* Optional (NULL: nothing to tell): the work this backend's compiles have done in this
   * process so far, for LATCH_LOG=compiles ("passes ran 12 times, 3 plans built"). */
  void (*work_so_far)(char *out, size_t size);
  /* Optional (NULL: none): the libraries the backend's executables depend on, their
   * versions and the instruction set each will use, as one line without "options=": part of
   * the fingerprint, so a cache entry made with another library or ISA is a miss. */
  const char *(*libraries)(void);
} rt_backend;


/* ---- comm.c ---- */
/* The communicator over Open MPI: one world per process, each rank one device of an SPMD
 * module (rank = replica * num_partitions + partition, XLA's flattened device id). Every
 * collective of a module is agreed first (rt_comm_agree: each rank sends every other rank the
 * signature of the op it reached) and then moves data with non-blocking MPI calls polled until
 * the timeout; a rank that does not arrive, or arrives at another op or shape, is an error
 * naming it. Calls from several threads are serialized. */

#define RT_COMM_DEFAULT_TIMEOUT 60.0 /* seconds, LATCH_COLLECTIVE_TIMEOUT */

typedef enum rt_comm_reduce { RT_COMM_SUM, RT_COMM_MAX, RT_COMM_MIN, RT_COMM_PROD } rt_comm_reduce;

/* Groups of world ranks that partition the world: group g has sizes[g] members, listed in
 * order in members (after the members of the groups before it). Every rank passes the same
 * groups to a collective. */
typedef struct rt_comm_groups {
  int count;
  const int *sizes;
  const int *members;
} rt_comm_groups;

/* The process's world, initialising MPI (MPI_Init_thread, MPI_THREAD_SERIALIZED) unless the
 * embedder did; one per process, counted: each open is matched by a close, and the last
 * close finalizes MPI if latch initialised it. A collective waits timeout_seconds (<= 0: the
 * default) for the other ranks. NULL with diag on failure. */
rt_comm *rt_comm_open(double timeout_seconds, hlo_diag *diag);
void rt_comm_close(rt_comm *comm);
/* Leaves the world before the last close (a process that cannot close every runtime before it
 * exits): MPI's part is freed and finalized as the last close would; later collectives fail. */
void rt_comm_leave(rt_comm *comm);
int rt_comm_rank(const rt_comm *comm);
int rt_comm_size(const rt_comm *comm);
/* Whether a collective failed or timed out: the ranks are out of step for good. */
bool rt_comm_broken(const rt_comm *comm);
/* The collectives this rank has reached (each rt_comm_agree counts one), the same count on
 * every rank while they are in step: unchanged across a run, that run moved no data. */
unsigned rt_comm_collectives(rt_comm *comm);
/* Whether MPI reduces this type itself (the rest go through a gather and the reducer). */
bool rt_comm_reducible(hlo_dtype dtype);
/* Every rank of the world reached the collective what with the same signature (text, at most
 * 255 bytes compared); otherwise an error naming the rank that did not arrive in time or
 * differs. Call before the data moves, on every rank, for every collective. */
hlo_status rt_comm_agree(rt_comm *comm, const char *what, const char *signature, hlo_diag *diag);
/* Collectives within this rank's group of groups; what names the op in errors. count is in
 * elements of dtype for reductions, bytes per member otherwise. The all-reduce reads send and
 * writes recv, two distinct buffers of count elements. */
hlo_status rt_comm_allreduce(rt_comm *comm, const rt_comm_groups *groups, const void *send, void *recv, int64_t count,
                             hlo_dtype dtype, rt_comm_reduce op, const char *what, hlo_diag *diag);
hlo_status rt_comm_allgather(rt_comm *comm, const rt_comm_groups *groups, const void *send, int64_t bytes, void *recv,
                             const char *what, hlo_diag *diag);
hlo_status rt_comm_alltoall(rt_comm *comm, const rt_comm_groups *groups, const void *send, int64_t bytes, void *recv,
                            const char *what, hlo_diag *diag);
/* send holds one block of count elements per member in group order; recv gets this rank's. */
hlo_status rt_comm_reduce_scatter(rt_comm *comm, const rt_comm_groups *groups, const void *send, void *recv,
                                  int64_t count, hlo_dtype dtype, rt_comm_reduce op, const char *what, hlo_diag *diag);
/* root: the index within the group of the member whose data every member gets. */
hlo_status rt_comm_broadcast(rt_comm *comm, const rt_comm_groups *groups, void *data, int64_t bytes, int root,
                             const char *what, hlo_diag *diag);
/* Sends bytes to world rank to and receives bytes from world rank from (either -1: none);
 * call right after the collective's rt_comm_agree. */
hlo_status rt_comm_exchange(rt_comm *comm, int to, const void *send, int from, void *recv, int64_t bytes,
                            const char *what, hlo_diag *diag);

/* Async starts: the transfer starts and the call returns; target (retained until then) holds
 * the result once rt_comm_finish(comm, target) returns. all-reduce reduces target's data in
 * place; all-gather's member blocks come back from the finish in *blocks (malloc'd, the
 * caller lays them out and frees them); the exchange receives into target's data. What is
 * sent is copied first. A collective still in flight when the world closes marks it broken. */
hlo_status rt_comm_allreduce_start(rt_comm *comm, const rt_comm_groups *groups, rt_value *target, rt_comm_reduce op,
                                   const char *what, hlo_diag *diag);
hlo_status rt_comm_allgather_start(rt_comm *comm, const rt_comm_groups *groups, const void *send, int64_t bytes,
                                   rt_value *target, const char *what, hlo_diag *diag);
hlo_status rt_comm_exchange_start(rt_comm *comm, int to, const void *send, int from, rt_value *target, int64_t bytes,
                                  const char *what, hlo_diag *diag);
/* Waits (up to the timeout) for the transfer started for target; at once when none is in
 * flight for it (the start completed before it returned: *blocks is then NULL). */
hlo_status rt_comm_finish(rt_comm *comm, const rt_value *target, void **blocks, const char *what, hlo_diag *diag);

/* Rank 0's *bytes (*len of them; *len 0 when it has nothing, which fails every rank) in a
 * new malloc'd *bytes on every other rank; every rank calls it. */
hlo_status rt_comm_share(rt_comm *comm, void **bytes, size_t *len, const char *what, hlo_diag *diag);

/* ---- parallel.c ---- */
/* The parallel-for behind the cpu backend's kernels, over OpenMP (parallel.c). */

#ifdef __cplusplus
extern "C" {
#endif

/* Calls fn(ctx, begin, end) over disjoint ranges covering [0, n), each about grain items or
 * more, possibly on several threads at once; returns when all are done. n <= grain runs
 * inline on the caller's thread, so small work never pays for a task. Thread count: the
 * last rt_parallel_request_threads before the first loop, else every core. */
void rt_parallel_for(int64_t n, int64_t grain, void (*fn)(void *ctx, int64_t begin, int64_t end),
                     void *ctx);
/* Asks for this many threads (1 to 1024; others are ignored): latch_open and the command
 * pass latch_options.threads (LATCH_THREADS). The count is process-wide and fixed by the
 * first parallel loop, so only a request made before it counts. */
void rt_parallel_request_threads(int threads);
/* The threads rt_parallel_for may use: a forked child's are its parent's. */
int rt_parallel_threads(void);
/* The team an OpenMP region (oneDNN's) may use: rt_parallel_threads, but one in a child
 * forked after the pool started (libgomp's pool does not survive fork). */
int rt_parallel_openmp_threads(void);

#ifdef __cplusplus
}
#endif

/* ---- fork_lock.c ---- */
/* A process-wide mutex that fork waits for, so that a child never inherits it held by a
 * thread it does not have (fork_lock.c says for which locks). Define one with
 * RT_FORK_MUTEX_INIT and take it with these instead of pthread_mutex_lock. */

typedef struct rt_fork_mutex {
  pthread_mutex_t mutex;
  atomic_bool listed;         /* known to fork's handlers */
  struct rt_fork_mutex *next; /* the next listed one */
} rt_fork_mutex;
#define RT_FORK_MUTEX_INIT {PTHREAD_MUTEX_INITIALIZER, false, NULL}

void rt_fork_lock(rt_fork_mutex *m);
void rt_fork_unlock(rt_fork_mutex *m);

/* ---- test_point.c ---- */
/* FOR TESTS ONLY: places inside locked regions where a test's function runs while the thread
 * holds the lock (a test forks from another thread then, and checks what the child finds).
 * One function for the process; NULL (the default) runs none. */

typedef enum rt_test_point {
  RT_TEST_WORLD_LOCKED,      /* comm.c: a collective holds the world's lock */
  RT_TEST_PRIMITIVES_LOCKED, /* cpu/executable.c: making a loaded plan's oneDNN primitives */
  RT_TEST_POOL_LOCKED,       /* cpu/executable.c: taking an arena from its family's pool */
  RT_TEST_SOURCE_LOCKED,     /* cpu/executable.c: decoding a loaded executable's source module */
  RT_TEST_FORK_LOCK_HELD,    /* fork_lock.c: inside any rt_fork_lock */
  /* a fork handler is about to wait for the locks above: */
  RT_TEST_FORK_WAITS_WORLD,       /* comm.c's, for the world's */
  RT_TEST_FORK_WAITS_EXECUTABLES, /* cpu/executable.c's, for the executables' */
  RT_TEST_FORK_WAITS_FORK_LOCKS,  /* fork_lock.c's, for rt_fork_lock's */
} rt_test_point;
typedef void (*rt_test_fn)(rt_test_point point);

void rt_test_point_set(rt_test_fn fn);
void rt_test_at(rt_test_point point);

/* ---- npy.c ---- */
/* NumPy .npy files: how latch exchanges tensors with other tools.
 *
 * Reads format versions 1.0, 2.0 and 3.0 with element types f2 f4 f8, i1..i8, u1..u8 and
 * b1, either byte order, C or Fortran order (Fortran data is transposed to row-major).
 * NumPy has no bfloat16 type code: ml_dtypes arrays are saved as '<V2', raw bytes with no
 * type, so that descr is refused; the descr 'bfloat16' (a latch extension) is read as bf16.
 * Writes version 1.0 (2.0 when the header needs it), little-endian, C order; bf16 values are
 * written as exact f4 so that NumPy can read them (callers may want to say so). */

/* Reads an array; NULL with a message naming the file in diag on any failure. */
rt_value *rt_npy_read(const char *path, hlo_diag *diag);
/* Decodes a whole .npy file held in memory; name is used in messages. */
rt_value *rt_npy_decode(const void *bytes, size_t size, const char *name, hlo_diag *diag);
/* Writes an array value (not a tuple). */
hlo_status rt_npy_write(const char *path, const rt_value *value, hlo_diag *diag);
/* The descr rt_npy_write uses for an element type ("<f4", "|b1", ...), or NULL when the
 * type cannot be written. */
const char *rt_npy_descr(hlo_dtype dtype);

/* ---- fingerprint.c ---- */
/* A backend fingerprint: everything besides the graph that decides what a compiled
 * executable is, as one string. It is half of an on-disk compile-cache key (the graph's
 * canonical hash is the other), so anything that can change generated code or the serialized
 * form must be in it: the backend's name and version, latch's version, the caller's
 * code-changing options, and the host's CPU architecture and vector features (a cache
 * directory may be shared by machines, and code built for AVX-512 must not be loaded where
 * there is none). Over-inclusion only costs a recompile; omission gives wrong hits. */

/* Bump with any release: entries written by another latch are never loaded. */
#define RT_LATCH_VERSION "0.1.0"

/* The build identity: 32 hex digits of a hash of the library's sources, the compiler's
 * version and the flags, computed by the Makefile. A rebuild with any change to the code
 * that lowers or compiles graphs gives another identity, so its cache entries never match
 * the old build's: no version to bump by hand. */
const char *rt_build_id(void);

/* "backend=NAME/VERSION latch=V build=ID arch=A cpu=F1,F2 libs=L options=O" in out, NUL-terminated. options
 * may be NULL or "" when none. Returns the length it needed, like snprintf: a result >= size
 * means out was cut short and must not be used as a key. RT_FINGERPRINT_MAX is enough unless
 * options are long. */
#define RT_FINGERPRINT_MAX 1024
size_t rt_fingerprint(const rt_backend *backend, const char *options, char *out, size_t size);

/* The host's vector features, comma-separated ("sse4.2,avx,avx2,fma"), "" where latch does
 * not know how to ask. */
const char *rt_cpu_features(void);

/* ---- random_fill.c ---- */
/* Deterministic inputs from a seed, so a run can be repeated anywhere without input files.
 *
 * The same seed gives the same bytes on every machine: the generator is splitmix64 and
 * every value is made from integers with exact arithmetic, never from libm. Each parameter
 * has its own stream (seed and parameter number), so adding a parameter leaves the others'
 * values alone; tuple elements get sub-streams the same way.
 *
 *   floats (f16 bf16 f32 f64): uniform in [-1, 1), on a grid fine enough for the type and
 *                              coarse enough that every value is exact in it
 *   integers:                  uniform in [0, 8): small enough to index most dims
 *   pred:                      true or false with equal odds
 *
 * Dynamic dims get their bound ([<=N] is filled with N elements); unbounded ([?]) get 1. */

/* Fills an array value in place from stream. */
void rt_random_fill(rt_value *value, uint64_t seed, uint64_t stream);
/* A new value of shape (tuples element-wise, a token as an empty tuple) filled from the
 * stream; NULL with an error for types that are not computable or when memory runs out. */
rt_value *rt_random_value(const hlo_shape *shape, uint64_t seed, uint64_t stream, hlo_diag *diag);
/* splitmix64's output function, exposed for tests and derived seeds; inline, since random
 * fills call it once or twice per element. */
static inline uint64_t rt_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* ---- accuracy.c ---- */
/* The accuracy check: is a backend's result as close to the truth as the reference
 * evaluator's own result in the declared types? The truth is the reference evaluator in fp64
 * mode on the same inputs. A floating output passes when
 *
 *   rmse(result - fp64) <= m * rmse(reference - fp64) + tol
 *
 * with m = 3 for f16 and bf16 (their rounding makes reordered sums drift more) and 2 for
 * the others: a backend may round differently from the reference, but not much worse.
 * NaN and infinity positions (and signs) must agree with the reference in the declared
 * types; those positions are left out of the rmse. Integer and pred outputs must be equal.
 * Tuples are compared output by output, nested tuples flattened in order. */

#define RT_ACCURACY_DEFAULT_TOL 1e-3

typedef struct rt_accuracy_verdict {
  bool passed;
  int failed_output; /* flat index of the first failing output, -1 when passed */
  /* The failing output with its figures, or a summary when passed. */
  char message[512];
} rt_accuracy_verdict;

/* Compares result against the reference in the declared types (declared) and in fp64
 * (fp64); all three share the module's output structure. HLO_ERR_INPUT when they do not
 * (different tuple structure or dims). */
hlo_status rt_accuracy_compare(const rt_value *result, const rt_value *declared, const rt_value *fp64, double tol,
                               rt_accuracy_verdict *verdict, hlo_diag *diag);


/* ---- fault.c ---- */
/* Fault injection, FOR TESTS ONLY: makes a backend misbehave on demand so the checks and the
 * minifier can be tested against known bugs. Never set LATCH_FAULT in production (capture/
 * reads it and passes the parsed fault to rt_fault_backend).
 *
 *   compile:OPCODE       compile fails (HLO_ERR_UNSUPPORTED, naming the op and the
 *                        instruction, as a real backend's compile error does) when the
 *                        module contains OPCODE anywhere
 *   accuracy:OPCODE:EPS  each floating OPCODE result r is computed as r + EPS * (|r| + 1):
 *                        the module is rewritten (a copy) before the inner compile
 *   crash:OPCODE         compile aborts the process (SIGABRT)
 *   hang:OPCODE          compile sleeps forever
 *   shift:OPCODE         each floating OPCODE result comes out with its elements moved one
 *                        place along its last dim (an indexing bug): only values that vary
 *                        along that dim show it, constant ones never do
 *   compile:OP1+OP2      compile fails only when the module contains both OP1 and OP2 (a
 *                        fusion or a layout chosen across two ops): interacting culprits
 *   accuracy:OP1+OP2:EPS each floating OP2 result with an OP1 operand (a producer feeding
 *                        its consumer) gets the error above; OP2 elsewhere is exact
 *   choice:KIND:N        a wrong choice of the backend's own: when the compile takes the Nth
 *                        choice of KIND (hlo_choice: "fusion", "fold_affine", "winograd",
 *                        ...), every floating output r comes out as r + 0.5 * (|r| + 1);
 *                        with that choice refused (LATCH_CHOICES, LATCH_AVOID) it is exact
 *
 * The fault wraps an inner backend, so it applies to any backend: rt_fault_backend gives an
 * rt_backend whose compile applies the fault and whose executables run the inner one's. */

typedef enum rt_fault_kind {
  RT_FAULT_NONE = 0,
  RT_FAULT_COMPILE,
  RT_FAULT_ACCURACY,
  RT_FAULT_CRASH,
  RT_FAULT_HANG,
  RT_FAULT_SHIFT,
  RT_FAULT_CHOICE,
} rt_fault_kind;

typedef struct rt_fault {
  rt_fault_kind kind;
  hlo_opcode opcode;
  double eps; /* accuracy only */
  /* An OP1+OP2 fault (compile and accuracy): paired, opcode is OP1 and partner OP2. */
  bool paired;
  hlo_opcode partner;
  /* choice: the kind of choice and which of them (1-based) is wrong */
  char choice_kind[32];
  int choice_index;
} rt_fault;

/* Parses "kind:OPCODE[:EPS]" and "kind:OP1+OP2[:EPS]"; HLO_ERR_INPUT with a message on
 * anything else. */
hlo_status rt_fault_parse(const char *text, rt_fault *fault, hlo_diag *diag);

/* A backend that applies fault around inner. There is one wrapper per process (the fault
 * setting is process-wide, as the environment variable is): a later call replaces the
 * earlier configuration. Returns inner itself when fault->kind is RT_FAULT_NONE. */
const rt_backend *rt_fault_backend(const rt_backend *inner, const rt_fault *fault);

/* The module with the accuracy (or shift) fault's rewrite applied (a new module), for tests:
 * every opcode result, or with a paired fault every partner result that has an opcode
 * operand. */
hlo_module *rt_fault_perturb(const hlo_module *module, const rt_fault *fault, hlo_diag *diag);

#endif
