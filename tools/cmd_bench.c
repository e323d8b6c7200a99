/* latch bench: the model zoo (bench/harness.c) unless --micro or --peak is given.
 *
 * latch bench --micro: what capture costs per op, apart from running anything. For chains
 * of 10, 100 and 1,000 traced ops it times tracing (the public op call: checks, shape and
 * type inference, the node, its hash, the handle), hashing alone, cutting the graph and
 * hashing its key at sync, and the compile-cache lookup of that key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "capture/capture.h"
#include "cli.h"

void cmd_bench_usage(void) {
  bench_zoo_usage();
  fputs(
      "\n"
      "  --cache-url URL  the compile cache's remote tier (Redis) for every runtime the bench opens:\n"
      "                   redis://[user:password@]host[:port][/db] or unix:///path; sets\n"
      "                   LATCH_CACHE_URL, which latch_options_init reads\n"
      "latch bench --remote-lookups N [--cache-url URL]: remote-tier lookups per second, one\n"
      "connection (tools/bench_remote.c)\n"
      "\n"
      "latch bench --micro [--reps N]:\n"
      "Micro-benchmarks of lazy capture on chains of 10, 100 and 1,000 elementwise ops\n"
      "(f32[4,4] with a broadcast f32[4] operand), printing per chain length:\n"
      "  trace    ns per op for the public call (latch_binary), node hash included\n"
      "  hash     ns per node for the node hash alone\n"
      "  key      ns per sync to cut the graph and hash its key (and per node)\n"
      "  lookup   ns per compile-cache lookup of that key (a hit)\n"
      "Nothing is executed. --reps N repeats each measurement about N times 1,000 ops\n"
      "(default 200). Times are the thread's CPU time, best of three trials.\n"
      "Then traced functions, on the default backend: guard ns per call for 1, 4 and 16\n"
      "inputs; the dispatch overhead of a trace-once hit against trace-every on a tiny graph\n"
      "(call time minus the backend's execute); an MLP batch sweep 1..64 under the static\n"
      "and automatic shape policies (traces, backend compiles, instantiations).\n"
      "\n"
      "latch bench --peak N [--repeat R] [--json FILE]:\n"
      "The peak: the better of an f32 N x N by N x N product (the backend's dot kernel) and a\n"
      "3x3 convolution of 128 to 128 features over 56x56 at batch 8 (its convolution library),\n"
      "each through the runtime with LATCH_THREADS threads, one untimed run, then the median of\n"
      "R (default 5) wall times, printed as GFLOP/s and written to FILE.\n",
      stdout);
}

static int bench_peak_main(int argc, char **argv) {
  const char *n_text = NULL, *repeat_text = NULL, *json = NULL;
  cli_flag flags[] = {{"--peak", true, &n_text}, {"--repeat", true, &repeat_text}, {"--json", true, &json}};
  const char *positional[1];
  int positional_count = 0;
  int status = cli_parse_flags("bench", argc, argv, flags, 3, positional, &positional_count, 0);
  if (status != CLI_OK) return status;
  int n = n_text ? atoi(n_text) : 0, repeat = repeat_text ? atoi(repeat_text) : 5;
  if (n < 1 || n > 16384 || repeat < 1) {
    cli_error("bench: --peak takes a side from 1 to 16384 and --repeat at least 1; see 'latch bench --help'");
    return CLI_USAGE;
  }
  return bench_peak(n, repeat, json) == 0 ? CLI_OK : CLI_INTERNAL;
}

/* Thread CPU time, not wall time: the machines this runs on are often shared, and time
 * spent descheduled is not capture's cost. */
static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static double per(uint64_t ns, double count) { return count > 0 ? (double)ns / count : 0; }

/* A chain of n ops: t = (t + b) * b ... with the intermediate handles dropped as a
 * frontend drops temporaries. */
static latch_tensor *chain(latch_tensor *x, latch_tensor *b, int n) {
  latch_tensor *t = latch_retain(x);
  for (int i = 0; i < n; i++) {
    latch_tensor *next = latch_binary(i & 1 ? LATCH_MUL : LATCH_ADD, t, b);
    latch_release(t);
    t = next;
  }
  return t;
}

static int bench_micro(int reps) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  latch_runtime *rt = latch_open(&options);
  if (!rt) {
    cli_error("%s", latch_last_error());
    return CLI_INTERNAL;
  }
  float xs[16] = {0}, bs[4] = {1, 1, 1, 1};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 2, (int64_t[]){4, 4}, xs);
  latch_tensor *b = latch_from_host(rt, LATCH_F32, 1, (int64_t[]){4}, bs);
  printf("latch bench --micro: chains of f32[4,4] (+|*) f32[4], reference backend, nothing executed\n");
  printf("%8s %14s %14s %16s %14s %12s\n", "ops", "trace ns/op", "hash ns/node", "key ns/sync", "key ns/node",
         "lookup ns");
  static const int sizes[] = {10, 100, 1000};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    int n = sizes[s], rounds = reps * 1000 / n;
    if (rounds < 3) rounds = 3;
    /* Each figure is the best of three trials: the CPU time of a trial still grows when
     * other processes share the caches. */
    uint64_t trace_ns = UINT64_MAX, hash_ns = UINT64_MAX, key_ns = UINT64_MAX, lookup_ns = UINT64_MAX, sink = 0;
    /* Tracing, including releasing the chains (their frees are part of a frontend's step). */
    for (int trial = 0; trial < 3; trial++) {
      uint64_t start = cpu_ns();
      for (int r = 0; r < rounds; r++) latch_release(chain(x, b, n));
      trace_ns = min_u64(trace_ns, cpu_ns() - start);
    }
    latch_tensor *root = chain(x, b, n);
    /* Hashing alone, over the live chain's nodes. */
    cap_node **nodes = malloc(sizeof(cap_node *) * (size_t)n);
    int count = 0;
    for (cap_node *node = root->node; node && node->op == CAP_BINARY && count < n; node = node->operands[0])
      nodes[count++] = node;
    for (int trial = 0; trial < 3; trial++) {
      uint64_t start = cpu_ns();
      for (int r = 0; r < rounds; r++)
        for (int i = 0; i < count; i++) {
          cache_key key = {0, 0};
          if (cap_node_hash(nodes[i], &key)) sink += key.lo;
        }
      hash_ns = min_u64(hash_ns, cpu_ns() - start);
    }
    /* Cutting the graph and hashing its key, as a sync does before the lookup. */
    cap_graph g;
    for (int trial = 0; trial < 3; trial++) {
      uint64_t start = cpu_ns();
      for (int r = 0; r < rounds; r++) {
        cap_graph_collect(&g, rt->backend, 1, &root->node, NULL);
        sink += g.key.lo;
        if (r + 1 < rounds || trial < 2) cap_graph_free(&g);
      }
      key_ns = min_u64(key_ns, cpu_ns() - start);
    }
    /* The lookup: compile once (a miss), then time hits. */
    if (latch_sync(rt) != LATCH_OK) {
      cli_error("sync: %s", latch_last_error());
      return CLI_INTERNAL;
    }
    int lookups = rounds * 100;
    for (int trial = 0; trial < 3; trial++) {
      uint64_t start = cpu_ns();
      for (int r = 0; r < lookups; r++) cache_table_release(rt->cache, cache_table_get(rt->cache, g.key));
      lookup_ns = min_u64(lookup_ns, cpu_ns() - start);
    }
    cap_graph_free(&g);
    printf("%8d %14.1f %14.1f %16.0f %14.1f %12.1f\n", n, per(trace_ns, (double)rounds * n),
           per(hash_ns, (double)rounds * count), per(key_ns, rounds), per(key_ns, (double)rounds * n),
           per(lookup_ns, lookups));
    if (sink == 42) printf(" "); /* keeps the hashing loops from being optimized away */
    free(nodes);
    latch_release(root);
  }
  latch_stats stats;
  latch_get_stats(rt, &stats);
  printf("cache: %llu hits, %llu misses, %llu compiles\n", (unsigned long long)stats.cache_hits,
         (unsigned long long)stats.cache_misses, (unsigned long long)stats.compiles);
  latch_release(x), latch_release(b);
  latch_close(rt);
  printf("\n");
  return bench_function_micro() == 0 ? CLI_OK : CLI_INTERNAL;
}

/* Takes --cache-url URL (or --cache-url=URL) out of argv into LATCH_CACHE_URL: the zoo's
 * runtimes are opened through latch_options_init, which reads it. The new argc, or -1. */
static int take_cache_url(int argc, char **argv) {
  int kept = 0;
  for (int i = 0; i < argc; i++) {
    const char *url = NULL;
    if (strcmp(argv[i], "--cache-url") == 0) {
      if (i + 1 == argc) {
        cli_error("bench: --cache-url needs a URL");
        return -1;
      }
      url = argv[++i];
    } else if (strncmp(argv[i], "--cache-url=", 12) == 0) {
      url = argv[i] + 12;
    }
    if (url) setenv("LATCH_CACHE_URL", url, 1);
    else argv[kept++] = argv[i];
  }
  return kept;
}

int cmd_bench(int argc, char **argv) {
  if ((argc = take_cache_url(argc, argv)) < 0) return CLI_USAGE;
  if (argc == 2 && strcmp(argv[0], "--remote-lookups") == 0) {
    int count = atoi(argv[1]);
    if (count < 1) {
      cli_error("bench: --remote-lookups wants a count of at least 1");
      return CLI_USAGE;
    }
    return bench_remote_lookups(count);
  }
  bool is_micro = false, is_peak = false;
  for (int i = 0; i < argc; i++) is_micro = is_micro || strcmp(argv[i], "--micro") == 0;
  for (int i = 0; i < argc; i++) is_peak = is_peak || strcmp(argv[i], "--peak") == 0;
  if (is_peak && !is_micro) return bench_peak_main(argc, argv);
  if (!is_micro) return bench_zoo_main(argc, argv);
  const char *micro = NULL, *reps_text = NULL, *help = NULL;
  cli_flag flags[] = {{"--micro", false, &micro}, {"--reps", true, &reps_text}, {"--help", false, &help}};
  const char *positional[1];
  int positional_count = 0;
  int status = cli_parse_flags("bench", argc, argv, flags, 3, positional, &positional_count, 0);
  if (status != CLI_OK) return status;
  if (help) {
    cmd_bench_usage();
    return CLI_OK;
  }
  int reps = reps_text ? atoi(reps_text) : 200;
  if (!micro || reps < 1) {
    cli_error("bench: --reps must be at least 1; see 'latch bench --help'");
    return CLI_USAGE;
  }
  return bench_micro(reps);
}
