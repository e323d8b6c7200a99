/* The all-reduce's bandwidth against a bare MPI_Allreduce on the same ranks (`make
 * bench-allreduce`, under mpirun): an f32 sum of SIZE_MB megabytes (default 64), timed in
 * rounds that alternate the two (so a loaded machine slows both alike), the median of each
 * printed by rank 0 with the ratio. latch's side is latch_all_reduce inside a traced function
 * (the path a data-parallel step takes: the graph's all-reduce, its copy in and out, MPI);
 * the program initialises MPI itself and latch joins it (the embedder's path). Prints figures,
 * asserts nothing but that both give the same sum.
 *
 *   mpirun -np 2 --mca btl self,vader build/bench-allreduce [SIZE_MB] [ROUNDS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latch.h"

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, compare);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static latch_status summed(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                           latch_tensor **out, int out_count) {
  (void)user, (void)n, (void)st, (void)sn, (void)out_count;
  out[0] = latch_all_reduce(in[0], LATCH_SUM);
  return latch_tensor_error(out[0]) ? LATCH_ERR_INPUT : LATCH_OK;
}

int main(int argc, char **argv) {
  int provided = 0, rank = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double mb = argc > 1 ? atof(argv[1]) : 64;
  int rounds = argc > 2 ? atoi(argv[2]) : 9;
  int64_t count = (int64_t)(mb * 1024 * 1024 / 4);
  float *data = malloc(sizeof(float) * (size_t)count), *bare = malloc(sizeof(float) * (size_t)count);
  for (int64_t i = 0; i < count; i++) data[i] = (float)((i + rank) % 7);

  latch_options options;
  latch_options_init(&options);
  options.mpi = true;
  latch_runtime *rt = latch_open(&options);
  latch_function_options fo;
  latch_function_options_init(&fo);
  latch_function *fn = rt ? latch_function_new(rt, summed, NULL, &fo) : NULL;
  if (!fn) {
    fprintf(stderr, "bench-allreduce: %s\n", latch_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  latch_tensor *x = latch_from_borrowed(rt, LATCH_F32, 1, &count, data, NULL, NULL);
  double *t_latch = calloc((size_t)rounds, sizeof(double)), *t_bare = calloc((size_t)rounds, sizeof(double));
  int wrong = 0;
  for (int r = -1; r < rounds; r++) { /* round -1 traces and compiles */
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    latch_tensor *out = NULL;
    if (latch_call(fn, &x, 1, NULL, 0, &out, 1) != LATCH_OK || latch_sync(rt) != LATCH_OK) {
      fprintf(stderr, "bench-allreduce: %s\n", latch_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const float *got = latch_data(out);
    double latch_s = MPI_Wtime() - start;
    MPI_Barrier(MPI_COMM_WORLD);
    memcpy(bare, data, sizeof(float) * (size_t)count);
    start = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, bare, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double bare_s = MPI_Wtime() - start;
    if (r >= 0) t_latch[r] = latch_s, t_bare[r] = bare_s;
    wrong += got == NULL || memcmp(got, bare, sizeof(float) * (size_t)count) != 0;
    latch_release(out);
  }
  double l = median(t_latch, rounds), b = median(t_bare, rounds);
  if (rank == 0)
    printf("all-reduce of %.0f MB on %d ranks, median of %d: latch %.2f ms (%.2f GB/s), bare MPI_Allreduce %.2f ms "
           "(%.2f GB/s): latch at %.0f%%%s\n",
           mb, size, rounds, l * 1e3, mb / 1024 / l, b * 1e3, mb / 1024 / b, 100 * b / l,
           wrong ? "; THE SUMS DIFFER" : "");
  latch_release(x);
  latch_function_free(fn);
  latch_close(rt);
  free(data), free(bare), free(t_latch), free(t_bare);
  MPI_Finalize();
  return wrong != 0;
}
