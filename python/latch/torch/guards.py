"""Guards on what a compiled graph depends on besides its tensor inputs.

latch's own guards (the Function's, in C) cover the inputs' and parameters' dtypes and sizes;
the torch-side ones there cover which tensor each parameter slot holds and its version. A
traced graph also depends on Python state that make_fx reads once and bakes in: each
submodule's `training` flag and other plain attributes (ints, floats, bools, strings, tuples of
them), which submodule object sits where, the hooks registered, the parameters and buffers
present with their sizes and requires_grad, grad mode, the inputs' requires_grad, and the
plain globals and closure cells the traced code reads. `state()` gathers all of it twice:

  - a key, by value: equal keys may share a traced graph, a new key traces again;
  - a flat tuple of (owner, key, value) triples that the warm call in C checks by identity
    (python/src/compiled.c: guards_hold); a failed check goes to Python, which computes the
    key again: an equal value in another object (`m.p = 0.5` again) keeps the graph and only
    sets the triples anew.

What is not guarded (mutable containers changed in place, globals read by helpers the traced
code calls, class attributes) is listed in docs/pytorch-training.md."""
import types

import torch

PLAIN = (bool, int, float, complex, str, bytes, type(None), torch.dtype, torch.device, torch.layout,
         torch.memory_format)
CALLABLE = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType, type)
# nn.Module dicts guarded entry by entry (_modules, _parameters, _buffers) or by size (hooks)
HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks")
SKIP = frozenset(("_parameters", "_buffers", "_modules") + HOOKS)


def plain(v):
    """A value compared by value: None, bools, numbers, strings, dtypes, tuples of them."""
    if type(v) is tuple:
        return all(plain(x) for x in v)
    return isinstance(v, PLAIN)


class _Builder:
    def __init__(self):
        self.key, self.triples, self.seen_code = [], [], set()

    def item(self, d, k, value, key_part):
        self.triples += (d, k, value)
        self.key.append(key_part)

    def size(self, d):
        self.triples += (d, None, len(d))

    def value(self, owner, name, v, attr=False, label=None):
        """owner's name (a dict's entry, or an attribute with attr) guarded: plain values by
        value, tensors by identity and version, functions and classes by identity; label
        names it in the key."""
        label = label or name
        if plain(v):
            part = (label, v)
        elif isinstance(v, torch.Tensor):
            part = (label, "tensor", id(v), v._version)
            self.triples += (v, "_version", v._version)
        elif isinstance(v, CALLABLE):
            part = (label, "object", id(v))
        else:
            return
        if attr:
            self.triples += (owner, name, v)
            self.key.append(part)
        else:
            self.item(owner, name, v, part)

    def code_globals(self, code, globs):
        """The plain globals code (and the code nested in it) reads."""
        if code in self.seen_code:
            return
        self.seen_code.add(code)
        for name in code.co_names:
            if name in globs:
                self.value(globs, name, globs[name])
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self.code_globals(const, globs)

    def function(self, fn):
        """A plain function's globals and closure cells."""
        fn = getattr(fn, "__func__", fn)
        code = getattr(fn, "__code__", None)
        if code is None:
            return
        self.code_globals(code, fn.__globals__)
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            self.value(cell, "cell_contents", contents, attr=True, label=name)

    def module(self, prefix, sub):
        d = sub.__dict__
        self.size(d)
        self.key.append((prefix, "module", id(sub)))
        for name, v in d.items():
            if name not in SKIP:
                self.value(d, name, v)
        for name in HOOKS:
            if name in d:
                self.size(d[name])
                self.key.append((name, len(d[name])))
        self.size(sub._modules)
        for name, child in sub._modules.items():
            self.item(sub._modules, name, child, (name, id(child)))
        for kind in ("_parameters", "_buffers"):
            tensors = getattr(sub, kind)
            self.size(tensors)
            for name, t in tensors.items():
                if t is None:
                    self.item(tensors, name, None, (name, None))
                    continue
                # which tensor: identity here; a replacement of the same size, dtype and
                # requires_grad keeps the graph (the Function lends the new one)
                self.item(tensors, name, t, (name, tuple(t.shape), t.dtype, t.requires_grad))
                self.triples += (t, "requires_grad", t.requires_grad)
        forward = getattr(type(sub), "forward", None)
        if forward is not None:
            self.function(forward)


def state(fn, module):
    """(key, guards): what the graph of fn (module: the nn.Module fn is, or None) depends on
    besides its inputs, by value and as C's identity triples. Grad mode and the inputs'
    requires_grad are guarded apart (Compiled's grad_mode and input_grads)."""
    b = _Builder()
    if module is not None:
        glob = torch.nn.modules.module
        for name in ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks"):
            if hasattr(glob, name):
                b.size(getattr(glob, name))
                b.key.append((name, len(getattr(glob, name))))
        for prefix, sub in module.named_modules(remove_duplicate=False):
            b.module(prefix, sub)
    else:
        b.function(fn)
    return tuple(b.key), tuple(b.triples)
