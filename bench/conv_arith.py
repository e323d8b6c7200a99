"""The arithmetic latch's convolutions do, from oneDNN's own account of each run
(ONEDNN_VERBOSE=1: one `exec` line per primitive run, with its implementation and shape), for
bench/compare_ort.py's GFLOP/s. A direct convolution does every multiply-add it counts; a
Winograd F(m x m, 3 x 3) kernel does (m + 2)^2 multiplies per m x m outputs where the direct
one does 9 m^2: oneDNN's jit_fp32_wino_2x3 (m = 2) 16 of 36, its jit_wino_4x3 (m = 4) 36 of
144. The transforms' additions are left out, as the direct count leaves out the adds of
im2col: both count a multiply-add as 2 flops."""
import re

# mb8_g32ic32oc32_ih56oh56kh3sh1dh0ph1_iw56ow56kw3sw1dw0pw1 (g only with groups; id/od in 3-D)
SHAPE = re.compile(r"mb(\d+)_(?:g(\d+))?ic(\d+)oc(\d+)_.*?oh(\d+)kh(\d+).*?ow(\d+)kw(\d+)")
# The share of the direct multiplies a Winograd implementation does, by its name.
WINOGRAD = (("wino_2x3", 16 / 36), ("wino_4x3", 36 / 144))


def direct_flops(shape):
    """2 x the multiply-adds of a convolution's oneDNN shape string; None if unreadable."""
    m = SHAPE.search(shape)
    if not m:
        return None
    mb, groups, ic, oc, oh, kh, ow, kw = (int(v) if v else 1 for v in m.groups())
    return 2 * mb * oc * oh * ow * (ic // groups) * kh * kw


def winograd_saving(verbose_text, steps):
    """The flops per step that Winograd kernels did not do, from ONEDNN_VERBOSE's output over
    `steps` steps, and how many convolution runs per step were Winograd's, as (flops, runs)."""
    saved = runs = 0.0
    for line in verbose_text.splitlines():
        fields = line.split(",")
        if len(fields) < 5 or "exec" not in fields[:3] or "convolution" not in fields:
            continue
        impl = fields[fields.index("convolution") + 1]
        share = next((s for name, s in WINOGRAD if name in impl), None)
        flops = direct_flops(line) if share is not None else None
        if flops:
            saved += flops * (1 - share)
            runs += 1
    return saved / steps, runs / steps
