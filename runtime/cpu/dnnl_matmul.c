/* bf16 products on oneDNN's matmul primitive. A batch of [m][k] by [k][n] matrices is one
 * call; each operand is plain row-major or transposed, told to oneDNN by its strides rather
 * than copied; the operands are bf16 and the result f32 or bf16. oneDNN's kernels for
 * processors with bf16 instructions (avx512_bf16, AMX) multiply pairs of bf16 values and sum
 * them in f32: twice the products per instruction of f32. On other processors its bf16
 * kernels emulate them at less than f32's speed, so there dot.c widens the operands to f32
 * and runs its f32 path instead (rt_cpu_bf16_native decides), and a compile says so once
 * (rt_cpu_bf16_note).
 *
 * A primitive is made once per shape and kept for the process in a small table under a lock:
 * oneDNN's own cache would still build the descriptor and look it up on every call. */
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

void rt_cpu_bf16_use_native(int on) {
  atomic_store_explicit(&native, on < 0 ? -1 : on > 0, memory_order_relaxed);
}

static bool bf16_operands(const hlo_instr *instr) {
  return (instr->opcode == HLO_OP_DOT || instr->opcode == HLO_OP_CONVOLUTION) && instr->operand_count == 2 &&
         instr->operands[0]->shape.dtype == HLO_BF16 && instr->operands[1]->shape.dtype == HLO_BF16;
}

void rt_cpu_bf16_note(const hlo_comp *entry, const rt_compile_options *options) {
  static atomic_bool said;
  if (!options || !options->log_compiles || rt_cpu_bf16_native() || atomic_load(&said)) return;
  for (int i = 0; i < entry->instr_count; i++) {
    if (!bf16_operands(entry->instrs[i])) continue;
    if (!atomic_exchange(&said, true))
      fprintf(stderr,
              "latch: bf16 products run converted to f32: this processor has no bf16 instructions "
              "(oneDNN's instruction set: %s)\n",
              rt_cpu_dnnl_isa_name());
    return;
  }
}

/* ---- the primitives kept ---- */

typedef struct matmul_key {
  int64_t batch, m, n, k;
  bool a_transposed, b_transposed;
  dnnl_data_type_t c_type;
} matmul_key;

enum { KEPT_PRIMITIVES = 256 };
static struct {
  matmul_key key;
  dnnl_primitive_t prim;
} kept[KEPT_PRIMITIVES];
static int kept_count;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

static bool same_key(const matmul_key *a, const matmul_key *b) {
  return a->batch == b->batch && a->m == b->m && a->n == b->n && a->k == b->k &&
         a->a_transposed == b->a_transposed && a->b_transposed == b->b_transposed && a->c_type == b->c_type;
}

static dnnl_primitive_t make_primitive(const matmul_key *key) {
  int64_t batch = key->batch, m = key->m, n = key->n, k = key->k;
  dnnl_dims_t a_dims = {batch, m, k}, b_dims = {batch, k, n}, c_dims = {batch, m, n};
  /* A [m][k] or stored [k][m]; B [k][n] or stored [n][k] */
  dnnl_dims_t a_strides = {m * k, key->a_transposed ? 1 : k, key->a_transposed ? m : 1};
  dnnl_dims_t b_strides = {k * n, key->b_transposed ? 1 : n, key->b_transposed ? k : 1};
  dnnl_dims_t c_strides = {m * n, n, 1};
  dnnl_memory_desc_t a_md, b_md, c_md;
  dnnl_matmul_desc_t desc;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t prim = NULL;
  bool ok = dnnl_memory_desc_init_by_strides(&a_md, 3, a_dims, dnnl_bf16, a_strides) == dnnl_success &&
            dnnl_memory_desc_init_by_strides(&b_md, 3, b_dims, dnnl_bf16, b_strides) == dnnl_success &&
            dnnl_memory_desc_init_by_strides(&c_md, 3, c_dims, key->c_type, c_strides) == dnnl_success &&
            dnnl_matmul_desc_init(&desc, &a_md, &b_md, NULL, &c_md) == dnnl_success &&
            dnnl_primitive_desc_create(&pd, &desc, NULL, rt_cpu_dnnl_engine(), NULL) == dnnl_success;
  if (ok && dnnl_primitive_create(&prim, pd) != dnnl_success) prim = NULL;
  if (pd) dnnl_primitive_desc_destroy(pd);
  return prim;
}

/* The primitive for key, kept when the table has room; *owned when the caller must destroy it. */
static dnnl_primitive_t primitive_for(const matmul_key *key, bool *owned) {
  *owned = false;
  pthread_mutex_lock(&kept_lock);
  dnnl_primitive_t prim = NULL;
  for (int i = 0; i < kept_count && !prim; i++)
    if (same_key(&kept[i].key, key)) prim = kept[i].prim;
  if (!prim && (prim = make_primitive(key))) {
    if (kept_count < KEPT_PRIMITIVES) kept[kept_count].key = *key, kept[kept_count++].prim = prim;
    else *owned = true;
  }
  pthread_mutex_unlock(&kept_lock);
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
  return (matmul_key){mm->batch, mm->m, mm->n, mm->k, mm->a_transposed, mm->b_transposed,
                      mm->c_type == HLO_BF16 ? dnnl_bf16 : dnnl_f32};
}

bool rt_cpu_matmul_bf16_ready(const rt_cpu_matmul *mm) {
  matmul_key key = key_of(mm);
  bool owned;
  dnnl_primitive_t prim = primitive_for(&key, &owned);
  if (prim && owned) dnnl_primitive_destroy(prim);
  return prim != NULL;
}

static _Atomic int64_t runs;

int64_t rt_cpu_matmul_bf16_runs(void) { return atomic_load(&runs); }

bool rt_cpu_matmul_bf16(const rt_cpu_matmul *mm) {
  atomic_fetch_add(&runs, 1);
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
            dnnl_primitive_execute(prim, stream, 3, args) == dnnl_success && dnnl_stream_wait(stream) == dnnl_success;
  if (stream) dnnl_stream_destroy(stream);
  if (a) dnnl_memory_destroy(a);
  if (b) dnnl_memory_destroy(b);
  if (c) dnnl_memory_destroy(c);
  omp_set_num_threads(team);
  if (owned) dnnl_primitive_destroy(prim);
  return ok;
}
