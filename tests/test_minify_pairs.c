/* Interacting culprits: a failure that needs two ops together. On generated graphs of 1,200
 * instructions with two culprit ops (cosine and sine), half under compile:cosine+sine (both
 * anywhere in the module) and half under accuracy:cosine+sine:0.25 (a sine fed by the
 * cosine), the repro must be exactly the two, with only parameters and constants beside
 * them, in at most 60 checks, in at least 95% of the cases. Both generators: the culprits'
 * values outputs, and the culprits feeding other ops only; there an accuracy error the later
 * ops hide leaves a module that passes its check, and then there must be no repro (the
 * module whole passes min_check too). `make test` runs CASES of each; `make minify-pairs`
 * runs 100 (the count is the first argument) and prints the figures. */
#include <stdlib.h>

#include "gen_graph.h"
#include "minify/minify.h"
#include "runtime/runtime.h"
#include "runtime/reference/reference.h"
#include "test.h"

enum { CASES = 6, OPS = 1200, MAX_CHECKS = 60 };

/* Exactly one cosine and one sine, the rest parameters and constants (and the root tuple
 * that returns the two when neither feeds the other). */
static bool pair_alone(const hlo_module *m) {
  int ops = 0, cos = 0, sin = 0;
  for (int i = 0; i < m->entry->instr_count; i++) {
    const hlo_instr *instr = m->entry->instrs[i];
    hlo_opcode op = instr->opcode;
    if (op == HLO_OP_PARAMETER || op == HLO_OP_CONSTANT || (op == HLO_OP_TUPLE && instr == m->entry->root)) continue;
    ops++;
    cos += op == HLO_OP_COS;
    sin += op == HLO_OP_SIN;
  }
  return ops == 2 && cos == 1 && sin == 1;
}

static void run_cases(int cases, bool culprits_out) {
  int minimal = 0, within = 0, worst = 0, total = 0, passing = 0;
  int first = getenv("TEST_CASE") ? atoi(getenv("TEST_CASE")) : 0;
  for (int c = first; c < cases; c++) {
    bool accuracy = c % 2 == 1;
    hlo_module *m = gen_graph_pair((uint64_t)c, OPS, HLO_OP_COS, HLO_OP_SIN, accuracy, culprits_out);
    CHECK(m != NULL);
    if (!m) continue;
    rt_value **inputs = gen_inputs(m, (uint64_t)c);
    rt_fault fault = {.kind = accuracy ? RT_FAULT_ACCURACY : RT_FAULT_COMPILE, .opcode = HLO_OP_COS, .eps = 0.25,
                      .paired = true, .partner = HLO_OP_SIN};
    min_options o = {0};
    o.predicate.kind = accuracy ? MIN_CHECK_ACCURACY : MIN_CHECK_COMPILE;
    o.predicate.backend = rt_fault_backend(&rt_backend_reference, &fault);
    o.predicate.tol = RT_ACCURACY_DEFAULT_TOL;
    o.predicate.timeout_s = 30;
    o.progress = getenv("TEST_VERBOSE") ? stderr : NULL;
    min_report report;
    hlo_diag d = {HLO_OK, ""};
    hlo_status status = min_minify(m, inputs, m->entry->param_count, &o, &report, &d);
    if (status == HLO_ERR_INPUT && !culprits_out) { /* the error hidden: the module must pass */
      min_outcome whole;
      CHECK_EQ_INT(min_check(&o.predicate, m, inputs, m->entry->param_count, &whole, &d), HLO_OK);
      CHECK_MSG(whole.kind == MIN_PASS, "case %d: no repro, but the module fails (%d)", c, whole.kind);
      passing++;
    } else {
      CHECK_MSG(status == HLO_OK, "case %d: %s", c, d.message);
    }
    if (status == HLO_OK) {
      bool alone = pair_alone(report.module);
      minimal += alone && report.checks <= MAX_CHECKS;
      within += report.checks <= MAX_CHECKS;
      if (!alone || report.checks > MAX_CHECKS)
        fprintf(stderr, "case %d (%s): %d instructions, %d ops, %d checks\n", c, accuracy ? "accuracy" : "compile",
                report.instrs_after, report.ops_after, report.checks);
      CHECK(!report.flaky);
      total += report.checks;
      if (report.checks > worst) worst = report.checks;
      min_report_free(&report);
    }
    gen_free_inputs(inputs, m->entry->param_count);
    hlo_module_free(m);
  }
  int failing = cases - passing;
  printf("interacting culprits (%s): %d of %d failing modules give exactly the two within %d checks (%d pass and "
         "give none); %d within the checks; checks mean %.1f, max %d\n",
         culprits_out ? "culprits as outputs" : "culprits feeding other ops", minimal, failing, MAX_CHECKS, passing,
         within, failing ? (double)total / failing : 0.0, worst);
  CHECK_MSG(minimal * 100 >= 95 * failing, "%d of %d minimal repros", minimal, failing);
}

static int cases = CASES;

static void test_pairs(void) {
  run_cases(cases, true);
  run_cases(cases, false);
}

int main(int argc, char **argv) {
  if (argc > 1) cases = atoi(argv[1]) > 0 ? atoi(argv[1]) : CASES;
  RUN(test_pairs);
  return TEST_REPORT();
}
