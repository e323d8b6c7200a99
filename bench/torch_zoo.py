#!/usr/bin/python3
"""PyTorch side of latch's benchmark: the same architectures, timed with PyTorch's own CPU
kernels, and exported as .npy weights so latch can be checked against PyTorch's logits.

  bench/torch_zoo.py time   [--model M ...] [--batch N] [--size N] [--repeat N] [--warmup N] [--threads N]
                            [--json FILE] [--input FILE.npy --output FILE.npy]
  bench/torch_zoo.py export-onnx --model M --out DIR [--size N] [--batch N] [--steps N]
  bench/torch_zoo.py export --model M --out DIR [--batch N] [--size N] [--seed N] [--perturb]

`time` prints the median milliseconds per inference step (eval mode, no autograd) per model,
and its JSON holds each step's convolution and product flops (count_flops).
`export-onnx` writes what bench/compare_ort.py gives every side: the model as ONNX (torch.onnx,
the batch dim dynamic) for ONNX Runtime, its weights as .npy, an input and PyTorch's output.
`export` writes DIR/weights/<state_dict key>.npy for every parameter and buffer, DIR/input.npy
(seeded) and DIR/output.npy (PyTorch's output on it), which `latch bench --weights` reads.

Needs Debian's python3-torch and python3-torchvision (an opt-in dependency, not in CI; `make
check-torch` runs the export and compares); run with /usr/bin/python3, where Debian puts them.
Models: mlp, bert_small, bert_base (Hugging Face BertModel naming), gpt2 (one decoder step on
a seeded KV cache of --size positions, GPT2Model naming), gpt2_small (GPT-2 small over --size
causal tokens, the last hidden state), gpt2_small_gen (GPT-2 small's decoder step, each call
growing the cache: generation), vit_tiny (vit_b_16 narrowed to 4 layers of width 192, 3
heads) and torchvision's. --state-dict FILE loads weights torch.save wrote over the seeded ones.
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


class GPT2(torch.nn.Module):
    """A GPT-2-like decoder with Hugging Face GPT2Model's keys: pre-norm layers of causal
    self-attention (one packed c_attn) and a tanh-GELU MLP, then ln_f. Subclasses pick what
    forward runs: a whole sequence, or one step on a KV cache."""

    def __init__(self, layers, hidden, heads, vocab, positions=1024):
        super().__init__()
        nn, d = torch.nn, hidden
        self.heads, self.hidden, self.vocab = heads, hidden, vocab
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(positions, d)
        self.h = nn.ModuleList(
            _modules(ln_1=nn.LayerNorm(d), attn=_modules(c_attn=Conv1D(d, 3 * d), c_proj=Conv1D(d, d)),
                     ln_2=nn.LayerNorm(d), mlp=_modules(c_fc=Conv1D(d, 4 * d), c_proj=Conv1D(4 * d, d)))
            for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.past = None

    def split(self, t):
        b, s, d = t.shape
        return t.view(b, s, self.heads, d // self.heads).transpose(1, 2)

    def block(self, layer, x, past=None, mask=None):
        """One layer on x [B, S, D]; past: (keys, values) [B, heads, T, d] the new ones are
        appended to. Returns x and the keys and values attended to."""
        b, s, d = x.shape
        q, k, v = layer.attn.c_attn(layer.ln_1(x)).split(d, dim=2)
        keys, values = self.split(k), self.split(v)
        if past is not None:
            keys, values = torch.cat([past[0], keys], 2), torch.cat([past[1], values], 2)
        scores = self.split(q) @ keys.transpose(-1, -2) / ((d // self.heads) ** 0.5)
        if mask is not None:
            scores = scores + mask
        p = torch.softmax(scores, dim=-1)
        x = x + layer.attn.c_proj((p @ values).transpose(1, 2).reshape(b, s, d))
        f = layer.mlp.c_proj(torch.nn.functional.gelu(layer.mlp.c_fc(layer.ln_2(x)), approximate="tanh"))
        return x + f, (keys, values)

    def sequence(self, ids):
        """ids [B, S] -> the last hidden state [B, S, D], each position attending to itself and
        the ones before it (GPT2Model's output)."""
        s = ids.shape[1]
        x = self.wte(ids) + self.wpe.weight[:s]
        mask = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        for layer in self.h:
            x, _ = self.block(layer, x, mask=mask)
        return self.ln_f(x)

    def make_past(self, batch, size, generator):
        shape = (batch, self.heads, size, self.hidden // self.heads)
        self.past = [(torch.randn(shape, generator=generator), torch.randn(shape, generator=generator))
                     for _ in self.h]

    def step(self, token, carry=False):
        """token [B, 1] -> the next logits [B, vocab] (LM head tied to wte), attending to the
        cache self.past; carry: the cache keeps this token's keys and values (generation)."""
        at = self.past[0][0].shape[2]
        x = self.wte(token) + self.wpe.weight[at:at + 1]
        grown = []
        for layer, past in zip(self.h, self.past):
            x, kv = self.block(layer, x, past)
            grown.append(kv)
        if carry:
            self.past = grown
        return (self.ln_f(x) @ self.wte.weight.t()).reshape(token.shape[0], self.vocab)


class GPT2Step(GPT2):
    """latch's zoo gpt2 and gpt2_small_gen (bench/models/gpt2.c): one decoder step on a KV
    cache (self.past, [B, heads, S, d] per layer), exported as weights/past.<layer>.key/value.npy;
    forward(token [B, 1]) returns the next logits [B, vocab]. carry: each call appends to the
    cache (generation) instead of reading the same one."""

    def __init__(self, layers=4, hidden=256, heads=4, vocab=2048, carry=False):
        super().__init__(layers, hidden, heads, vocab)
        self.carry = carry

    def forward(self, token):
        return self.step(token, self.carry)


class GPT2Sequence(GPT2):
    """latch's zoo gpt2_small (bench/models/gpt2_seq.c): GPT-2 small (12 layers, 768, 12 heads)
    over a whole causal sequence of token ids [B, S]; the output is the last hidden state."""

    def __init__(self):
        super().__init__(*GPT2_SMALL)

    def forward(self, ids):
        return self.sequence(ids)


GPT2_SMALL = (12, 768, 12, 50257)


class GPT2StepExport(torch.nn.Module):
    """A KV-cache step as ONNX takes it: forward(token, past.0.key, ..., past.0.value, ...)
    returns (logits, present.0.key, ..., present.0.value, ...), the cache grown by this token."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, token, *past):
        n = len(self.model.h)
        self.model.past = list(zip(past[:n], past[n:]))
        logits = self.model.step(token, carry=True)
        return (logits, *[kv[0] for kv in self.model.past], *[kv[1] for kv in self.model.past])


def export_step_onnx(model, batch, size, path):
    """A KV-cache model's step as ONNX (opset 17), batch and cache length dynamic."""
    n = len(model.h)
    model.make_past(batch, size, torch.Generator().manual_seed(2))
    past = [kv[0] for kv in model.past] + [kv[1] for kv in model.past]
    names = [f"past.{i}.key" for i in range(n)] + [f"past.{i}.value" for i in range(n)]
    outs = ["output"] + [name.replace("past.", "present.") for name in names]
    axes = {"input": {0: "batch"}, "output": {0: "batch"}}
    axes.update({name: {0: "batch", 2: "positions"} for name in names + outs[1:]})
    x = make_input("gpt2_small_gen" if model.vocab != 2048 else "gpt2", batch, size, 0)
    with torch.no_grad():
        torch.onnx.export(GPT2StepExport(model), (x, *past), path, input_names=["input"] + names, output_names=outs,
                          dynamic_axes=axes, opset_version=17)


# Models whose step reads and grows a KV cache (past.<layer>.key/value) instead of a whole input.
STEP_MODELS = {"gpt2", "gpt2_small_gen"}


def build(name, size, state_dict=None):
    """The model, seeded; state_dict: a file of weights (torch.save's, e.g. torchvision's
    downloaded ones) loaded over the seeded ones, every key required."""
    model = build_seeded(name, size)
    if state_dict:
        model.load_state_dict(torch.load(state_dict, map_location="cpu"))
    return model


def build_seeded(name, size):
    torch.manual_seed(0)
    if name == "mlp":
        return MLP()
    if name in BERT:
        return BertEncoder(*BERT[name])
    if name == "gpt2":
        return GPT2Step()
    if name == "gpt2_small":
        return GPT2Sequence()
    if name == "gpt2_small_gen":
        return GPT2Step(*GPT2_SMALL, carry=True)
    if name not in TORCHVISION and name != "vit_tiny":
        raise SystemExit(f"torch_zoo.py: unknown model '{name}'; models: mlp, {', '.join(BERT)}, gpt2, gpt2_small, "
                         f"gpt2_small_gen, vit_tiny, {', '.join(TORCHVISION)}")
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
    if name in STEP_MODELS or name == "gpt2_small":
        vocab = GPT2_SMALL[3] if name != "gpt2" else 2048
        return torch.randint(0, vocab, (batch, 1 if name in STEP_MODELS else size), generator=generator)
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


def transformer_flops(name, batch, size):
    """The products' flops of one step of a transformer (2 per multiply-add): per layer the
    four d x d projections, the two of the MLP (d x 4d each way) and attention's two products
    over every pair of positions (all of them, as the step computes them, causal or not);
    gpt2_small_gen: one token against a cache of `size`; None for other models."""
    if name in BERT:
        layers, d, tokens, keys = BERT[name][0], BERT[name][1], size, size
    elif name == "gpt2_small":
        layers, d, tokens, keys = GPT2_SMALL[0], GPT2_SMALL[1], size, size
    elif name in ("vit_b_16", "vit_tiny"):
        layers, d = (12, 768) if name == "vit_b_16" else (4, 192)
        tokens = keys = (size // 16) ** 2 + 1
    else:
        return None
    per_layer = 2 * tokens * (4 * d * d + 8 * d * d) + 2 * 2 * tokens * keys * d
    total = layers * per_layer
    if name.startswith("vit"):  # the patch convolution and the head
        total += 2 * (tokens - 1) * d * 3 * 16 * 16 + 2 * d * 1000
    return batch * total


def time_model(name, batch, size, repeat, warmup=1, state_dict=None, x=None):
    """The step's wall ms per timed step, its flops, and its output on the last step; x: the
    input (else the seeded one). A KV-cache model grows its cache by one position per step."""
    model = build(name, size, state_dict).eval()
    if name in STEP_MODELS:
        model.make_past(batch, size, torch.Generator().manual_seed(2))
    x = make_input(name, batch, size, 0) if x is None else x
    flops = count_flops(name, model, x) if name not in STEP_MODELS else None
    with torch.no_grad():
        for _ in range(warmup):  # first-call allocations and kernel selection
            model(x)
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            y = model(x)
            samples.append((time.perf_counter() - start) * 1e3)
    return samples, flops or transformer_flops(name, batch, size), y


def cmd_time(args):
    torch.set_num_threads(args.threads)
    results = {}
    print(f"{'model':<16} {'batch':>5} {'size':>5} {'median ms':>10} {'min ms':>8}")
    if args.input and len(args.model) != 1:
        raise SystemExit("torch_zoo.py: --input and --output take one --model")
    x = torch.from_numpy(np.load(args.input)) if args.input else None
    for name in args.model:
        size = 28 if name == "mlp" else args.size
        samples, flops, y = time_model(name, args.batch, size, args.repeat, args.warmup, args.state_dict, x)
        if args.output:
            np.save(args.output, y.numpy())
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
    model = build(args.model, args.size, args.state_dict).eval()
    if args.perturb:
        perturb(model, args.seed + 1)
    weights = os.path.join(args.out, "weights")
    save_weights(model, weights)
    if args.model in STEP_MODELS:
        model.make_past(args.batch, args.size, torch.Generator().manual_seed(args.seed + 2))
        save_past(model, weights)
    x = make_input(args.model, args.batch, args.size, args.seed)
    with torch.no_grad():
        y = model(x)
    np.save(os.path.join(args.out, "input.npy"), x.numpy())
    np.save(os.path.join(args.out, "output.npy"), y.numpy())
    print(f"wrote {len(model.state_dict())} tensors to {weights}, input {tuple(x.shape)}, output {tuple(y.shape)}")


def cmd_export_onnx(args):
    """What the three sides of a comparison run, into DIR (--out), each file written once: the
    model seeded with every weight moved off its initial value (perturb), or --state-dict's;
    weights.pt, its state dict for `time --state-dict`; model.onnx (opset 13 for the image models, 17 for the transformers, input 'input' and
    output 'output' with a dynamic batch dim: one file serves every batch size; a KV-cache
    model's step also takes and returns the cache, export_step_onnx), weights/<state_dict key>.npy (latch's --weights; the cache as
    past.<layer>.key/value.npy), and per batch B input-bB.npy (seeded) and output-bB.npy,
    PyTorch eager's output on it: after --steps steps for a KV-cache model (the cache grown
    by one position each)."""
    model = build(args.model, args.size, args.state_dict).eval()
    if not args.state_dict:  # off their initial values, so that no term is zero (vit_b_16's head is)
        perturb(model, 1)
    os.makedirs(args.out, exist_ok=True)
    if not os.path.exists(os.path.join(args.out, "weights.pt")):
        torch.save(model.state_dict(), os.path.join(args.out, "weights.pt.part"))
        os.rename(os.path.join(args.out, "weights.pt.part"), os.path.join(args.out, "weights.pt"))
    weights = os.path.join(args.out, "weights")
    if not os.path.isdir(weights):
        save_weights(model, weights + ".part")
        if args.model in STEP_MODELS:
            model.make_past(args.batch, args.size, torch.Generator().manual_seed(2))
            save_past(model, weights + ".part")
        os.rename(weights + ".part", weights)
    onnx = os.path.join(args.out, "model.onnx")
    if args.model in STEP_MODELS and not os.path.exists(onnx):
        export_step_onnx(model, args.batch, args.size, onnx + ".part")
        os.rename(onnx + ".part", onnx)
    elif not os.path.exists(onnx):
        x = make_input(args.model, 1, args.size, 0)
        axes = {"input": {0: "batch"}, "output": {0: "batch"}}
        opset = 13 if args.model in TORCHVISION and args.model != "vit_b_16" or args.model == "mlp" else 17
        # Traced with autograd on: under no_grad nn.MultiheadAttention (vit_b_16's) takes its
        # fused path, aten::_native_multi_head_attention, which has no ONNX export.
        torch.onnx.export(model, x, onnx + ".part", input_names=["input"], output_names=["output"],
                          dynamic_axes=axes, opset_version=opset)
        os.rename(onnx + ".part", onnx)
    x = make_input(args.model, args.batch, args.size, 0)
    if args.model in STEP_MODELS:
        model.make_past(args.batch, args.size, torch.Generator().manual_seed(2))
    with torch.no_grad():
        for _ in range(args.steps if args.model in STEP_MODELS else 1):
            y = model(x)
    np.save(os.path.join(args.out, f"input-b{args.batch}.npy"), x.numpy())
    np.save(os.path.join(args.out, f"output-b{args.batch}.npy"), y.numpy())
    print(f"wrote {args.out}: {args.model}, input {tuple(x.shape)}, output {tuple(y.shape)}")


def save_weights(model, directory):
    os.makedirs(directory, exist_ok=True)
    for key, value in model.state_dict().items():
        if value.dtype == torch.int64:  # num_batches_tracked: not a weight
            continue
        np.save(os.path.join(directory, key + ".npy"), value.detach().numpy().astype(np.float32))


def save_past(model, directory):
    for i, (k, v) in enumerate(model.past):
        np.save(os.path.join(directory, f"past.{i}.key.npy"), k.numpy())
        np.save(os.path.join(directory, f"past.{i}.value.npy"), v.numpy())


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
    t.add_argument("--input", help="the input (.npy) instead of the seeded one")
    t.add_argument("--output", help="write the last timed step's output (.npy)")
    e = sub.add_parser("export", help="weights, input and output as .npy")
    e.add_argument("--model", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--batch", type=int, default=1)
    e.add_argument("--size", type=int, default=224)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--perturb", action="store_true", help="move every weight and statistic off its initial value")
    o = sub.add_parser("export-onnx", help="the model as ONNX (batch dim dynamic), its weights, an input and "
                       "PyTorch's output on it")
    o.add_argument("--model", required=True)
    o.add_argument("--out", required=True, help="a directory")
    o.add_argument("--size", type=int, default=224)
    o.add_argument("--batch", type=int, default=1)
    o.add_argument("--steps", type=int, default=1, help="a KV-cache model's steps before its output (default 1)")
    for p in (t, e, o):
        p.add_argument("--state-dict", help="weights saved by torch.save (e.g. torchvision's) over the seeded ones")
    args = parser.parse_args()
    {"time": cmd_time, "export": cmd_export, "export-onnx": cmd_export_onnx}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
