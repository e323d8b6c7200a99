/* A disk cache entry whose checksums are all valid but whose executable was edited: the arena
 * made smaller than what its steps reach, then the blob's and the entry's checksums computed
 * again, as someone who can write the cache directory would. Loading refuses it, naming the
 * step, so the command compiles afresh and prints the same values; it never runs code that
 * writes outside its buffers. So are blobs whose plan was edited in other ways, each
 * serialized again with a right checksum: a buffer moved off the arena's alignment, a value
 * freed before a step reads it, a convolution's source read as twice its value, and a fused
 * program that reads a register before writing it or loads a pred value as f32 (four
 * times its bytes), a pool that reads its source in another channel block than the
 * convolution before it wrote, a concatenation that reads a blocked operand as row-major,
 * and a pool's or concatenation's result written blocked into the caller's buffer. And running a loaded executable changes nothing its serialization writes,
 * even when the blob's oneDNN descriptions are not the ones oneDNN gives (a bias of another
 * size): the run is refused or runs, and the bytes stay. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "cpu_util.h"
#include "disk_test_util.h"
#include "hlo/hlo.h"
#include "runtime/cpu/blob_internal.h"
#include "runtime/cpu/dnnl_internal.h"
#include "runtime/cpu/exec_internal.h"
#include "runtime/cpu/fusion_internal.h"
#include "test.h"

/* a = x.x lives in the arena until c reads it. */
static const char chain[] =
    "HloModule chain\n"
    "ENTRY e {\n"
    "  x = f32[8,8] parameter(0)\n"
    "  a = f32[8,8] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  b = f32[8,8] exponential(a)\n"
    "  ROOT c = f32[8,8] dot(b, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "}\n";

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *bytes = malloc((size_t)size + 1);
  *len = bytes ? fread(bytes, 1, (size_t)size, f) : 0;
  fclose(f);
  return bytes;
}

/* The one entry in dir, its path in out. */
static bool find_entry(const char *dir, char *out, size_t size) {
  DIR *d = opendir(dir);
  struct dirent *e;
  bool found = false;
  while (d && (e = readdir(d)))
    if (cache_disk_is_entry_name(e->d_name)) found = snprintf(out, size, "%s/%s", dir, e->d_name) > 0;
  if (d) closedir(d);
  return found;
}

/* The blob with its plan's arena cut to arena_bytes, serialized again (a fresh checksum);
 * NULL when the blob cannot be read. */
static void *shrink_arena(const void *blob, size_t len, int64_t arena_bytes, size_t *out_len) {
  hlo_module *module;
  rt_cpu_plan *plan;
  const char *source;
  size_t source_len;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (rt_cpu_deserialize(blob, len, &module, &plan, &source, &source_len, &diag) != HLO_OK) return NULL;
  CHECK_MSG(plan->arena_bytes > arena_bytes, "arena of %lld bytes", (long long)plan->arena_bytes);
  plan->arena_bytes = arena_bytes;
  void *bytes = NULL;
  if (rt_cpu_serialize(module, plan, source, source_len, &bytes, out_len, &diag) != HLO_OK) bytes = NULL;
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
  return bytes;
}

/* Rewrites the entry at path with its executable's arena cut, every checksum recomputed;
 * the crafted blob goes to *crafted. */
static bool craft(const char *path, void **crafted, size_t *crafted_len) {
  size_t len;
  unsigned char *file = (unsigned char *)read_all(path, &len);
  cache_disk_header header;
  if (!file || cache_disk_header_decode(file, len, &header) != CACHE_DISK_OK) return free(file), false;
  const char *fingerprint = (const char *)file + CACHE_DISK_HEADER_BYTES;
  unsigned char *payload = file + CACHE_DISK_HEADER_BYTES + header.fingerprint_len;
  size_t at = 0;
  while (at + 8 <= header.payload_len && memcmp(payload + at, RT_CPU_BLOB_MAGIC, 8) != 0) at++;
  CHECK_MSG(at + 8 <= header.payload_len, "no cpu executable in %s", path);
  if (at + 8 > header.payload_len) return free(file), false;
  *crafted = shrink_arena(payload + at, header.payload_len - at, 64, crafted_len);
  if (!*crafted) return free(file), false;
  size_t payload_len = at + *crafted_len;
  unsigned char *new_payload = malloc(payload_len);
  memcpy(new_payload, payload, at);
  memcpy(new_payload + at, *crafted, *crafted_len);
  unsigned char raw[CACHE_DISK_HEADER_BYTES];
  cache_disk_header_encode(header.key, fingerprint, header.fingerprint_len, new_payload, payload_len, raw);
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(raw, 1, sizeof raw, f) == sizeof raw &&
            fwrite(fingerprint, 1, header.fingerprint_len, f) == header.fingerprint_len &&
            fwrite(new_payload, 1, payload_len, f) == payload_len;
  if (f) ok = fclose(f) == 0 && ok;
  free(new_payload);
  free(file);
  return ok;
}

static void smaller_arena_is_refused(void) {
  if (!cli_setup()) return;
  char env[600], dir[600], entry[1024];
  snprintf(env, sizeof env, "LATCH_CACHE=disk LATCH_CACHE_DIR='%s/cache'", cli_dir);
  cli_write_text(cli_path("chain.hlo"), chain);
  CLI_CHECK(0, env, "run --backend cpu '%s'", cli_path("chain.hlo"));
  char first[1 << 12];
  snprintf(first, sizeof first, "%s", strstr(cli_out, "output 0:") ? strstr(cli_out, "output 0:") : "");
  *strchrnul(first, '\n') = 0;
  CHECK_MSG(first[0], "%s", cli_out);
  snprintf(dir, sizeof dir, "%s/cache", cli_dir);
  CHECK(find_entry(dir, entry, sizeof entry));
  void *crafted = NULL;
  size_t crafted_len = 0;
  CHECK(craft(entry, &crafted, &crafted_len));

  /* The edited blob itself: its checksum holds, its steps do not fit. */
  hlo_module *module = NULL;
  rt_cpu_plan *plan = NULL;
  const char *source;
  size_t source_len;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK(rt_cpu_deserialize(crafted, crafted_len, &module, &plan, &source, &source_len, &diag) == HLO_ERR_INPUT);
  CHECK_MSG(strstr(diag.message, "reaches outside the arena") != NULL, "%s", diag.message);
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
  free(crafted);

  /* The next run: the same values, compiled afresh; no crash. */
  CLI_CHECK(0, env, "run --backend cpu '%s'", cli_path("chain.hlo"));
  CLI_HAS(cli_out, first);
  CLI_HAS(cli_out, "1 compile");
  cli_cleanup();
}

/* A fused group: x read in place as f32, p loaded as pred, select's operands computed first. */
static const char fused[] =
    "HloModule fused\n"
    "ENTRY e {\n"
    "  x = f32[64] parameter(0)\n"
    "  p = pred[64] parameter(1)\n"
    "  a = f32[64] exponential(x)\n"
    "  b = f32[64] negate(x)\n"
    "  ROOT s = f32[64] select(p, a, b)\n"
    "}\n";

/* A loaded plan: text compiled, serialized (blob, whose bytes source points into) and read
 * back. */
typedef struct loaded {
  void *blob;
  size_t len;
  hlo_module *module;
  rt_cpu_plan *plan;
  const char *source;
  size_t source_len;
} loaded;

static bool load_plan(const char *text, loaded *l) {
  rt_executable *exe = compile_checked(text);
  hlo_diag diag;
  hlo_diag_clear(&diag);
  *l = (loaded){0};
  bool ok = exe && rt_backend_cpu.serialize(exe, &l->blob, &l->len, &diag) == HLO_OK &&
            rt_cpu_deserialize(l->blob, l->len, &l->module, &l->plan, &l->source, &l->source_len, &diag) == HLO_OK;
  CHECK_MSG(ok, "%s", diag.message);
  rt_backend_cpu.destroy(exe);
  return ok;
}

/* text's plan edited by edit, serialized again (a right checksum) and loaded: refused with a
 * message holding want. */
static void refuse_edit(const char *text, const char *what, bool (*edit)(rt_cpu_plan *), const char *want) {
  loaded l;
  if (load_plan(text, &l)) {
    CHECK_MSG(edit(l.plan), "%s: nothing to edit", what);
    hlo_diag diag;
    hlo_diag_clear(&diag);
    void *bytes = NULL;
    size_t len = 0;
    CHECK(rt_cpu_serialize(l.module, l.plan, l.source, l.source_len, &bytes, &len, &diag) == HLO_OK);
    rt_executable *exe = bytes ? rt_backend_cpu.adopt(bytes, len, NULL, &diag) : NULL;
    CHECK_MSG(exe == NULL && diag.status == HLO_ERR_INPUT, "%s: loaded", what);
    CHECK_MSG(strstr(diag.message, want) != NULL, "%s: %s", what, diag.message);
    rt_backend_cpu.destroy(exe);
  }
  rt_cpu_plan_free(l.plan);
  hlo_module_free(l.module);
  free(l.blob);
}

static rt_cpu_step *fused_step(rt_cpu_plan *plan) {
  for (int i = 0; i < plan->step_count; i++)
    if (plan->steps[i].kind == RT_STEP_FUSED) return &plan->steps[i];
  return NULL;
}

/* The select reads its own register as its else-operand: run, it would read a stack slot
 * no instruction wrote. */
static bool read_before_write(rt_cpu_plan *plan) {
  rt_cpu_step *s = fused_step(plan);
  for (int k = 0; s && k < s->fusion->instr_count; k++)
    if (s->fusion->instrs[k].code == FU_SELECT) return s->fusion->instrs[k].c = s->fusion->instrs[k].dst, true;
  return false;
}

/* The pred parameter's load made an f32 view: 64 elements of 4 bytes out of a 64-byte value. */
static bool pred_read_as_f32(rt_cpu_plan *plan) {
  rt_cpu_step *s = fused_step(plan);
  for (int k = 0; s && k < s->fusion->instr_count; k++) {
    fusion_instr *in = &s->fusion->instrs[k];
    if (in->code == FU_LOAD && in->dtype == HLO_PRED) return in->dtype = HLO_F32, in->linear = true, in->tile = -1, true;
  }
  return false;
}

/* a's buffer moved 4 bytes on, inside an arena made 64 bytes larger: in bounds, misaligned. */
static bool buffer_misaligned(rt_cpu_plan *plan) {
  for (int i = 0; i < plan->step_count; i++) {
    rt_cpu_step *s = &plan->steps[i];
    if (rt_cpu_step_writes_buffer(s) && !s->output && !s->part_count) {
      plan->arena_bytes += RT_CPU_ALIGN;
      s->offset += 4;
      return true;
    }
  }
  return false;
}

/* x freed at a (inside b's group: b's head), before b and c read it: they would find its
 * cell empty. */
static bool freed_before_read(rt_cpu_plan *plan) {
  static int x = 0;
  if (plan->step_count < 2 || strcmp(plan->steps[x].instr->name, "x") != 0) return false;
  plan->steps[1].frees = &x;
  plan->steps[1].free_count = 1;
  return true;
}

/* A convolution with its bias on oneDNN. */
static const char conv_bias[] =
    "HloModule cb\n"
    "ENTRY e {\n"
    "  x = f32[1,8,10,10] parameter(0)\n"
    "  w = f32[8,8,3,3] parameter(1)\n"
    "  bias = f32[8] parameter(2)\n"
    "  c = f32[1,8,10,10] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    "  bb = f32[1,8,10,10] broadcast(bias), dimensions={1}\n"
    "  ROOT y = f32[1,8,10,10] add(c, bb)\n"
    "}\n";

/* The convolution's source said to arrive as two images where its value holds one: the run
 * would read (and scan) twice the value's bytes. */
static bool source_twice_its_value(rt_cpu_plan *plan) {
  for (int i = 0; i < plan->step_count; i++) {
    rt_cpu_dnnl *d = plan->steps[i].kind == RT_STEP_DNNL ? plan->steps[i].dnnl : NULL;
    if (d && d->conv && d->src_in_md.ndims == 4 && d->src_in_md.dims[0] == 1) {
      d->src_in_md.dims[0] = d->src_in_md.padded_dims[0] = 2;
      return true;
    }
  }
  return false;
}

/* A pool of a convolution's result over 8 channels: the convolution keeps its result in
 * oneDNN's blocked layout (8 or 16 channels a block, by the processor), which the pool reads
 * as it is; the pool's own result leaves row-major. */
static const char conv_pool[] =
    "HloModule cp\n"
    "mx {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT m = f32[] maximum(a, b)\n"
    "}\n"
    "ENTRY e {\n"
    "  x = f32[1,8,8,8] parameter(0)\n"
    "  w = f32[8,8,3,3] parameter(1)\n"
    "  ninf = f32[] constant(-inf)\n"
    "  c = f32[1,8,8,8] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    "  ROOT p = f32[1,8,4,4] reduce-window(c, ninf), window={size=1x1x2x2 stride=1x1x2x2}, to_apply=mx\n"
    "}\n";

/* Two convolutions' results joined along the channels: both arrive blocked, the result
 * leaves row-major. */
static const char conv_concat[] =
    "HloModule cc\n"
    "ENTRY e {\n"
    "  x = f32[1,8,6,6] parameter(0)\n"
    "  w1 = f32[16,8,1,1] parameter(1)\n"
    "  w2 = f32[16,8,3,3] parameter(2)\n"
    "  a = f32[1,16,6,6] convolution(x, w1), window={size=1x1}, dim_labels=bf01_oi01->bf01\n"
    "  b = f32[1,16,6,6] convolution(x, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    "  ROOT j = f32[1,32,6,6] concatenate(a, b), dimensions={1}\n"
    "}\n";

/* The DNNL step running a pool (or else a concatenation), when the plan has one. */
static rt_cpu_dnnl *dnnl_step_of(rt_cpu_plan *plan, bool pool) {
  for (int i = 0; i < plan->step_count; i++) {
    rt_cpu_dnnl *d = plan->steps[i].kind == RT_STEP_DNNL ? plan->steps[i].dnnl : NULL;
    if (d && (pool ? d->pool != NULL : d->concat != NULL)) return d;
  }
  return NULL;
}

/* The pool told to read its source in the other block (16 for 8, 8 for 16): where the
 * convolution wrote blocks of 8, it would read twice the source's bytes; where it wrote
 * blocks of 16, the channels out of their places. */
static bool pool_block_switched(rt_cpu_plan *plan) {
  rt_cpu_dnnl *d = dnnl_step_of(plan, true);
  if (!d || (d->block != 8 && d->block != 16)) return false;
  d->block = d->block == 8 ? 16 : 8;
  return true;
}

/* The step's result described as kept in its own block, though it is the caller's: written
 * blocked into the caller's buffer (channels out of their places; with blocks of 16 over 8
 * channels, twice the buffer's bytes). */
static bool result_kept_blocked(rt_cpu_dnnl *d, const hlo_shape *shape) {
  if (!d || d->blocked_out || !rt_cpu_dnnl_block_md(&d->out_md, shape, d->block)) return false;
  d->blocked_out = true;
  d->out_bytes = (int64_t)dnnl_memory_desc_get_size(&d->out_md);
  return true;
}

static bool pool_result_kept_blocked(rt_cpu_plan *plan) {
  rt_cpu_dnnl *d = dnnl_step_of(plan, true);
  return d && result_kept_blocked(d, &d->pool->shape);
}

static bool concat_result_kept_blocked(rt_cpu_plan *plan) {
  rt_cpu_dnnl *d = dnnl_step_of(plan, false);
  return d && result_kept_blocked(d, &d->concat->shape);
}

/* The concatenation told its first operand arrives row-major: it would copy the blocked
 * floats as planes, every channel of that operand out of its place. */
static bool concat_operand_said_row_major(rt_cpu_plan *plan) {
  rt_cpu_dnnl *d = dnnl_step_of(plan, false);
  if (!d || !d->operand_blocked[0]) return false;
  d->operand_blocked[0] = false;
  return true;
}

static void edited_plans_are_refused(void) {
  refuse_edit(conv_bias, "a source larger than its value", source_twice_its_value, "a source larger than its value");
  refuse_edit(chain, "a value freed before it is read", freed_before_read, "step %b: an input with no value");
  refuse_edit(fused, "a register read before it is written", read_before_write, "a register read before it is written");
  refuse_edit(fused, "a pred load read as f32", pred_read_as_f32, "a load of another type than its value's");
  refuse_edit(chain, "a misaligned buffer", buffer_misaligned, "is not aligned in the arena");
  refuse_edit(conv_pool, "a pool reading another block", pool_block_switched,
              "step %p: a pool's source read in another layout than it arrives in");
  refuse_edit(conv_pool, "a pool's result blocked", pool_result_kept_blocked,
              "step %p: a blocked result handed to the caller");
  refuse_edit(conv_concat, "a blocked operand read as row-major", concat_operand_said_row_major,
              "step %j: a concatenation's operand read in another layout than it arrives in");
  refuse_edit(conv_concat, "a concatenation's result blocked", concat_result_kept_blocked,
              "step %j: a blocked result handed to the caller");
}

static void run_keeps_the_blob(void) {
  loaded l;
  if (!load_plan(conv_bias, &l)) return;
  rt_cpu_step *conv = NULL;
  for (int i = 0; i < l.plan->step_count; i++)
    if (l.plan->steps[i].kind == RT_STEP_DNNL) conv = &l.plan->steps[i];
  CHECK(conv && conv->dnnl->post_count > 0 && conv->dnnl->posts[0].kind == RT_DNNL_BIAS);
  hlo_diag diag;
  hlo_diag_clear(&diag);
  void *crafted = NULL, *after = NULL;
  size_t crafted_len = 0, after_len = 0;
  if (conv) conv->dnnl->bias_md.dims[0] = 9; /* the bias has 8 features */
  CHECK(conv && rt_cpu_serialize(l.module, l.plan, l.source, l.source_len, &crafted, &crafted_len, &diag) == HLO_OK);
  rt_executable *exe = crafted ? rt_backend_cpu.deserialize(crafted, crafted_len, NULL, &diag) : NULL;
  CHECK_MSG(exe != NULL, "%s", diag.message);
  rt_value *args[3] = {NULL, NULL, NULL}, *result = NULL;
  const hlo_comp *entry = l.module->entry;
  for (int i = 0; i < 3; i++) args[i] = rt_random_value(&entry->params[i]->shape, 1, (uint64_t)i, &diag);
  hlo_diag_clear(&diag);
  if (exe && rt_backend_cpu.execute(exe, args, 3, &result, &diag) != HLO_OK) /* refused: it must say why */
    CHECK_MSG(strstr(diag.message, "oneDNN did not take the cached description") != NULL, "%s", diag.message);
  CHECK(exe && rt_backend_cpu.serialize(exe, &after, &after_len, &diag) == HLO_OK);
  CHECK(after && after_len == crafted_len && memcmp(after, crafted, crafted_len) == 0);
  rt_value_release(result);
  for (int i = 0; i < 3; i++) rt_value_release(args[i]);
  rt_backend_cpu.destroy(exe);
  free(crafted);
  free(after);
  rt_cpu_plan_free(l.plan);
  hlo_module_free(l.module);
  free(l.blob);
}

int main(void) {
  RUN(edited_plans_are_refused);
  RUN(run_keeps_the_blob);
  RUN(smaller_arena_is_refused);
  return TEST_REPORT();
}
