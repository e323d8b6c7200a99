/* The minifier's efficiency goal: on 100 generated graphs of 1,000+ instructions with one
 * culprit (a compile fault in half of them, an accuracy fault in the other half), the repro
 * is the culprit alone, with only parameters and constants beside it, in at least 95 cases,
 * each with at most 50 checks. Prints the distribution of checks and sizes. */
#include <stdlib.h>

#include "gen_graph.h"
#include "minify/minify.h"
#include "runtime/runtime.h"
#include "test.h"
#include "runtime/reference/reference.h"

enum { CASES = 100, OPS = 1000, MAX_CHECKS = 50 };

/* The culprit alone: one op, of the culprit's opcode, the rest parameters and constants. */
static bool culprit_alone(const hlo_module *m, hlo_opcode culprit) {
  int ops = 0, culprits = 0;
  for (int i = 0; i < m->entry->instr_count; i++) {
    hlo_opcode op = m->entry->instrs[i]->opcode;
    if (op == HLO_OP_PARAMETER || op == HLO_OP_CONSTANT) continue;
    ops++;
    culprits += op == culprit;
  }
  return ops == 1 && culprits == 1;
}

static void test_generated(void) {
  int minimal = 0, worst_checks = 0, total_checks = 0;
  int check_histogram[MAX_CHECKS + 2] = {0}, size_histogram[8] = {0};
  for (int c = 0; c < CASES; c++) {
    int position = 0;
    hlo_module *m = gen_graph((uint64_t)c, OPS, HLO_OP_COS, &position);
    CHECK(m != NULL);
    if (!m) continue;
    CHECK(m->entry->instr_count >= OPS);
    rt_value **inputs = gen_inputs(m, (uint64_t)c);
    bool accuracy = c % 2 == 1;
    rt_fault fault = {.kind = accuracy ? RT_FAULT_ACCURACY : RT_FAULT_COMPILE, .opcode = HLO_OP_COS, .eps = 0.25};
    min_options o = {0};
    o.predicate.kind = accuracy ? MIN_CHECK_ACCURACY : MIN_CHECK_COMPILE;
    o.predicate.backend = rt_fault_backend(&rt_backend_reference, &fault);
    o.predicate.tol = RT_ACCURACY_DEFAULT_TOL;
    o.predicate.timeout_s = 30;
    min_report report;
    hlo_diag d = {HLO_OK, ""};
    hlo_status status = min_minify(m, inputs, m->entry->param_count, &o, &report, &d);
    CHECK_MSG(status == HLO_OK, "case %d: %s", c, d.message);
    if (status == HLO_OK) {
      bool alone = culprit_alone(report.module, HLO_OP_COS);
      minimal += alone;
      if (!alone) fprintf(stderr, "case %d (%s): not minimal: %d instructions, %d ops\n", c,
                          accuracy ? "accuracy" : "compile", report.instrs_after, report.ops_after);
      CHECK(!report.flaky);
      CHECK_MSG(report.checks <= MAX_CHECKS, "case %d: %d checks", c, report.checks);
      total_checks += report.checks;
      if (report.checks > worst_checks) worst_checks = report.checks;
      check_histogram[report.checks <= MAX_CHECKS ? report.checks : MAX_CHECKS + 1]++;
      size_histogram[report.instrs_after < 7 ? report.instrs_after : 7]++;
      min_report_free(&report);
    }
    gen_free_inputs(inputs, m->entry->param_count);
    hlo_module_free(m);
  }
  printf("generated graphs: %d of %d repros are the culprit alone; checks mean %.1f, max %d\n", minimal, CASES,
         (double)total_checks / CASES, worst_checks);
  printf("checks:");
  for (int i = 0; i <= MAX_CHECKS + 1; i++)
    if (check_histogram[i]) printf(" %s%d:%d", i > MAX_CHECKS ? ">" : "", i > MAX_CHECKS ? MAX_CHECKS : i, check_histogram[i]);
  printf("\nrepro instructions (culprit, parameters, constants):");
  for (int i = 0; i < 8; i++)
    if (size_histogram[i]) printf(" %s%d:%d", i == 7 ? ">=" : "", i, size_histogram[i]);
  printf("\n");
  CHECK_MSG(minimal >= 95, "%d minimal repros", minimal);
}

int main(void) {
  RUN(test_generated);
  return TEST_REPORT();
}
