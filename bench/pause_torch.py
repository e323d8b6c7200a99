#!/usr/bin/python3
"""make pause-torch: does a step after a pause cost what a step right after a step costs?

  PYTHONPATH=build/python bench/pause_torch.py [--model resnet18] [--mode train,eval]
                                               [--pause 0.2] [--pairs 8] [--threads 2] [--eager]

A program that runs a step now and then (a bench that alternates two sides, a server between
requests) lets the threads sleep in between. Per mode, the steps of train_torch.py (train:
forward, loss, backward and SGD through latch.torch.compile) or a forward under no_grad of
the model in eval() (eval) are taken in pairs: one right after the step before it, one after
sleeping --pause seconds. Prints the median ms of each kind and their ratio (1.0: the pause
costs nothing). --eager times PyTorch's own model in a process that never imports latch.
Threads: torch.set_num_threads and LATCH_THREADS.
"""
import argparse
import os
import statistics
import sys
import time

from train_torch import Side, build


def eval_side(name, torch, nn, F, lt):
    model, x, _, _ = build(name, torch, nn)
    model.eval()
    run = model if lt is None else lt.compile(model)

    def step(batch):
        with torch.no_grad():
            run(batch)
    return step, x


def timed(step, batch):
    start = time.perf_counter()
    step(batch)
    return (time.perf_counter() - start) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--mode", default="train,eval")
    ap.add_argument("--pause", type=float, default=0.2)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eager", action="store_true", help="PyTorch alone (latch never imported)")
    a = ap.parse_args()
    os.environ["LATCH_THREADS"] = str(a.threads)
    if not a.eager:
        import latch  # noqa: F401  its settings before torch loads libgomp, as train_torch.py
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    lt = None
    if not a.eager:
        import latch.torch as lt
    torch.set_num_threads(a.threads)
    side_name = "eager" if a.eager else "latch"
    print(f"{'model':<10} {'mode':<6} {'side':<6} {'after a step':>12} {'after pause':>12} {'ratio':>6}")
    for mode in a.mode.split(","):
        if mode == "train":
            side = Side(a.model, torch, nn, F, False)
            fn = side.model if lt is None else lt.compile(side.model)
            step, batch = (lambda inputs: side.step(fn, inputs)), side.x
        elif mode == "eval":
            step, batch = eval_side(a.model, torch, nn, F, lt)
        else:
            raise SystemExit(f"pause_torch.py: unknown mode {mode!r} (train, eval)")
        for _ in range(3):  # the first traces and compiles
            step(batch)
        back, paused = [], []
        for _ in range(a.pairs):
            step(batch)
            back.append(timed(step, batch))
            time.sleep(a.pause)
            paused.append(timed(step, batch))
        b, p = statistics.median(back), statistics.median(paused)
        print(f"{a.model:<10} {mode:<6} {side_name:<6} {b:>10.1f}ms {p:>10.1f}ms {p / b:>6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
