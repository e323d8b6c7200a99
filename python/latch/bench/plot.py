"""The benchmark table as grouped bars (matplotlib, Debian's python3-matplotlib): one group per
row (model, batch, size), one bar per mode, height = ms per step relative to PyTorch eager on a
log scale (lower is faster). A cell that was not timed (its output differed from eager's, its
mode fell back, failed or does not run the model) is a marked gap: a hatched grey stub at the
foot of the axis with the reason written over it, never an empty slot that reads as zero. The
caption under the plot names the machine, the threads and the torch version."""
import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"eager": "#777777", "jit": "#4c72b0", "torch_lazy": "#dd8452", "latch_lazy": "#55a868",
          "latch_compile": "#c44e52"}
LOW, HIGH = 0.1, 10.0  # the axis: 0.1x to 10x eager; ratios outside are drawn at the edge
GAP = "#bbbbbb"


def _ratio(row, mode):
    """The cell's ms over eager's, clipped to the axis, or None for a gap (or no eager figure)."""
    cell, base = row["cells"].get(mode), row["cells"].get("eager", {})
    if not cell or cell["status"] != "ok" or base.get("status") != "ok":
        return None
    return min(max(cell["ms"] / base["ms"], LOW), HIGH)


def draw(rows, modes, caption):
    """The figure (save it with .savefig(path): .svg and .png both work)."""
    width = max(6.0, 1.0 + len(rows) * (0.18 * len(modes) + 0.25))
    fig, ax = plt.subplots(figsize=(width, 4.8))
    bar = 0.8 / len(modes)
    for j, mode in enumerate(modes):
        for i, row in enumerate(rows):
            x = i + (j - (len(modes) - 1) / 2) * bar
            r = _ratio(row, mode)
            if r is not None:  # bars grow from 1x (eager) up or down
                ax.bar(x, r - 1, bottom=1, width=bar * 0.9, color=COLORS.get(mode, "#999999"), gid=f"bar-{i}-{mode}")
                continue
            status = row["cells"].get(mode, {}).get("status", "not run")
            ax.bar(x, LOW * (10 ** 0.25) - LOW, bottom=LOW, width=bar * 0.9, color="white", edgecolor=GAP, hatch="///",
                   gid=f"gap-{i}-{mode}")
            ax.text(x, LOW * 10 ** 0.3, status, rotation=90, ha="center", va="bottom", fontsize=6, color="#555555")
    for j, mode in enumerate(modes):  # the legend's entries
        ax.bar(0, 0, color=COLORS.get(mode, "#999999"), label=mode)
    ax.bar(0, 0, color="white", edgecolor=GAP, hatch="///", label="not timed (reason above)")
    ax.set_yscale("log")
    ax.set_ylim(LOW, HIGH)
    ax.axhline(1, color="#444444", linewidth=0.8)
    ax.set_ylabel("ms per step / PyTorch eager (log; lower is faster)")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r['model']} b{r['batch']} {r['size']}" for r in rows], rotation=60, ha="right", fontsize=7)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.legend(fontsize=7, ncol=min(len(modes) + 1, 6), loc="upper center", bbox_to_anchor=(0.5, 1.12))
    fig.text(0.01, 0.01, caption, fontsize=7, ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig

