/* The one call the capture layer makes when a compiled graph fails its check: minify the
 * graph and leave a repro directory, quietly, so the caller can print one warning line with
 * the path and go on with reference results. */
#ifndef MIN_AUTO_H
#define MIN_AUTO_H
#include <stddef.h>

#include "check.h"

typedef struct min_auto_request {
  const hlo_module *module;   /* the failing graph */
  rt_value *const *inputs;    /* its inputs, in the parameters' declared types */
  int input_count;
  const rt_backend *backend;  /* the backend that failed */
  min_check_kind kind;        /* MIN_CHECK_COMPILE or MIN_CHECK_ACCURACY */
  double tol;                 /* accuracy tolerance; 0 gives RT_ACCURACY_DEFAULT_TOL */
  double timeout_s;           /* per check; 0 gives 30 s */
  const char *dir;            /* the repro directory; NULL makes a new /tmp/latch-repro-XXXXXX */
} min_auto_request;

/* LATCH_CHECK's values: off (or unset, or empty), compile, accuracy (which implies compile). */
typedef enum min_check_mode { MIN_MODE_OFF = 0, MIN_MODE_COMPILE, MIN_MODE_ACCURACY } min_check_mode;
/* Parses text (NULL is off); HLO_ERR_INPUT naming the three values on anything else. */
hlo_status min_check_mode_parse(const char *text, min_check_mode *mode, hlo_diag *diag);

/* Minifies and writes the repro; its directory goes to path (size bytes). HLO_ERR_INPUT when
 * the graph does not fail the check again (a flaky failure that did not come back). */
hlo_status min_auto_repro(const min_auto_request *request, char *path, size_t size, hlo_diag *diag);

#endif
