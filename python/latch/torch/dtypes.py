"""torch dtypes <-> latch dtype numbers (latch_dtype in include/latch.h), installed into the
extension so it can lend torch tensors to latch and give results back as torch tensors."""
import torch

from .. import _latch

BOOL, I8, I16, I32, I64, U8, U16, U32, U64, F16, BF16, F32, F64 = range(1, 14)

TO_LATCH = {
    torch.bool: BOOL, torch.int8: I8, torch.int16: I16, torch.int32: I32, torch.int64: I64,
    torch.uint8: U8, torch.float16: F16, torch.bfloat16: BF16, torch.float32: F32, torch.float64: F64,
}
TO_TORCH = {v: k for k, v in TO_LATCH.items()}
FLOATS = (F16, BF16, F32, F64)

_latch.set_dtypes(TO_LATCH)
_latch.set_torch(torch._C._from_dlpack)

# A torch tensor viewing the latch Tensor's synced memory (no copy; the latch tensor stays
# alive as long as the torch tensor): DLPack, in C (python/src/to_torch.c).
to_torch = _latch.to_torch


def latch_dtype(dtype):
    try:
        return TO_LATCH[dtype]
    except KeyError:
        raise _latch.Unsupported(f"latch: torch dtype {dtype} has no latch dtype") from None
