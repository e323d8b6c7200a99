/* `make soak` (opt-in, a few minutes): two processes race on one empty
 * disk cache (then a third, a quarter as long, runs on the cache they filled), each with THREADS threads making CALLS calls of traced functions with random
 * batch sizes (1..100: symbolic after the second size, so most calls run bindings, and more
 * than the 64 an entry keeps), one function per thread updating its own weights in place
 * (latch_assign) and one shared by all threads reading a weight only. Every call is
 * replayed op by op on an eager runtime with its own copies of the weights, and the
 * outputs (and, every 50 calls, the weights) must agree. Between a quarter of the calls and
 * the end, RSS and the count of open files must stay flat. Prints the figures; exits 1 on
 * any disagreement, error or growth. Written against latch.h alone, like an embedder.
 *
 *   build/soak [CALLS [THREADS]]    (defaults 2000 and 8; make soak: SOAK_CALLS=12000,
 *                                    SOAK_THREADS=8, about 3 minutes on 2 cores) */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <latch.h>

#include "soak_util.h"

enum { IN = 16, HIDDEN = 32, OUT = 4, MAX_BATCH = 100 };
/* Traced and eager results agree within this fraction of the largest magnitude: the two
 * modes run the same kernels, fused or not, so only rounding differs. */
#define AGREE_REL 1e-4

static int calls_per_thread = 2000, thread_count = 8;
static latch_runtime *traced_rt, *eager_rt;
static latch_function *shared_fn;
static latch_tensor *shared_w_traced, *shared_w_eager; /* read only, [IN, HIDDEN] */
static atomic_int failures, calls_done;
static atomic_int quarter_sampled;
static double rss_quarter_mb;
static int fds_quarter;

typedef struct model {
  latch_runtime *rt;
  latch_tensor *w1, *b1, *w2; /* [IN, HIDDEN], [HIDDEN], [HIDDEN, OUT] */
} model;

static void fail(const char *what, int thread, int call) {
  atomic_fetch_add(&failures, 1);
  fprintf(stderr, "soak: pid %d thread %d call %d: %s (%s)\n", (int)getpid(), thread, call, what, latch_last_error());
}

/* One training-like step: softmax(relu(x w1 + b1) w2) out; b1 -= 0.01 mean over the batch
 * of the pre-activation (a mean over the symbolic batch: it binds); w2 -= 0.001 h^T y. */
static latch_status step(void *user, latch_tensor *const *in, int n, latch_tensor **out, int m) {
  (void)n, (void)m;
  model *md = user;
  latch_runtime *rt = md->rt;
  int batch_dim = 0, perm[2] = {1, 0};
  latch_tensor *xw = latch_matmul(in[0], md->w1), *pre = latch_binary(LATCH_ADD, xw, md->b1);
  latch_tensor *h = latch_relu(pre), *y = latch_matmul(h, md->w2);
  out[0] = latch_softmax(y, -1);
  latch_tensor *lr1 = latch_scalar(rt, LATCH_F32, 0.01), *lr2 = latch_scalar(rt, LATCH_F32, 0.001);
  latch_tensor *mean = latch_reduce(LATCH_MEAN, pre, 1, &batch_dim, false), *d1 = latch_binary(LATCH_MUL, mean, lr1);
  latch_tensor *b1 = latch_binary(LATCH_SUB, md->b1, d1);
  latch_tensor *ht = latch_permute(h, perm), *g = latch_matmul(ht, y), *d2 = latch_binary(LATCH_MUL, g, lr2);
  latch_tensor *w2 = latch_binary(LATCH_SUB, md->w2, d2);
  latch_status s = latch_assign(md->b1, b1);
  if (s == LATCH_OK) s = latch_assign(md->w2, w2);
  latch_tensor *all[] = {xw, pre, h, y, lr1, lr2, mean, d1, b1, ht, g, d2, w2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) latch_release(all[i]);
  return s;
}

/* The shared function: relu(x W), W read only. */
static latch_status shared(void *user, latch_tensor *const *in, int n, latch_tensor **out, int m) {
  (void)n, (void)m;
  latch_tensor *xw = latch_matmul(in[0], user);
  out[0] = latch_relu(xw);
  latch_release(xw);
  return LATCH_OK;
}

static void model_init(model *md, latch_runtime *rt, uint64_t seed) {
  int64_t d1[2] = {IN, HIDDEN}, db[1] = {HIDDEN}, d2[2] = {HIDDEN, OUT};
  md->rt = rt;
  md->w1 = latch_rand_normal(rt, LATCH_F32, 2, d1, 0, 0.3, seed);
  md->b1 = latch_rand_normal(rt, LATCH_F32, 1, db, 0, 0.1, seed + 1);
  md->w2 = latch_rand_normal(rt, LATCH_F32, 2, d2, 0, 0.3, seed + 2);
}

static void model_free(model *md) { latch_release(md->w1), latch_release(md->b1), latch_release(md->w2); }

/* Whether a and b (n values) agree within AGREE_REL of b's largest magnitude. */
static bool agree(const float *a, const float *b, int64_t n) {
  double scale = 0, worst = 0;
  for (int64_t i = 0; i < n; i++) {
    scale = fmax(scale, fabs((double)b[i]));
    double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= worst)) worst = d; /* NaN wins */
  }
  return worst <= AGREE_REL * scale + 1e-7;
}

static bool read_both(latch_tensor *a, latch_tensor *b, float *x, float *y, int64_t n) {
  return latch_read(a, x, sizeof(float) * (size_t)n) == LATCH_OK && latch_read(b, y, sizeof(float) * (size_t)n) == LATCH_OK;
}

static bool same_weights(const model *t, const model *e, float *x, float *y) {
  return read_both(t->b1, e->b1, x, y, HIDDEN) && agree(x, y, HIDDEN) && read_both(t->w2, e->w2, x, y, HIDDEN * OUT) &&
         agree(x, y, HIDDEN * OUT);
}

typedef struct worker {
  int id;
  unsigned seed;
} worker;

static void sample_quarter(void) {
  if (atomic_fetch_add(&calls_done, 1) + 1 != calls_per_thread * thread_count / 4) return;
  rss_quarter_mb = soak_rss_mb();
  fds_quarter = soak_open_files();
  atomic_store(&quarter_sampled, 1);
}

/* One call of both functions at a random batch, checked against the eager replay. */
static void one_call(worker *w, int call, latch_function *fn, model *traced, model *eager, float *x, float *a, float *b) {
  int64_t batch = 1 + rand_r(&w->seed) % MAX_BATCH, dims[2] = {batch, IN};
  for (int64_t i = 0; i < batch * IN; i++) x[i] = (float)(rand_r(&w->seed) % 2001 - 1000) / 1000.0f;
  latch_tensor *xt = latch_from_host(traced_rt, LATCH_F32, 2, dims, x), *xe = latch_from_host(eager_rt, LATCH_F32, 2, dims, x);
  latch_tensor *yt = NULL, *ye = NULL, *st = NULL, *se = NULL;
  if (latch_call(fn, &xt, 1, NULL, 0, &yt, 1) != LATCH_OK) fail("traced call", w->id, call);
  else if (step(eager, &xe, 1, &ye, 1) != LATCH_OK || latch_sync(eager_rt) != LATCH_OK) fail("eager step", w->id, call);
  else if (!read_both(yt, ye, a, b, batch * OUT) || !agree(a, b, batch * OUT)) fail("outputs differ from eager", w->id, call);
  if (latch_call(shared_fn, &xt, 1, NULL, 0, &st, 1) != LATCH_OK) fail("shared call", w->id, call);
  else if (shared(shared_w_eager, &xe, 1, &se, 1) != LATCH_OK || latch_sync(eager_rt) != LATCH_OK) fail("eager shared", w->id, call);
  else if (!read_both(st, se, a, b, batch * HIDDEN) || !agree(a, b, batch * HIDDEN)) fail("shared outputs differ", w->id, call);
  if (call % 50 == 49 && !same_weights(traced, eager, a, b)) fail("weights differ from eager", w->id, call);
  latch_release(xt), latch_release(xe), latch_release(yt), latch_release(ye), latch_release(st), latch_release(se);
  sample_quarter();
}

static void *work(void *arg) {
  worker *w = arg;
  model traced, eager;
  model_init(&traced, traced_rt, 100 + (uint64_t)w->id * 10);
  model_init(&eager, eager_rt, 100 + (uint64_t)w->id * 10);
  latch_function_options o;
  latch_function_options_init(&o);
  latch_function *fn = latch_function_new_step(traced_rt, step, &traced, &o);
  float *x = malloc(sizeof(float) * MAX_BATCH * IN), *a = malloc(sizeof(float) * MAX_BATCH * HIDDEN),
        *b = malloc(sizeof(float) * MAX_BATCH * HIDDEN);
  for (int call = 0; call < calls_per_thread && fn && x && a && b; call++) one_call(w, call, fn, &traced, &eager, x, a, b);
  if (!fn) fail("function_new", w->id, 0);
  latch_function_stats s;
  latch_function_get_stats(fn, &s);
  if (w->id == 0)
    printf("soak: pid %d thread 0: %llu calls, %llu traces, %llu hits, %llu bindings built, %llu kept, %llu dropped, "
           "%llu compiled specializations\n", (int)getpid(), (unsigned long long)s.calls, (unsigned long long)s.traces,
           (unsigned long long)s.hits, (unsigned long long)s.instantiations, (unsigned long long)s.bindings_kept,
           (unsigned long long)s.bindings_dropped, (unsigned long long)s.specializations);
  latch_function_free(fn);
  model_free(&traced), model_free(&eager);
  free(x), free(a), free(b);
  return NULL;
}

static latch_runtime *open_runtime(bool eager) {
  latch_options o;
  latch_options_init(&o);
  o.eager = eager;
  o.cache = eager ? "memory" : "disk"; /* LATCH_CACHE_DIR names the shared directory */
  latch_runtime *rt = latch_open(&o);
  if (!rt) fprintf(stderr, "soak: latch_open: %s\n", latch_last_error());
  return rt;
}

/* One racing process: returns its exit status. */
static int process(void) {
  traced_rt = open_runtime(false), eager_rt = open_runtime(true);
  if (!traced_rt || !eager_rt) return 1;
  int64_t dims[2] = {IN, HIDDEN};
  shared_w_traced = latch_rand_normal(traced_rt, LATCH_F32, 2, dims, 0, 0.3, 7);
  shared_w_eager = latch_rand_normal(eager_rt, LATCH_F32, 2, dims, 0, 0.3, 7);
  shared_fn = latch_function_new_step(traced_rt, shared, shared_w_traced, NULL);
  pthread_t threads[64];
  worker workers[64];
  double start = soak_now_s(), rss_start = soak_rss_mb();
  for (int t = 0; t < thread_count; t++) {
    workers[t] = (worker){t, (unsigned)(getpid() * 977 + t)};
    pthread_create(&threads[t], NULL, work, &workers[t]);
  }
  for (int t = 0; t < thread_count; t++) pthread_join(threads[t], NULL);
  double seconds = soak_now_s() - start, rss_end = soak_rss_mb();
  int fds_end = soak_open_files();
  latch_stats s;
  latch_get_stats(traced_rt, &s);
  latch_function_stats fs;
  latch_function_get_stats(shared_fn, &fs);
  int calls = calls_per_thread * thread_count;
  printf("soak: pid %d: %d threads x %d calls (x2 functions) in %.1f s, %.0f us per call pair with its eager replay; "
         "compiles %llu, disk loads %llu, disk writes %llu; shared function: %llu traces, %llu bindings kept\n",
         (int)getpid(), thread_count, calls_per_thread, seconds, seconds * 1e6 / calls, (unsigned long long)s.compiles,
         (unsigned long long)s.disk_loads, (unsigned long long)s.disk_writes, (unsigned long long)fs.traces,
         (unsigned long long)fs.bindings_kept);
  printf("soak: pid %d: RSS %.1f MB at start, %.1f MB at a quarter of the calls, %.1f MB at the end; open files %d at "
         "a quarter, %d at the end; %d failures\n", (int)getpid(), rss_start, rss_quarter_mb, rss_end, fds_quarter,
         fds_end, atomic_load(&failures));
  int status = atomic_load(&failures) ? 1 : 0;
  /* Flat: the last three quarters of the calls may not add more than 8 MB (or a quarter).
   * Under 1,000 calls a thread the first quarter is still warming up (arenas, bindings,
   * allocator pools): too short to judge. */
  bool judged = atomic_load(&quarter_sampled) && calls_per_thread >= 1000;
  if (!judged) printf("soak: pid %d: too few calls to judge RSS\n", (int)getpid());
  if (judged && rss_end - rss_quarter_mb > fmax(8, rss_quarter_mb / 4)) {
    fprintf(stderr, "soak: pid %d: RSS grew from %.1f to %.1f MB\n", (int)getpid(), rss_quarter_mb, rss_end);
    status = 1;
  }
  if (atomic_load(&quarter_sampled) && fds_end > fds_quarter) {
    fprintf(stderr, "soak: pid %d: open files grew from %d to %d\n", (int)getpid(), fds_quarter, fds_end);
    status = 1;
  }
  latch_function_free(shared_fn);
  latch_release(shared_w_traced), latch_release(shared_w_eager);
  latch_close(traced_rt), latch_close(eager_rt);
  return status;
}

int main(int argc, char **argv) {
  if (argc > 1) calls_per_thread = atoi(argv[1]);
  if (argc > 2) thread_count = atoi(argv[2]);
  if (calls_per_thread < 4 || thread_count < 1 || thread_count > 64) {
    fprintf(stderr, "usage: soak [CALLS >= 4 [THREADS 1..64]]\n");
    return 2;
  }
  char dir[] = "/tmp/latch-soak-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("LATCH_CACHE_DIR", dir, 1);
  fflush(NULL);
  pid_t racers[2];
  for (int p = 0; p < 2; p++)
    if ((racers[p] = fork()) == 0) {
      int status = process();
      fflush(NULL);
      _exit(status);
    }
  int worst = 0;
  for (int p = 0; p < 3; p++) {
    if (p == 2) { /* then one more on the cache they filled, a quarter as long: it loads */
      calls_per_thread /= 4;
      printf("soak: a third process on the warm cache\n");
      fflush(NULL);
      if ((racers[0] = fork()) == 0) {
        int status = process();
        fflush(NULL);
        _exit(status);
      }
    }
    int status = 0;
    waitpid(racers[p == 2 ? 0 : p], &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code > worst) worst = code;
  }
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  if (system(command) != 0) fprintf(stderr, "soak: could not remove %s\n", dir);
  printf("soak: %s\n", worst ? "FAILED" : "passed");
  return worst;
}
