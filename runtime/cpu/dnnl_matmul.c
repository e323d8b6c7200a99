/* bf16 products on oneDNN's matmul primitive. A batch of [m][k] by [k][n] matrices is one
 * call; each operand is plain row-major or transposed, told to oneDNN by its strides rather
 * than copied; the operands are bf16 and the result f32 or bf16. oneDNN's kernels for
 * processors with bf16 instructions (avx512_bf16, AMX) multiply pairs of bf16 values and sum
 * them in f32: twice the products per instruction of f32. On other processors its bf16
 * kernels emulate them at less than f32's speed, so there dot.c widens the operands to f32
 * and runs its f32 path instead (rt_cpu_bf16_native decides), and a compile says so once
 * (rt_cpu_bf16_note). Where the bf16 instructions exist but do fewer multiply-adds per second
 * than f32's (bf16_rate.c measures), products of many rows are widened too: only few rows,
 * bound by reading the weight, gain from its bf16 bytes (rt_cpu_bf16_native_for).
 *
 * The same primitive with f32 operands runs a batch of small f32 products as one call
 * (rt_cpu_matmul_f32: dot.c's batched path, where its own loop made one sgemm per matrix).
 *
 * A primitive is made once per shape, operand type and OpenMP team and kept for the process
 * in a small table under a lock: oneDNN's own cache would still build the descriptor and
 * look it up on every call.
 *
 * Prepacked weights: oneDNN's bf16 kernels read b in a blocked layout of their own (pairs of
 * rows interleaved, in panels), and given a plain b they copy it into that layout on every
 * call, for every block of rows of a. A weight changes only when its contents do, so the
 * caller may ask for the primitive that reads b in the layout it chose (b's format `any`),
 * pack b once into it (rt_cpu_matmul_bf16_pack, a oneDNN reorder) and keep the packed bytes
 * per weight version (dot.c, plan.c): then a call reads the weight as packed. */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "dnnl_internal.h"
#include "kernel_internal.h"

/* -1 until the first question: then whether oneDNN runs bf16 on this processor natively. */
static _Atomic int native = -1;

bool rt_cpu_bf16_native(void) {
  int on = atomic_load_explicit(&native, memory_order_relaxed);
  if (on < 0) {
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    on = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
    atomic_store_explicit(&native, on, memory_order_relaxed);
  }
  return on;
}

/* Set by rt_cpu_bf16_use_native(1): every bf16 product on oneDNN, whatever its rows. */
static atomic_bool forced;

void rt_cpu_bf16_use_native(int on) {
  atomic_store_explicit(&native, on < 0 ? -1 : on > 0, memory_order_relaxed);
  atomic_store_explicit(&forced, on > 0, memory_order_relaxed);
}

bool rt_cpu_bf16_native_for(int64_t rows) {
  if (!rt_cpu_bf16_native()) return false;
  return atomic_load_explicit(&forced, memory_order_relaxed) || rows <= RT_CPU_BF16_FEW_ROWS ||
         rt_cpu_bf16_arithmetic_pays();
}

static bool bf16_operands(const hlo_instr *instr) {
  return (instr->opcode == HLO_OP_DOT || instr->opcode == HLO_OP_CONVOLUTION) && instr->operand_count == 2 &&
         instr->operands[0]->shape.dtype == HLO_BF16 && instr->operands[1]->shape.dtype == HLO_BF16;
}

void rt_cpu_bf16_note(const hlo_comp *entry, const rt_compile_options *options) {
  static atomic_bool said;
  if (!options || !options->log_compiles || atomic_load(&said)) return;
  bool widened = !rt_cpu_bf16_native(), slow = !widened && !rt_cpu_bf16_native_for(RT_CPU_BF16_FEW_ROWS + 1);
  if (!widened && !slow) return;
  for (int i = 0; i < entry->instr_count; i++) {
    if (!bf16_operands(entry->instrs[i])) continue;
    if (!atomic_exchange(&said, true) && widened)
      fprintf(stderr,
              "latch: bf16 products run converted to f32: this processor has no bf16 instructions "
              "(oneDNN's instruction set: %s)\n",
              rt_cpu_dnnl_isa_name());
    else if (slow)
      fprintf(stderr,
              "latch: bf16 products of more than %d rows run converted to f32: this processor's bf16 dot "
              "products do fewer multiply-adds per second than its f32 ones\n",
              RT_CPU_BF16_FEW_ROWS);
    return;
  }
}

/* ---- the primitives kept ---- */

typedef struct matmul_key {
  int64_t batch, m, n, k;
  bool a_transposed, b_transposed;
  bool b_any; /* b in the layout oneDNN picks */
  dnnl_data_type_t ab_type, c_type;
  int threads; /* the OpenMP team it is made for (oneDNN splits the work then) */
} matmul_key;

enum { KEPT_PRIMITIVES = 256 };
static struct {
  matmul_key key;
  dnnl_primitive_t prim;
} kept[KEPT_PRIMITIVES];
static int kept_count;
static rt_fork_mutex kept_lock = RT_FORK_MUTEX_INIT; /* fork waits for it */
/* One execute of a kept primitive at a time: a primitive kept for the process is shared by
 * every thread that runs a product of its shape, and run from several at once it gave wrong
 * results now and then (oneDNN's scratchpad for it is not per call). */
static rt_fork_mutex run_lock = RT_FORK_MUTEX_INIT; /* fork waits for it */

static bool same_key(const matmul_key *a, const matmul_key *b) {
  return a->batch == b->batch && a->m == b->m && a->n == b->n && a->k == b->k &&
         a->a_transposed == b->a_transposed && a->b_transposed == b->b_transposed && a->b_any == b->b_any &&
         a->ab_type == b->ab_type && a->c_type == b->c_type && a->threads == b->threads;
}

/* A [rows][cols] matrix of a batch (stored [cols][rows] when transposed) as a oneDNN layout:
 * two dims for one matrix (oneDNN 2.6 picks a blocked layout for a weight of `any` format
 * only then), three for a batch. */
static bool matrix_md(dnnl_memory_desc_t *md, int64_t batch, int64_t rows, int64_t cols, bool transposed,
                      dnnl_data_type_t type) {
  int nd = batch == 1 ? 2 : 3;
  dnnl_dims_t dims = {batch, rows, cols}, strides = {rows * cols, transposed ? 1 : cols, transposed ? rows : 1};
  return dnnl_memory_desc_init_by_strides(md, nd, dims + (3 - nd), type, strides + (3 - nd)) == dnnl_success;
}

/* b as the caller stores it: [k][n], or [n][k] when b_transposed. */
static bool plain_b_md(const matmul_key *key, dnnl_memory_desc_t *md) {
  return matrix_md(md, key->batch, key->k, key->n, key->b_transposed, key->ab_type);
}

static dnnl_primitive_t make_primitive(const matmul_key *key) {
  int64_t batch = key->batch, m = key->m, n = key->n, k = key->k;
  dnnl_dims_t b_dims = {batch, k, n};
  int nd = batch == 1 ? 2 : 3;
  dnnl_memory_desc_t a_md, b_md, c_md;
  dnnl_matmul_desc_t desc;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t prim = NULL;
  /* A [m][k] or stored [k][m]; B [k][n] or stored [n][k], or in oneDNN's own layout */
  bool b_ok = key->b_any ? dnnl_memory_desc_init_by_tag(&b_md, nd, b_dims + (3 - nd), key->ab_type,
                                                        dnnl_format_tag_any) == dnnl_success
                         : plain_b_md(key, &b_md);
  bool ok = matrix_md(&a_md, batch, m, k, key->a_transposed, key->ab_type) && b_ok &&
            matrix_md(&c_md, batch, m, n, false, key->c_type) &&
            dnnl_matmul_desc_init(&desc, &a_md, &b_md, NULL, &c_md) == dnnl_success &&
            dnnl_primitive_desc_create(&pd, &desc, NULL, rt_cpu_dnnl_engine(), NULL) == dnnl_success;
  if (ok && dnnl_primitive_create(&prim, pd) != dnnl_success) prim = NULL;
  if (pd) dnnl_primitive_desc_destroy(pd);
  return prim;
}

/* The primitive for key, kept when the table has room; *owned when the caller must destroy it. */
static dnnl_primitive_t primitive_for(const matmul_key *key, bool *owned) {
  *owned = false;
  rt_fork_lock(&kept_lock);
  dnnl_primitive_t prim = NULL;
  for (int i = 0; i < kept_count && !prim; i++)
    if (same_key(&kept[i].key, key)) prim = kept[i].prim;
  if (!prim && (prim = make_primitive(key))) {
    if (kept_count < KEPT_PRIMITIVES) kept[kept_count].key = *key, kept[kept_count++].prim = prim;
    else *owned = true;
  }
  rt_fork_unlock(&kept_lock);
  return prim;
}

static dnnl_memory_t user_memory(dnnl_primitive_t prim, dnnl_query_t what, const void *data) {
  const_dnnl_primitive_desc_t pd;
  if (dnnl_primitive_get_primitive_desc(prim, &pd) != dnnl_success) return NULL;
  dnnl_memory_t mem = NULL;
  if (dnnl_memory_create(&mem, dnnl_primitive_desc_query_md(pd, what, 0), rt_cpu_dnnl_engine(), (void *)data) !=
      dnnl_success)
    return NULL;
  return mem;
}

static matmul_key key_of(const rt_cpu_matmul *mm) {
  int threads = rt_cpu_dnnl_team();
  return (matmul_key){mm->batch, mm->m, mm->n, mm->k, mm->a_transposed, mm->b_transposed, mm->b_packed,
                      mm->f32 ? dnnl_f32 : dnnl_bf16, mm->c_type == HLO_BF16 ? dnnl_bf16 : dnnl_f32, threads};
}

bool rt_cpu_matmul_bf16_ready(const rt_cpu_matmul *mm) {
  matmul_key key = key_of(mm);
  bool owned;
  dnnl_primitive_t prim = primitive_for(&key, &owned);
  if (prim && owned) dnnl_primitive_destroy(prim);
  return prim != NULL;
}

static _Atomic int64_t runs, f32_runs;

int64_t rt_cpu_matmul_bf16_runs(void) { return atomic_load(&runs); }

int64_t rt_cpu_matmul_f32_runs(void) { return atomic_load(&f32_runs); }

static bool execute(const rt_cpu_matmul *mm);

bool rt_cpu_matmul_bf16(const rt_cpu_matmul *mm) {
  atomic_fetch_add(&runs, 1);
  return execute(mm);
}

bool rt_cpu_matmul_f32(const rt_cpu_matmul *mm) {
  atomic_fetch_add(&f32_runs, 1);
  rt_cpu_matmul f32 = *mm;
  f32.f32 = true;
  f32.b_packed = false;
  return execute(&f32);
}

/* prim run on args and waited for, under run_lock. */
static bool run_kept(dnnl_primitive_t prim, dnnl_stream_t stream, const dnnl_exec_arg_t *args) {
  rt_fork_lock(&run_lock);
  bool ok = dnnl_primitive_execute(prim, stream, 3, args) == dnnl_success && dnnl_stream_wait(stream) == dnnl_success;
  rt_fork_unlock(&run_lock);
  return ok;
}

static bool execute(const rt_cpu_matmul *mm) {
  matmul_key key = key_of(mm);
  bool owned;
  dnnl_primitive_t prim = primitive_for(&key, &owned);
  if (!prim) return false;
  int team = rt_cpu_dnnl_team_begin();
  dnnl_stream_t stream = NULL;
  dnnl_memory_t a = user_memory(prim, dnnl_query_src_md, mm->a), b = user_memory(prim, dnnl_query_weights_md, mm->b),
                c = user_memory(prim, dnnl_query_dst_md, mm->c);
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  bool ok = a && b && c && dnnl_stream_create(&stream, rt_cpu_dnnl_engine(), dnnl_stream_default_flags) == dnnl_success &&
            run_kept(prim, stream, args);
  if (stream) dnnl_stream_destroy(stream);
  if (a) dnnl_memory_destroy(a);
  if (b) dnnl_memory_destroy(b);
  if (c) dnnl_memory_destroy(c);
  omp_set_num_threads(team);
  if (owned) dnnl_primitive_destroy(prim);
  return ok;
}

/* The layout the primitive reading b in oneDNN's own layout wants, when that is not b's
 * plain one; false otherwise. */
static bool packed_md(const rt_cpu_matmul *mm, dnnl_memory_desc_t *md) {
  matmul_key key = key_of(mm), plain_key = key;
  key.b_any = true;
  plain_key.b_any = false;
  bool owned;
  dnnl_primitive_t prim = primitive_for(&key, &owned);
  const_dnnl_primitive_desc_t pd;
  dnnl_memory_desc_t plain;
  bool ok = prim && dnnl_primitive_get_primitive_desc(prim, &pd) == dnnl_success && plain_b_md(&plain_key, &plain);
  if (ok) *md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  if (prim && owned) dnnl_primitive_destroy(prim);
  return ok && md->format_kind == dnnl_blocked && !dnnl_memory_desc_equal(md, &plain);
}

int64_t rt_cpu_matmul_bf16_packed_bytes(const rt_cpu_matmul *mm) {
  dnnl_memory_desc_t md;
  if (!packed_md(mm, &md)) return 0;
  size_t bytes = dnnl_memory_desc_get_size(&md);
  return bytes > (size_t)INT64_MAX ? 0 : (int64_t)bytes;
}

bool rt_cpu_matmul_bf16_pack(const rt_cpu_matmul *mm, void *packed) {
  matmul_key plain_key = key_of(mm);
  plain_key.b_any = false;
  dnnl_memory_desc_t to, from;
  if (!packed_md(mm, &to) || !plain_b_md(&plain_key, &from)) return false;
  dnnl_engine_t engine = rt_cpu_dnnl_engine();
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t reorder = NULL;
  dnnl_memory_t src = NULL, dst = NULL;
  dnnl_stream_t stream = NULL;
  int team = rt_cpu_dnnl_team_begin();
  bool ok = dnnl_reorder_primitive_desc_create(&pd, &from, engine, &to, engine, NULL) == dnnl_success &&
            dnnl_primitive_create(&reorder, pd) == dnnl_success &&
            dnnl_memory_create(&src, &from, engine, (void *)mm->b) == dnnl_success &&
            dnnl_memory_create(&dst, &to, engine, packed) == dnnl_success &&
            dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success;
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
  ok = ok && dnnl_primitive_execute(reorder, stream, 2, args) == dnnl_success && dnnl_stream_wait(stream) == dnnl_success;
  omp_set_num_threads(team);
  if (stream) dnnl_stream_destroy(stream);
  if (src) dnnl_memory_destroy(src);
  if (dst) dnnl_memory_destroy(dst);
  if (reorder) dnnl_primitive_destroy(reorder);
  if (pd) dnnl_primitive_desc_destroy(pd);
  return ok;
}
