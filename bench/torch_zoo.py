#!/usr/bin/python3
"""PyTorch side of latch's benchmark: the same architectures, timed with PyTorch's own CPU
kernels, and exported as .npy weights so latch can be checked against PyTorch's logits.

  bench/torch_zoo.py time   [--model M ...] [--batch N] [--size N] [--repeat N] [--warmup N] [--threads N]
                            [--json FILE]
  bench/torch_zoo.py export-onnx --model M --out FILE.onnx [--size N]
  bench/torch_zoo.py export --model M --out DIR [--batch N] [--size N] [--seed N] [--perturb]

`time` prints the median milliseconds per inference step (eval mode, no autograd) per model,
and its JSON holds each step's convolution and product flops (count_flops).
`export-onnx` writes the model as ONNX (torch.onnx, the batch dim dynamic) for ONNX Runtime.
`export` writes DIR/weights/<state_dict key>.npy for every parameter and buffer, DIR/input.npy
(seeded) and DIR/output.npy (PyTorch's output on it), which `latch bench --weights` reads.

Needs Debian's python3-torch and python3-torchvision (an opt-in dependency, not in CI; `make
check-torch` runs the export and compares); run with /usr/bin/python3, where Debian puts them.
Models: mlp, bert_small, bert_base (Hugging Face BertModel naming), gpt2 (one decoder step on
a seeded KV cache of --size positions, GPT2Model naming), vit_tiny (vit_b_16 narrowed to 4
layers of width 192, 3 heads) and torchvision's.
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
from torchvision.models.vision_transformer import VisionTransformer

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


def _modules(**children):
    """A bare module holding children under the given names (state_dict key prefixes)."""
    module = torch.nn.Module()
    for key, child in children.items():
        module.add_module(key, child)
    return module


class BertEncoder(torch.nn.Module):
    """latch's zoo bert_small / bert_base (bench/models/bert.c): Hugging Face BertModel's
    encoder and its state_dict keys, without the pooler; the output is the last hidden state."""

    def __init__(self, layers, hidden, heads, vocab):
        super().__init__()
        nn = torch.nn
        self.heads = heads
        self.embeddings = _modules(word_embeddings=nn.Embedding(vocab, hidden),
                                   position_embeddings=nn.Embedding(512, hidden),
                                   token_type_embeddings=nn.Embedding(2, hidden),
                                   LayerNorm=nn.LayerNorm(hidden, eps=1e-12))
        self.encoder = _modules(layer=nn.ModuleList(
            _modules(attention=_modules(self=_modules(query=nn.Linear(hidden, hidden), key=nn.Linear(hidden, hidden),
                                                      value=nn.Linear(hidden, hidden)),
                                        output=_modules(dense=nn.Linear(hidden, hidden),
                                                        LayerNorm=nn.LayerNorm(hidden, eps=1e-12))),
                     intermediate=_modules(dense=nn.Linear(hidden, 4 * hidden)),
                     output=_modules(dense=nn.Linear(4 * hidden, hidden), LayerNorm=nn.LayerNorm(hidden, eps=1e-12)))
            for _ in range(layers)))

    def split(self, x):
        b, t, d = x.shape
        return x.view(b, t, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, ids):
        e = self.embeddings
        positions = torch.arange(ids.shape[1])
        x = e.word_embeddings(ids) + e.position_embeddings(positions) + e.token_type_embeddings(torch.zeros_like(positions))
        x = e.LayerNorm(x)
        for layer in self.encoder.layer:
            s = layer.attention.self
            q, k, v = self.split(s.query(x)), self.split(s.key(x)), self.split(s.value(x))
            p = torch.softmax(q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5), dim=-1)
            a = (p @ v).transpose(1, 2).reshape(x.shape)
            a = layer.attention.output.LayerNorm(layer.attention.output.dense(a) + x)
            f = layer.output.dense(torch.nn.functional.gelu(layer.intermediate.dense(a)))
            x = layer.output.LayerNorm(f + a)
        return x


BERT = {"bert_small": (4, 256, 4, 8192), "bert_base": (12, 768, 12, 30522)}


class Conv1D(torch.nn.Module):
    """GPT-2's linear layer: weight stored [in, out], y = x @ weight + bias."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n_in, n_out) * 0.02)
        self.bias = torch.nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


class GPT2Step(torch.nn.Module):
    """latch's zoo gpt2 (bench/models/gpt2.c): one decoder step of a GPT-2-like model with
    Hugging Face GPT2Model's keys and a tied LM head. The KV cache (self.past, [B, heads, S,
    d] per layer) is exported as weights/past.<layer>.key/value.npy; forward(token [B, 1])
    returns the next logits [B, vocab]."""

    LAYERS, HIDDEN, HEADS, VOCAB, POSITIONS = 4, 256, 4, 2048, 1024

    def __init__(self):
        super().__init__()
        nn, d = torch.nn, self.HIDDEN
        self.wte = nn.Embedding(self.VOCAB, d)
        self.wpe = nn.Embedding(self.POSITIONS, d)
        self.h = nn.ModuleList(
            _modules(ln_1=nn.LayerNorm(d), attn=_modules(c_attn=Conv1D(d, 3 * d), c_proj=Conv1D(d, d)),
                     ln_2=nn.LayerNorm(d), mlp=_modules(c_fc=Conv1D(d, 4 * d), c_proj=Conv1D(4 * d, d)))
            for _ in range(self.LAYERS))
        self.ln_f = nn.LayerNorm(d)
        self.past = None

    def make_past(self, batch, size, generator):
        shape = (batch, self.HEADS, size, self.HIDDEN // self.HEADS)
        self.past = [(torch.randn(shape, generator=generator), torch.randn(shape, generator=generator))
                     for _ in range(self.LAYERS)]

    def forward(self, token):
        b, d, heads = token.shape[0], self.HIDDEN, self.HEADS
        at = self.past[0][0].shape[2]
        x = self.wte(token) + self.wpe.weight[at:at + 1]
        split = lambda t: t.view(b, 1, heads, d // heads).transpose(1, 2)
        for layer, (past_k, past_v) in zip(self.h, self.past):
            q, k, v = layer.attn.c_attn(layer.ln_1(x)).split(d, dim=2)
            keys, values = torch.cat([past_k, split(k)], 2), torch.cat([past_v, split(v)], 2)
            p = torch.softmax(split(q) @ keys.transpose(-1, -2) / ((d // heads) ** 0.5), dim=-1)
            x = x + layer.attn.c_proj((p @ values).transpose(1, 2).reshape(b, 1, d))
            f = layer.mlp.c_proj(torch.nn.functional.gelu(layer.mlp.c_fc(layer.ln_2(x)), approximate="tanh"))
            x = x + f
        return (self.ln_f(x) @ self.wte.weight.t()).reshape(b, self.VOCAB)


def build(name, size):
    torch.manual_seed(0)
    if name == "mlp":
        return MLP()
    if name in BERT:
        return BertEncoder(*BERT[name])
    if name == "gpt2":
        return GPT2Step()
    if name not in TORCHVISION and name != "vit_tiny":
        raise SystemExit(f"torch_zoo.py: unknown model '{name}'; models: mlp, {', '.join(BERT)}, gpt2, vit_tiny, "
                         f"{', '.join(TORCHVISION)}")
    if name == "vit_b_16":
        return TORCHVISION[name](weights=None, image_size=size)
    if name == "vit_tiny":
        # latch's vit_tiny (bench/models/vit.c): vit_b_16's architecture and keys, narrowed.
        return VisionTransformer(image_size=size, patch_size=16, num_layers=4, num_heads=3, hidden_dim=192,
                                 mlp_dim=768)
    return TORCHVISION[name](weights=None)


def make_input(name, batch, size, seed):
    generator = torch.Generator().manual_seed(seed)
    if name == "mlp":
        return torch.rand(batch, 784, generator=generator) * 2 - 1
    if name in BERT:
        return torch.randint(0, BERT[name][3], (batch, size), generator=generator)
    if name == "gpt2":
        return torch.randint(0, GPT2Step.VOCAB, (batch, 1), generator=generator)
    return torch.rand(batch, 3, size, size, generator=generator) * 2 - 1


# Models whose products are all nn.Conv2d and nn.Linear calls, so count_flops sees them all
# (attention's matmuls in bert, gpt2 and the vits are not module calls).
FLOPS_COUNTED = {"mlp", "resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "alexnet", "vgg16"}


def count_flops(name, model, x):
    """Multiplies and adds (2 flops per multiply-add) of the model's convolutions and linear
    layers on x, from each call's output size; None for a model whose products are not all
    module calls."""
    if name not in FLOPS_COUNTED:
        return None
    total = [0]

    def conv(module, inputs, output):
        kh, kw = module.kernel_size
        total[0] += 2 * output.numel() * (module.in_channels // module.groups) * kh * kw

    def linear(module, inputs, output):
        total[0] += 2 * output.numel() * module.in_features

    hooks = [m.register_forward_hook(conv) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    hooks += [m.register_forward_hook(linear) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return total[0]


def time_model(name, batch, size, repeat, warmup=1):
    model = build(name, size).eval()
    if name == "gpt2":
        model.make_past(batch, size, torch.Generator().manual_seed(2))
    x = make_input(name, batch, size, 0)
    with torch.no_grad():
        for _ in range(warmup):  # first-call allocations and kernel selection
            model(x)
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            model(x)
            samples.append((time.perf_counter() - start) * 1e3)
    return samples, count_flops(name, model, x)


def cmd_time(args):
    torch.set_num_threads(args.threads)
    results = {}
    print(f"{'model':<16} {'batch':>5} {'size':>5} {'median ms':>10} {'min ms':>8}")
    for name in args.model:
        size = 28 if name == "mlp" else args.size
        samples, flops = time_model(name, args.batch, size, args.repeat, args.warmup)
        results[name] = {"batch": args.batch, "size": size, "median_ms": statistics.median(samples),
                         "min_ms": min(samples), "samples_ms": samples, "flops": flops}
        print(f"{name:<16} {args.batch:>5} {size:>5} {statistics.median(samples):>10.3f} {min(samples):>8.3f}",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "torch": torch.__version__, "models": results}, f, indent=1)


def perturb(model, seed):
    """Moves every parameter and buffer off its initial value (zero heads, unit batch-norm
    statistics), so that a check against these weights exercises every term."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for key, value in model.state_dict().items():
            if not value.is_floating_point():
                continue
            noise = torch.randn(value.shape, generator=generator)
            if key.endswith("running_var"):
                value.copy_(0.5 + torch.rand(value.shape, generator=generator))
            elif key.endswith("running_mean"):
                value.copy_(0.1 * noise)
            else:
                value.add_(0.05 * noise)


def cmd_export(args):
    model = build(args.model, args.size).eval()
    if args.perturb:
        perturb(model, args.seed + 1)
    weights = os.path.join(args.out, "weights")
    os.makedirs(weights, exist_ok=True)
    for key, value in model.state_dict().items():
        if value.dtype == torch.int64:  # num_batches_tracked: not a weight
            continue
        np.save(os.path.join(weights, key + ".npy"), value.detach().numpy().astype(np.float32))
    if args.model == "gpt2":
        model.make_past(args.batch, args.size, torch.Generator().manual_seed(args.seed + 2))
        for i, (k, v) in enumerate(model.past):
            np.save(os.path.join(weights, f"past.{i}.key.npy"), k.numpy())
            np.save(os.path.join(weights, f"past.{i}.value.npy"), v.numpy())
    x = make_input(args.model, args.batch, args.size, args.seed)
    with torch.no_grad():
        y = model(x)
    np.save(os.path.join(args.out, "input.npy"), x.numpy())
    np.save(os.path.join(args.out, "output.npy"), y.numpy())
    print(f"wrote {len(model.state_dict())} tensors to {weights}, input {tuple(x.shape)}, output {tuple(y.shape)}")


def cmd_export_onnx(args):
    """The model in ONNX (opset 13), input 'input' and output 'output' with a dynamic batch
    dim: one file serves every batch size."""
    if args.model in BERT or args.model == "gpt2":
        raise SystemExit(f"torch_zoo.py: export-onnx takes image models and mlp, not {args.model}")
    model = build(args.model, args.size).eval()
    x = make_input(args.model, 1, args.size, 0)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    axes = {"input": {0: "batch"}, "output": {0: "batch"}}
    with torch.no_grad():
        torch.onnx.export(model, x, args.out, input_names=["input"], output_names=["output"], dynamic_axes=axes,
                          opset_version=13)
    print(f"wrote {args.out}: {args.model}, input {tuple(x.shape[1:])} after the batch dim")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("time", help="median ms per step per model")
    t.add_argument("--model", nargs="+", default=["mlp", "resnet18", "mobilenet_v2", "squeezenet1_1"])
    t.add_argument("--batch", type=int, default=1)
    t.add_argument("--size", type=int, default=224)
    t.add_argument("--repeat", type=int, default=10)
    t.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    t.add_argument("--threads", type=int, default=os.cpu_count())
    t.add_argument("--json")
    e = sub.add_parser("export", help="weights, input and output as .npy")
    e.add_argument("--model", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--batch", type=int, default=1)
    e.add_argument("--size", type=int, default=224)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--perturb", action="store_true", help="move every weight and statistic off its initial value")
    o = sub.add_parser("export-onnx", help="the model as ONNX, batch dim dynamic")
    o.add_argument("--model", required=True)
    o.add_argument("--out", required=True)
    o.add_argument("--size", type=int, default=224)
    args = parser.parse_args()
    {"time": cmd_time, "export": cmd_export, "export-onnx": cmd_export_onnx}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
