"""latch.torch.compile: torch.compile's signature and meaning over latch's traced functions
(latch/torch/compile.py does the tracing; this file is the front a user calls).

  compile(model=None, *, fullgraph=False, dynamic=None, mode=None, options=None, disable=False)

is usable as @compile, @compile(...) and compile(model, ...). A function comes back as a
Compiled callable; a module as an OptimizedModule, an nn.Module that holds the original as
_orig_mod (as torch's does) and so shares its parameters and buffers: parameters(),
state_dict(), load_state_dict(), train()/eval(), to() and hooks act on the original's
tensors, and torch.save/torch.load keep the original and the settings (the compiled graphs
are traced again after loading). Every argument is checked here, at the compile call: an
unknown keyword is Python's TypeError naming it, an unknown mode or option a ValueError
naming it and listing the known ones."""
import weakref

import torch

from .compile import TRACE_EAGER, TRACE_EVERY, TRACE_ONCE, Compiled

# torch.compile's modes, each a latch behaviour (docs/python.md, "Modes"):
#   default          trace once; shapes as `dynamic` says (None: latch's automatic policy)
#   reduce-overhead  trace once with every size guarded by value (dynamic=None means False):
#                    each shape gets an executable specialized to it, the cheapest warm call;
#                    torch's mode (CUDA graphs) also specializes to static shapes
#   max-autotune     reduce-overhead, and up to 64 traces (not 8) before latch gives up
#                    specializing and traces every call: more compile time for more
#                    specialized executables; latch has no kernel search to spend it on
MODES = {
    "default": {},
    "reduce-overhead": {"static": True},
    "max-autotune": {"static": True, "recompile_limit": 64},
}
# options: latch's own settings of one compiled function
TRACES = {"once": TRACE_ONCE, "every": TRACE_EVERY, "eager": TRACE_EAGER}
OPTIONS = {
    "trace": "latch's trace mode: 'once' (the default), 'every' (trace each call, the graph still "
             "compiled once per key) or 'eager' (each op run at once)",
    "name": "the name in latch's logs and warnings",
    "recompile_limit": "traces after the first before latch traces every call (default 8, LATCH_RECOMPILE_LIMIT)",
    "precision": "'f32' (exact) or 'bf16': dot products and convolutions of f32 tensors on bf16 operands, summed "
                 "in f32 into f32 results, as torch.autocast (default: LATCH_PRECISION, else 'f32')",
    "check": "'eager': each graph's first call also run by PyTorch and compared, a repro written on a mismatch "
             "(default: LATCH_CHECK=eager from the environment, else 'off'; docs/pytorch-training.md)",
}

_live = weakref.WeakSet()  # every Compiled made here, for latch.torch.stats()


def _known(names):
    return ", ".join(repr(n) for n in names)


def settings(fullgraph=False, dynamic=None, mode=None, options=None):
    """The keyword arguments of Compiled for compile()'s arguments; ValueError naming a bad one."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"latch.torch.compile: unknown mode {mode!r}; modes: {_known(MODES)}")
    if dynamic not in (None, True, False):
        raise ValueError(f"latch.torch.compile: dynamic must be None, True or False, not {dynamic!r}")
    if not isinstance(fullgraph, bool):
        raise ValueError(f"latch.torch.compile: fullgraph must be True or False, not {fullgraph!r}")
    options = dict(options or {})
    for key in options:
        if key not in OPTIONS:
            raise ValueError(f"latch.torch.compile: unknown option {key!r}; options: {_known(OPTIONS)}")
    chosen = MODES[mode or "default"]
    out = {"fullgraph": fullgraph, "dynamic": dynamic, "name": options.get("name"),
           "recompile_limit": chosen.get("recompile_limit", -1)}
    if dynamic is None and chosen.get("static"):
        out["dynamic"] = False
    trace = options.get("trace", "once")
    if trace not in TRACES:
        raise ValueError(f"latch.torch.compile: options['trace'] must be one of {_known(TRACES)}, not {trace!r}")
    out["mode"] = TRACES[trace]
    if options.get("check") not in (None, "eager", "off"):
        raise ValueError(f"latch.torch.compile: options['check'] must be 'eager' or 'off', not {options['check']!r}")
    out["check"] = options.get("check")
    if options.get("precision") not in (None, "f32", "bf16"):
        raise ValueError(f"latch.torch.compile: options['precision'] must be 'f32' or 'bf16', not {options['precision']!r}")
    out["precision"] = options.get("precision")
    limit = options.get("recompile_limit")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"latch.torch.compile: options['recompile_limit'] must be a non-negative int, not {limit!r}")
        out["recompile_limit"] = limit
    return out


def _compiled(fn, kwargs):
    c = Compiled(fn, **kwargs)
    _live.add(c)
    return c


class OptimizedModule(torch.nn.Module):
    """A module compiled by latch.torch.compile: calls run the latch-compiled forward of
    _orig_mod; everything else is the original module's (attributes not found here are looked
    up on it; state_dict() and load_state_dict() use its keys, so a checkpoint saved from
    either loads into the other)."""

    def __init__(self, mod, kwargs):
        super().__init__()
        self._orig_mod = mod
        self._latch_settings = kwargs
        self._latch_compiled = _compiled(mod, kwargs)

    def forward(self, *args, **kwargs):
        return self._latch_compiled(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "_orig_mod" or "_orig_mod" not in self.__dict__.get("_modules", {}):
                raise
            return getattr(self._modules["_orig_mod"], name)

    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict=True):
        return self._orig_mod.load_state_dict(state_dict, strict)

    @property
    def eager_reason(self):
        """None, or why calls run the module eagerly (an op latch does not lower, ...)."""
        return self._latch_compiled.eager_reason

    def stats(self):
        """The compiled function's counters (traces, hits, entries, ...; latch_function_stats)."""
        return self._latch_compiled.stats()

    # torch.save pickles the module and the settings; the compiled graphs are traced again.
    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_latch_compiled", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._latch_compiled = _compiled(self._orig_mod, self._latch_settings)


def compile(model=None, *, fullgraph=False, dynamic=None, mode=None, options=None, disable=False):
    """Compile model (a function or an nn.Module) with latch: the first call traces it into an
    aten graph, later calls whose inputs pass the guards run latch's cached executable.

    fullgraph: True makes a call that would fall back to eager raise latch.Unsupported
    instead. dynamic: None traces the first shapes static and makes a dim symbolic once it
    changes; True makes each input's first dim symbolic from the first trace; False guards
    every size by value. mode: "default", "reduce-overhead" or "max-autotune" (see MODES).
    options: latch's settings ("trace", "name", "recompile_limit", "check", "precision"; see OPTIONS). disable:
    True returns model itself. With model None, returns a decorator."""
    kwargs = settings(fullgraph, dynamic, mode, options)
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, mode=mode, options=options, disable=disable)
    if disable:
        return model
    if isinstance(model, torch.nn.Module):
        return OptimizedModule(model, kwargs)
    if not callable(model):
        raise TypeError(f"latch.torch.compile: model must be a function or an nn.Module, not {type(model).__name__}")
    return _compiled(model, kwargs)
