"""torch dtypes <-> latch dtype numbers (latch_dtype in include/latch.h), installed into the
extension so it can lend torch tensors to latch."""
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


def latch_dtype(dtype):
    try:
        return TO_LATCH[dtype]
    except KeyError:
        raise _latch.Unsupported(f"latch: torch dtype {dtype} has no latch dtype") from None


def to_torch(t):
    """A torch tensor viewing the latch Tensor t's synced memory (no copy; t stays alive)."""
    shape = t.shape
    dtype = TO_TORCH[t.dtype]
    if 0 in shape:
        return torch.empty(shape, dtype=dtype)
    flat = torch.frombuffer(t, dtype=dtype)
    return flat if len(shape) == 1 else flat.view(shape)
