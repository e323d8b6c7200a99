"""The output check of bench/compare_ort.py: one side's output file against PyTorch eager's
reference output on the same weights and input, by latch's accuracy rule (the largest
difference over the reference's largest magnitude, at most the tolerance: 1e-3 for f32, as
LATCH_CHECK and `make check-torch`). Reads .npy files itself (float32 and float64, C order),
so the comparison runs without numpy and is tested without it (tests/test_compare_ort.sh)."""
import array
import ast
import math
import struct
import sys

TOLERANCE = 1e-3


def read_npy(path):
    """(shape, values as an array of floats) of a .npy file; raises ValueError when the file
    is not one this reads."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    major = data[6]
    size_format, start = ("<H", 8) if major == 1 else ("<I", 8)
    (header_length,) = struct.unpack_from(size_format, data, start)
    offset = start + struct.calcsize(size_format)
    header = ast.literal_eval(data[offset:offset + header_length].decode("latin1"))
    kinds = {"<f4": "f", "<f8": "d"}
    if header.get("descr") not in kinds or header.get("fortran_order"):
        raise ValueError(f"{path}: {header.get('descr')} {'(Fortran order)' if header.get('fortran_order') else ''}"
                         "; float32 and float64 in C order are read")
    values = array.array(kinds[header["descr"]])
    if values.itemsize != struct.calcsize(kinds[header["descr"]]) or sys.byteorder != "little":
        raise ValueError("this machine's floats are not the file's")
    values.frombytes(data[offset + header_length:])
    shape = tuple(header["shape"])
    if len(values) != math.prod(shape):
        raise ValueError(f"{path}: {len(values)} values for shape {shape}")
    return shape, values


def compare(got_path, want_path, tolerance=TOLERANCE):
    """{"max_abs_diff", "max_rel_diff", "ok", "error"} of got against want: the shapes must
    agree and every value be finite where want's is; max_rel_diff is the largest difference
    over want's largest magnitude. A file that cannot be read fails with its reason."""
    try:
        got_shape, got = read_npy(got_path)
        want_shape, want = read_npy(want_path)
    except (OSError, ValueError, SyntaxError) as e:
        return {"max_abs_diff": None, "max_rel_diff": None, "ok": False, "error": str(e)}
    if got_shape != want_shape:
        return {"max_abs_diff": None, "max_rel_diff": None, "ok": False,
                "error": f"shape {list(got_shape)} where PyTorch's is {list(want_shape)}"}
    diff = scale = 0.0
    for g, w in zip(got, want):
        d = abs(g - w)
        if not d <= diff:  # NaN wins
            diff = d if d == d else math.inf
        if abs(w) > scale:
            scale = abs(w)
    if scale == 0:  # every output would pass against zeros that a wrong weight also gives
        return {"max_abs_diff": diff, "max_rel_diff": None, "ok": False,
                "error": "PyTorch's output is all zeros: the check cannot tell a right output from a wrong one"}
    rel = diff / scale
    ok = rel <= tolerance
    return {"max_abs_diff": diff, "max_rel_diff": rel, "ok": ok,
            "error": None if ok else f"output differs from PyTorch's: max abs diff {diff:.3g}, "
                                      f"relative {rel:.3g} > {tolerance:g}"}


def worst(checks):
    """The worst of several rounds' checks of one side (a failed one first, else the largest
    relative difference); None for none."""
    checks = [c for c in checks if c]
    if not checks:
        return None
    failed = [c for c in checks if not c["ok"]]
    return (failed or sorted(checks, key=lambda c: c["max_rel_diff"] or 0))[-1] if not failed else failed[0]
