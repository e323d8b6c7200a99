/* latch_all_reduce and latch_world, the collectives of latch.h: in one process (a world of one:
 * the op is its operand; bad ops and types refused), and under `mpirun -np 2` and `-np 4`
 * (this program again, as the ranks: `test_world rank BACKEND`) on the reference and cpu
 * backends, eagerly and inside a traced function. Rank r's x[i] = 3r + i - 4 (small integers,
 * every sum exact), so the expected sum is n*i + 3*n(n-1)/2 - 4n, the max 3(n-1) + i - 4, the
 * min i - 4, worked here by hand; a rank exits 1 on a wrong value. Rank 0 alone compiles each
 * graph; the others receive its executable (LATCH_LOG=compiles says the count per job).
 * A cache entry that a writer replaced with the executable of the same graph on other sizes
 * (valid header and checksums) loads on rank 0 and reaches rank 1 as rank 0's bytes; its
 * first run fails on both before any collective, and each rank compiles it afresh, says so
 * once and gets the right sums; the next job loads the replaced entry and compiles nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "disk_test_util.h"
#include "function_util.h"

#define MPIRUN                                                                                   \
  "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 " \
  "LATCH_COLLECTIVE_TIMEOUT=60 timeout 120 mpirun --oversubscribe"

enum { N = 6 };

static latch_tensor *rank_values(latch_runtime *rt, int rank) {
  int64_t dims[1] = {N};
  return fu_ramp(rt, 1, dims, 1, 3.0 * rank - 4);
}

static void one_process(void) {
  test_current = "one process";
  latch_runtime *rt = fu_open();
  int rank = -1, size = -1;
  latch_world(rt, &rank, &size);
  CHECK(rank == 0 && size == 1);
  latch_tensor *x = rank_values(rt, 0);
  latch_tensor *sum = latch_all_reduce(x, LATCH_SUM), *mean = latch_all_reduce(x, LATCH_MEAN);
  double *s = fu_read(sum), *m = fu_read(mean);
  for (int i = 0; s && m && i < N; i++) CHECK(s[i] == i - 4 && m[i] == i - 4);
  CHECK(s && m);
  free(s), free(m);
  latch_tensor *bad = latch_all_reduce(x, (latch_reduce_op)9);
  CHECK_MSG(latch_tensor_error(bad) && strstr(latch_tensor_error(bad), "all_reduce"), "%s",
            latch_tensor_error(bad) ? latch_tensor_error(bad) : "(no error)");
  int64_t dims[1] = {2};
  int32_t ints[2] = {1, 2};
  latch_tensor *k = latch_from_host(rt, LATCH_I32, 1, dims, ints);
  latch_tensor *int_mean = latch_all_reduce(k, LATCH_MEAN);
  CHECK(latch_tensor_error(int_mean) != NULL);
  latch_world_leave(rt); /* without a world: nothing to leave */
  latch_release(x), latch_release(sum), latch_release(mean), latch_release(bad), latch_release(k);
  latch_release(int_mean);
  latch_close(rt);
}

/* ---- one rank of the job ---- */

static int failures;

static void expect(const char *what, latch_tensor *t, int size, latch_reduce_op op) {
  double *v = fu_read(t);
  if (!v) {
    fprintf(stderr, "%s: %s\n", what, latch_tensor_error(t) ? latch_tensor_error(t) : latch_last_error());
    failures++;
    return;
  }
  for (int i = 0; i < N; i++) {
    double want = op == LATCH_RMAX ? 3.0 * (size - 1) + i - 4
                  : op == LATCH_RMIN ? i - 4.0
                  : size * (double)i + 1.5 * size * (size - 1) - 4.0 * size;
    if (op == LATCH_MEAN) want /= size;
    if (v[i] != want) {
      fprintf(stderr, "%s [%d]: %g, want %g\n", what, i, v[i], want);
      failures++;
    }
  }
  free(v);
}

static latch_status summed(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                           latch_tensor **out, int out_count) {
  (void)n, (void)st, (void)sn, (void)out_count;
  latch_tensor *twice = latch_binary(LATCH_ADD, in[0], in[0]);
  latch_tensor *mean = latch_all_reduce(twice, LATCH_MEAN), *half = latch_scalar(user, LATCH_F32, 0.5);
  out[0] = latch_binary(LATCH_MUL, mean, half);
  latch_release(twice), latch_release(mean), latch_release(half);
  return LATCH_OK;
}

/* Over a megabyte (the ring of point-to-point transfers, its chunks uneven: 300001 elements
 * over 2 or 4 ranks): rank r's element i is i % 5 + r, so the sum is n(i % 5) + n(n-1)/2 and
 * the max i % 5 + n - 1, exact in f32. */
static void large(latch_runtime *rt, int rank, int size) {
  int64_t count = 300001;
  float *data = malloc(sizeof(float) * (size_t)count);
  for (int64_t i = 0; i < count; i++) data[i] = (float)(i % 5 + rank);
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, &count, data);
  latch_tensor *sum = latch_all_reduce(x, LATCH_SUM), *max = latch_all_reduce(x, LATCH_RMAX);
  double *s = fu_read(sum), *m = fu_read(max);
  int wrong = !s || !m;
  for (int64_t i = 0; !wrong && i < count; i++)
    wrong = s[i] != size * (double)(i % 5) + size * (size - 1) / 2.0 || m[i] != (double)(i % 5) + size - 1;
  if (wrong) fprintf(stderr, "large all_reduce: wrong values (%s)\n", latch_last_error());
  failures += wrong;
  free(s), free(m), free(data);
  latch_release(x), latch_release(sum), latch_release(max);
}

static int one_rank(const char *backend) {
  latch_options options;
  latch_options_init(&options);
  options.backend = backend;
  options.mpi = true;
  options.log = "compiles";
  latch_runtime *rt = latch_open(&options);
  if (!rt) {
    fprintf(stderr, "latch_open: %s\n", latch_last_error());
    return 1;
  }
  int rank = -1, size = -1;
  latch_world(rt, &rank, &size);
  latch_tensor *x = rank_values(rt, rank);
  const latch_reduce_op ops[4] = {LATCH_SUM, LATCH_MEAN, LATCH_RMAX, LATCH_RMIN};
  for (int i = 0; i < 4; i++) {
    latch_tensor *r = latch_all_reduce(x, ops[i]);
    expect("eager all_reduce", r, size, ops[i]);
    latch_release(r);
  }
  latch_function_options fo = fu_options(LATCH_TRACE_ONCE, LATCH_SHAPES_STATIC);
  latch_function *fn = latch_function_new(rt, summed, rt, &fo);
  for (int call = 0; call < 3; call++) {
    latch_tensor *out = NULL;
    if (latch_call(fn, &x, 1, NULL, 0, &out, 1) != LATCH_OK) {
      fprintf(stderr, "latch_call: %s\n", latch_last_error());
      failures++;
    } else {
      expect("traced all_reduce", out, size, LATCH_MEAN);
    }
    latch_release(out);
  }
  latch_function_free(fn);
  latch_release(x);
  large(rt, rank, size);
  latch_stats stats;
  latch_get_stats(rt, &stats);
  latch_close(rt);
  printf("rank %d of %d: %s, %llu compiles\n", rank, size, failures ? "wrong" : "right",
         (unsigned long long)stats.compiles);
  return failures ? 1 : 0;
}

/* A rank on the disk cache dir: all_reduce(x + x) on f32[n], rank r's x[i] = i + r, so the
 * sum is 2(size i + size(size - 1)/2). Prints what it got, compiled and loaded. */
static int planted_rank(const char *dir, int n) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "cpu";
  options.mpi = true;
  options.cache = "disk";
  options.cache_dir = dir;
  latch_runtime *rt = latch_open(&options);
  if (!rt || n < 1 || n > 8) return fprintf(stderr, "latch_open: %s\n", latch_last_error()), 1;
  int rank = -1, size = -1, wrong = n;
  latch_world(rt, &rank, &size);
  float xs[8];
  for (int i = 0; i < n; i++) xs[i] = (float)(i + rank);
  int64_t dims[1] = {n};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, xs), *twice = latch_binary(LATCH_ADD, x, x);
  latch_tensor *sum = latch_all_reduce(twice, LATCH_SUM);
  double *v = fu_read(sum);
  if (v) wrong = 0;
  else fprintf(stderr, "rank %d: %s\n", rank, latch_last_error());
  for (int i = 0; v && i < n; i++) wrong += v[i] != 2.0 * (size * i + size * (size - 1) / 2.0);
  free(v);
  latch_release(x), latch_release(twice), latch_release(sum);
  latch_stats st;
  latch_get_stats(rt, &st);
  latch_close(rt);
  printf("rank %d of %d: %d wrong, %llu compiles, %llu disk loads\n", rank, size, wrong,
         (unsigned long long)st.compiles, (unsigned long long)st.disk_loads);
  return wrong ? 1 : 0;
}

static void planted_entry(void) {
  test_current = "a planted entry";
  char env[512], small[600], large[600];
  snprintf(env, sizeof env, MPIRUN " -np 2 --mca btl self,vader");
  snprintf(small, sizeof small, "%s", cli_path("small"));
  snprintf(large, sizeof large, "%s", cli_path("large"));
  CHECK_MSG(cli_run(env, "planted '%s' 4", small) == 0, "%s%s", cli_out, cli_err);
  CHECK_MSG(cli_run(env, "planted '%s' 8", large) == 0, "%s%s", cli_out, cli_err);
  CHECK(plant_entry(small, large));
  int status = cli_run(env, "planted '%s' 8", large);
  CHECK_MSG(status == 0 && strstr(cli_out, "rank 0 of 2: 0 wrong, 1 compiles, 1 disk loads") &&
                strstr(cli_out, "rank 1 of 2: 0 wrong, 1 compiles, 0 disk loads") &&
                count_occurrences(cli_err, "failed its first run") == 2,
            "exit %d\nstdout: %s\nstderr: %s", status, cli_out, cli_err);
  status = cli_run(env, "planted '%s' 8", large);
  CHECK_MSG(status == 0 && strstr(cli_out, "rank 0 of 2: 0 wrong, 0 compiles, 1 disk loads") &&
                strstr(cli_out, "rank 1 of 2: 0 wrong, 0 compiles, 0 disk loads") &&
                count_occurrences(cli_err, "failed its first run") == 0,
            "exit %d\nstdout: %s\nstderr: %s", status, cli_out, cli_err);
}

/* Every rank right; the seven graphs (six eager all-reduces, the traced one) compiled by
 * rank 0 alone and received by the others, each line of LATCH_LOG=compiles saying so. */
static void job(int ranks, const char *btl, const char *backend) {
  char env[512], line[64], log[64];
  snprintf(env, sizeof env, MPIRUN " -np %d --mca btl %s", ranks, btl);
  int status = cli_run(env, "rank %s", backend);
  int right = 0;
  for (int r = 0; r < ranks; r++) {
    snprintf(line, sizeof line, "rank %d of %d: right, %d compiles", r, ranks, r == 0 ? 7 : 0);
    right += strstr(cli_out, line) != NULL;
  }
  snprintf(log, sizeof log, "compiles for the job of %d ranks: 1", ranks);
  int logged = 0, received = 0;
  for (const char *p = cli_err; (p = strstr(p, log)); p++) logged++;
  for (const char *p = cli_err; (p = strstr(p, "received from rank 0")); p++) received++;
  CHECK_MSG(status == 0 && right == ranks && logged == 7 * ranks && received == 7 * (ranks - 1),
            "%d ranks, %s, %s: exit %d, %d right, %d lines of %d, %d received\nstdout: %s\nstderr: %s", ranks, btl,
            backend, status, right, logged, 7 * ranks, received, cli_out, cli_err);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "rank") == 0) return one_rank(argv[2]);
  if (argc == 4 && strcmp(argv[1], "planted") == 0) return planted_rank(argv[2], atoi(argv[3]));
  one_process();
  test_current = "ranks";
  char *self = realpath(argv[0], NULL);
  if (!cli_setup() || !self) {
    CHECK_MSG(false, "no private directory, or %s not found", argv[0]);
    return TEST_REPORT();
  }
  snprintf(cli_bin, sizeof cli_bin, "%s", self); /* the ranks are this program */
  free(self);
  job(2, "self,vader", "reference");
  job(2, "self,tcp", "cpu");
  job(4, "self,vader", "cpu");
  planted_entry();
  cli_cleanup();
  return TEST_REPORT();
}
