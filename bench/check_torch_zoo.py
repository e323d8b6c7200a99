"""make check-torch-zoo: every model of latch/zoo.py compiled by latch.torch.compile at 224
(sequence modules: length 64), batch 1, eval mode, no_grad, on the threads given; a table of
model, compiled whole or in parts (how many), the max difference from eager (scaled by
1 + max |eager|), and the median latch and eager ms (called in turn), with the geomean of
latch / eager."""
import argparse
import math
import os
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("models", nargs="*")
    a = p.parse_args()
    os.environ.setdefault("LATCH_THREADS", str(a.threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    # latch and PyTorch share libgomp here, which reads its wait policy once, when torch loads
    # it: threads that spin after each parallel region take the cores the other team needs
    # on a busy machine (mobilenet_v3_small's step 100x longer, either side). import latch
    # sets this, but torch comes first.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    torch.set_num_threads(a.threads)
    from latch import zoo
    names = a.models or zoo.ALL
    print(f"{'model':26} {'graph':>12} {'max diff':>10} {'latch ms':>9} {'eager ms':>9} {'ratio':>6}")
    ratios, bad = [], 0
    for name in names:
        try:
            r = zoo.check(name, a.size if name in zoo.VISION else a.length, a.repeat)
        except Exception as e:  # a row, not the end of the table
            print(f"{name:26} error: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            bad += 1
            continue
        graph = "whole" if r["whole"] else f"{r['parts']} parts" if r["parts"] else "eager"
        ratio = r["latch_ms"] / r["eager_ms"]
        ratios.append(ratio)
        ok = r["whole"] and r["diff"] <= 1e-3 and r["shapes_match"]
        bad += not ok
        print(f"{name:26} {graph:>12} {r['diff']:10.2e} {r['latch_ms']:9.2f} {r['eager_ms']:9.2f} {ratio:6.2f}"
              + ("" if ok else "  <- " + (r["reason"] or ", ".join(r["eager_ops"]) or "differs")), flush=True)
    if ratios:
        print(f"geomean latch / eager: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f} over {len(ratios)} models")
    print(f"{len(names) - bad} of {len(names)} whole and matching eager")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
