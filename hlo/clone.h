/* Deep copies of modules, for executables and caches that must outlive the module they were
 * made from. */
#ifndef HLO_CLONE_H
#define HLO_CLONE_H
#include "ir.h"

/* An independent copy of module (its own arena), equal to it as HLO text. NULL with diag
 * when out of memory. Elided constants stay elided and keep their filled values, since the
 * filler is seeded by the instruction's name. Instructions keep their origins. */
hlo_module *hlo_module_clone(const hlo_module *module, hlo_diag *diag);

#endif
