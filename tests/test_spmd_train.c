/* A sharded training step of a two-layer MLP in the form XLA's SPMD partitioner gives the
 * MaxText steps of the corpus (../shared/corpus/xla/hlo_llama31_70b_bf16_16x8.hlo), at small
 * sizes: a mesh of D data-parallel groups of F devices, device d = g * F + f. Each weight is
 * stored cut along its first dimension over the F devices of a group and all-gathered before
 * use (replica_groups=[D,F]<=[D*F]); the batch is cut over all D * F devices; W1's gradient is
 * summed over the group, this device's rows taken by dynamic-slice at offsets looked up from
 * partition-id, then summed over the data axis ([F,D]<=[D,F]T(1,0)), as the corpus does; W2's
 * gradient is a reduce-scatter over the group (what XLA's optimizer makes of that pair) and
 * the same data-axis sum; the loss is summed over every device. SGD updates each device's own
 * rows.
 *
 * The step runs under `mpirun -np 2` (D=1, F=2) and `-np 4` (D=2, F=2) with `latch run
 * --spmd`; the same step unpartitioned (no collectives, the whole batch and weights) runs in
 * one process; both are checked against the step worked here in fp64. Inputs are small
 * integers, the batch 8 and the rate 1/8: every value is a dyadic rational well inside f32's
 * 24 bits, so all three agree exactly whatever the order of the sums. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_util.h"
#include "runtime/runtime.h"
#include "test.h"

#define MPIRUN                                                                                   \
  "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 " \
  "timeout 120 mpirun --oversubscribe"

enum { B = 8, IN = 4, H = 8, OUT = 4 };

static double x_of(int row, int col) { return (row + col * 2) % 3 - 1; }
static double t_of(int row, int col) { return (row + col * 5) % 4 - 2; }
static double w1_of(int row, int col) { return (row * 5 + col * 3) % 4 - 1; }
static double w2_of(int row, int col) { return (row * 7 + col) % 3 - 1; }

/* ---- the step in fp64 ---- */

typedef struct step_result {
  double w1[IN * H], w2[H * OUT], loss;
} step_result;

static void step_by_hand(step_result *s) {
  double h[B * H], r[B * H], e[B * OUT], gw1[IN * H] = {0}, gw2[H * OUT] = {0};
  s->loss = 0;
  for (int i = 0; i < B; i++)
    for (int j = 0; j < H; j++) {
      h[i * H + j] = 0;
      for (int k = 0; k < IN; k++) h[i * H + j] += x_of(i, k) * w1_of(k, j);
      r[i * H + j] = h[i * H + j] > 0 ? h[i * H + j] : 0;
    }
  for (int i = 0; i < B; i++)
    for (int j = 0; j < OUT; j++) {
      double o = 0;
      for (int k = 0; k < H; k++) o += r[i * H + k] * w2_of(k, j);
      e[i * OUT + j] = o - t_of(i, j);
      s->loss += e[i * OUT + j] * e[i * OUT + j] / B; /* the mean over the batch of the squared errors' sum */
    }
  for (int i = 0; i < B; i++) {
    double dr[H];
    for (int k = 0; k < H; k++) { /* dloss/do = 2 e / B; back through W2 and the relu */
      dr[k] = 0;
      for (int j = 0; j < OUT; j++) {
        gw2[k * OUT + j] += r[i * H + k] * 2 * e[i * OUT + j] / B;
        dr[k] += 2 * e[i * OUT + j] / B * w2_of(k, j);
      }
      if (h[i * H + k] <= 0) dr[k] = 0;
    }
    for (int m = 0; m < IN; m++)
      for (int k = 0; k < H; k++) gw1[m * H + k] += x_of(i, m) * dr[k];
  }
  for (int m = 0; m < IN; m++)
    for (int k = 0; k < H; k++) s->w1[m * H + k] = w1_of(m, k) - gw1[m * H + k] / 8;
  for (int k = 0; k < H; k++)
    for (int j = 0; j < OUT; j++) s->w2[k * OUT + j] = w2_of(k, j) - gw2[k * OUT + j] / 8;
}

/* ---- the module, sharded over D x F devices or whole (D = F = 1) ---- */

static void append(char *text, size_t size, const char *format, ...) __attribute__((format(printf, 3, 4)));
static void append(char *text, size_t size, const char *format, ...) {
  size_t used = strlen(text);
  va_list ap;
  va_start(ap, format);
  vsnprintf(text + used, size - used, format, ap);
  va_end(ap);
}

/* The gradients' path from the full-size gw1, gw2 of this device's batch to gw1s, gw2s (its
 * rows summed over every device), with the corpus's collectives. */
static void append_gradient_sums(char *text, size_t size, int D, int F) {
  int N = D * F, i1 = IN / F, h1 = H / F;
  char group[64], data[64], table[256] = "", offsets[128] = "";
  snprintf(group, sizeof group, "[%d,%d]<=[%d]", D, F, N);
  snprintf(data, sizeof data, "[%d,%d]<=[%d,%d]T(1,0)", F, D, D, F);
  for (int d = 0; d < N; d++) append(table, sizeof table, "%s%d", d ? ", " : "", d % F);
  for (int f = 0; f < F; f++) append(offsets, sizeof offsets, "%s%d", f ? ", " : "", f * i1);
  append(text, size,
         "  gw1sum = f32[%d,%d] all-reduce(gw1), channel_id=4, replica_groups=%s, use_global_device_ids=true, "
         "to_apply=add\n"
         "  pid = u32[] partition-id()\n"
         "  index_table = u32[%d] constant({%s})\n"
         "  index1 = u32[1] dynamic-slice(index_table, pid), dynamic_slice_sizes={1}\n"
         "  index = u32[] reshape(index1)\n"
         "  offset_table = s32[%d] constant({%s})\n"
         "  offset1 = s32[1] dynamic-slice(offset_table, index), dynamic_slice_sizes={1}\n"
         "  offset = s32[] reshape(offset1)\n"
         "  zero_index = s32[] constant(0)\n"
         "  gw1mine = f32[%d,%d] dynamic-slice(gw1sum, offset, zero_index), dynamic_slice_sizes={%d,%d}\n"
         "  gw1s = f32[%d,%d] all-reduce(gw1mine), channel_id=5, replica_groups=%s, use_global_device_ids=true, "
         "to_apply=add\n"
         "  gw2mine = f32[%d,%d] reduce-scatter(gw2), channel_id=6, replica_groups=%s, dimensions={0}, "
         "use_global_device_ids=true, to_apply=add\n"
         "  gw2s = f32[%d,%d] all-reduce(gw2mine), channel_id=7, replica_groups=%s, use_global_device_ids=true, "
         "to_apply=add\n",
         IN, H, group, N, table, F, offsets, i1, H, i1, H, i1, H, data, h1, OUT, group, h1, OUT, data);
}

static void write_step(const char *path, int D, int F) {
  int N = D * F, b = B / N, i1 = IN / F, h1 = H / F;
  bool sharded = N > 1;
  char text[8192] = "";
  append(text, sizeof text, "HloModule train_step%s\n", sharded ? "" : "_whole");
  if (sharded) {
    text[strlen(text) - 1] = 0;
    append(text, sizeof text, ", num_partitions=%d, use_spmd_partitioning=true\n", N);
  }
  append(text, sizeof text,
         "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
         "ENTRY main {\n"
         "  x = f32[%d,%d] parameter(0)\n  t = f32[%d,%d] parameter(1)\n"
         "  w1s = f32[%d,%d] parameter(2)\n  w2s = f32[%d,%d] parameter(3)\n",
         b, IN, b, OUT, i1, H, h1, OUT);
  if (sharded)
    append(text, sizeof text,
           "  w1 = f32[%d,%d] all-gather(w1s), channel_id=1, replica_groups=[%d,%d]<=[%d], dimensions={0}, "
           "use_global_device_ids=true\n"
           "  w2 = f32[%d,%d] all-gather(w2s), channel_id=2, replica_groups=[%d,%d]<=[%d], dimensions={0}, "
           "use_global_device_ids=true\n",
           IN, H, D, F, N, H, OUT, D, F, N);
  else
    append(text, sizeof text, "  w1 = f32[%d,%d] copy(w1s)\n  w2 = f32[%d,%d] copy(w2s)\n", IN, H, H, OUT);
  append(text, sizeof text,
         "  h = f32[%d,%d] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
         "  zero = f32[] constant(0)\n  zeros = f32[%d,%d] broadcast(zero), dimensions={}\n"
         "  r = f32[%d,%d] maximum(h, zeros)\n"
         "  o = f32[%d,%d] dot(r, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
         "  err = f32[%d,%d] subtract(o, t)\n  sq = f32[%d,%d] multiply(err, err)\n"
         "  part = f32[] reduce(sq, zero), dimensions={0,1}, to_apply=add\n"
         "  inverse_batch = f32[] constant(%g)\n  mine = f32[] multiply(part, inverse_batch)\n",
         b, H, b, H, b, H, b, OUT, b, OUT, b, OUT, 1.0 / B);
  if (sharded)
    append(text, sizeof text,
           "  loss = f32[] all-reduce(mine), channel_id=3, replica_groups=[1,%d]<=[%d], use_global_device_ids=true, "
           "to_apply=add\n",
           N, N);
  else
    append(text, sizeof text, "  loss = f32[] copy(mine)\n");
  append(text, sizeof text,
         "  two_over_batch = f32[] constant(%g)\n  scale = f32[%d,%d] broadcast(two_over_batch), dimensions={}\n"
         "  dout = f32[%d,%d] multiply(err, scale)\n"
         "  gw2 = f32[%d,%d] dot(r, dout), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
         "  dr = f32[%d,%d] dot(dout, w2), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
         "  positive = pred[%d,%d] compare(h, zeros), direction=GT\n"
         "  dh = f32[%d,%d] select(positive, dr, zeros)\n"
         "  gw1 = f32[%d,%d] dot(x, dh), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n",
         2.0 / B, b, OUT, b, OUT, H, OUT, b, H, b, H, b, H, IN, H);
  if (sharded) append_gradient_sums(text, sizeof text, D, F);
  else append(text, sizeof text, "  gw1s = f32[%d,%d] copy(gw1)\n  gw2s = f32[%d,%d] copy(gw2)\n", IN, H, H, OUT);
  append(text, sizeof text,
         "  rate = f32[] constant(0.125)\n"
         "  rate1 = f32[%d,%d] broadcast(rate), dimensions={}\n  rate2 = f32[%d,%d] broadcast(rate), dimensions={}\n"
         "  step1 = f32[%d,%d] multiply(gw1s, rate1)\n  step2 = f32[%d,%d] multiply(gw2s, rate2)\n"
         "  nw1 = f32[%d,%d] subtract(w1s, step1)\n  nw2 = f32[%d,%d] subtract(w2s, step2)\n"
         "  ROOT out = (f32[%d,%d], f32[%d,%d], f32[]) tuple(nw1, nw2, loss)\n}\n",
         i1, H, h1, OUT, i1, H, h1, OUT, i1, H, h1, OUT, i1, H, h1, OUT);
  cli_write_text(path, text);
}

/* ---- inputs and outputs ---- */

static void write_block(const char *dir, int index, int rows, int cols, int row0, double (*value)(int, int)) {
  rt_value *v = rt_value_new_array(HLO_F32, 2, (int64_t[]){rows, cols});
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) rt_set_f64(v, i * cols + j, value(row0 + i, j));
  char path[600];
  snprintf(path, sizeof path, "%s/%d.npy", dir, index);
  hlo_diag diag = {0};
  CHECK_MSG(rt_npy_write(path, v, &diag) == HLO_OK, "%s", diag.message);
  rt_value_release(v);
}

/* Device d's inputs in dir: its rows of the batch and its group index's rows of W1 and W2. */
static void write_inputs(const char *dir, int d, int N, int F) {
  mkdir(dir, 0777);
  int b = B / N, f = d % F;
  write_block(dir, 0, b, IN, d * b, x_of);
  write_block(dir, 1, b, OUT, d * b, t_of);
  write_block(dir, 2, IN / F, H, f * (IN / F), w1_of);
  write_block(dir, 3, H / F, OUT, f * (H / F), w2_of);
}

/* Output index of the run in dir/sub equals want (count values), exactly. */
static void check_output(const char *dir, const char *sub, int index, const double *want, int64_t count) {
  char path[700];
  snprintf(path, sizeof path, "%s/%s/%d.npy", dir, sub, index);
  hlo_diag diag = {0};
  rt_value *got = rt_npy_read(path, &diag);
  CHECK_MSG(got != NULL, "%s: %s", path, diag.message);
  if (!got) return;
  CHECK_MSG(got->count == count, "%s: %lld values, want %lld", path, (long long)got->count, (long long)count);
  for (int64_t i = 0; i < count && i < got->count; i++)
    CHECK_MSG(rt_get_f64(got, i) == want[i], "%s [%lld]: %.9g, want %.9g", path, (long long)i, rt_get_f64(got, i),
              want[i]);
  rt_value_release(got);
}

/* ---- the runs ---- */

static void test_whole_step_in_one_process(void) {
  step_result want;
  step_by_hand(&want);
  cli_sh("rm -rf '%s' '%s'", cli_path("whole_in"), cli_path("whole_out"));
  write_inputs(cli_path("whole_in"), 0, 1, 1);
  write_step(cli_path("whole.hlo"), 1, 1);
  CLI_CHECK(0, "", "run '%s' --inputs '%s' --output '%s' --backend cpu", cli_path("whole.hlo"),
            cli_path("whole_in"), cli_path("whole_out"));
  check_output(cli_path("whole_out"), ".", 0, want.w1, IN * H);
  check_output(cli_path("whole_out"), ".", 1, want.w2, H * OUT);
  check_output(cli_path("whole_out"), ".", 2, &want.loss, 1);
}

static void run_sharded(int D, int F, const char *btl, const char *backend) {
  int N = D * F, i1 = IN / F, h1 = H / F;
  step_result want;
  step_by_hand(&want);
  cli_sh("rm -rf '%s' '%s'", cli_path("in"), cli_path("out"));
  mkdir(cli_path("in"), 0777);
  for (int d = 0; d < N; d++) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%d", cli_path("in"), d);
    write_inputs(dir, d, N, F);
  }
  write_step(cli_path("step.hlo"), D, F);
  char launcher[256];
  snprintf(launcher, sizeof launcher, MPIRUN " -np %d --mca btl self,%s", N, btl);
  CLI_CHECK(0, launcher, "run --spmd '%s' --inputs '%s' --output '%s' --backend %s", cli_path("step.hlo"),
            cli_path("in"), cli_path("out"), backend);
  for (int d = 0; d < N; d++) { /* each device: its rows of the whole step's new weights */
    char sub[16];
    snprintf(sub, sizeof sub, "%d", d);
    int f = d % F;
    check_output(cli_path("out"), sub, 0, want.w1 + f * i1 * H, i1 * H);
    check_output(cli_path("out"), sub, 1, want.w2 + f * h1 * OUT, h1 * OUT);
    check_output(cli_path("out"), sub, 2, &want.loss, 1);
  }
}

static void test_two_ranks_one_group(void) { run_sharded(1, 2, "vader", "cpu"); }
static void test_four_ranks_two_groups_cpu(void) { run_sharded(2, 2, "tcp", "cpu"); }
static void test_four_ranks_two_groups_reference(void) { run_sharded(2, 2, "vader", "reference"); }

int main(void) {
  if (!cli_setup()) {
    fprintf(stderr, "test_spmd_train: cannot make a temporary directory\n");
    return 1;
  }
  RUN(test_whole_step_in_one_process);
  RUN(test_two_ranks_one_group);
  RUN(test_four_ranks_two_groups_cpu);
  RUN(test_four_ranks_two_groups_reference);
  cli_cleanup();
  return TEST_REPORT();
}
