/* The minifier on small modules whose minimal repros are known by hand: candidates, each
 * strategy's effect, crash and hang isolation, the external-command predicate, flakiness. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "eval_util.h"
#include "hlo/hlo.h"
#include "minify/minify.h"
#include "minify/minify_internal.h"
#include "runtime/runtime.h"
#include "runtime/reference/reference.h"

/* x=(1,2,3), y=(1,1,1): a=(2,3,4), b=(4,9,16), c=cos(b), d=tanh(c). */
static const char *const small =
    "HloModule s\n"
    "ENTRY e {\n"
    "  x = f32[3] parameter(0)\n"
    "  y = f32[3] parameter(1)\n"
    "  unused = f32[3] parameter(2)\n"
    "  a = f32[3] add(x, y)\n"
    "  b = f32[3] multiply(a, a)\n"
    "  dead = f32[3] subtract(x, y)\n"
    "  c = f32[3] cosine(b)\n"
    "  d = f32[3] tanh(c)\n"
    "  ROOT r = (f32[3], f32[3]) tuple(d, a)\n"
    "}\n";

static hlo_module *parse(const char *text) {
  hlo_diag d = {HLO_OK, ""};
  hlo_module *m = hlo_parse_module(text, strlen(text), "test", &d);
  CHECK_MSG(m != NULL, "%s", d.message);
  return m;
}

static rt_value **small_inputs(void) {
  int64_t dims[1] = {3};
  rt_value **in = calloc(3, sizeof *in);
  in[0] = make_value(HLO_F32, 1, dims, (double[]){1, 2, 3});
  in[1] = make_value(HLO_F32, 1, dims, (double[]){1, 1, 1});
  in[2] = make_value(HLO_F32, 1, dims, (double[]){7, 7, 7});
  return in;
}

static void free_inputs(rt_value **in, int n) {
  for (int i = 0; i < n; i++) rt_value_release(in[i]);
  free(in);
}

static int find(const hlo_module *m, const char *name) {
  for (int i = 0; i < m->entry->instr_count; i++)
    if (strcmp(m->entry->instrs[i]->name, name) == 0) return i;
  return -1;
}

static void check_values(const rt_value *v, const double *want, int n) {
  CHECK(v != NULL);
  for (int i = 0; v && i < n; i++) CHECK_NEAR(rt_get_f64(v, i), want[i], 0);
}

/* The only op of m, or NULL when there are more or none. */
static const hlo_instr *only_op(const hlo_module *m) {
  const hlo_instr *op = NULL;
  for (int i = 0; i < m->entry->instr_count; i++) {
    const hlo_instr *instr = m->entry->instrs[i];
    if (instr->opcode == HLO_OP_PARAMETER || instr->opcode == HLO_OP_CONSTANT) continue;
    if (op) return NULL;
    op = instr;
  }
  return op;
}

static void test_candidates(void) {
  hlo_module *m = parse(small);
  rt_value **in = small_inputs();
  int n = m->entry->instr_count;
  min_disp disp[16] = {0};
  rt_value *values[16] = {0};
  int b = find(m, "b");
  int64_t dims[1] = {3};
  values[b] = make_value(HLO_F32, 1, dims, (double[]){4, 9, 16});
  /* b becomes a parameter: x and y still feed a (an output), unused and dead go. */
  disp[b] = MIN_TO_PARAM;
  min_plan plan = {disp, NULL, 0};
  rt_value **new_in = NULL;
  int new_count = 0;
  hlo_diag d = {HLO_OK, ""};
  hlo_module *c = min_build(m, in, values, &plan, &new_in, &new_count, &d);
  CHECK_MSG(c != NULL, "%s", d.message);
  if (c) {
    CHECK_EQ_INT(c->entry->instr_count, n - 2);
    CHECK_EQ_INT(new_count, 3);
    CHECK_EQ_INT(c->entry->param_count, 3);
    CHECK(find(c, "dead") < 0 && find(c, "unused") < 0);
    CHECK_STR(c->entry->params[2]->name, "b");
    check_values(new_in[0], (double[]){1, 2, 3}, 3);
    check_values(new_in[2], (double[]){4, 9, 16}, 3);
    free_inputs(new_in, new_count);
    hlo_module_free(c);
  }
  /* b becomes a constant holding its value, c the only output: x, y, a go too. */
  disp[b] = MIN_TO_CONST;
  int outputs[1] = {find(m, "c")};
  plan.outputs = outputs;
  plan.output_count = 1;
  c = min_build(m, in, values, &plan, &new_in, &new_count, &d);
  CHECK_MSG(c != NULL, "%s", d.message);
  if (c) {
    CHECK_EQ_INT(c->entry->instr_count, 2);
    CHECK_EQ_INT(new_count, 0);
    char *text = hlo_module_to_text(c);
    CHECK(strstr(text, "f32[3] constant({4, 9, 16})") != NULL);
    CHECK(strstr(text, "ROOT %c = f32[3] cosine(%b)") != NULL);
    free(text);
    free_inputs(new_in, new_count);
    hlo_module_free(c);
  }
  rt_value_release(values[b]);
  CHECK_EQ_INT(min_count_ops(m), 6);
  free_inputs(in, 3);
  hlo_module_free(m);
}

static min_options options_for(min_check_kind kind, rt_fault_kind fault_kind, hlo_opcode op, double timeout) {
  min_options o = {0};
  rt_fault fault = {.kind = fault_kind, .opcode = op, .eps = 0.5};
  o.predicate.kind = kind;
  o.predicate.backend = rt_fault_backend(&rt_backend_reference, &fault);
  o.predicate.tol = RT_ACCURACY_DEFAULT_TOL;
  o.predicate.timeout_s = timeout;
  return o;
}

/* Minifies small under o; the repro must be want_op alone. */
static void minify_small(const min_options *o, hlo_opcode want_op, min_kind want_kind, min_report *report) {
  hlo_module *m = parse(small);
  rt_value **in = small_inputs();
  hlo_diag d = {HLO_OK, ""};
  hlo_status status = min_minify(m, in, 3, o, report, &d);
  CHECK_MSG(status == HLO_OK, "%s", d.message);
  CHECK_EQ_INT(report->failure.kind, want_kind);
  if (status == HLO_OK) {
    const hlo_instr *op = only_op(report->module);
    CHECK_MSG(op && op->opcode == want_op, "repro has %d ops", report->ops_after);
    CHECK_EQ_INT(report->instrs_before, 9);
    CHECK_EQ_INT(report->reproduced, 3);
    CHECK(!report->flaky);
  }
  free_inputs(in, 3);
  hlo_module_free(m);
}

static void test_compile_fault(void) {
  min_options o = options_for(MIN_CHECK_COMPILE, RT_FAULT_COMPILE, HLO_OP_COS, 30);
  min_report r;
  minify_small(&o, HLO_OP_COS, MIN_COMPILE_ERROR, &r);
  CHECK_EQ_INT(r.failure.opcode, HLO_OP_COS);
  CHECK_EQ_INT(r.failure.status, HLO_ERR_UNSUPPORTED);
  /* cosine's operand b became a parameter; a compile check computes no values, so the repro
   * has the inputs `latch run --seed 0` makes for f32[3], not b's (4, 9, 16). */
  CHECK_EQ_INT(r.input_count, 1);
  if (r.input_count == 1) {
    int64_t dims[1] = {3};
    hlo_shape shape = hlo_shape_make(HLO_F32, 1, dims);
    hlo_diag d = {HLO_OK, ""};
    rt_value *seeded = rt_random_value(&shape, 0, 0, &d);
    CHECK(r.inputs[0] && r.inputs[0]->count == 3 && memcmp(r.inputs[0]->data, seeded->data, 12) == 0);
    rt_value_release(seeded);
  }
  CHECK(r.wins[MIN_TRUNCATE] + r.wins[MIN_OUTPUTS] > 0);
  CHECK(r.wins[MIN_NEEDED] + r.wins[MIN_PROMOTE] > 0); /* b cut: cosine kept alone, or b promoted */
  min_report_free(&r);
}

/* A compile check reads no input data: a step whose parameters would take 16 TiB minifies
 * (with no inputs given at all). Its repro is the culprit on f32[1,1] with seeded data, or
 * with keep_shapes the culprit at its size with shapes only. */
static void test_compile_needs_no_data(void) {
  hlo_module *m = parse("HloModule huge\n"
                        "ENTRY e {\n"
                        "  x = f32[2097152,2097152] parameter(0)\n"
                        "  y = f32[2097152,2097152] parameter(1)\n"
                        "  a = f32[2097152,2097152] add(x, y)\n"
                        "  b = f32[2097152,2097152] multiply(a, x)\n"
                        "  c = f32[2097152,2097152] cosine(b)\n"
                        "  ROOT d = f32[2097152,2097152] tanh(c)\n"
                        "}\n");
  min_options o = options_for(MIN_CHECK_COMPILE, RT_FAULT_COMPILE, HLO_OP_COS, 30);
  min_report r;
  hlo_diag d = {HLO_OK, ""};
  for (int keep = 0; keep < 2; keep++) {
    o.keep_shapes = keep;
    hlo_status status = min_minify(m, NULL, 0, &o, &r, &d);
    CHECK_MSG(status == HLO_OK, "%s", d.message);
    if (status != HLO_OK) continue;
    const hlo_instr *op = only_op(r.module);
    CHECK(op && op->opcode == HLO_OP_COS);
    CHECK_EQ_INT(r.input_count, 1);
    CHECK_NEAR(r.input_bytes_before, 2 * 16.0 * 1024 * 1024 * 1024 * 1024, 0);
    if (keep) {
      CHECK(r.input_count == 1 && r.inputs[0] == NULL); /* 16 TiB: shapes only, the repro uses the seed */
      CHECK_NEAR(r.input_bytes_after, 16.0 * 1024 * 1024 * 1024 * 1024, 0);
    } else {
      CHECK(r.input_count == 1 && r.inputs[0] && r.inputs[0]->count == 1);
      CHECK_NEAR(r.input_bytes_after, 4, 0); /* f32[1,1] */
      CHECK(r.wins[MIN_SHAPES] == 1);
    }
    min_report_free(&r);
  }
  hlo_module_free(m);
}

/* A dead instruction is the culprit: the compile still fails on it, so DCE must not win. */
static void test_dead_culprit(void) {
  min_options o = options_for(MIN_CHECK_COMPILE, RT_FAULT_COMPILE, HLO_OP_SUBTRACT, 30);
  min_report r;
  minify_small(&o, HLO_OP_SUBTRACT, MIN_COMPILE_ERROR, &r);
  CHECK_EQ_INT(r.wins[MIN_DCE], 0);
  CHECK_EQ_INT(r.input_count, 2); /* x and y */
  min_report_free(&r);
}

static void test_accuracy_fault(void) {
  min_options o = options_for(MIN_CHECK_ACCURACY, RT_FAULT_ACCURACY, HLO_OP_MULTIPLY, 30);
  min_report r;
  minify_small(&o, HLO_OP_MULTIPLY, MIN_ACCURACY, &r);
  min_report_free(&r);
}

static void test_crash_is_a_failure(void) {
  min_options o = options_for(MIN_CHECK_COMPILE, RT_FAULT_CRASH, HLO_OP_COS, 30);
  min_report r;
  minify_small(&o, HLO_OP_COS, MIN_CRASH, &r);
  CHECK_EQ_INT(r.failure.signal, SIGABRT);
  min_report_free(&r);
}

static void test_hang_is_a_failure(void) {
  min_options o = options_for(MIN_CHECK_COMPILE, RT_FAULT_HANG, HLO_OP_COS, 0.3);
  min_report r;
  minify_small(&o, HLO_OP_COS, MIN_HANG, &r);
  min_report_free(&r);
}

static void test_command(void) {
  char dir[] = "/tmp/latch-test-minify-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  min_options o = {0};
  o.predicate.kind = MIN_CHECK_COMMAND;
  o.predicate.command = "grep -q cosine"; /* exit 0, still failing, while a cosine is left */
  o.predicate.work_dir = dir;
  o.predicate.timeout_s = 30;
  min_report r;
  minify_small(&o, HLO_OP_COS, MIN_COMMAND, &r);
  min_report_free(&r);
  o.predicate.command = "! grep -q tanh"; /* the flipped convention: non-zero means failing */
  o.predicate.command_nonzero = true;
  minify_small(&o, HLO_OP_TANH, MIN_COMMAND, &r);
  min_report_free(&r);
  char command[256];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  CHECK(system(command) == 0);
}

/* A backend that refuses cosine and tanh, naming the last of them in the module. */
static rt_executable *picky_compile(const hlo_module *m, const rt_compile_options *o, hlo_diag *d) {
  const hlo_instr *last = NULL;
  for (int i = 0; i < m->entry->instr_count; i++) {
    hlo_opcode op = m->entry->instrs[i]->opcode;
    if (op == HLO_OP_COS || op == HLO_OP_TANH) last = m->entry->instrs[i];
  }
  if (!last) return rt_backend_reference.compile(m, o, d);
  hlo_diag_set(d, HLO_ERR_UNSUPPORTED, "no kernel for %s %%%s", hlo_opcode_name(last->opcode), last->name);
  return NULL;
}

/* The original fails on tanh; prefixes that stop at cosine fail too, but on another op: they
 * are another bug, and the repro must be tanh alone. */
static void test_same_op_only(void) {
  rt_backend picky = rt_backend_reference;
  picky.compile = picky_compile;
  min_options o = {0};
  o.predicate.kind = MIN_CHECK_COMPILE;
  o.predicate.backend = &picky;
  o.predicate.timeout_s = 30;
  min_report r;
  minify_small(&o, HLO_OP_TANH, MIN_COMPILE_ERROR, &r);
  CHECK_EQ_INT(r.failure.opcode, HLO_OP_TANH);
  min_report_free(&r);
}

/* A test that wants cosine with its operand b computed in the module, not passed in: making
 * b a parameter loses the failure, making it a constant keeps it. */
static void test_constant_strategy(void) {
  char dir[] = "/tmp/latch-test-constant-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  min_options o = {0};
  o.predicate.kind = MIN_CHECK_COMMAND;
  o.predicate.command = "grep -q 'cosine(%b)' \"$1\" && ! grep -q '%b = f32\\[3\\] parameter'";
  o.predicate.work_dir = dir;
  o.predicate.timeout_s = 30;
  hlo_module *m = parse(small);
  rt_value **in = small_inputs();
  min_report r;
  hlo_diag d = {HLO_OK, ""};
  CHECK_EQ_INT(min_minify(m, in, 3, &o, &r, &d), HLO_OK);
  if (r.module) {
    char *text = hlo_module_to_text(r.module);
    CHECK_MSG(strstr(text, "%b = f32[3] constant({4, 9, 16})") != NULL, "%s", text);
    CHECK_EQ_INT(r.ops_after, 1);
    CHECK(r.wins[MIN_CONSTANT] > 0);
    free(text);
  }
  min_report_free(&r);
  free_inputs(in, 3);
  hlo_module_free(m);
  char command[256];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  CHECK(system(command) == 0);
}

static void test_not_failing(void) {
  hlo_module *m = parse(small);
  rt_value **in = small_inputs();
  min_options o = options_for(MIN_CHECK_COMPILE, RT_FAULT_COMPILE, HLO_OP_DOT, 30);
  min_report r;
  hlo_diag d = {HLO_OK, ""};
  CHECK_EQ_INT(min_minify(m, in, 3, &o, &r, &d), HLO_ERR_INPUT);
  CHECK_EQ_INT(r.failure.kind, MIN_PASS);
  CHECK(strstr(d.message, "does not fail") != NULL);
  free_inputs(in, 3);
  hlo_module_free(m);
}

/* cosine's result multiplied by zero: a cosine that computes wrong values is harmless here,
 * so the module passes the accuracy check and there is nothing to minify, although cosine
 * fails on its own. */
static void test_masked_failure(void) {
  hlo_module *m = parse("HloModule masked\n"
                        "ENTRY e {\n"
                        "  x = f32[3] parameter(0)\n"
                        "  c = f32[3] cosine(x)\n"
                        "  z = f32[] constant(0)\n"
                        "  zb = f32[3] broadcast(z), dimensions={}\n"
                        "  ROOT m = f32[3] multiply(c, zb)\n"
                        "}\n");
  rt_value **in = small_inputs();
  min_options o = options_for(MIN_CHECK_ACCURACY, RT_FAULT_ACCURACY, HLO_OP_COS, 30);
  o.rechecks = 1;
  min_report r;
  hlo_diag d = {HLO_OK, ""};
  CHECK_EQ_INT(min_minify(m, in, 1, &o, &r, &d), HLO_ERR_INPUT);
  CHECK_EQ_INT(r.failure.kind, MIN_PASS);
  CHECK(r.module == NULL);
  CHECK_MSG(strstr(d.message, "does not fail") != NULL, "%s", d.message);
  free_inputs(in, 3);
  hlo_module_free(m);
}

/* Progress lines into a string. */
static char progress_text[1 << 16];

static FILE *progress_open(void) {
  progress_text[0] = 0;
  return fmemopen(progress_text, sizeof progress_text - 1, "w");
}

/* Under crash:cosine the accuracy check crashes: that is the failure kept (with the op the
 * crash names), and no check that crashes is taken for a pass. */
static void test_crash_in_accuracy_check(void) {
  min_options o = options_for(MIN_CHECK_ACCURACY, RT_FAULT_CRASH, HLO_OP_COS, 30);
  o.progress = progress_open();
  min_report r;
  minify_small(&o, HLO_OP_COS, MIN_CRASH, &r);
  fclose(o.progress);
  CHECK_EQ_INT(r.failure.signal, SIGABRT);
  CHECK_EQ_INT(r.failure.opcode, HLO_OP_COS);
  CHECK_MSG(strstr(progress_text, " pass\n") == NULL, "%s", progress_text);
  CHECK_EQ_INT(r.wins[MIN_SCAN], 0);
  min_report_free(&r);
}

/* Two accuracy failures: ca (output 1) comes first in the module, cb feeds output 0, the
 * one the check names. The repro keeps output 0's failure: cb alone, named as the first op
 * whose value differs; ca, which fails on its own, is another failure. */
static void test_two_accuracy_failures(void) {
  hlo_module *m = parse("HloModule two\n"
                        "ENTRY e {\n"
                        "  x = f32[3] parameter(0)\n"
                        "  ca = f32[3] cosine(x)\n"
                        "  y = f32[3] add(x, x)\n"
                        "  cb = f32[3] cosine(y)\n"
                        "  nb = f32[3] negate(cb)\n"
                        "  ROOT r = (f32[3], f32[3]) tuple(nb, ca)\n"
                        "}\n");
  rt_value **in = small_inputs();
  for (int scan = 0; scan < 2; scan++) {
    min_options o = options_for(MIN_CHECK_ACCURACY, RT_FAULT_ACCURACY, HLO_OP_COS, 30);
    o.no_scan = scan == 0;
    min_report r;
    hlo_diag d = {HLO_OK, ""};
    CHECK_EQ_INT(min_minify(m, in, 1, &o, &r, &d), HLO_OK);
    if (!r.module) continue;
    const hlo_instr *op = only_op(r.module);
    CHECK_MSG(op && strcmp(op->name, "cb") == 0, "scan %d: repro has %d ops, first %s", scan, r.ops_after,
              op ? op->name : "-");
    CHECK_EQ_INT(r.failed_output, 0);
    CHECK_STR(r.first_differing, "cb");
    CHECK_EQ_INT(r.reproduced, 3);
    /* any failure: the first failing piece found is taken, whichever output it feeds */
    min_report_free(&r);
    o.any_failure = true;
    CHECK_EQ_INT(min_minify(m, in, 1, &o, &r, &d), HLO_OK);
    op = r.module ? only_op(r.module) : NULL;
    CHECK(op && op->opcode == HLO_OP_COS);
    min_report_free(&r);
  }
  free_inputs(in, 3);
  hlo_module_free(m);
}

/* Message classes: names, numbers and shapes are not part of the kind of error. */
static void test_message_class(void) {
  char a[256], b[256];
  min_message_class("backend cpu cannot compile cosine %cosine.3 (f32[3,4]) at 12", a, sizeof a);
  CHECK_STR(a, "backend cpu cannot compile cosine at");
  min_message_class("backend cpu cannot compile cosine %c (f32[1])", b, sizeof b);
  CHECK_STR(b, "backend cpu cannot compile cosine");
  min_outcome x = {.kind = MIN_COMPILE_ERROR, .status = HLO_ERR_UNSUPPORTED, .opcode = HLO_OP_COS};
  min_outcome y = x;
  snprintf(x.message, sizeof x.message, "cannot compile cosine %%c.1");
  snprintf(y.message, sizeof y.message, "cannot compile cosine %%c.2");
  CHECK(min_outcome_same(&x, &y));
  snprintf(y.message, sizeof y.message, "out of scratch memory compiling cosine %%c.2");
  CHECK(!min_outcome_same(&x, &y));
}

/* A backend that fails every other compile, counting in a file (checks run in children). */
static char counter_path[64];
static rt_executable *alternating_compile(const hlo_module *m, const rt_compile_options *o, hlo_diag *d) {
  FILE *f = fopen(counter_path, "r+");
  int count = 0;
  if (f) {
    if (fscanf(f, "%d", &count) != 1) count = 0;
    rewind(f);
    fprintf(f, "%d\n", count + 1);
    fclose(f);
  }
  if (count % 2 == 0) {
    hlo_diag_set(d, HLO_ERR_UNSUPPORTED, "cannot compile cosine %%c");
    return NULL;
  }
  return rt_backend_reference.compile(m, o, d);
}

static void test_flaky(void) {
  snprintf(counter_path, sizeof counter_path, "/tmp/latch-flaky-%d", (int)getpid());
  FILE *f = fopen(counter_path, "w");
  fputs("0\n", f);
  fclose(f);
  rt_backend flaky = rt_backend_reference;
  flaky.compile = alternating_compile;
  min_options o = {0};
  o.predicate.kind = MIN_CHECK_COMPILE;
  o.predicate.backend = &flaky;
  o.predicate.timeout_s = 30;
  hlo_module *m = parse(small);
  rt_value **in = small_inputs();
  min_report r;
  hlo_diag d = {HLO_OK, ""};
  CHECK_EQ_INT(min_minify(m, in, 3, &o, &r, &d), HLO_OK);
  CHECK(r.flaky);
  CHECK(r.reproduced < r.rechecks);
  min_report_free(&r);
  free_inputs(in, 3);
  hlo_module_free(m);
  unlink(counter_path);
}

static void test_outcomes(void) {
  hlo_module *m = parse(small);
  CHECK_EQ_INT(min_opcode_in_message(m, "backend x cannot compile %c."), HLO_OP_COS);
  CHECK_EQ_INT(min_opcode_in_message(m, "no dot support"), HLO_OP_DOT);
  CHECK_EQ_INT(min_opcode_in_message(m, "x: cosine is not supported"), HLO_OP_COS);
  CHECK_EQ_INT(min_opcode_in_message(m, "cannot lower d"), HLO_OP_TANH);
  CHECK_EQ_INT(min_opcode_in_message(m, "out of memory"), HLO_OP_COUNT);
  min_outcome a = {.kind = MIN_COMPILE_ERROR, .status = HLO_ERR_UNSUPPORTED, .opcode = HLO_OP_COS};
  min_outcome b = a;
  CHECK(min_outcome_same(&a, &b));
  b.opcode = HLO_OP_TANH; /* an error on another op is another bug */
  CHECK(!min_outcome_same(&a, &b));
  b = a;
  b.status = HLO_ERR_INTERNAL;
  CHECK(!min_outcome_same(&a, &b));
  min_outcome crash = {.kind = MIN_CRASH, .signal = SIGSEGV}, abrt = {.kind = MIN_CRASH, .signal = SIGABRT};
  CHECK(!min_outcome_same(&crash, &abrt));
  CHECK(!min_outcome_same(&a, &crash));
  hlo_module_free(m);
}

/* The capture layer's entry point leaves a repro directory with all four parts. */
static void test_auto_repro(void) {
  hlo_module *m = parse(small);
  rt_value **in = small_inputs();
  rt_fault fault = {.kind = RT_FAULT_ACCURACY, .opcode = HLO_OP_COS, .eps = 0.5};
  min_auto_request request = {.module = m, .inputs = in, .input_count = 3,
                              .backend = rt_fault_backend(&rt_backend_reference, &fault),
                              .kind = MIN_CHECK_ACCURACY};
  char path[256] = "", file[512];
  hlo_diag d = {HLO_OK, ""};
  CHECK_EQ_INT(min_auto_repro(&request, path, sizeof path, &d), HLO_OK);
  CHECK(strncmp(path, "/tmp/latch-repro-", 17) == 0);
  /* The repro is cosine alone (its operand b a parameter: 2 instructions), and it fails
   * the check the same way when read back from the directory. */
  snprintf(file, sizeof file, "%s/repro.hlo", path);
  hlo_module **read = NULL;
  int count = hlo_parse_file(file, &read, &d);
  CHECK_EQ_INT(count, 1);
  if (count == 1) {
    const hlo_instr *op = only_op(read[0]);
    CHECK(op && op->opcode == HLO_OP_COS);
    CHECK_EQ_INT(read[0]->entry->instr_count, 2);
    snprintf(file, sizeof file, "%s/inputs/0.npy", path);
    rt_value *b = rt_npy_read(file, &d);
    CHECK_MSG(b != NULL, "%s", d.message);
    /* b = (x + y)^2 = (4, 9, 16) */
    if (b) check_values(b, (double[]){4, 9, 16}, 3);
    min_predicate p = {.kind = MIN_CHECK_ACCURACY, .backend = request.backend, .tol = RT_ACCURACY_DEFAULT_TOL,
                       .timeout_s = 30};
    min_outcome again;
    CHECK_EQ_INT(min_check(&p, read[0], &b, 1, &again, &d), HLO_OK);
    CHECK_EQ_INT(again.kind, MIN_ACCURACY);
    rt_value_release(b);
    hlo_module_free(read[0]);
  }
  free(read);
  /* report.txt carries the context the kernels depend on, and repro.sh sets the settings. */
  char text[8192] = "";
  snprintf(file, sizeof file, "%s/report.txt", path);
  FILE *f = fopen(file, "r");
  if (f) {
    text[fread(text, 1, sizeof text - 1, f)] = 0;
    fclose(f);
  }
  char want[256];
  snprintf(want, sizeof want, "build:      %s\n", rt_build_id());
  CHECK_MSG(strstr(text, want) != NULL, "%s", text);
  snprintf(want, sizeof want, "threads:    %d\n", rt_parallel_threads());
  CHECK_MSG(strstr(text, want) != NULL, "%s", text);
  CHECK(strstr(text, "\ncpu:        ") != NULL);
  CHECK(strstr(text, "settings:   LATCH_NO_FUSION=0 LATCH_THREADS=") != NULL);
  CHECK(strstr(text, "differs:    %c is the first op found whose value differs (output 0 of the original fails)"));
  snprintf(file, sizeof file, "grep -q '^export LATCH_NO_FUSION=0 LATCH_THREADS=%d$' '%s/repro.sh'",
           rt_parallel_threads(), path);
  CHECK(system(file) == 0);
  snprintf(file, sizeof file, "rm -rf '%s'", path);
  CHECK(path[0] && system(file) == 0);
  min_check_mode mode;
  CHECK_EQ_INT(min_check_mode_parse(NULL, &mode, &d), HLO_OK);
  CHECK_EQ_INT(mode, MIN_MODE_OFF);
  CHECK_EQ_INT(min_check_mode_parse("accuracy", &mode, &d), HLO_OK);
  CHECK_EQ_INT(mode, MIN_MODE_ACCURACY);
  CHECK_EQ_INT(min_check_mode_parse("compile", &mode, &d), HLO_OK);
  CHECK_EQ_INT(mode, MIN_MODE_COMPILE);
  CHECK_EQ_INT(min_check_mode_parse("always", &mode, &d), HLO_ERR_INPUT);
  free_inputs(in, 3);
  hlo_module_free(m);
}

/* Reads dir/name into text ("" when missing). */
static void read_text(const char *dir, const char *name, char *text, size_t size) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  text[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  text[fread(text, 1, size - 1, f)] = 0;
  fclose(f);
}

/* The embedded path, with a compile error its check (compile and run) saw: minified on
 * shapes alone, no inputs given at all, and repro.sh replays a compile check. With its
 * budget spent at once, the repro is the module as it was, and report.txt says so. */
static void test_auto_repro_compile(void) {
  hlo_module *m = parse(small);
  rt_value **in = small_inputs();
  rt_fault fault = {.kind = RT_FAULT_COMPILE, .opcode = HLO_OP_COS};
  const rt_backend *backend = rt_fault_backend(&rt_backend_reference, &fault);
  min_predicate p = {.kind = MIN_CHECK_EXECUTE, .backend = backend, .timeout_s = 30};
  min_outcome seen;
  hlo_diag d = {HLO_OK, ""};
  CHECK_EQ_INT(min_check(&p, m, in, 3, &seen, &d), HLO_OK);
  CHECK_EQ_INT(seen.kind, MIN_COMPILE_ERROR);
  char dir[] = "/tmp/latch-test-repro-XXXXXX", path[256], text[8192];
  CHECK(mkdtemp(dir) != NULL);
  min_auto_request request = {.module = m, .inputs = NULL, .input_count = 0, .backend = backend,
                              .kind = MIN_CHECK_EXECUTE, .failure = &seen, .dir = dir};
  CHECK_EQ_INT(min_auto_repro(&request, path, sizeof path, &d), HLO_OK);
  read_text(dir, "repro.hlo", text, sizeof text);
  CHECK_MSG(strstr(text, "cosine(") && !strstr(text, "tanh(") && !strstr(text, "add("), "%s", text);
  read_text(dir, "repro.sh", text, sizeof text);
  CHECK_MSG(strstr(text, "--check compile\n") != NULL, "%s", text);
  read_text(dir, "report.txt", text, sizeof text);
  CHECK(strstr(text, "check:      compile on backend reference") != NULL);
  CHECK(strstr(text, "budget:") == NULL);
  request.budget_s = 1e-9;
  CHECK_EQ_INT(min_auto_repro(&request, path, sizeof path, &d), HLO_OK);
  read_text(dir, "report.txt", text, sizeof text);
  CHECK_MSG(strstr(text, "budget:     spent before the strategies were done") != NULL, "%s", text);
  read_text(dir, "repro.hlo", text, sizeof text);
  CHECK(strstr(text, "cosine(") && strstr(text, "tanh(") && strstr(text, "add("));
  snprintf(path, sizeof path, "rm -rf '%s'", dir);
  CHECK(system(path) == 0);
  free_inputs(in, 3);
  hlo_module_free(m);
}

int main(void) {
  RUN(test_candidates);
  RUN(test_auto_repro_compile);
  RUN(test_auto_repro);
  RUN(test_compile_fault);
  RUN(test_dead_culprit);
  RUN(test_compile_needs_no_data);
  RUN(test_accuracy_fault);
  RUN(test_crash_is_a_failure);
  RUN(test_hang_is_a_failure);
  RUN(test_command);
  RUN(test_same_op_only);
  RUN(test_constant_strategy);
  RUN(test_not_failing);
  RUN(test_masked_failure);
  RUN(test_crash_in_accuracy_check);
  RUN(test_two_accuracy_failures);
  RUN(test_message_class);
  RUN(test_flaky);
  RUN(test_outcomes);
  return TEST_REPORT();
}
