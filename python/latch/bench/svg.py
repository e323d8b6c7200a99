"""The benchmark table as grouped bars (SVG, no plotting library): one group per row (model,
batch, size), one bar per mode, height = ms per step relative to PyTorch eager (log scale)."""
import math

COLORS = {"eager": "#777777", "jit": "#4c72b0", "torch_lazy": "#dd8452", "latch_lazy": "#55a868",
          "latch_compile": "#c44e52"}


def bars(rows, modes):
    width, group, bar, top, height = 60 + len(rows) * (len(modes) * 9 + 14), len(modes) * 9 + 14, 8, 40, 260
    lo, hi = math.log10(0.1), math.log10(10)
    y = lambda r: top + height - (min(max(math.log10(r), lo), hi) - lo) / (hi - lo) * height  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 130}" font-family="sans-serif" font-size="10">',
           f'<text x="10" y="20" font-size="13">ms per step relative to PyTorch eager (log scale; lower is faster)</text>']
    for r in (0.1, 0.3, 1, 3, 10):
        out.append(f'<line x1="50" x2="{width}" y1="{y(r):.1f}" y2="{y(r):.1f}" stroke="#ddd"/>'
                   f'<text x="10" y="{y(r) + 3:.1f}">{r}x</text>')
    for i, row in enumerate(rows):
        x0 = 60 + i * group
        base = row["ms"].get("eager")
        for j, m in enumerate(modes):
            v = row["ms"].get(m)
            if not v or not base:
                continue
            yy = y(v / base)
            out.append(f'<rect x="{x0 + j * 9}" y="{min(yy, y(1)):.1f}" width="{bar}" height="{abs(y(1) - yy):.1f}" '
                       f'fill="{COLORS.get(m, "#999")}"><title>{m}: {v:.2f} ms</title></rect>')
        label = f'{row["model"]} b{row["batch"]} {row["size"]}'
        out.append(f'<text transform="translate({x0 + 4},{top + height + 8}) rotate(60)">{label}</text>')
    for k, m in enumerate(modes):
        out.append(f'<rect x="{60 + k * 110}" y="{top + height + 110}" width="10" height="10" fill="{COLORS.get(m, "#999")}"/>'
                   f'<text x="{74 + k * 110}" y="{top + height + 119}">{m}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
