/* Errors as values: a code and a message, filled by whoever failed first. */
#ifndef HLO_DIAG_H
#define HLO_DIAG_H

typedef enum hlo_status {
  HLO_OK = 0,
  HLO_ERR_INPUT = 1,       /* malformed text, bad shapes, bad arguments: the caller's fault */
  HLO_ERR_UNSUPPORTED = 2, /* valid HLO that latch does not handle (an op, a type) */
  HLO_ERR_INTERNAL = 3,    /* an I/O failure or a broken invariant */
} hlo_status;

typedef struct hlo_diag {
  hlo_status status;
  char message[1024];
} hlo_diag;

/* Records the first error only: later ones are usually consequences. Returns code. */
hlo_status hlo_diag_set(hlo_diag *diag, hlo_status code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
void hlo_diag_clear(hlo_diag *diag);

#endif
