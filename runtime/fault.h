/* Fault injection, FOR TESTS ONLY: makes a backend misbehave on demand so the checks and the
 * minifier can be tested against known bugs. Never set LATCH_FAULT in production.
 *
 *   compile:OPCODE       compile fails (HLO_ERR_UNSUPPORTED, naming the op and the
 *                        instruction, as a real backend's compile error does) when the
 *                        module contains OPCODE anywhere
 *   accuracy:OPCODE:EPS  each floating OPCODE result r is computed as r + EPS * (|r| + 1):
 *                        the module is rewritten (a copy) before the inner compile
 *   crash:OPCODE         compile aborts the process (SIGABRT)
 *   hang:OPCODE          compile sleeps forever
 *
 * The fault wraps an inner backend, so it applies to any backend: rt_fault_backend gives an
 * rt_backend whose compile applies the fault and whose executables run the inner one's. */
#ifndef RT_FAULT_H
#define RT_FAULT_H
#include "backend.h"

typedef enum rt_fault_kind { RT_FAULT_NONE = 0, RT_FAULT_COMPILE, RT_FAULT_ACCURACY, RT_FAULT_CRASH, RT_FAULT_HANG } rt_fault_kind;

typedef struct rt_fault {
  rt_fault_kind kind;
  hlo_opcode opcode;
  double eps; /* accuracy only */
} rt_fault;

/* Parses "kind:OPCODE[:EPS]"; HLO_ERR_INPUT with a message on anything else. */
hlo_status rt_fault_parse(const char *text, rt_fault *fault, hlo_diag *diag);

/* A backend that applies fault around inner. There is one wrapper per process (the fault
 * setting is process-wide, as the environment variable is): a later call replaces the
 * earlier configuration. Returns inner itself when fault->kind is RT_FAULT_NONE. */
const rt_backend *rt_fault_backend(const rt_backend *inner, const rt_fault *fault);

/* inner wrapped with the fault in $LATCH_FAULT, inner when it is unset or empty, NULL with
 * diag when it does not parse. */
const rt_backend *rt_fault_from_env(const rt_backend *inner, hlo_diag *diag);

/* The module with the accuracy fault's rewrite applied (a new module), for tests. */
hlo_module *rt_fault_perturb(const hlo_module *module, hlo_opcode opcode, double eps, hlo_diag *diag);

#endif
