/* latch bisect's engine (minify/bisect.c) against faults injected into the cpu backend's own
 * choices (LATCH_FAULT=choice:KIND:N): the culprit named is the injected one, kind and
 * application, within 40 checks; a failure none of the choices causes is said to be none;
 * a module that passes has no culprit. Generated graphs (tests/gen_graph.h) with a fault at
 * a random one of their choices, CASES of them here; `make bisect-generated` runs 100 and
 * prints the hit rate and checks. */
#include <stdlib.h>

#include "gen_graph.h"
#include "hlo/hlo.h"
#include "minify/minify.h"
#include "runtime/cpu/cpu.h"
#include "runtime/reference/reference.h"
#include "runtime/runtime.h"
#include "test.h"

enum { CASES = 4, OPS = 300, MAX_CHECKS = 40 };

/* conv -> batch norm as capture lowers it -> relu: fold_affine folds the norm in. */
static const char *const bn =
    "HloModule bn\n"
    "ENTRY e {\n"
    "  x = f32[1,3,6,6] parameter(0)\n"
    "  w = f32[4,3,3,3] parameter(1)\n"
    "  mean = f32[4] parameter(2)\n  var = f32[4] parameter(3)\n"
    "  gamma = f32[4] parameter(4)\n  beta = f32[4] parameter(5)\n"
    "  c = f32[1,4,6,6] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    "  m = f32[1,4,6,6] broadcast(mean), dimensions={1}\n"
    "  v = f32[1,4,6,6] broadcast(var), dimensions={1}\n"
    "  eps = f32[] constant(1e-05)\n  eb = f32[1,4,6,6] broadcast(eps), dimensions={}\n"
    "  ve = f32[1,4,6,6] add(v, eb)\n  r = f32[1,4,6,6] rsqrt(ve)\n"
    "  d = f32[1,4,6,6] subtract(c, m)\n  nd = f32[1,4,6,6] multiply(d, r)\n"
    "  g = f32[1,4,6,6] broadcast(gamma), dimensions={1}\n  s = f32[1,4,6,6] multiply(nd, g)\n"
    "  b = f32[1,4,6,6] broadcast(beta), dimensions={1}\n  y = f32[1,4,6,6] add(s, b)\n"
    "  z = f32[] constant(0)\n  zb = f32[1,4,6,6] broadcast(z), dimensions={}\n"
    "  ROOT relu = f32[1,4,6,6] maximum(y, zb)\n}\n";

static hlo_module *parse(const char *text) {
  hlo_diag d = {HLO_OK, ""};
  hlo_module *m = hlo_parse_module(text, strlen(text), "test", &d);
  CHECK_MSG(m != NULL, "%s", d.message);
  return m;
}

/* The choices the cpu backend's compile of m makes, by a compile here with a log. */
typedef struct choice_list {
  min_choice items[4096];
  int count;
} choice_list;

static void note(void *context, const char *kind, const char *name, bool taken) {
  choice_list *l = context;
  (void)taken;
  if (l->count < 4096) {
    snprintf(l->items[l->count].kind, sizeof l->items[0].kind, "%s", kind);
    snprintf(l->items[l->count].name, sizeof l->items[0].name, "%s", name);
    l->count++;
  }
}

static void list(const hlo_module *m, choice_list *l) {
  l->count = 0;
  rt_compile_options o = RT_COMPILE_OPTIONS_INIT;
  o.choice_log = note;
  o.choice_log_context = l;
  hlo_diag d = {HLO_OK, ""};
  rt_executable *exe = rt_backend_cpu.compile(m, &o, &d);
  CHECK_MSG(exe != NULL, "%s", d.message);
  if (exe) rt_backend_cpu.destroy(exe);
}

/* Bisects m under choice:KIND:INDEX; the result's culprit must be that choice. */
static bool bisect_fault(const hlo_module *m, rt_value **inputs, const char *kind, int index, min_bisect_result *r,
                         bool quiet) {
  rt_fault fault;
  char text[96];
  snprintf(text, sizeof text, "choice:%s:%d", kind, index);
  hlo_diag d = {HLO_OK, ""};
  CHECK_EQ_INT(rt_fault_parse(text, &fault, &d), HLO_OK);
  min_bisect_request request = {.module = m, .inputs = inputs, .input_count = m->entry->param_count,
                                .backend = rt_fault_backend(&rt_backend_cpu, &fault)};
  request.predicate = (min_predicate){.kind = MIN_CHECK_ACCURACY, .backend = request.backend,
                                      .tol = RT_ACCURACY_DEFAULT_TOL, .timeout_s = 60};
  hlo_status status = min_bisect(&request, r, &d);
  CHECK_MSG(status == HLO_OK, "%s: %s", text, d.message);
  bool named = status == HLO_OK && strcmp(r->choice.kind, kind) == 0 && r->application == index;
  if (!named && !quiet) fprintf(stderr, "%s: %s (%d checks)\n", text, r->line, r->checks);
  return named;
}

/* Two 3x3 convolutions over 64 features, each with a relu: Winograd and blocked layouts
 * where this host's oneDNN offers them, fusion otherwise. */
static const char *const convs =
    "HloModule conv2\n"
    "ENTRY e {\n"
    "  x = f32[1,64,28,28] parameter(0)\n"
    "  w1 = f32[64,64,3,3] parameter(1)\n  w2 = f32[64,64,3,3] parameter(2)\n"
    "  c1 = f32[1,64,28,28] convolution(x, w1), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    "  z = f32[] constant(0)\n  zb = f32[1,64,28,28] broadcast(z), dimensions={}\n"
    "  r1 = f32[1,64,28,28] maximum(c1, zb)\n"
    "  c2 = f32[1,64,28,28] convolution(r1, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    "  ROOT r2 = f32[1,64,28,28] maximum(c2, zb)\n}\n";

/* Every choice the compile of text makes, each in turn as the fault: bisect names it (its
 * kind, application and instruction) within the checks. */
static void every_choice(const char *text) {
  hlo_module *m = parse(text);
  if (!m) return;
  rt_value **inputs = gen_inputs(m, 7);
  choice_list *l = calloc(1, sizeof *l);
  list(m, l);
  CHECK(l->count > 0);
  for (int i = 0; i < l->count; i++) {
    int index = 0;
    for (int j = 0; j <= i; j++) index += strcmp(l->items[j].kind, l->items[i].kind) == 0;
    min_bisect_result r;
    CHECK_MSG(bisect_fault(m, inputs, l->items[i].kind, index, &r, false), "%s %d", l->items[i].kind, index);
    CHECK_STR(r.choice.name, l->items[i].name);
    CHECK_EQ_INT(r.culprit, i + 1);
    CHECK(r.checks <= MAX_CHECKS);
  }
  free(l);
  gen_free_inputs(inputs, m->entry->param_count);
  hlo_module_free(m);
}

static void test_conv_choices(void) {
  every_choice(convs);
}

static int count_choice(const choice_list *l, const char *kind, const char *name) {
  int count = 0;
  for (int i = 0; i < l->count; i++) count += strcmp(l->items[i].kind, kind) == 0 && strcmp(l->items[i].name, name) == 0;
  return count;
}

/* A product on the gemm path (64 rows): where f32 gemm is oneDNN's (the backend describes
 * its products as onednn), the compile asks once whether this one may run there
 * (onednn_product), elsewhere never; bisect names the choice when it is there. Each oneDNN
 * convolution asks whether it may trust inputs known finite (known_finite). */
static void test_product_and_finite_choices(void) {
  static const char *const product = "HloModule p\nENTRY e {\n  a = f32[64,128] parameter(0)\n"
                                     "  b = f32[128,96] parameter(1)\n"
                                     "  ROOT d = f32[64,96] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  hlo_module *m = parse(product);
  if (!m) return;
  choice_list *l = calloc(1, sizeof *l);
  list(m, l);
  char described[256];
  rt_backend_cpu.describe(described, sizeof described);
  bool on_dnnl = strstr(described, "products=onednn") != NULL;
  CHECK_EQ_INT(count_choice(l, "onednn_product", "d"), on_dnnl ? 1 : 0);
  if (on_dnnl) every_choice(product);
  hlo_module_free(m);
  m = parse(convs);
  if (m) {
    list(m, l);
    CHECK_EQ_INT(count_choice(l, "known_finite", "c1"), 1);
    CHECK_EQ_INT(count_choice(l, "known_finite", "c2"), 1);
    hlo_module_free(m);
  }
  free(l);
}

/* The fold_affine pass's one application, and each choice the bn module's compile makes. */
static void test_bn_choices(void) {
  hlo_module *m = parse(bn);
  if (!m) return;
  rt_value **inputs = gen_inputs(m, 7);
  choice_list *l = calloc(1, sizeof *l);
  list(m, l);
  int folds = 0;
  for (int i = 0; i < l->count; i++) folds += strcmp(l->items[i].kind, "fold_affine") == 0;
  CHECK_EQ_INT(folds, 1);
  min_bisect_result r;
  CHECK(bisect_fault(m, inputs, "fold_affine", 1, &r, false));
  CHECK_STR(r.line, "culprit: pass fold_affine, application 1 of 1 (%c)");
  CHECK(r.is_pass);
  CHECK(r.checks <= MAX_CHECKS);
  free(l);
  every_choice(bn);
  gen_free_inputs(inputs, m->entry->param_count);
  hlo_module_free(m);
}

/* A failure that is no choice's (cosine wrong whatever is chosen): none named. A module
 * that passes: no culprit at all. */
static void test_not_a_choice(void) {
  hlo_module *m = parse("HloModule c\nENTRY e {\n  x = f32[8] parameter(0)\n  c = f32[8] cosine(x)\n"
                        "  ROOT t = f32[8] tanh(c)\n}\n");
  if (!m) return;
  rt_value **inputs = gen_inputs(m, 1);
  rt_fault fault = {.kind = RT_FAULT_ACCURACY, .opcode = HLO_OP_COS, .eps = 0.5};
  min_bisect_request request = {.module = m, .inputs = inputs, .input_count = 1,
                                .backend = rt_fault_backend(&rt_backend_cpu, &fault)};
  request.predicate = (min_predicate){.kind = MIN_CHECK_ACCURACY, .backend = request.backend,
                                      .tol = RT_ACCURACY_DEFAULT_TOL, .timeout_s = 60};
  min_bisect_result r;
  hlo_diag d = {HLO_OK, ""};
  CHECK_EQ_INT(min_bisect(&request, &r, &d), HLO_OK);
  CHECK_EQ_INT(r.culprit, 0);
  CHECK_MSG(strstr(r.line, "culprit: none of the backend's") != NULL, "%s", r.line);
  request.backend = request.predicate.backend = &rt_backend_cpu;
  CHECK_EQ_INT(min_bisect(&request, &r, &d), HLO_ERR_INPUT);
  CHECK(strstr(d.message, "does not fail") != NULL);
  gen_free_inputs(inputs, 1);
  hlo_module_free(m);
}

/* Generated graphs, culprits as outputs and culprits feeding other ops: a fault at a random
 * choice of each, which bisect must name. */
static void run_generated(int cases) {
  int named = 0, worst = 0, total = 0, tried = 0, in_passes = 0;
  choice_list *l = calloc(1, sizeof *l);
  for (int c = 0; c < cases; c++) {
    int position;
    hlo_module *m = c % 2 ? gen_graph_pair((uint64_t)c, OPS, HLO_OP_COS, HLO_OP_SIN, true, c % 4 == 1)
                          : gen_graph((uint64_t)c, OPS, HLO_OP_COS, &position);
    CHECK(m != NULL);
    if (!m) continue;
    list(m, l);
    CHECK(l->count > 0);
    if (l->count == 0) {
      hlo_module_free(m);
      continue;
    }
    uint64_t pick = ((uint64_t)c * 0x9e3779b97f4a7c15ull) >> 33;
    int at = (int)(pick % (uint64_t)l->count);
    int index = 0;
    for (int j = 0; j <= at; j++) index += strcmp(l->items[j].kind, l->items[at].kind) == 0;
    rt_value **inputs = gen_inputs(m, (uint64_t)c);
    min_bisect_result r;
    bool hit = bisect_fault(m, inputs, l->items[at].kind, index, &r, cases > CASES);
    hit = hit && r.checks <= MAX_CHECKS;
    named += hit;
    in_passes += r.is_pass;
    tried++;
    total += r.checks;
    if (r.checks > worst) worst = r.checks;
    gen_free_inputs(inputs, m->entry->param_count);
    hlo_module_free(m);
  }
  free(l);
  printf("bisect on generated graphs: %d of %d culprits named within %d checks (%d in passes, %d in kernel choices); "
         "checks mean %.1f, max %d\n",
         named, tried, MAX_CHECKS, in_passes, tried - in_passes, tried ? (double)total / tried : 0.0, worst);
  CHECK_MSG(named * 100 >= 95 * tried, "%d of %d named", named, tried);
}

static int cases = CASES;

static void test_generated(void) {
  run_generated(cases);
}

int main(int argc, char **argv) {
  if (argc > 1) cases = atoi(argv[1]) > 0 ? atoi(argv[1]) : CASES;
  if (argc <= 1) {
    RUN(test_bn_choices);
    RUN(test_conv_choices);
    RUN(test_product_and_finite_choices);
    RUN(test_not_a_choice);
  }
  RUN(test_generated);
  return TEST_REPORT();
}
