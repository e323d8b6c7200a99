/* fork in a program using latch: a child of a process that compiled runs graphs with both
 * cache tiers (a fresh Redis connection of its own, the parent's left working), and nothing a
 * thread of the parent was doing at fork makes the child wait forever: a Redis command in
 * flight (the server paused under it), a compile in flight (the child compiles that key
 * itself instead of waiting for a thread it does not have), a cpu executable making its
 * oneDNN primitives or taking an arena, and a collective holding the MPI world's lock (held
 * there by runtime/'s test points, not by sleeping). Every child has a hang guard (alarm): a
 * child that would wait forever fails instead. Results are checked against values worked out
 * independently (remote_test_util.h) or the reference evaluator's. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "capture/capture.h"
#include "cpu_util.h"
#include "disk_test_util.h"
#include "runtime/runtime.h"
#include "redis_test_util.h"
#include "remote_test_util.h"
#include "test.h"

enum { HANG_GUARD_S = 120 };

#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer kills a child of a multithreaded process that starts a thread (it does not
 * support it: its own state there may be inconsistent). latch's children start threads (the
 * cpu backend's parallel loops, a lease's renewal), as the children of any embedder may: here
 * the child runs on, still checked. What it cannot get past: the child's new thread reusing
 * the stack of a thread that was running in the parent at fork, which it still counts as
 * running ("dup thread with used id"), so a case whose child starts a thread while another
 * was inside a call at fork (fork_during_remote_call: the child's compile renews its lease on
 * a thread) runs in `make test` and `make sanitize` but not under ThreadSanitizer. */
#define UNDER_TSAN 1
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "die_after_fork=0"; }
#else
#define UNDER_TSAN 0
#endif

/* The child's exit status; -1 when it did not exit (killed: a hang caught by its guard). */
static int wait_child(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void fork_after_compiling(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[160], dir[64], dir2[64];
  redis_url(&s, NULL, "unsigned=0", url, sizeof url);
  make_temp_dir(dir);
  make_temp_dir(dir2);
  latch_runtime *rt = open_rt(url, dir, "fork-secret");
  CHECK(rt && run_graph(rt, 0) == 0 && run_graph(rt, 1) == 0);
  latch_stats before = rt ? stats_of(rt) : (latch_stats){0};
  CHECK_EQ_INT((int)before.remote_writes, 2);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(HANG_GUARD_S);
    /* graph 0 from the inherited memory table, graph 2 compiled and written to both tiers */
    int wrong = run_graph(rt, 0) + run_graph(rt, 2);
    latch_stats st = stats_of(rt);
    bool wrote = st.remote_writes == before.remote_writes + 1;
    latch_close(rt);
    _exit(wrong == 0 && wrote ? 0 : 1);
  }
  CHECK_EQ_INT(wait_child(pid), 0);
  /* the parent's own connection still answers */
  CHECK(rt && run_graph(rt, 3) == 0);
  CHECK(rt && stats_of(rt).remote_writes == before.remote_writes + 1);
  if (rt) latch_close(rt);
  /* what the child wrote is on the server: a process with an empty disk loads graph 2 */
  rt = open_rt(url, dir2, "fork-secret");
  CHECK(rt && run_graph(rt, 2) == 0);
  CHECK(rt && stats_of(rt).remote_loads == 1 && stats_of(rt).compiles == 0);
  if (rt) latch_close(rt);
  remove_tree(dir);
  remove_tree(dir2);
  redis_stop(&s);
}

/* ---- a Redis command in flight at fork ---- */

typedef struct busy {
  latch_runtime *rt;
  atomic_int wrong;
} busy;

static void *run_graph_5(void *arg) {
  busy *b = arg;
  atomic_store(&b->wrong, run_graph(b->rt, 5));
  return NULL;
}

static void fork_during_remote_call(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[160];
  redis_url(&s, NULL, "unsigned=0&timeout_ms=5000", url, sizeof url);
  latch_runtime *rt = open_rt(url, NULL, "fork-secret");
  CHECK(rt && run_graph(rt, 0) == 0); /* connected */
  redisContext *c = redis_client(&s, NULL);
  redisReply *r = c ? redisCommand(c, "CLIENT PAUSE 600 ALL") : NULL;
  CHECK(r && r->type == REDIS_REPLY_STATUS);
  if (r) freeReplyObject(r);
  busy b = {rt, 4};
  pthread_t thread;
  pthread_create(&thread, NULL, run_graph_5, &b);
  redis_sleep_ms(150); /* the thread's GET is waiting on the paused server, under the tier's lock */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(HANG_GUARD_S);
    int wrong = run_graph(rt, 6);
    latch_stats st = stats_of(rt);
    _exit(wrong == 0 && st.remote_writes >= 1 ? 0 : 1);
  }
  CHECK_EQ_INT(wait_child(pid), 0);
  pthread_join(thread, NULL);
  CHECK_EQ_INT(atomic_load(&b.wrong), 0);
  CHECK(run_graph(rt, 7) == 0);
  if (c) redisFree(c);
  latch_close(rt);
  redis_stop(&s);
}

/* ---- a compile in flight at fork ---- */

static atomic_int compile_started;

static void *slow_compile(void *ctx, hlo_diag *diag) {
  (void)diag;
  atomic_store(&compile_started, 1);
  if (ctx) redis_sleep_ms(800);
  return strdup("value");
}

typedef struct compiling {
  cache_table *table;
  bool ok;
} compiling;

static const cache_key in_flight_key = {.lo = 7, .hi = 9};

static void *compile_in_thread(void *arg) {
  compiling *c = arg;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_entry *e = cache_table_get_or_compile(c->table, in_flight_key, slow_compile, (void *)1, &diag, NULL);
  c->ok = e && strcmp(cache_entry_value(e), "value") == 0;
  cache_table_release(c->table, e);
  return NULL;
}

static void fork_during_compile(void) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_table *table = cache_table_new(8, free, &diag);
  CHECK(table != NULL);
  if (!table) return;
  compiling c = {table, false};
  atomic_store(&compile_started, 0);
  pthread_t thread;
  pthread_create(&thread, NULL, compile_in_thread, &c);
  while (!atomic_load(&compile_started)) redis_sleep_ms(2);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(HANG_GUARD_S);
    bool hit = true;
    cache_entry *e = cache_table_get_or_compile(table, in_flight_key, slow_compile, NULL, &diag, &hit);
    bool ok = e && strcmp(cache_entry_value(e), "value") == 0 && !hit;
    cache_table_release(table, e);
    cache_table_free(table);
    _exit(ok ? 0 : 1);
  }
  CHECK_EQ_INT(wait_child(pid), 0);
  pthread_join(thread, NULL);
  CHECK(c.ok);
  cache_stats st;
  cache_table_stats(table, &st);
  CHECK_EQ_INT((int)st.compiles, 1); /* the child's compile is the child's */
  cache_table_free(table);
}

/* ---- a traced function's compile in flight at fork ---- */

typedef struct traced_graph {
  latch_runtime *rt;
  int g;
} traced_graph;

/* relu(x * (g + 2) - 1): remote_test_util.h's graph g, traced. */
static latch_status graph_fn(void *user, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                             int output_count) {
  (void)input_count, (void)output_count;
  const traced_graph *t = user;
  latch_runtime *rt = t->rt;
  int g = t->g;
  latch_tensor *k = latch_scalar(rt, LATCH_F32, g + 2), *one = latch_scalar(rt, LATCH_F32, 1);
  latch_tensor *a = latch_binary(LATCH_MUL, inputs[0], k), *b = latch_binary(LATCH_SUB, a, one);
  outputs[0] = latch_relu(b);
  latch_release(k), latch_release(one), latch_release(a), latch_release(b);
  return outputs[0] ? LATCH_OK : LATCH_ERR_INTERNAL;
}

/* One call of f on xs; the wrong values (4 when the call failed). */
static int call_graph(latch_runtime *rt, latch_function *f, int g) {
  int64_t dims[1] = {4};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, xs), *y = NULL;
  float out[4];
  int wrong = 4;
  if (latch_call(f, &x, 1, NULL, 0, &y, 1) == LATCH_OK && latch_read(y, out, sizeof out) == LATCH_OK) {
    wrong = 0;
    for (int i = 0; i < 4; i++) wrong += out[i] != expected(g, i);
  }
  latch_release(x);
  latch_release(y);
  return wrong;
}

typedef struct calling {
  latch_runtime *rt;
  latch_function *f;
  atomic_int wrong;
} calling;

enum { TRACED = 3 };

static void *call_in_thread(void *arg) {
  calling *c = arg;
  atomic_store(&c->wrong, call_graph(c->rt, c->f, TRACED));
  return NULL;
}

/* A thread's latch_call traces and compiles (its save to the disk cache held up halfway by
 * the test hook, so the fork surely lands inside the compile step, with the function's call
 * lock held) while the main thread forks: the child calls the same function and gets the
 * right values, neither waiting for the thread it does not have nor finding the lock taken;
 * the parent's call finishes as if nothing happened. */
static void fork_during_traced_compile(void) {
  char dir[64];
  make_temp_dir(dir);
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.cache = "disk";
  options.cache_dir = dir;
  options.test_cache_write_delay_ms = "800";
  latch_runtime *rt = latch_open(&options);
  CHECK(rt != NULL);
  if (!rt) return;
  latch_function_options fo;
  latch_function_options_init(&fo);
  traced_graph t = {rt, TRACED};
  latch_function *f = latch_function_new_step(rt, graph_fn, &t, &fo);
  CHECK(f != NULL);
  calling c = {rt, f, 4};
  pthread_t thread;
  pthread_create(&thread, NULL, call_in_thread, &c);
  while (count_files(dir, CACHE_DISK_TEMP_PREFIX) < 1) redis_sleep_ms(2); /* the save has begun */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(HANG_GUARD_S);
    int wrong = call_graph(rt, f, TRACED) + call_graph(rt, f, TRACED);
    _exit(wrong == 0 ? 0 : 1);
  }
  CHECK_EQ_INT(wait_child(pid), 0);
  pthread_join(thread, NULL);
  CHECK_EQ_INT(atomic_load(&c.wrong), 0);
  CHECK_EQ_INT(call_graph(rt, f, TRACED), 0);
  latch_function_stats st;
  latch_function_get_stats(f, &st);
  CHECK_EQ_INT((int)st.traces, 1); /* the parent traced once: the child's trace was its own */
  latch_function_free(f);
  latch_close(rt);
  remove_tree(dir);
}

/* ---- the runtime's repro lock ---- */

typedef struct holding {
  latch_runtime *rt;
  atomic_bool held, forked;
} holding;

/* Holds the runtime's repro lock a moment, as a thread noting a repro does, and ends only
 * once the fork is over (a thread that ended unjoined at fork is one the child cannot join:
 * ThreadSanitizer would report it there as leaked). */
static void *hold_repro_lock(void *arg) {
  holding *h = arg;
  pthread_mutex_lock(&h->rt->repro_lock);
  atomic_store(&h->held, true);
  redis_sleep_ms(200);
  pthread_mutex_unlock(&h->rt->repro_lock);
  while (!atomic_load(&h->forked)) redis_sleep_ms(1);
  return NULL;
}

/* A thread holds the repro lock while the main thread forks: the child's latch_last_repro
 * finds it free (fork waited for it) and answers "" (no repro made), as the parent does. */
static void fork_while_repro_lock_held(void) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.cache = "off";
  latch_runtime *rt = latch_open(&options);
  CHECK(rt != NULL);
  if (!rt) return;
  holding h = {rt, false, false};
  pthread_t thread;
  pthread_create(&thread, NULL, hold_repro_lock, &h);
  while (!atomic_load(&h.held)) redis_sleep_ms(1);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(HANG_GUARD_S);
    _exit(strcmp(latch_last_repro(rt), "") == 0 ? 0 : 1);
  }
  atomic_store(&h.forked, true);
  CHECK_EQ_INT(wait_child(pid), 0);
  pthread_join(thread, NULL);
  CHECK_STR(latch_last_repro(rt), "");
  latch_close(rt);
}

/* ---- a thread inside a locked region at fork ---- */

/* The test's function at runtime/'s test points: the first thread to reach the armed point
 * notes that it is inside and stays there, the lock held, until fork has begun (the fork
 * handler for that lock is about to wait for it) or, where no handler waits, until fork has
 * returned in the parent: without the handler the child is surely copied with the lock held. */
static atomic_int armed = -1, awaited = -1;
static atomic_bool inside, fork_began, forked, fork_pending;

static void at_point(rt_test_point point) {
  if (point >= RT_TEST_FORK_WAITS_WORLD) {
    if ((int)point == atomic_load(&awaited)) atomic_store(&fork_began, true);
    return;
  }
  int want = (int)point;
  if (!atomic_compare_exchange_strong(&armed, &want, -1)) return;
  atomic_store(&inside, true);
  while (!atomic_load(&fork_began) && !atomic_load(&forked)) redis_sleep_ms(1);
}

static void note_forked(void) { atomic_store(&forked, true); }

/* The handler that waits for the lock held at point. */
static rt_test_point waiter_of(rt_test_point point) {
  switch (point) {
    case RT_TEST_WORLD_LOCKED: return RT_TEST_FORK_WAITS_WORLD;
    case RT_TEST_FORK_LOCK_HELD: return RT_TEST_FORK_WAITS_FORK_LOCKS;
    default: return RT_TEST_FORK_WAITS_EXECUTABLES;
  }
}

static void arm(rt_test_point point) {
  atomic_store(&fork_pending, true);
  atomic_store(&inside, false);
  atomic_store(&fork_began, false);
  atomic_store(&forked, false);
  atomic_store(&awaited, (int)waiter_of(point));
  atomic_store(&armed, (int)point);
}

/* A thread that reached a test point ends only once the fork is over (fork_over): one that
 * ended unjoined at fork is one the child cannot join, which ThreadSanitizer would report
 * there as leaked. */
static void outlive_fork(void) {
  while (atomic_load(&fork_pending)) redis_sleep_ms(1);
}

static void fork_over(void) { atomic_store(&fork_pending, false); }

/* Whether a thread reached the armed point (within the hang guard's time); disarmed if not. */
static bool wait_inside(void) {
  for (int waited_ms = 0; !atomic_load(&inside) && waited_ms < HANG_GUARD_S * 1000; waited_ms += 2)
    redis_sleep_ms(2);
  int point = atomic_exchange(&armed, -1);
  return point == -1 && atomic_load(&inside);
}

/* ---- the cpu executable's locks ---- */

/* Two oneDNN convolutions with a relu and a residual add between them, at a batch size: the
 * relu's result lives in the executable's arena. */
static const char *convs_text(int batch) {
  static char text[2][1024];
  char *s = text[batch % 2];
  snprintf(s, sizeof text[0],
           "HloModule convs\nENTRY e {\n x = f32[%1$d,8,10,10] parameter(0)\n w = f32[8,8,3,3] parameter(1)\n"
           " w2 = f32[8,8,3,3] parameter(2)\n"
           " c = f32[%1$d,8,10,10] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
           " zero = f32[] constant(0)\n z = f32[%1$d,8,10,10] broadcast(zero), dimensions={}\n"
           " a = f32[%1$d,8,10,10] maximum(c, z)\n"
           " c2 = f32[%1$d,8,10,10] convolution(a, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
           " ROOT y = f32[%1$d,8,10,10] add(c2, a)\n}\n",
           batch);
  return s;
}

enum { CONV_ARGS = 3 };

/* The module at one batch size, random arguments and the reference evaluator's result. */
typedef struct conv_case {
  hlo_module *module;
  rt_value *args[CONV_ARGS];
  rt_value *want;
} conv_case;

static conv_case conv_case_make(int batch) {
  conv_case c = {.module = parse_checked(convs_text(batch))};
  hlo_diag diag = {0};
  for (int i = 0; c.module && i < CONV_ARGS; i++)
    c.args[i] = rt_random_value(&c.module->entry->params[i]->shape, 11, (uint64_t)i, &diag);
  if (c.module) rt_evaluate(c.module, c.args, CONV_ARGS, &(rt_eval_options){.fp64 = false}, &c.want, &diag);
  CHECK_MSG(c.want != NULL, "reference: %s", diag.message);
  return c;
}

static void conv_case_free(conv_case *c) {
  rt_value_release(c->want);
  for (int i = 0; i < CONV_ARGS; i++) rt_value_release(c->args[i]);
  hlo_module_free(c->module);
}

/* A loaded executable (its oneDNN primitives not made, its source module not decoded), and
 * the cases it runs: at its own batch size, and bound to another. */
typedef struct loaded_convs {
  rt_executable *exe;
  conv_case one, two;
} loaded_convs;

/* Whether exe's result on c's arguments agrees with the reference's (cpu_agree). */
static bool executes_right(rt_executable *exe, const conv_case *c) {
  hlo_diag diag = {0};
  rt_value *got = NULL;
  hlo_status status = rt_backend_cpu.execute(exe, c->args, CONV_ARGS, &got, &diag);
  bool right = status == HLO_OK && cpu_agree(c->want, got);
  if (!right) fprintf(stderr, "execute: %s\n", status == HLO_OK ? "wrong values" : diag.message);
  rt_value_release(got);
  return right;
}

static bool runs_right(const loaded_convs *l) { return executes_right(l->exe, &l->one); }

/* Bound to batch 2 (decoding the source module at the first bind), then run. */
static bool binds_right(const loaded_convs *l) {
  hlo_diag diag = {0};
  rt_executable *bound = rt_backend_cpu.bind(l->exe, l->two.module, &diag);
  if (!bound) fprintf(stderr, "bind: %s\n", diag.message);
  bool right = bound && executes_right(bound, &l->two);
  rt_backend_cpu.destroy(bound);
  return right;
}

typedef bool (*convs_work)(const loaded_convs *l);

typedef struct working {
  const loaded_convs *convs;
  convs_work work;
  atomic_bool right;
} working;

static void *work_in_thread(void *arg) {
  working *w = arg;
  atomic_store(&w->right, w->work(w->convs));
  outlive_fork();
  return NULL;
}

/* A thread does work and is held at point, inside the locked region, while the main thread
 * forks: the child does the same work twice and gets the right values; the thread's work
 * finishes in the parent as if nothing happened. */
static void fork_inside(const loaded_convs *l, convs_work work, rt_test_point point) {
  working w = {l, work, false};
  arm(point);
  pthread_t thread;
  pthread_create(&thread, NULL, work_in_thread, &w);
  bool entered = wait_inside();
  CHECK_MSG(entered, "the thread never reached test point %d", (int)point);
  if (entered) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(HANG_GUARD_S);
      _exit(work(l) && work(l) ? 0 : 1);
    }
    CHECK_EQ_INT(wait_child(pid), 0);
  }
  fork_over();
  pthread_join(thread, NULL);
  CHECK(atomic_load(&w.right));
  CHECK(work(l));
}

/* A loaded executable makes its oneDNN primitives at its first execute, under its
 * primitives_lock, and decodes its source module at its first bind, under its source_lock:
 * fork lands there, and inside its arena pool's lock. */
static void fork_inside_cpu_locks(void) {
  loaded_convs l = {.one = conv_case_make(1), .two = conv_case_make(2)};
  rt_executable *compiled = compile_checked(convs_text(1));
  hlo_diag diag = {0};
  void *bytes = NULL;
  size_t len = 0;
  if (compiled && rt_backend_cpu.serialize(compiled, &bytes, &len, &diag) == HLO_OK)
    l.exe = rt_backend_cpu.deserialize(bytes, len, NULL, &diag);
  CHECK_MSG(l.exe != NULL, "serialize and load: %s", diag.message);
  if (l.exe && l.one.want && l.two.want) {
    rt_test_point_set(at_point);
    fork_inside(&l, runs_right, RT_TEST_PRIMITIVES_LOCKED);
    fork_inside(&l, runs_right, RT_TEST_POOL_LOCKED);
    fork_inside(&l, binds_right, RT_TEST_SOURCE_LOCKED);
    rt_test_point_set(NULL);
  }
  rt_backend_cpu.destroy(l.exe);
  rt_backend_cpu.destroy(compiled);
  free(bytes);
  conv_case_free(&l.one);
  conv_case_free(&l.two);
}

/* ---- a process-wide lock that fork waits for (rt_fork_lock) ---- */

typedef struct keeping {
  hlo_shape shape;
  atomic_bool made;
} keeping;

/* A kept value made and released: the kept buffers' lock taken twice. */
static bool keeps_values(const hlo_shape *shape) {
  rt_value *v = rt_value_new_kept(shape);
  bool made = v && v->count == hlo_shape_elements(shape);
  rt_value_release(v);
  return made;
}

static void *keep_in_thread(void *arg) {
  keeping *k = arg;
  atomic_store(&k->made, keeps_values(&k->shape));
  outlive_fork();
  return NULL;
}

/* A thread is inside the kept value buffers' lock (runtime/value.c) while the main thread
 * forks: the child makes and releases kept values. */
static void fork_inside_fork_lock(void) {
  keeping k = {.made = false};
  int64_t dims[1] = {1 << 16};
  hlo_shape_set_array(&k.shape, HLO_F32, 1, dims);
  rt_test_point_set(at_point);
  arm(RT_TEST_FORK_LOCK_HELD);
  pthread_t thread;
  pthread_create(&thread, NULL, keep_in_thread, &k);
  bool entered = wait_inside();
  CHECK(entered);
  if (entered) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(HANG_GUARD_S);
      _exit(keeps_values(&k.shape) && keeps_values(&k.shape) ? 0 : 1);
    }
    CHECK_EQ_INT(wait_child(pid), 0);
  }
  fork_over();
  pthread_join(thread, NULL);
  rt_test_point_set(NULL);
  CHECK(atomic_load(&k.made));
}

/* ---- the MPI world's lock ---- */

typedef struct agreeing {
  rt_comm *comm;
  atomic_bool agreed;
} agreeing;

static void *agree_in_thread(void *arg) {
  agreeing *a = arg;
  hlo_diag diag = {0};
  atomic_store(&a->agreed, rt_comm_agree(a->comm, "the thread's collective", "sum f32[4]", &diag) == HLO_OK);
  outlive_fork();
  return NULL;
}

/* The child's collective is refused at once, saying why: it neither waits for the lock the
 * parent's thread held at fork nor uses its parent's MPI; closing the world there returns. */
static int world_child(rt_comm *comm) {
  alarm(HANG_GUARD_S);
  hlo_diag diag = {0};
  hlo_status status = rt_comm_agree(comm, "the child's collective", "sum f32[4]", &diag);
  bool refused = status == HLO_ERR_INPUT && strstr(diag.message, "forked child");
  if (!refused) fprintf(stderr, "the child's collective: status %d: %s\n", (int)status, diag.message);
  rt_comm_close(comm);
  return refused ? 0 : 1;
}

/* A world of one (MPI initialised here, as a singleton): a thread is held inside a
 * collective, the world's lock held, while the main thread forks (world_child); then the
 * thread's collective and the next one succeed in the parent. */
static int world_process(void) {
  alarm(HANG_GUARD_S);
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  hlo_diag diag = {0};
  rt_comm *comm = rt_comm_open(60, &diag);
  if (!comm) {
    fprintf(stderr, "opening the world: %s\n", diag.message);
    return 1;
  }
  rt_test_point_set(at_point);
  agreeing a = {comm, false};
  arm(RT_TEST_WORLD_LOCKED);
  pthread_t thread;
  pthread_create(&thread, NULL, agree_in_thread, &a);
  bool entered = wait_inside();
  fflush(NULL);
  pid_t pid = entered ? fork() : -1;
  if (pid == 0) _exit(world_child(comm));
  int child = pid > 0 ? wait_child(pid) : -1;
  fork_over();
  pthread_join(thread, NULL);
  rt_test_point_set(NULL);
  bool again = rt_comm_agree(comm, "the next collective", "sum f32[4]", &diag) == HLO_OK;
  rt_comm_close(comm);
  if (!entered || child != 0 || !atomic_load(&a.agreed) || !again)
    fprintf(stderr, "world: entered %d, child's exit %d, thread agreed %d, next agreed %d (%s)\n", entered, child,
            (int)atomic_load(&a.agreed), again, diag.message);
  return entered && child == 0 && atomic_load(&a.agreed) && again ? 0 : 1;
}

/* MPI is initialised in a process of the test's own (this program again, `test_fork world`,
 * with no thread of the test's in it), never in the test's process itself. */
static void fork_while_world_locked(void) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", "test_fork", "world", (char *)NULL);
    _exit(127);
  }
  CHECK_EQ_INT(wait_child(pid), 0);
}

/* ---- the thread count in a child ---- */

enum { POOL = 3, N = 48 };

typedef struct seen {
  pthread_mutex_t lock;
  pthread_t ids[64];
  int count;
} seen;

/* Notes the thread running this part; a short sleep keeps parts overlapping. */
static void note_thread(void *ctx, int64_t begin, int64_t end) {
  (void)begin, (void)end;
  seen *s = ctx;
  pthread_mutex_lock(&s->lock);
  bool known = false;
  for (int i = 0; i < s->count; i++) known = known || pthread_equal(s->ids[i], pthread_self());
  if (!known && s->count < 64) s->ids[s->count++] = pthread_self();
  pthread_mutex_unlock(&s->lock);
  redis_sleep_ms(20);
}

/* The distinct threads one parallel loop of six parts ran on. */
static int threads_used(void) {
  seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
  rt_parallel_for(6, 1, note_thread, &s);
  return s.count;
}

/* a (N x N) times b (N x N) on the cpu backend, a[i][k] = i % 7 - 3, b[k][j] = (k + 2j) % 5 - 2:
 * small integers, so every sum is exact in f32 and is worked out here in integers. The wrong
 * values (N * N when it failed). */
static int matmul_wrong(void) {
  static float a[N * N], b[N * N], out[N * N];
  for (int i = 0; i < N; i++)
    for (int k = 0; k < N; k++) a[i * N + k] = (float)(i % 7 - 3), b[i * N + k] = (float)((i + 2 * k) % 5 - 2);
  latch_options options;
  latch_options_init(&options);
  options.backend = "cpu";
  latch_runtime *rt = latch_open(&options);
  int64_t dims[2] = {N, N};
  latch_tensor *x = rt ? latch_from_host(rt, LATCH_F32, 2, dims, a) : NULL;
  latch_tensor *w = rt ? latch_from_host(rt, LATCH_F32, 2, dims, b) : NULL;
  latch_tensor *y = rt ? latch_matmul(x, w) : NULL;
  int wrong = N * N;
  if (y && latch_read(y, out, sizeof out) == LATCH_OK) {
    wrong = 0;
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N; j++) {
        long sum = 0;
        for (int k = 0; k < N; k++) sum += (long)(i % 7 - 3) * ((k + 2 * j) % 5 - 2);
        wrong += out[i * N + j] != (float)sum;
      }
  }
  latch_release(x), latch_release(w), latch_release(y);
  latch_close(rt);
  return wrong;
}

/* A child of a process whose OpenMP pool ran keeps the parent's thread count: its loops run
 * on that many threads of its own (not libgomp's pool, which fork does not copy), and a
 * product through oneDNN and latch's loops answers with the right values. */
static void child_keeps_thread_count(void) {
  CHECK_EQ_INT(rt_parallel_threads(), POOL);
  threads_used();                  /* OpenMP's pool has run */
  CHECK_EQ_INT(matmul_wrong(), 0); /* and oneDNN's team */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(HANG_GUARD_S);
    int threads = rt_parallel_threads(), used = threads_used(), wrong = matmul_wrong();
    if (threads != POOL || used != POOL || wrong)
      fprintf(stderr, "child: %d threads, a loop ran on %d, %d wrong values\n", threads, used, wrong);
    _exit(threads == POOL && used == POOL && wrong == 0 ? 0 : 1);
  }
  CHECK_EQ_INT(wait_child(pid), 0);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "world") == 0) _exit(world_process()); /* _exit: MPI's allocations live on */
  rt_parallel_request_threads(POOL); /* before the first loop fixes the count */
  RUN(child_keeps_thread_count);
  RUN(fork_after_compiling);
  if (!UNDER_TSAN) RUN(fork_during_remote_call);
  RUN(fork_during_compile);
  RUN(fork_during_traced_compile);
  RUN(fork_while_repro_lock_held);
  pthread_atfork(NULL, note_forked, NULL);
  RUN(fork_inside_cpu_locks);
  RUN(fork_inside_fork_lock);
  RUN(fork_while_world_locked);
  return TEST_REPORT();
}
