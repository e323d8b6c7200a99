"""The models latch.torch.compile is checked on as PyTorch users run them: the smallest member
of each torchvision classification family and PyTorch's own sequence modules, each with a
builder (eval mode, seeded) and an input maker, and check() that compiles one and compares it
with eager. Used by python/tests/test_zoo.py (a few at small sizes) and
bench/check_torch_zoo.py (all of them at 224: `make check-torch-zoo`)."""
import torch

nn = torch.nn

VISION = ["alexnet", "convnext_tiny", "densenet121", "efficientnet_b0", "efficientnet_v2_s", "googlenet",
          "inception_v3", "maxvit_t", "mnasnet0_5", "mobilenet_v2", "mobilenet_v3_small", "regnet_x_400mf",
          "regnet_y_400mf", "resnet18", "resnext50_32x4d", "shufflenet_v2_x0_5", "squeezenet1_0", "swin_t",
          "swin_v2_t", "vgg11", "vgg11_bn", "vit_b_16", "wide_resnet50_2"]
# the least size each takes (inception_v3's stem needs 75; maxvit and vit fix theirs at build)
MIN_SIZE = {"inception_v3": 75, "maxvit_t": 224, "alexnet": 64, "vgg11": 32, "vgg11_bn": 32, "googlenet": 32}


def _vision(name, size):
    import torchvision
    kwargs = {"weights": None}
    if name == "vit_b_16":
        kwargs["image_size"] = size
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=False)
    m = getattr(torchvision.models, name)(**kwargs)
    if name == "vit_b_16":  # torchvision starts the head at zero: every output would be 0
        nn.init.normal_(m.heads.head.weight, std=0.02)
    return m, (torch.rand(1, 3, size, size) * 2 - 1,)


class _Seq(nn.Module):
    """A sequence module's call as users write it, its output a tensor or a tuple of them."""

    def __init__(self, module, call):
        super().__init__()
        self.module, self.call = module, call

    def forward(self, *args):
        return self.call(self.module, *args)


def _sequence(name, length):
    d, heads, ff = 32, 4, 64
    x = torch.randn(2, length, d)
    mem = torch.randn(2, length + 1, d)
    causal = nn.Transformer.generate_square_subsequent_mask(length)
    pad = torch.zeros(2, length, dtype=torch.bool)
    pad[1, -2:] = True

    def enc(first):
        return nn.TransformerEncoder(nn.TransformerEncoderLayer(d, heads, ff, batch_first=True, norm_first=first), 2,
                                     enable_nested_tensor=False)

    def dec(first):
        return nn.TransformerDecoder(nn.TransformerDecoderLayer(d, heads, ff, batch_first=True, norm_first=first), 2)

    cases = {
        "encoder_post_norm": (enc(False), lambda m, x: m(x), (x,)),
        "encoder_pre_norm": (enc(True), lambda m, x: m(x), (x,)),
        "encoder_causal_mask": (enc(False), lambda m, x, mask: m(x, mask=mask), (x, causal)),
        "encoder_padding_mask": (enc(True), lambda m, x, pad: m(x, src_key_padding_mask=pad), (x, pad)),
        "decoder_post_norm": (dec(False), lambda m, x, mem: m(x, mem), (x, mem)),
        "decoder_pre_norm_causal": (dec(True), lambda m, x, mem, mask: m(x, mem, tgt_mask=mask), (x, mem, causal)),
        "multihead_attention": (nn.MultiheadAttention(d, heads, batch_first=True),
                                lambda m, x: m(x, x, x), (x,)),
        "multihead_attention_mask": (nn.MultiheadAttention(d, heads, batch_first=True),
                                     lambda m, x, mask: m(x, x, x, attn_mask=mask, need_weights=False)[0], (x, causal)),
        "lstm_2_layers": (nn.LSTM(d, 16, 2, batch_first=True), lambda m, x: m(x), (x,)),
        "lstm_seq_first": (nn.LSTM(d, 16, 1), lambda m, x: m(x), (x.transpose(0, 1).contiguous(),)),
        "gru_2_layers": (nn.GRU(d, 16, 2, batch_first=True), lambda m, x: m(x), (x,)),
        "gru_seq_first": (nn.GRU(d, 16, 1), lambda m, x: m(x), (x.transpose(0, 1).contiguous(),)),
    }
    module, call, args = cases[name]
    return _Seq(module, call), args


SEQUENCE = ["encoder_post_norm", "encoder_pre_norm", "encoder_causal_mask", "encoder_padding_mask",
            "decoder_post_norm", "decoder_pre_norm_causal", "multihead_attention", "multihead_attention_mask",
            "lstm_2_layers", "lstm_seq_first", "gru_2_layers", "gru_seq_first"]
ALL = VISION + SEQUENCE


def build(name, size):
    """(module in eval mode, inputs); size: the image side, or the sequence length."""
    torch.manual_seed(0)
    if name in VISION:
        module, args = _vision(name, max(size, MIN_SIZE.get(name, 32)))
    else:
        module, args = _sequence(name, size)
    return module.eval(), args


def flat(out):
    return [t for t in torch.utils._pytree.tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


def max_diff(got, want):
    """max |got - want| over the tensors of two outputs, each scaled by 1 + max |want|."""
    got, want = flat(got), flat(want)
    return max(((g.double() - w.double()).abs().max().item() / (1 + w.double().abs().max().item())
                if w.numel() else 0.0) for g, w in zip(got, want))


def check(name, size):
    """Compile name's model, call it twice, compare with eager: a dict with whole (compiled as
    one graph), parts (compiled parts of a split graph, 0 when whole), eager_ops, reason (why
    it ran eagerly), diff (max |latch - eager| over the outputs, scaled by 1 + max |eager|),
    shapes_match, and compiled and args (the compiled module and its inputs, to time)."""
    import latch.torch as lt
    module, args = build(name, size)
    c = lt.Compiled(module, name=name)
    with torch.no_grad():
        want = flat(module(*args))
        c(*args)
        got = flat(c(*args))
        diff = max_diff(got, want)
        plans = [p for graphs in c.states.values() for p in graphs.plans.values()]
        parts = sum(len([1 for v in cut.__dict__.values() if isinstance(v, lt.Compiled)]) for cut, _ in plans
                    if not isinstance(cut, lt.Compiled))
        result = {"name": name, "whole": c.function is not None and not c.eager_ops and c.eager_reason is None,
                  "parts": parts, "eager_ops": list(c.eager_ops), "reason": c.eager_reason, "diff": diff,
                  "shapes_match": [g.shape for g in got] == [w.shape for w in want]}
        result["compiled"], result["args"] = c, args
    return result
