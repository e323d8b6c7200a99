#include "hlo.h"

#include <stdarg.h>
#include <stdio.h>

hlo_status hlo_diag_set(hlo_diag *diag, hlo_status code, const char *format, ...) {
  if (!diag || diag->status != HLO_OK) return code;
  diag->status = code;
  va_list args;
  va_start(args, format);
  vsnprintf(diag->message, sizeof diag->message, format, args);
  va_end(args);
  return code;
}

void hlo_diag_clear(hlo_diag *diag) {
  diag->status = HLO_OK;
  diag->message[0] = 0;
}
