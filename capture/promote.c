/* Element types at the API boundary, the promotion table and NumPy broadcasting. */
#include "capture.h"

static const hlo_dtype to_hlo[] = {
    [LATCH_INVALID] = HLO_INVALID, [LATCH_BOOL] = HLO_PRED, [LATCH_I8] = HLO_S8,   [LATCH_I16] = HLO_S16,
    [LATCH_I32] = HLO_S32,         [LATCH_I64] = HLO_S64,   [LATCH_U8] = HLO_U8,   [LATCH_U16] = HLO_U16,
    [LATCH_U32] = HLO_U32,         [LATCH_U64] = HLO_U64,   [LATCH_F16] = HLO_F16, [LATCH_BF16] = HLO_BF16,
    [LATCH_F32] = HLO_F32,         [LATCH_F64] = HLO_F64,
};

hlo_dtype cap_hlo_dtype(latch_dtype dtype) {
  return (unsigned)dtype < sizeof to_hlo / sizeof to_hlo[0] ? to_hlo[dtype] : HLO_INVALID;
}

latch_dtype cap_latch_dtype(hlo_dtype dtype) {
  for (unsigned i = 1; i < sizeof to_hlo / sizeof to_hlo[0]; i++)
    if (to_hlo[i] == dtype) return (latch_dtype)i;
  return LATCH_INVALID;
}

size_t latch_dtype_size(latch_dtype dtype) { return hlo_dtype_size(cap_hlo_dtype(dtype)); }

const char *latch_dtype_name(latch_dtype dtype) {
  hlo_dtype d = cap_hlo_dtype(dtype);
  return d == HLO_INVALID ? "invalid" : hlo_dtype_name(d);
}

static hlo_dtype signed_of_bits(int bits) {
  switch (bits) {
    case 8: return HLO_S8;
    case 16: return HLO_S16;
    case 32: return HLO_S32;
    case 64: return HLO_S64;
    default: return HLO_INVALID;
  }
}

hlo_dtype cap_promote(hlo_dtype a, hlo_dtype b) {
  if (a == b) return a;
  if (a == HLO_PRED) return b;
  if (b == HLO_PRED) return a;
  bool fa = hlo_dtype_is_float(a), fb = hlo_dtype_is_float(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  int ba = hlo_dtype_bits(a), bb = hlo_dtype_bits(b);
  if (fa) return ba == bb ? HLO_F32 : ba > bb ? a : b; /* f16 with bf16: neither holds the other */
  bool sa = hlo_dtype_is_signed(a), sb = hlo_dtype_is_signed(b);
  if (sa == sb) return ba > bb ? a : b;
  hlo_dtype s = sa ? a : b;
  int bs = sa ? ba : bb, bu = sa ? bb : ba;
  if (bs > bu) return s;
  return signed_of_bits(2 * bu); /* u64 with any signed type: none */
}

bool cap_broadcast_dims(int rank_a, const int64_t *a, int rank_b, const int64_t *b, int *rank_out, int64_t *out) {
  int rank = rank_a > rank_b ? rank_a : rank_b;
  for (int i = 0; i < rank; i++) {
    int ia = i - (rank - rank_a), ib = i - (rank - rank_b);
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  *rank_out = rank;
  return true;
}

int cap_norm_dim(int dim, int rank) {
  if (dim < 0) dim += rank;
  return dim >= 0 && dim < rank ? dim : -1;
}
