/* Repro directories: the module as HLO text, its inputs as .npy files, one command that
 * reproduces the failure, and a report of the minification. */
#ifndef MIN_REPRO_H
#define MIN_REPRO_H
#include "hlo/ir.h"
#include "runtime/value.h"

struct min_report;
struct min_predicate;

/* Writes dir/hlo_name (HLO text) and dir/inputs/I.npy for each input; dir is created. */
hlo_status min_write_case(const char *dir, const char *hlo_name, const hlo_module *module, rt_value *const *inputs,
                          int input_count, hlo_diag *diag);

/* What repro.sh runs. */
typedef struct min_repro_info {
  const char *backend;   /* --backend NAME for latch run */
  const char *latch_bin; /* the latch binary the minifier ran as, recorded as a fallback; may be NULL */
  const char *source;    /* the original module's file, for the report; may be NULL */
} min_repro_info;

/* The whole repro directory: repro.hlo, inputs/, repro.sh, report.txt. */
hlo_status min_write_repro(const char *dir, const struct min_report *report, const struct min_predicate *predicate,
                           const min_repro_info *info, hlo_diag *diag);

#endif
