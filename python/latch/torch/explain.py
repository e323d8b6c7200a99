"""latch.torch.explain and latch.torch.stats: what latch would do with a model, and what it
has done.

explain(model, *inputs) answers as torch._dynamo.explain does, by running: it captures the
aten graph as compile's first call does (make_fx through functionalization and the
decompositions: latch/torch/capture.py), lists every op latch does not lower,
then compiles a copy of the model with fullgraph=True and calls it once on the inputs, so a
reason found only while lowering (an argument a lowering refuses) is reported too. The
verdict is "whole" (one latch graph), "fallback" (compile would run the model eagerly, with
the reasons) or "error" (the call fails under torch as well as latch, or on a device latch
does not run). It prints a short report and returns the same as a dict."""
import copy
import operator
from collections import Counter

import torch

from .. import _latch, stats as runtime_stats
from . import api
from .capture import capture
from .compile import Compiled, _named_state as named_state


def _devices(model, inputs):
    tensors = [a for a in inputs if isinstance(a, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        tensors += list(model.parameters()) + list(model.buffers())
    return sorted({t.device.type for t in tensors} - {"cpu"})


def _capture(model, inputs):
    """The aten graph compile's first call would trace: latch/torch/capture.py's, through
    functionalization and the decompositions, the module's state swapped for copies."""
    module = model if isinstance(model, torch.nn.Module) else None
    with torch.no_grad():
        return capture(lambda m, *a: (m if m is not None else model)(*a), module, named_state,
                       [a.detach().clone() for a in inputs]).gm


def _ops(gm):
    """(aten op counts, the ops latch does not lower with their counts)."""
    from .lowering import LOWERINGS
    ops, unlowered = Counter(), Counter()
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem:
            ops[str(node.target)] += 1
            if node.target not in LOWERINGS:
                unlowered[str(node.target)] += 1
    return ops, unlowered


def _trial(model, inputs):
    """Compile a copy with fullgraph=True and call it once: None, or why latch declined."""
    twin = copy.deepcopy(model) if isinstance(model, torch.nn.Module) else model
    compiled = Compiled(twin, fullgraph=True)  # not api.compile: not one of stats()'s functions
    try:
        with torch.no_grad():
            compiled(*inputs)
    except _latch.Unsupported as e:
        return str(e)
    return None


def _report(name, result):
    lines = [f"latch.torch.explain: {name}: {result['verdict']}"]
    if result["ops"]:
        lines.append(f"  {sum(result['ops'].values())} aten ops ({len(result['ops'])} kinds)")
    for op, n in sorted(result["unlowered"].items()):
        lines.append(f"  not lowered: {op} ({n}x)")
    lines += [f"  reason: {r}" for r in result["reasons"]]
    return "\n".join(lines)


def explain(model, *inputs, verbose=True):
    """What latch.torch.compile(model) would make of a call with inputs (see above)."""
    name = getattr(model, "__name__", None) or type(model).__name__
    result = {"verdict": "whole", "ops": {}, "unlowered": {}, "reasons": []}
    devices = _devices(model, inputs)
    if devices:
        result["verdict"] = "error"
        result["reasons"].append(f"tensors on device {', '.join(devices)}: latch runs cpu tensors only")
    elif not all(isinstance(a, torch.Tensor) for a in inputs):
        result["verdict"] = "fallback"
        result["reasons"].append("non-tensor arguments are not compiled")
    else:
        try:
            gm = _capture(model, inputs)
        except Exception as e:  # make_fx could not trace it: the call fails under latch
            result["verdict"] = "error"
            result["reasons"].append(f"make_fx cannot trace it: {e}")
        else:
            ops, unlowered = _ops(gm)
            result["ops"], result["unlowered"] = dict(ops), dict(unlowered)
            reason = _trial(model, inputs)
            if unlowered or reason:
                result["verdict"] = "fallback"
                result["reasons"].append(reason or "ops latch does not lower")
    if verbose:
        print(_report(name, result))
    return result


def stats():
    """The runtime's counters (compile cache: hits, misses, compiles, disk loads, ...;
    latch.stats()) and, under "functions", each live compiled function's (traces, hits,
    entries, ...) by name."""
    out = dict(runtime_stats())
    functions = {}
    for c in list(api._live):
        name, n = c.name, 2
        while name in functions:
            name, n = f"{c.name}#{n}", n + 1
        functions[name] = c.stats()
    out["functions"] = functions
    return out
