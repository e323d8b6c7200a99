/* libFuzzer target for the .npy reader: any bytes must decode to a value or fail with a
 * message, never crash, leak or allocate more than the input announces and holds. A value
 * that decodes must also write and read back to the same bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  rt_value *value = rt_npy_decode(data, size, "fuzz.npy", &diag);
  if (!value) {
    if (diag.status == HLO_OK || !strstr(diag.message, "fuzz.npy")) abort(); /* a failure must say why */
    return 0;
  }
  if (value->shape.dtype != HLO_BF16) { /* bf16 is written as f32: not the same bytes */
    char path[64];
    snprintf(path, sizeof path, "/tmp/latch-fuzz-npy-%d.npy", (int)getpid());
    if (rt_npy_write(path, value, &diag) != HLO_OK) abort();
    rt_value *back = rt_npy_read(path, &diag);
    if (!back || back->count != value->count ||
        memcmp(back->data, value->data, (size_t)hlo_shape_bytes(&value->shape)) != 0)
      abort();
    rt_value_release(back);
    unlink(path);
  }
  rt_value_release(value);
  return 0;
}
