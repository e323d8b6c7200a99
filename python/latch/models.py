"""The models latch's PyTorch frontend is tested and benchmarked on: torchvision's, a BERT
encoder layer and a GPT-2 block written here in torch, and two training steps (an MLP and a
small CNN: forward, backward, SGD). Each builder returns (module, make_input(batch, size))."""
import math

import torch
import torchvision

nn = torch.nn
F = torch.nn.functional

VISION = {
    "resnet18": torchvision.models.resnet18,
    "resnet50": torchvision.models.resnet50,
    "mobilenet_v2": torchvision.models.mobilenet_v2,
    "squeezenet1_1": torchvision.models.squeezenet1_1,
    "alexnet": torchvision.models.alexnet,
    "vgg16": torchvision.models.vgg16,
    "vit_b_16": torchvision.models.vit_b_16,
}


class BertLayer(nn.Module):
    """One BERT encoder layer (post-norm): self-attention, residual, LayerNorm, GELU MLP."""

    def __init__(self, hidden=768, heads=12):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        split = lambda y: y.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.heads), dim=-1)
        a = (p @ v).transpose(1, 2).reshape(b, t, d)
        x = self.ln1(x + self.proj(a))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class GPT2Block(nn.Module):
    """One GPT-2 block (pre-norm, causal self-attention, tanh GELU MLP)."""

    def __init__(self, hidden=768, heads=12):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.attn = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.out = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.attn(self.ln1(x)).split(d, dim=2)
        split = lambda y: y.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        s = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        s = s.masked_fill(~causal, float("-inf"))
        a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class MLP(nn.Module):
    def __init__(self, inputs=784, hidden=256, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(inputs, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = F.avg_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.relu(self.conv2(x))
        return self.fc(x.mean(dim=(2, 3)))


class TrainStep(nn.Module):
    """forward, cross-entropy loss, backward and an SGD update in place; returns the loss."""

    def __init__(self, model, lr=0.01):
        super().__init__()
        self.model, self.lr = model, lr

    def forward(self, x, labels):
        params = [p for p in self.model.parameters()]
        loss = F.cross_entropy(self.model(x), labels)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(g * self.lr)
        return loss.detach()


def _images(channels=3):
    def make(batch, size, seed=0):
        g = torch.Generator().manual_seed(seed)
        return (torch.rand(batch, channels, size, size, generator=g) * 2 - 1,)
    return make


def _tokens(hidden):
    def make(batch, size, seed=0):
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(batch, size, hidden, generator=g),)
    return make


def _train(inputs_shape):
    def make(batch, size, seed=0):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(batch, *inputs_shape(size), generator=g)
        return x, torch.randint(0, 10, (batch,), generator=g)
    return make


# name -> (builder(size), make_input, the small size, the full size)
MODELS = {name: (lambda size, f=f, name=name: (f(weights=None, image_size=size) if name == "vit_b_16" else f(weights=None)),
                 _images(), 32 if name != "alexnet" else 64, 224)
          for name, f in VISION.items()}
MODELS["bert_layer"] = (lambda size: BertLayer(), _tokens(768), 16, 128)
MODELS["gpt2_block"] = (lambda size: GPT2Block(), _tokens(768), 16, 128)
MODELS["train_mlp"] = (lambda size: TrainStep(MLP(inputs=size * size)), _train(lambda s: (s, s)), 28, 28)
MODELS["train_cnn"] = (lambda size: TrainStep(SmallCNN()), _train(lambda s: (3, s, s)), 16, 32)


def build(name, size, seed=0):
    """The module (inference models in eval mode) and its input for (batch, size)."""
    torch.manual_seed(seed)
    builder, make_input, _, _ = MODELS[name]
    module = builder(size)
    if name == "vit_b_16":  # torchvision starts the head at zero: every output would be 0
        nn.init.normal_(module.heads.head.weight, std=0.02)
    if not name.startswith("train_"):
        module.eval()
    return module, make_input
