#!/usr/bin/python3
"""PyTorch side of latch's benchmark: the same architectures, timed with PyTorch's own CPU
kernels, and exported as .npy weights so latch can be checked against PyTorch's logits.

  bench/torch_zoo.py time   [--model M ...] [--batch N] [--size N] [--repeat N] [--threads N] [--json FILE]
  bench/torch_zoo.py export --model M --out DIR [--batch N] [--size N] [--seed N]

`time` prints the median milliseconds per inference step (eval mode, no autograd) per model.
`export` writes DIR/weights/<state_dict key>.npy for every parameter and buffer, DIR/input.npy
(seeded) and DIR/output.npy (PyTorch's output on it), which `latch bench --weights` reads.

Needs Debian's python3-torch and python3-torchvision (an opt-in dependency: `make
bench-torch` installs them); run with /usr/bin/python3, where Debian puts them.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torchvision

TORCHVISION = {
    "resnet18": torchvision.models.resnet18,
    "resnet50": torchvision.models.resnet50,
    "mobilenet_v2": torchvision.models.mobilenet_v2,
    "squeezenet1_1": torchvision.models.squeezenet1_1,
    "alexnet": torchvision.models.alexnet,
    "vgg16": torchvision.models.vgg16,
    "vit_b_16": torchvision.models.vit_b_16,
}


class MLP(torch.nn.Module):
    """latch's zoo mlp: 784 -> 512 -> 512 -> 10 with ReLU (bench/models/mlp.c)."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 512)
        self.fc2 = torch.nn.Linear(512, 512)
        self.fc3 = torch.nn.Linear(512, 10)

    def forward(self, x):
        x = torch.relu(self.fc1(x.flatten(1)))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def build(name, size):
    torch.manual_seed(0)
    if name == "mlp":
        return MLP()
    if name not in TORCHVISION:
        raise SystemExit(f"torch_zoo.py: unknown model '{name}'; models: mlp, {', '.join(TORCHVISION)}")
    if name == "vit_b_16":
        return TORCHVISION[name](weights=None, image_size=size)
    return TORCHVISION[name](weights=None)


def make_input(name, batch, size, seed):
    generator = torch.Generator().manual_seed(seed)
    if name == "mlp":
        return torch.rand(batch, 784, generator=generator) * 2 - 1
    return torch.rand(batch, 3, size, size, generator=generator) * 2 - 1


def time_model(name, batch, size, repeat):
    model = build(name, size).eval()
    x = make_input(name, batch, size, 0)
    with torch.no_grad():
        model(x)  # warm-up: first-call allocations and kernel selection
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            model(x)
            samples.append((time.perf_counter() - start) * 1e3)
    return samples


def cmd_time(args):
    torch.set_num_threads(args.threads)
    results = {}
    print(f"{'model':<16} {'batch':>5} {'size':>5} {'median ms':>10} {'min ms':>8}")
    for name in args.model:
        size = 28 if name == "mlp" else args.size
        samples = time_model(name, args.batch, size, args.repeat)
        results[name] = {"batch": args.batch, "size": size, "median_ms": statistics.median(samples),
                         "min_ms": min(samples), "samples_ms": samples}
        print(f"{name:<16} {args.batch:>5} {size:>5} {statistics.median(samples):>10.3f} {min(samples):>8.3f}",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "torch": torch.__version__, "models": results}, f, indent=1)


def cmd_export(args):
    model = build(args.model, args.size).eval()
    weights = os.path.join(args.out, "weights")
    os.makedirs(weights, exist_ok=True)
    for key, value in model.state_dict().items():
        if value.dtype == torch.int64:  # num_batches_tracked: not a weight
            continue
        np.save(os.path.join(weights, key + ".npy"), value.detach().numpy().astype(np.float32))
    x = make_input(args.model, args.batch, args.size, args.seed)
    with torch.no_grad():
        y = model(x)
    np.save(os.path.join(args.out, "input.npy"), x.numpy())
    np.save(os.path.join(args.out, "output.npy"), y.numpy())
    print(f"wrote {len(model.state_dict())} tensors to {weights}, input {tuple(x.shape)}, output {tuple(y.shape)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("time", help="median ms per step per model")
    t.add_argument("--model", nargs="+", default=["mlp", "resnet18", "mobilenet_v2", "squeezenet1_1"])
    t.add_argument("--batch", type=int, default=1)
    t.add_argument("--size", type=int, default=224)
    t.add_argument("--repeat", type=int, default=10)
    t.add_argument("--threads", type=int, default=os.cpu_count())
    t.add_argument("--json")
    e = sub.add_parser("export", help="weights, input and output as .npy")
    e.add_argument("--model", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--batch", type=int, default=1)
    e.add_argument("--size", type=int, default=224)
    e.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    {"time": cmd_time, "export": cmd_export}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
