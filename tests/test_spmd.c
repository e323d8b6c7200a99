/* SPMD modules across processes: `latch run --spmd` under `mpirun -np 2` and `-np 4`, over
 * shared memory (btl vader) and TCP over loopback (btl tcp), on the reference and cpu
 * backends. Each rank's inputs are written here, seeded by the rank; the expected outputs are
 * computed here from all ranks' inputs in fp64 (sums, maxima, gathers, exchanges worked
 * element by element over the group each rank belongs to, by hand from XLA's group rules),
 * never by latch. Failures: ranks at collectives of different shapes, a rank that hangs and a
 * rank that dies each end every surviving rank with an error naming the op and the rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_util.h"
#include "runtime/runtime.h"
#include "test.h"

/* Open MPI keeps allocations past MPI_Finalize: under ASan the ranks check no leaks. */
#define MPIRUN                                                                                   \
  "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 " \
  "timeout 120 mpirun --oversubscribe"

/* ---- inputs and expected values ---- */

/* x: f32[8], k: s32[4], z: f32[2,4] of rank r: small integers and halves, exact in f32, so
 * every sum below is exact whatever the order. */
static double x_of(int r, int i) { return ((r * 37 + i * 11) % 17) - 8 + 0.5 * r; }
static double k_of(int r, int i) { return (r + i) % 3 + 1; }
static double z_of(int r, int row, int col) { return 10 * r + 4 * row + col - 5; }

static void write_array(const char *dir, int index, hlo_dtype dtype, int rank, const int64_t *dims,
                        double (*value)(int r, int i), int r) {
  rt_value *v = rt_value_new_array(dtype, rank, dims);
  for (int64_t i = 0; i < v->count; i++) rt_set_f64(v, i, value(r, (int)i));
  char path[600];
  snprintf(path, sizeof path, "%s/%d.npy", dir, index);
  hlo_diag diag = {0};
  CHECK_MSG(rt_npy_write(path, v, &diag) == HLO_OK, "%s", diag.message);
  rt_value_release(v);
}

static double z_flat(int r, int i) { return z_of(r, i / 4, i % 4); }

static void write_inputs(int ranks, bool with_k_z) {
  mkdir(cli_path("in"), 0777);
  for (int r = 0; r < ranks; r++) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%d", cli_path("in"), r);
    mkdir(dir, 0777);
    write_array(dir, 0, HLO_F32, 1, (int64_t[]){with_k_z ? 8 : 4}, x_of, r);
    if (!with_k_z) continue;
    write_array(dir, 1, HLO_S32, 1, (int64_t[]){4}, k_of, r);
    write_array(dir, 2, HLO_F32, 2, (int64_t[]){2, 4}, z_flat, r);
  }
}

/* Output index of rank r, read from the run's output directory. */
static rt_value *output(int r, int index) {
  char path[600];
  snprintf(path, sizeof path, "%s/%d/%d.npy", cli_path("out"), r, index);
  hlo_diag diag = {0};
  rt_value *v = rt_npy_read(path, &diag);
  CHECK_MSG(v != NULL, "%s: %s", path, diag.message);
  return v;
}

static void check_values(int r, int index, const double *want, int64_t count) {
  rt_value *got = output(r, index);
  if (!got) return;
  CHECK_MSG(got->count == count, "rank %d output %d: %lld elements, want %lld", r, index, (long long)got->count,
            (long long)count);
  for (int64_t i = 0; i < count && i < got->count; i++)
    CHECK_MSG(rt_get_f64(got, i) == want[i], "rank %d output %d [%lld]: %g, want %g", r, index, (long long)i,
              rt_get_f64(got, i), want[i]);
  rt_value_release(got);
}

/* ---- every collective, cross-replica, on N ranks ---- */

static const char *reducers =
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
    "minf {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] minimum(a, b)\n}\n"
    "mul {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT s = s32[] multiply(b, a)\n}\n"
    /* maximum written as a select: not an op MPI has, so it goes through gather and fold */
    "maxsel {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
    "  gt = pred[] compare(a, b), direction=GT\n  ROOT m = f32[] select(gt, a, b)\n}\n";

static void write_all_module(int n) {
  char pairs[128] = "", chain[128] = "", reversed[64] = "";
  int at = 0;
  for (int r = 0; r + 1 < n; r++) at += snprintf(chain + at, sizeof chain - at, "%s{%d,%d}", r ? "," : "", r, r + 1);
  at = 0;
  for (int r = n - 1; r >= 0; r--) at += snprintf(reversed + at, sizeof reversed - at, "%s%d", r < n - 1 ? "," : "", r);
  snprintf(pairs, sizeof pairs, n == 4 ? "{{0,1},{2,3}}" : "{{0,1}}");
  char text[8192];
  snprintf(text, sizeof text,
           "HloModule spmd_all, replica_count=%d\n%s"
           "ENTRY main {\n"
           "  x = f32[8] parameter(0)\n"
           "  k = s32[4] parameter(1)\n"
           "  z = f32[2,4] parameter(2)\n"
           /* the async pairs start first and finish last: every other collective runs while
            * their data is in flight */
           "  ars = f32[8] all-reduce-start(x), replica_groups={}, to_apply=add\n"
           "  ags = (f32[8], f32[%d]) all-gather-start(x), dimensions={0}, replica_groups={}\n"
           "  cps = (f32[8], f32[8], u32[], u32[]) collective-permute-start(x), source_target_pairs={{%d,0}}\n"
           "  ar = f32[8] all-reduce(x), replica_groups={}, to_apply=add\n"
           "  armax = f32[8] all-reduce(x), replica_groups=%s, to_apply=maxsel\n"
           "  arprod = s32[4] all-reduce(k), replica_groups={}, to_apply=mul\n"
           "  armin = f32[8] all-reduce(x), replica_groups=[1,%d]<=[%d], to_apply=minf\n"
           "  ag = f32[%d] all-gather(x), dimensions={0}, replica_groups={}\n"
           "  agi = f32[16] all-gather(x), dimensions={0}, replica_groups=[%d,2]<=[2,%d]T(1,0)\n"
           "  agz = f32[2,%d] all-gather(z), dimensions={1}, replica_groups={}\n"
           "  rsz = f32[2,%d] reduce-scatter(z), dimensions={1}, replica_groups={}, to_apply=add\n"
           "  a2az = f32[2,4] all-to-all(z), dimensions={1}, replica_groups={}\n"
           "  cp = f32[8] collective-permute(x), source_target_pairs={%s}\n"
           "  cb = f32[8] collective-broadcast(x), replica_groups={{%s}}\n"
           "  ard = f32[8] all-reduce-done(ars)\n"
           "  agd = f32[%d] all-gather-done(ags)\n"
           "  cpd = f32[8] collective-permute-done(cps)\n"
           "  id = u32[] replica-id()\n"
           "  ROOT t = (f32[8], f32[8], s32[4], f32[8], f32[%d], f32[16], f32[2,%d], f32[2,%d], f32[2,4], f32[8],"
           " f32[8], f32[8], f32[%d], f32[8], u32[]) tuple(ar, armax, arprod, armin, ag, agi, agz, rsz, a2az, cp, cb,"
           " ard, agd, cpd, id)\n"
           "}\n",
           n, reducers, 8 * n, n - 1, pairs, n, n, 8 * n, n / 2, n / 2, 4 * n, 4 / n, chain, reversed, 8 * n, 8 * n,
           4 * n, 4 / n, 8 * n);
  cli_write_text(cli_path("all.hlo"), text);
}

/* The expected outputs of rank r among n, from every rank's inputs. */
static void check_all_outputs(int n, int r) {
  double want[64];
  for (int i = 0; i < 8; i++) { /* ar, and its async pair (output 11) */
    want[i] = 0;
    for (int j = 0; j < n; j++) want[i] += x_of(j, i);
  }
  check_values(r, 0, want, 8);
  check_values(r, 11, want, 8);
  int pair = r / 2 * 2; /* armax over {0,1} or {2,3} */
  for (int i = 0; i < 8; i++) want[i] = fmax(x_of(pair, i), x_of(pair + 1, i));
  check_values(r, 1, want, 8);
  for (int i = 0; i < 4; i++) {
    want[i] = 1;
    for (int j = 0; j < n; j++) want[i] *= k_of(j, i);
  }
  check_values(r, 2, want, 4);
  for (int i = 0; i < 8; i++) {
    want[i] = x_of(0, i);
    for (int j = 1; j < n; j++) want[i] = fmin(want[i], x_of(j, i));
  }
  check_values(r, 3, want, 8);
  for (int j = 0; j < n; j++) /* ag and its async pair (12): rank j's x at 8j */
    for (int i = 0; i < 8; i++) want[8 * j + i] = x_of(j, i);
  check_values(r, 4, want, 8 * n);
  check_values(r, 12, want, 8 * n);
  /* [n/2,2]<=[2,n/2]T(1,0): iota over [2,n/2] transposed is 0, n/2, 1, n/2+1, ...: for n=4
   * the groups are {0,2} and {1,3}; for n=2, {0,1} */
  int first = n == 4 ? r % 2 : 0, second = n == 4 ? r % 2 + 2 : 1;
  for (int i = 0; i < 8; i++) want[i] = x_of(first, i), want[8 + i] = x_of(second, i);
  check_values(r, 5, want, 16);
  for (int row = 0; row < 2; row++) /* agz: along dim 1, rank j's four columns at 4j */
    for (int j = 0; j < n; j++)
      for (int c = 0; c < 4; c++) want[row * 4 * n + 4 * j + c] = z_of(j, row, c);
  check_values(r, 6, want, 8 * n);
  int c4 = 4 / n; /* rsz: the sum's columns [r*c4, (r+1)*c4) */
  for (int row = 0; row < 2; row++)
    for (int c = 0; c < c4; c++) {
      want[row * c4 + c] = 0;
      for (int j = 0; j < n; j++) want[row * c4 + c] += z_of(j, row, r * c4 + c);
    }
  check_values(r, 7, want, 2 * c4);
  for (int row = 0; row < 2; row++) /* a2az: block j of the result is rank j's block r */
    for (int j = 0; j < n; j++)
      for (int c = 0; c < c4; c++) want[row * 4 + j * c4 + c] = z_of(j, row, r * c4 + c);
  check_values(r, 8, want, 8);
  for (int i = 0; i < 8; i++) want[i] = r == 0 ? 0 : x_of(r - 1, i); /* cp: a chain, 0 is no target */
  check_values(r, 9, want, 8);
  for (int i = 0; i < 8; i++) want[i] = x_of(n - 1, i); /* cb: the group's first member, n-1 */
  check_values(r, 10, want, 8);
  for (int i = 0; i < 8; i++) want[i] = r == 0 ? x_of(n - 1, i) : 0; /* cps: {n-1,0} */
  check_values(r, 13, want, 8);
  want[0] = r;
  check_values(r, 14, want, 1);
}

static void run_all(int n, const char *btl, const char *backend) {
  cli_sh("rm -rf '%s'", cli_path("out"));
  write_all_module(n);
  write_inputs(n, true);
  char launcher[256];
  snprintf(launcher, sizeof launcher, MPIRUN " -np %d --mca btl self,%s", n, btl);
  CLI_CHECK(0, launcher, "run --spmd '%s' --inputs '%s' --output '%s' --backend %s", cli_path("all.hlo"),
            cli_path("in"), cli_path("out"), backend);
  for (int r = 0; r < n; r++) check_all_outputs(n, r);
  /* a compiling backend compiles once for the job: every rank says so */
  if (strcmp(backend, "cpu") == 0) {
    char line[96];
    snprintf(line, sizeof line, "compiles: 1 for the job of %d ranks (rank 0's", n);
    int lines = 0;
    for (const char *p = cli_out; (p = strstr(p, line)); p++) lines++;
    CHECK_EQ_INT(lines, n);
  }
}

static void test_two_ranks_shared_memory_reference(void) { run_all(2, "vader", "reference"); }
static void test_two_ranks_tcp_cpu(void) { run_all(2, "tcp", "cpu"); }
static void test_four_ranks_shared_memory_cpu(void) { run_all(4, "vader", "cpu"); }
static void test_four_ranks_tcp_reference(void) { run_all(4, "tcp", "reference"); }

/* ---- group modes: 2 replicas x 2 partitions, device = replica * 2 + partition ---- */

static const char *modes_text =
    "HloModule spmd_modes, replica_count=2, num_partitions=2\n"
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
    "ENTRY main {\n"
    "  x = f32[4] parameter(0)\n"
    "  flat = f32[4] all-reduce(x), channel_id=1, replica_groups={{0,3},{1,2}}, use_global_device_ids=true, to_apply=add\n"
    "  both = f32[4] all-reduce(x), channel_id=2, replica_groups={{0},{1}}, to_apply=add\n"
    "  cross = f32[4] all-reduce(x), replica_groups={}, to_apply=add\n"
    "  cpp = f32[4] collective-permute(x), channel_id=3, source_target_pairs={{0,1}}\n"
    "  a2a = f32[4] all-to-all(x), channel_id=4, dimensions={0}, replica_groups={}\n"
    "  ag = f32[8] all-gather(x), dimensions={0}, replica_groups={{1,0}}\n"
    "  rid = u32[] replica-id()\n"
    "  pid = u32[] partition-id()\n"
    "  ROOT t = (f32[4], f32[4], f32[4], f32[4], f32[4], f32[8], u32[], u32[]) tuple(flat, both, cross, cpp, a2a, ag, rid, pid)\n"
    "}\n";

static void sum_of(const int *devices, int count, double *want) {
  for (int i = 0; i < 4; i++) {
    want[i] = 0;
    for (int j = 0; j < count; j++) want[i] += x_of(devices[j], i);
  }
}

static void check_mode_outputs(int d) {
  int replica = d / 2, partition = d % 2;
  double want[8];
  /* flattened ids: the groups are devices {0,3} and {1,2} */
  sum_of(d == 0 || d == 3 ? (int[]){0, 3} : (int[]){1, 2}, 2, want);
  check_values(d, 0, want, 4);
  /* replica ids with a channel: each group takes every partition of its replicas */
  sum_of(replica == 0 ? (int[]){0, 1} : (int[]){2, 3}, 2, want);
  check_values(d, 1, want, 4);
  /* cross-replica: the devices of this partition */
  sum_of(partition == 0 ? (int[]){0, 2} : (int[]){1, 3}, 2, want);
  check_values(d, 2, want, 4);
  /* partition ids: partition 0 sends to partition 1 of the same replica */
  for (int i = 0; i < 4; i++) want[i] = partition == 1 ? x_of(d - 1, i) : 0;
  check_values(d, 3, want, 4);
  /* all-to-all across the partitions of this replica: block j from partition j */
  for (int j = 0; j < 2; j++)
    for (int c = 0; c < 2; c++) want[2 * j + c] = x_of(replica * 2 + j, 2 * partition + c);
  check_values(d, 4, want, 4);
  /* all-gather over replicas {1,0}: replica 1's x first */
  for (int i = 0; i < 4; i++) want[i] = x_of(2 + partition, i), want[4 + i] = x_of(partition, i);
  check_values(d, 5, want, 8);
  want[0] = replica;
  check_values(d, 6, want, 1);
  want[0] = partition;
  check_values(d, 7, want, 1);
}

static void run_modes(const char *btl, const char *backend) {
  cli_sh("rm -rf '%s'", cli_path("out"));
  cli_write_text(cli_path("modes.hlo"), modes_text);
  write_inputs(4, false);
  char launcher[256];
  snprintf(launcher, sizeof launcher, MPIRUN " -np 4 --mca btl self,%s", btl);
  CLI_CHECK(0, launcher, "run --spmd '%s' --inputs '%s' --output '%s' --backend %s", cli_path("modes.hlo"),
            cli_path("in"), cli_path("out"), backend);
  for (int d = 0; d < 4; d++) check_mode_outputs(d);
}

static void test_group_modes_reference(void) { run_modes("vader", "reference"); }
static void test_group_modes_cpu(void) { run_modes("tcp", "cpu"); }

/* ---- a tensor-parallel MLP against the unpartitioned one ---- */

/* y = relu(x W1) W2 with W1's columns and W2's rows split across n partitions: each rank
 * computes its slice of the hidden layer and its partial product, and an all-reduce sums
 * them. The same function unpartitioned runs in one process; integer-valued inputs keep
 * every sum exact, so the two must agree to the bit. */
static double w1_of(int row, int col) { return (row * 3 + col * 5) % 7 - 3; }
static double w2_of(int row, int col) { return (row * 2 + col) % 5 - 2; }
static double xm_of(int row, int col) { return (row + col * 3) % 4 - 1; }

static void write_values(const char *dir, int index, int rows, int cols, const double *values) {
  rt_value *v = rt_value_new_array(HLO_F32, 2, (int64_t[]){rows, cols});
  for (int64_t i = 0; i < v->count; i++) rt_set_f64(v, i, values[i]);
  char path[600];
  snprintf(path, sizeof path, "%s/%d.npy", dir, index);
  hlo_diag diag = {0};
  CHECK_MSG(rt_npy_write(path, v, &diag) == HLO_OK, "%s", diag.message);
  rt_value_release(v);
}

static void write_mlp(const char *path, int n, const char *partitions, bool sharded) {
  int h = 16 / n;
  char text[2048], root[256];
  snprintf(root, sizeof root, "  ROOT out = f32[4,4] copy(y)\n");
  if (sharded)
    snprintf(root, sizeof root,
             "  ROOT sum = f32[4,4] all-reduce(y), channel_id=1, replica_groups=%s, use_global_device_ids=true, "
             "to_apply=add\n",
             n == 4 ? "{{0,1,2,3}}" : "{{0,1}}");
  snprintf(text, sizeof text,
           "HloModule mlp%s\n"
           "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
           "ENTRY main {\n"
           "  x = f32[4,8] parameter(0)\n  w1 = f32[8,%d] parameter(1)\n  w2 = f32[%d,4] parameter(2)\n"
           "  h = f32[4,%d] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  zero = f32[] constant(0)\n  zeros = f32[4,%d] broadcast(zero), dimensions={}\n"
           "  relu = f32[4,%d] maximum(h, zeros)\n"
           "  y = f32[4,4] dot(relu, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "%s"
           "}\n",
           partitions, h, h, h, h, h, root);
  cli_write_text(path, text);
}

static void test_sharded_mlp(int n, const char *btl) {
  double x[32], w1[128], w2[64], shard1[128], shard2[64];
  for (int i = 0; i < 32; i++) x[i] = xm_of(i / 8, i % 8);
  for (int i = 0; i < 128; i++) w1[i] = w1_of(i / 16, i % 16);
  for (int i = 0; i < 64; i++) w2[i] = w2_of(i / 4, i % 4);
  cli_sh("rm -rf '%s' '%s' '%s'", cli_path("mlp_in"), cli_path("out"), cli_path("full_out"));
  mkdir(cli_path("mlp_in"), 0777);
  char dir[600];
  snprintf(dir, sizeof dir, "%s/full", cli_path("mlp_in"));
  mkdir(dir, 0777);
  write_values(dir, 0, 4, 8, x);
  write_values(dir, 1, 8, 16, w1);
  write_values(dir, 2, 16, 4, w2);
  int h = 16 / n;
  for (int r = 0; r < n; r++) { /* W1's columns and W2's rows [r*h, (r+1)*h) */
    snprintf(dir, sizeof dir, "%s/%d", cli_path("mlp_in"), r);
    mkdir(dir, 0777);
    for (int row = 0; row < 8; row++)
      for (int c = 0; c < h; c++) shard1[row * h + c] = w1[row * 16 + r * h + c];
    for (int row = 0; row < h; row++)
      for (int c = 0; c < 4; c++) shard2[row * 4 + c] = w2[(r * h + row) * 4 + c];
    write_values(dir, 0, 4, 8, x);
    write_values(dir, 1, 8, h, shard1);
    write_values(dir, 2, h, 4, shard2);
  }
  char partitions[64];
  snprintf(partitions, sizeof partitions, ", num_partitions=%d, use_spmd_partitioning=true", n);
  write_mlp(cli_path("mlp_sharded.hlo"), n, partitions, true);
  write_mlp(cli_path("mlp_full.hlo"), 1, "", false); /* one device: h is all 16 */
  snprintf(dir, sizeof dir, "%s/full", cli_path("mlp_in"));
  CLI_CHECK(0, "", "run '%s' --inputs '%s' --output '%s' --backend cpu", cli_path("mlp_full.hlo"), dir,
            cli_path("full_out"));
  char launcher[256];
  snprintf(launcher, sizeof launcher, MPIRUN " -np %d --mca btl self,%s", n, btl);
  CLI_CHECK(0, launcher, "run --spmd '%s' --inputs '%s' --output '%s' --backend cpu", cli_path("mlp_sharded.hlo"),
            cli_path("mlp_in"), cli_path("out"));
  char path[600];
  snprintf(path, sizeof path, "%s/0.npy", cli_path("full_out"));
  hlo_diag diag = {0};
  rt_value *full = rt_npy_read(path, &diag);
  CHECK_MSG(full != NULL, "%s", diag.message);
  double want[16]; /* and by hand in fp64, so the single process is checked too */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      want[i * 4 + j] = 0;
      for (int k = 0; k < 16; k++) {
        double hidden = 0;
        for (int m = 0; m < 8; m++) hidden += x[i * 8 + m] * w1[m * 16 + k];
        want[i * 4 + j] += fmax(hidden, 0) * w2[k * 4 + j];
      }
    }
  for (int i = 0; full && i < 16; i++) CHECK_MSG(rt_get_f64(full, i) == want[i], "single process [%d]", i);
  for (int r = 0; r < n; r++) check_values(r, 0, want, 16);
  rt_value_release(full);
}

static void test_sharded_mlp_two(void) { test_sharded_mlp(2, "vader"); }
static void test_sharded_mlp_four(void) { test_sharded_mlp(4, "tcp"); }

/* ---- large all-reduces: the ring of point-to-point transfers ---- */

/* All-reduces of a megabyte and more go round a ring (runtime/comm.c): over every rank, and
 * over pairs of ranks, summed and minimized, of a length no member count divides. Rank r's
 * x[i] is a small integer, so every sum is exact: each rank's result is checked element by
 * element against the sums and minima worked here. */
enum { BIG = 300007 };

static double big_of(int r, int i) { return (i * 7 + r * 13) % 29 - 14; }

static void test_large_all_reduce(int n, const char *btl) {
  cli_sh("rm -rf '%s' '%s'", cli_path("big_in"), cli_path("out"));
  mkdir(cli_path("big_in"), 0777);
  for (int r = 0; r < n; r++) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%d", cli_path("big_in"), r);
    mkdir(dir, 0777);
    write_array(dir, 0, HLO_F32, 1, (int64_t[]){BIG}, big_of, r);
  }
  char text[2048];
  snprintf(text, sizeof text,
           "HloModule big, replica_count=%d\n%s"
           "ENTRY main {\n  x = f32[%d] parameter(0)\n"
           "  all = f32[%d] all-reduce(x), replica_groups={}, to_apply=add\n"
           "  pairs = f32[%d] all-reduce(x), replica_groups=%s, to_apply=minf\n"
           "  ROOT out = (f32[%d], f32[%d]) tuple(all, pairs)\n}\n",
           n, reducers, BIG, BIG, BIG, n == 4 ? "{{0,2},{1,3}}" : "{{0,1}}", BIG, BIG);
  cli_write_text(cli_path("big.hlo"), text);
  char launcher[256];
  snprintf(launcher, sizeof launcher, MPIRUN " -np %d --mca btl self,%s", n, btl);
  CLI_CHECK(0, launcher, "run --spmd '%s' --inputs '%s' --output '%s' --backend cpu", cli_path("big.hlo"),
            cli_path("big_in"), cli_path("out"));
  double *sum = malloc(sizeof(double) * BIG), *min = malloc(sizeof(double) * BIG);
  for (int r = 0; r < n && sum && min; r++) {
    int partner = n == 4 ? (r + 2) % 4 : 1 - r;
    for (int i = 0; i < BIG; i++) {
      sum[i] = 0;
      for (int q = 0; q < n; q++) sum[i] += big_of(q, i);
      min[i] = fmin(big_of(r, i), big_of(partner, i));
    }
    check_values(r, 0, sum, BIG);
    check_values(r, 1, min, BIG);
  }
  free(sum), free(min);
}

static void test_large_two_shared_memory(void) { test_large_all_reduce(2, "vader"); }
static void test_large_four_tcp(void) { test_large_all_reduce(4, "tcp"); }

/* ---- failures ---- */

/* A wrapper that gives rank 1 its own environment (RANK1_ENV) or file (RANK1_FILE) and
 * leaves rank 0's exit status in the file status0 (mpirun's own status does not say it). */
static void write_rank_wrapper(void) {
  char text[2048];
  snprintf(text, sizeof text,
           "#!/bin/sh\n"
           "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then\n"
           "  [ -n \"$RANK1_ENV\" ] && export $RANK1_ENV\n"
           "  [ -n \"$RANK1_FILE\" ] && { bin=$1; shift; shift; shift; exec \"$bin\" run --spmd \"$RANK1_FILE\"; }\n"
           "  exec \"$@\"\n"
           "fi\n"
           "\"$@\"\n"
           "echo $? > '%s'\n",
           cli_path("status0"));
  cli_write_text(cli_path("rank1.sh"), text);
  cli_sh("chmod +x '%s'; rm -f '%s'", cli_path("rank1.sh"), cli_path("status0"));
}

static int rank0_status(void) {
  char text[32];
  cli_read_text(cli_path("status0"), text, sizeof text);
  return *text ? atoi(text) : -1;
}

static const char *two_ranks =
    "HloModule m, replica_count=2\n"
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
    "ENTRY main {\n  x = f32[%d] parameter(0)\n"
    "  ROOT r = f32[%d] all-reduce(x), replica_groups={}, to_apply=add\n}\n";

static void test_mismatched_shapes(void) {
  char text[1024];
  snprintf(text, sizeof text, two_ranks, 4, 4);
  cli_write_text(cli_path("four.hlo"), text);
  snprintf(text, sizeof text, two_ranks, 8, 8);
  cli_write_text(cli_path("eight.hlo"), text);
  write_rank_wrapper();
  char launcher[1024];
  snprintf(launcher, sizeof launcher, "RANK1_FILE='%s' " MPIRUN " -np 2 --mca btl self,vader '%s'",
           cli_path("eight.hlo"), cli_path("rank1.sh"));
  int status = cli_run(launcher, "run --spmd '%s'", cli_path("four.hlo"));
  CHECK_MSG(status != 0, "a mismatch ran: %s", cli_out);
  CHECK_EQ_INT(rank0_status(), 1);
  CLI_HAS(cli_err, "all-reduce %r: the ranks' collectives do not match: rank 0 has [all-reduce %r f32[4]");
  CLI_HAS(cli_err, "all-reduce %r: the ranks' collectives do not match: rank 1 has [all-reduce %r f32[8]");
}

/* Rank 1 stops before its first collective (it hangs, or dies); rank 0 waits the timeout and
 * fails naming rank 1 and the op. */
static void rank_one_fails(const char *env, const char *recovery) {
  char text[1024];
  snprintf(text, sizeof text, two_ranks, 4, 4);
  cli_write_text(cli_path("four.hlo"), text);
  write_rank_wrapper();
  char launcher[1024];
  snprintf(launcher, sizeof launcher, "RANK1_ENV='%s' LATCH_COLLECTIVE_TIMEOUT=2 " MPIRUN " %s -np 2 --mca btl self,tcp '%s'",
           env, recovery, cli_path("rank1.sh"));
  int status = cli_run(launcher, "run --spmd '%s'", cli_path("four.hlo"));
  CHECK_MSG(status != 124, "mpirun timed out: %s", cli_err);
  CHECK_EQ_INT(rank0_status(), 3);
  CLI_HAS(cli_err, "all-reduce %r: rank 1 did not reach it within 2 s (LATCH_COLLECTIVE_TIMEOUT); this is rank 0 of 2");
}

static void test_rank_hangs(void) { rank_one_fails("LATCH_FAULT=hang:all-reduce", ""); }
/* mpirun ends the whole job when a rank dies unless told to let the others go on. */
static void test_rank_dies(void) { rank_one_fails("LATCH_FAULT=crash:all-reduce", "--enable-recovery"); }

/* Without a world, a module of several devices is refused with a message saying how to run it. */
static void test_refused_without_world(void) {
  char text[1024];
  snprintf(text, sizeof text, two_ranks, 4, 4);
  cli_write_text(cli_path("four.hlo"), text);
  CLI_CHECK(2, "", "run '%s'", cli_path("four.hlo"));
  CLI_HAS(cli_err, "latch run --spmd");
  /* one rank for a module of two devices */
  CLI_CHECK(1, MPIRUN " -np 1", "run --spmd '%s'", cli_path("four.hlo"));
  CLI_HAS(cli_err, "the module has 2 replicas x 1 partitions = 2 devices, the world 1 ranks");
}

int main(void) {
  if (!cli_setup()) {
    fprintf(stderr, "test_spmd: cannot make a temporary directory\n");
    return 1;
  }
  RUN(test_two_ranks_shared_memory_reference);
  RUN(test_two_ranks_tcp_cpu);
  RUN(test_four_ranks_shared_memory_cpu);
  RUN(test_four_ranks_tcp_reference);
  RUN(test_group_modes_reference);
  RUN(test_group_modes_cpu);
  RUN(test_sharded_mlp_two);
  RUN(test_sharded_mlp_four);
  RUN(test_large_two_shared_memory);
  RUN(test_large_four_tcp);
  RUN(test_mismatched_shapes);
  RUN(test_rank_hangs);
  RUN(test_rank_dies);
  RUN(test_refused_without_world);
  cli_cleanup();
  return TEST_REPORT();
}
