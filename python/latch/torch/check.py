"""The check against eager PyTorch: LATCH_CHECK=eager, or latch.torch.compile(..., check="eager").

Each aten graph latch compiles (the inference graph of a guard state, and the forward and the
backward graph of the autograd path) is run by PyTorch on the same inputs at its first call,
and the outputs compared under latch's accuracy rule (LATCH_CHECK_TOL, 1e-3 by default,
scaled by the values' magnitude; wider under the bf16 precision, see tolerance()). On a mismatch a directory is written (under
LATCH_REPRO_DIR, else the temporary directory) that a PyTorch user can run:

  repro.py        the aten graph as a standalone module; runs it eagerly and through
                  latch.torch.compile and prints both differences
  graph.pt        the graph, shrunk first by functorch's minifier (functorch.compile.minifier:
                  the smallest graph whose latch outputs, op at a time, still differ)
  inputs.pt       its inputs
  difference.txt  the line on stderr
  hlo/            the library's HLO repro of that graph, when latch's cpu backend and its
                  reference evaluator differ on it (the graph run again in a child process
                  under LATCH_CHECK=accuracy, whose minifier shrinks the HLO); none when they
                  agree, which puts the difference in the lowering from aten to HLO

and one line on stderr names the directory and the first op whose output differs (each node
of the whole graph run eagerly and by latch, one at a time, in graph order). The call still
returns latch's values: the check reports, it does not repair.

The library's own LATCH_CHECK modes (compile, accuracy: latch against its reference
evaluator, with HLO repros) are set by LATCH_CHECK too; `eager` is this module's, and the
library takes it as its own checks off. latch.configure(check="eager") sets it."""
import contextlib
import copy
import io
import itertools
import os
import subprocess
import sys
import tempfile
import time

import torch

_TOL = float(os.environ.get("LATCH_CHECK_TOL", "") or 1e-3)
_count = itertools.count()
MINIFY_SECONDS = 60  # the minifier's time; the HLO repro's child process gets four times it


def wanted(check):
    """Whether a Compiled made with check= (None: the environment's) checks its graphs."""
    if check not in (None, "eager", "off"):
        raise ValueError(f"latch.torch.compile: check must be None, 'eager' or 'off', not {check!r}")
    if check is None:  # LATCH_CHECK, or latch.configure(check="eager"), when the Compiled is made
        return os.environ.get("LATCH_CHECK", "") == "eager"
    return check == "eager"


# Under the bf16 precision each product's operands are rounded to bf16, a relative error of
# at most 2**-8 each; a sum of K such products of either sign is then off by about sqrt(K) of
# them. The check's tolerance grows by 2**-8 * sqrt(K) for the graph's largest contraction K
# (a matmul's inner dim, a convolution's input features times its window), still scaled by
# the output's largest magnitude: a rounding the precision asked for passes, a wrong product
# (off by its own size) does not. docs/cpu-backend.md, "bf16".
BF16_EPSILON = 2.0 ** -8
_CONTRACTIONS = {  # aten op name: the contraction length from its arguments
    "mm": lambda a: a[0].shape[-1], "bmm": lambda a: a[0].shape[-1], "matmul": lambda a: a[0].shape[-1],
    "addmm": lambda a: a[1].shape[-1], "baddbmm": lambda a: a[1].shape[-1], "linear": lambda a: a[0].shape[-1],
    "convolution": lambda a: a[1][0].numel(),
}


def tolerance(precision, contraction):
    """The check's relative tolerance for a graph run at precision whose largest product sums
    contraction terms."""
    if precision != "bf16" or not contraction:
        return _TOL
    return _TOL + BF16_EPSILON * contraction ** 0.5


def _run_eager(gm, inputs, cloned=False):
    """gm's flat outputs run by PyTorch, and the largest contraction among its products.
    cloned: inputs are copies the run may update in place (else it runs on copies)."""
    from torch.utils import _pytree as pytree
    largest = [0]

    class Measure(torch.fx.Interpreter):
        def call_function(self, target, args, kwargs):
            name = getattr(getattr(target, "overloadpacket", None), "__name__", None)
            if name in _CONTRACTIONS and all(isinstance(a, torch.Tensor) for a in args[:2]):
                largest[0] = max(largest[0], int(_CONTRACTIONS[name](args)))
            return super().call_function(target, args, kwargs)

    with torch.no_grad():
        out = Measure(gm).run(*(inputs if cloned else [a.detach().clone() for a in inputs]))
    return pytree.tree_flatten(out)[0], largest[0]


def _differs(got, want, tol=None):
    tol = _TOL if tol is None else tol
    if not isinstance(want, torch.Tensor) or not isinstance(got, torch.Tensor):
        return False
    if got.shape != want.shape:
        return True
    if not want.is_floating_point():
        return not torch.equal(got.to(want.dtype), want)
    g, w = got.double(), want.double()
    if want.numel() == 0:
        return False
    both_nan = torch.isnan(g) & torch.isnan(w)
    err = torch.where(both_nan, torch.zeros_like(g), (g - w).abs()).max().item()
    return not err <= tol * (1 + w.abs().nan_to_num(0, 0, 0).max().item())


def _first_difference(gm, inputs, tol=None):
    """The first call_function node whose latch value differs from PyTorch's, run one node at
    a time outside any trace: (node, reason) or None."""
    from torch.utils._pytree import tree_map
    from .. import _latch
    from .compile import interpret
    from . import dtypes

    eager = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            # a copy: a view of an input that a later write-back updates would change under us
            eager[n] = tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, out)
            return out

    Recorder(gm).run(*[a.clone() for a in inputs])
    env = {}
    try:
        interpret(gm, [_latch.from_torch(a.detach().clone().contiguous()) for a in inputs], {}, env=env)
    except Exception as exc:  # the op latch could not run is the first difference
        failed = next((n for n in gm.graph.nodes if n.op == "call_function" and n not in env), None)
        return failed, f"latch raised {type(exc).__name__}: {exc}"
    for node in gm.graph.nodes:
        if node.op != "call_function" or node not in env:
            continue
        mine, theirs = env[node], eager.get(node)
        pairs = zip(mine, theirs) if isinstance(theirs, (list, tuple)) else [(mine, theirs)]
        for m, t in pairs:
            if isinstance(m, _latch.Tensor) and _differs(dtypes.to_torch(m), t, tol):
                return node, "output differs"
    return None


def _repro_source(name):
    return f'''"""An aten graph latch.torch.compile ran differently from PyTorch ({name}).
Run: python3 repro.py (latch on PYTHONPATH); prints PyTorch's and latch's largest difference."""
import os

import torch
import latch.torch

HERE = os.path.dirname(os.path.abspath(__file__))
graph = torch.load(os.path.join(HERE, "graph.pt"))
inputs = torch.load(os.path.join(HERE, "inputs.pt"))
flat = torch.utils._pytree.tree_flatten
want = flat(graph(*[a.clone() for a in inputs]))[0]
got = flat(latch.torch.compile(graph)(*[a.clone() for a in inputs]))[0]
for i, (g, w) in enumerate(zip(got, want)):
    if isinstance(w, torch.Tensor):
        print(f"output {{i}}: largest difference {{(g.double() - w.double()).abs().max().item()}}")
'''


def _write(name, gm, inputs):
    base = os.environ.get("LATCH_REPRO_DIR") or tempfile.gettempdir()
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)
    where = os.path.join(base, f"latch-eager-{os.getpid()}-{next(_count)}-{safe}")
    os.makedirs(where, exist_ok=True)
    graph = torch.fx.GraphModule(gm, gm.graph)  # a plain GraphModule: torch.load needs no latch
    graph.graph.lint()
    graph.recompile()
    torch.save(graph, os.path.join(where, "graph.pt"))
    torch.save([a.detach().clone() for a in inputs], os.path.join(where, "inputs.pt"))
    with open(os.path.join(where, "repro.py"), "w") as f:
        f.write(_repro_source(name))
    return where


def _latch_outputs(gm, inputs):
    """gm's outputs computed by latch one op at a time (outside any trace), as torch values."""
    from .. import _latch
    from .compile import interpret
    from . import dtypes
    outs = interpret(gm, [_latch.from_torch(a.detach().clone().contiguous()) for a in inputs], {})
    return [dtypes.to_torch(o) if isinstance(o, _latch.Tensor) else o for o in outs]


def _minify(gm, inputs, tol, budget=MINIFY_SECONDS):
    """functorch's minifier over gm: the smallest graph (with its inputs) whose latch outputs
    still differ from PyTorch's. The minifier asks the question many times; after budget
    seconds every answer is no, and the last graph that differed is kept. gm itself when
    latch's op-at-a-time run does not differ (the difference is in the compiled graph)."""
    from torch.utils import _pytree as pytree
    from functorch.compile import minifier
    deadline, smallest = time.monotonic() + budget, []

    def fails(g, ins):
        if time.monotonic() > deadline:
            return False
        try:
            with torch.no_grad():
                want = pytree.tree_flatten(g(*[a.clone() for a in ins]))[0]
                got = _latch_outputs(g, ins)
        except Exception:  # another failure than the one being shrunk
            return False
        differs = len(got) == len(want) and any(_differs(a, b, tol) for a, b in zip(got, want))
        if differs:
            smallest[:] = [torch.fx.GraphModule(g, copy.deepcopy(g.graph)), list(ins)]
        return differs

    if not fails(gm, inputs):
        return gm, inputs
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its progress report
            minifier(gm, list(inputs), fails, dump_state=lambda *a: None)
    except Exception:  # the minifier gave up (out of time): its best so far stands
        pass
    return smallest[0], smallest[1]


_HLO_CHILD = """import sys, torch, latch.torch as lt
graph, inputs = torch.load(sys.argv[1]), torch.load(sys.argv[2])
lt.compile(graph)(*inputs)
"""


def _hlo_repro(where):
    """The repro's graph compiled in a child process under LATCH_CHECK=accuracy: where latch's
    cpu backend and its reference evaluator differ, the library's minifier writes its HLO
    repro under where/hlo. Returns that repro's directory, or None (they agree: the
    difference is in the lowering from aten to HLO, not in the backend)."""
    import latch
    hlo = os.path.join(where, "hlo")
    root = os.path.dirname(os.path.dirname(os.path.abspath(latch.__file__)))
    env = dict(os.environ, LATCH_CHECK="accuracy", LATCH_REPRO_DIR=hlo,
               PYTHONPATH=os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    os.makedirs(hlo, exist_ok=True)
    try:
        subprocess.run([sys.executable, "-c", _HLO_CHILD, os.path.join(where, "graph.pt"),
                        os.path.join(where, "inputs.pt")], env=env, capture_output=True, timeout=MINIFY_SECONDS * 4)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = sorted(os.listdir(hlo))
    if not found:
        os.rmdir(hlo)
    return os.path.join(hlo, found[0]) if found else None


def compare(name, gm, inputs, got, precision=None, written=None):
    """got: latch's outputs of gm (a flat list, as gm's output list flattened) for inputs;
    checked against gm run eagerly, within tolerance(precision, ...). written: the inputs as
    latch's call left them, for a graph that updates its inputs in place (compared with
    eager's updates). Returns the repro directory on a mismatch, else None. precision None:
    the runtime's (LATCH_PRECISION)."""
    mine = [a.detach().clone() for a in inputs]
    want, contraction = _run_eager(gm, mine, cloned=True)
    tol = tolerance(precision or os.environ.get("LATCH_PRECISION") or "f32", contraction)
    if written is not None:
        got, want = list(got) + list(written), list(want) + mine
    if len(want) == len(got) and not any(_differs(g, w, tol) for g, w in zip(got, want)):
        return None
    with torch.no_grad():
        first = _first_difference(gm, inputs, tol)
        small, small_inputs = _minify(gm, inputs, tol)
    where = _write(name, small, small_inputs)
    op = f"first differing op: {first[0].target} ({first[0].name}: {first[1]})" if first and first[0] is not None \
        else "no single op differs (the whole graph does)"
    count = lambda g: sum(1 for n in g.graph.nodes if n.op == "call_function")  # noqa: E731
    hlo = _hlo_repro(where)
    hlo_text = f"HLO repro in {hlo}" if hlo else "no HLO repro: latch's backend agrees with its reference evaluator " \
        "on this graph, so the lowering from aten differs"
    line = (f"latch: check eager: {name}: latch's result differs from PyTorch's; {op}; repro in {where} "
            f"(aten graph minified from {count(gm)} to {count(small)} ops; {hlo_text})")
    with open(os.path.join(where, "difference.txt"), "w") as f:
        f.write(line + "\n")
    print(line, file=sys.stderr)
    return where
