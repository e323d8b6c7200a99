/* A batch sweep 1..64 of an MLP and of a small convolutional net under the automatic shape
 * policy: at most two traces per function (static first, then the batch symbolic), every
 * result equal to trace-every's, and the backend compiles counted: two on the reference
 * backend (it runs the symbolic entry's other bindings from the template without
 * compiling), two on the cpu backend (it binds the symbolic entry's one executable to each
 * other batch size), one per batch size on a backend that compiles static shapes only
 * (simulated here by the reference backend without its execute_module). On the cpu
 * backend trace-every runs on the cpu backend too, so equal results mean binding computes
 * what compiling each size computes, bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "function_util.h"
#include "runtime/cpu/cpu.h"
#include "runtime/reference/reference.h"

typedef struct model {
  latch_tensor *w1, *b1, *w2, *b2; /* MLP: [16,32] [32] [32,10] [10]; CNN: conv [4,1,3,3], -, fc [64,10], [10] */
} model;

/* The MLP's weights, made on rt. */
static model mlp_weights(latch_runtime *rt) {
  return (model){fu_ramp(rt, 2, FDIMS(16, 32), 0.001, -0.2), fu_ramp(rt, 1, FDIMS(32), 0.01, -0.1),
                 fu_ramp(rt, 2, FDIMS(32, 10), -0.002, 0.3), fu_ramp(rt, 1, FDIMS(10), 0.05, 0)};
}

static void model_release(model *m) {
  latch_release(m->w1);
  latch_release(m->b1);
  latch_release(m->w2);
  latch_release(m->b2);
}

static latch_status mlp(void *user, latch_tensor *const *in, int n, latch_tensor **out, int on) {
  (void)n, (void)on;
  model *m = user;
  latch_tensor *h = latch_matmul(in[0], m->w1), *hb = latch_binary(LATCH_ADD, h, m->b1), *r = latch_relu(hb);
  latch_tensor *o = latch_matmul(r, m->w2), *ob = latch_binary(LATCH_ADD, o, m->b2);
  out[0] = latch_log_softmax(ob, -1);
  latch_release(h);
  latch_release(hb);
  latch_release(r);
  latch_release(o);
  latch_release(ob);
  return LATCH_OK;
}

/* conv2d(pad 1) + relu + max_pool 2x2 + reshape(-1, 64) + matmul + bias. */
static latch_status cnn(void *user, latch_tensor *const *in, int n, latch_tensor **out, int on) {
  (void)n, (void)on;
  model *m = user;
  latch_conv2d_params p = {{1, 1}, {1, 1}, {1, 1}, 1};
  int64_t k[2] = {2, 2};
  latch_tensor *c = latch_conv2d(in[0], m->w1, &p), *r = latch_relu(c);
  latch_tensor *pool = latch_max_pool2d(r, k, NULL, NULL);
  latch_tensor *flat = latch_reshape(pool, 2, FDIMS(-1, 64));
  latch_tensor *o = latch_matmul(flat, m->w2);
  out[0] = latch_binary(LATCH_ADD, o, m->b2);
  latch_release(c);
  latch_release(r);
  latch_release(pool);
  latch_release(flat);
  latch_release(o);
  return LATCH_OK;
}

/* Runs the sweep on fresh runtimes (so compile counts are the sweep's own); returns the
 * trace-once function's stats and backend compiles. */
static rt_backend static_only;

typedef enum backend_kind { REFERENCE, STATIC_ONLY, CPU } backend_kind;

static void sweep(const char *name, latch_step_fn step, int rank, const int64_t *sample_dims, latch_shape_policy shapes,
                  bool check_traces, backend_kind backend) {
  latch_runtime *rt_once = fu_open(), *rt_every = fu_open();
  static_only = rt_backend_reference;
  static_only.name = "reference-static-only";
  static_only.execute_module = NULL;
  if (backend == STATIC_ONLY) rt_once->backend = &static_only;
  if (backend == CPU) rt_once->backend = rt_every->backend = &rt_backend_cpu;
  model m[2];
  latch_runtime *rts[2] = {rt_once, rt_every};
  for (int k = 0; k < 2; k++) {
    latch_runtime *rt = rts[k];
    if (step == mlp) {
      m[k] = mlp_weights(rt);
    } else {
      m[k] = (model){fu_ramp(rt, 4, FDIMS(4, 1, 3, 3), 0.03, -0.5), NULL, fu_ramp(rt, 2, FDIMS(64, 10), -0.001, 0.3),
                     fu_ramp(rt, 1, FDIMS(10), 0.05, 0)};
    }
  }
  latch_function_options o1 = fu_options(LATCH_TRACE_ONCE, shapes), o2 = fu_options(LATCH_TRACE_EVERY, shapes);
  o1.recompile_limit = 100;
  latch_function *once = latch_function_new_step(rt_once, step, &m[0], &o1);
  latch_function *every = latch_function_new_step(rt_every, step, &m[1], &o2);
  double worst = 0;
  int failures = 0;
  for (int64_t b = 1; b <= 64; b++) {
    int64_t dims[4];
    for (int i = 0; i < rank; i++) dims[i] = sample_dims[i];
    dims[0] = b;
    latch_tensor *x1 = fu_ramp(rt_once, rank, dims, 0.0007, -0.3 + 0.01 * (double)b);
    latch_tensor *x2 = fu_ramp(rt_every, rank, dims, 0.0007, -0.3 + 0.01 * (double)b);
    latch_tensor *a = NULL, *c = NULL;
    failures += latch_call(once, &x1, 1, NULL, 0, &a, 1) != LATCH_OK;
    failures += latch_call(every, &x2, 1, NULL, 0, &c, 1) != LATCH_OK;
    CHECK_EQ_INT(latch_dim(a, 0), b);
    double d = fu_max_diff(a, c);
    if (d > worst) worst = d;
    latch_release(a);
    latch_release(c);
    latch_release(x1);
    latch_release(x2);
  }
  CHECK_EQ_INT(failures, 0);
  CHECK_MSG(worst == 0, "%s: trace-once differs from trace-every by %g", name, worst);
  latch_function_stats s;
  latch_function_get_stats(once, &s);
  latch_stats r1, r2;
  latch_get_stats(rt_once, &r1);
  latch_get_stats(rt_every, &r2);
  if (check_traces) {
    CHECK_MSG(s.traces <= 2, "%s: %llu traces", name, (unsigned long long)s.traces);
    CHECK_EQ_INT(s.hits, 64 - s.traces);
    /* Every compile is a trace's graph or a specialization of the symbolic entry. */
    CHECK_EQ_INT(r1.compiles, s.traces + s.specializations);
    if (backend != STATIC_ONLY) {
      CHECK_EQ_INT(r1.compiles, 2);
      CHECK_EQ_INT(s.specializations, 0);
      CHECK_EQ_INT(s.instantiations, 62);
    } else {
      CHECK_EQ_INT(s.specializations, 62);
    }
  }
  printf("%s sweep 1..64 (%s, %s): trace-once %llu traces, %llu hits, %llu backend compiles (%llu specializations, "
         "%llu instantiations without compiling); trace-every %llu compiles; max |diff| %g\n",
         name, shapes == LATCH_SHAPES_STATIC ? "static" : "automatic", rt_once->backend->name,
         (unsigned long long)s.traces, (unsigned long long)s.hits, (unsigned long long)r1.compiles,
         (unsigned long long)s.specializations, (unsigned long long)s.instantiations, (unsigned long long)r2.compiles,
         worst);
  latch_function_free(once);
  latch_function_free(every);
  for (int k = 0; k < 2; k++) model_release(&m[k]);
  latch_close(rt_once);
  latch_close(rt_every);
}

static void test_mlp_sweep(void) {
  sweep("mlp", mlp, 2, FDIMS(0, 16), LATCH_SHAPES_AUTOMATIC, true, REFERENCE);
  sweep("mlp", mlp, 2, FDIMS(0, 16), LATCH_SHAPES_AUTOMATIC, true, STATIC_ONLY);
  sweep("mlp", mlp, 2, FDIMS(0, 16), LATCH_SHAPES_AUTOMATIC, true, CPU);
}

static void test_cnn_sweep(void) {
  sweep("cnn", cnn, 4, FDIMS(0, 1, 8, 8), LATCH_SHAPES_AUTOMATIC, true, REFERENCE);
  sweep("cnn", cnn, 4, FDIMS(0, 1, 8, 8), LATCH_SHAPES_AUTOMATIC, true, STATIC_ONLY);
  sweep("cnn", cnn, 4, FDIMS(0, 1, 8, 8), LATCH_SHAPES_AUTOMATIC, true, CPU);
}

/* One runtime on the cpu backend with the disk cache in dir: the MLP sweep 1..64 under the
 * automatic policy; outputs[b - 1] keeps each batch's last element. */
static void disk_sweep(const char *dir, float *outputs, latch_stats *stats, latch_function_stats *fstats) {
  latch_runtime *rt = fu_open_disk(dir);
  CHECK_MSG(rt != NULL, "%s", latch_last_error());
  if (!rt) return;
  model m = mlp_weights(rt);
  latch_function_options o = fu_options(LATCH_TRACE_ONCE, LATCH_SHAPES_AUTOMATIC);
  latch_function *f = latch_function_new_step(rt, mlp, &m, &o);
  for (int64_t b = 1; b <= 64; b++) {
    latch_tensor *x = fu_ramp(rt, 2, FDIMS(b, 16), 0.0007, -0.3 + 0.01 * (double)b), *y = NULL;
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &y, 1), LATCH_OK);
    float all[64 * 10];
    CHECK(y && latch_read(y, all, sizeof(float) * (size_t)(b * 10)) == LATCH_OK);
    outputs[b - 1] = all[b * 10 - 1];
    latch_release(y);
    latch_release(x);
  }
  latch_function_get_stats(f, fstats);
  latch_get_stats(rt, stats);
  latch_function_free(f);
  model_release(&m);
  latch_close(rt);
}

/* Flips one payload byte of every entry in dir (the last byte of each file). */
static int damage_entries(const char *dir) {
  char command[256];
  snprintf(command, sizeof command,
           "for f in %s/*.latch; do printf '\\377' | dd of=\"$f\" bs=1 seek=$(($(stat -c %%s \"$f\") - 1)) "
           "conv=notrunc 2>/dev/null; done; ls %s/*.latch | wc -l",
           dir, dir);
  FILE *p = popen(command, "r");
  int count = -1;
  if (p && fscanf(p, "%d", &count) != 1) count = -1;
  if (p) pclose(p);
  return count;
}

/* The first process compiles the two executables (batch 1, then the batch symbolic) and
 * binds the symbolic one to batches 3..64, saving every one on disk. A second process finds
 * all 64 there: it compiles nothing and binds nothing, loading each batch's binding, and
 * gives the same bits. With every entry damaged, a third process loads none, compiles and
 * binds again, and still gives the same bits. */
static void test_disk_sweep(void) {
  char dir[] = "/tmp/latch-sweep-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  float cold[64], warm[64], damaged[64];
  latch_stats s1, s2, s3;
  latch_function_stats f1, f2, f3;
  disk_sweep(dir, cold, &s1, &f1);
  CHECK_EQ_INT(s1.compiles, 2);
  CHECK_EQ_INT(f1.instantiations, 62);
  CHECK_EQ_INT(s1.disk_writes, 64);
  CHECK_EQ_INT(s1.disk_loads, 0);
  disk_sweep(dir, warm, &s2, &f2);
  CHECK_EQ_INT(s2.compiles, 0);
  CHECK_EQ_INT(s2.disk_loads, 64);
  CHECK_EQ_INT(s2.disk_writes, 0);
  CHECK_EQ_INT(f2.instantiations, 62);
  CHECK_EQ_INT(f2.specializations, 0);
  CHECK(memcmp(cold, warm, sizeof cold) == 0);
  CHECK_EQ_INT(damage_entries(dir), 64);
  disk_sweep(dir, damaged, &s3, &f3);
  CHECK_EQ_INT(s3.compiles, 2);
  CHECK_EQ_INT(s3.disk_loads, 0);
  CHECK_EQ_INT(s3.disk_writes, 64);
  CHECK_EQ_INT(f3.instantiations, 62);
  CHECK(memcmp(cold, damaged, sizeof cold) == 0);
  printf("mlp sweep 1..64 on cpu with the disk cache: %llu compiles cold, %llu warm (%llu loads), %llu with every "
         "entry damaged\n",
         (unsigned long long)s1.compiles, (unsigned long long)s2.compiles, (unsigned long long)s2.disk_loads,
         (unsigned long long)s3.compiles);
  char command[128];
  snprintf(command, sizeof command, "rm -rf %s", dir);
  CHECK(system(command) == 0);
}

/* Under LATCH_CHECK=accuracy the cpu backend's bindings are compiled, each one checked
 * against the fp64 reference, instead of bound. */
static void test_checked_sweep_compiles(void) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "cpu";
  options.eager = false;
  options.check = "accuracy";
  latch_runtime *rt = latch_open(&options);
  CHECK_MSG(rt != NULL, "%s", latch_last_error());
  if (!rt) return;
  model m = mlp_weights(rt);
  latch_function_options o = fu_options(LATCH_TRACE_ONCE, LATCH_SHAPES_AUTOMATIC);
  latch_function *f = latch_function_new_step(rt, mlp, &m, &o);
  for (int64_t b = 1; b <= 8; b++) {
    latch_tensor *x = fu_ramp(rt, 2, FDIMS(b, 16), 0.0007, 0), *y = NULL;
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &y, 1), LATCH_OK);
    latch_release(y);
    latch_release(x);
  }
  latch_function_stats s;
  latch_stats r;
  latch_function_get_stats(f, &s);
  latch_get_stats(rt, &r);
  CHECK_EQ_INT(s.traces, 2);
  CHECK_EQ_INT(s.specializations, 6);
  CHECK_EQ_INT(s.instantiations, 0);
  CHECK_EQ_INT(r.compiles, 8);
  CHECK_EQ_INT(r.check_failures, 0);
  latch_function_free(f);
  model_release(&m);
  latch_close(rt);
}

static void test_static_sweep(void) { sweep("mlp", mlp, 2, FDIMS(0, 16), LATCH_SHAPES_STATIC, false, REFERENCE); }

int main(void) {
  RUN(test_mlp_sweep);
  RUN(test_cnn_sweep);
  RUN(test_static_sweep);
  RUN(test_disk_sweep);
  RUN(test_checked_sweep_compiles);
  return TEST_REPORT();
}
