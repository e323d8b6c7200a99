"""latch.config: the runtime's settings from Python, the names of the LATCH_* variables
without the prefix, in lower case:

  import latch
  latch.config.cache = "disk"           # LATCH_CACHE
  latch.configure(threads=4, check="accuracy")

The C runtime reads its settings once, when it opens (the first latch call of the process:
latch_open in include/latch.h), from the environment; a setting here is that variable set in
this process's environment, so what latch.config says, the runtime gets, and child processes
inherit it. The runtime's settings (OPEN_ONCE) must be set before it opens: after, setting one
is an error that says so. recompile_limit is read when a compiled function is made and may
change at any time. Reading a setting gives the variable's value,
or None when unset (latch's default)."""
import os

from . import _latch

# name: (variable, what it takes)
SETTINGS = {
    "backend": ("LATCH_BACKEND", "'cpu' or 'reference'"),
    "threads": ("LATCH_THREADS", "threads of the cpu backend's loops; 0: one per core"),
    "cache": ("LATCH_CACHE", "'memory' (default), 'disk' or 'off'"),
    "cache_dir": ("LATCH_CACHE_DIR", "the disk cache's directory (default ~/.cache/latch)"),
    "cache_url": ("LATCH_CACHE_URL", "a Redis server shared by a fleet: redis://host[:port][/db] or unix:///path"),
    "check": ("LATCH_CHECK", "'off' (default), 'compile' or 'accuracy' (latch against its reference evaluator), "
                             "or 'eager' (latch.torch's graphs against eager PyTorch)"),
    "log": ("LATCH_LOG", "comma-separated words: recompiles, guards, compiles"),
    "precision": ("LATCH_PRECISION", "'f32' (default) or 'bf16': products of f32 tensors on bf16 operands"),
    "recompile_limit": ("LATCH_RECOMPILE_LIMIT", "traces after the first before a function traces every call"),
}
OPEN_ONCE = {"backend", "threads", "cache", "cache_dir", "cache_url", "check", "log", "precision"}
CHOICES = {"backend": {"cpu", "reference"}, "cache": {"memory", "disk", "off"},
           "check": {"off", "compile", "accuracy", "eager"}, "precision": {"f32", "bf16"}}
LOG_WORDS = {"recompiles", "guards", "compiles"}


def _text(name, value):
    """value as the variable's text; ValueError naming the setting when latch would refuse it."""
    if name in ("threads", "recompile_limit"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"latch.config.{name}: expected a non-negative int, not {value!r}")
        return str(value)
    if not isinstance(value, str):
        raise ValueError(f"latch.config.{name}: expected a string, not {value!r}")
    if name in CHOICES and value not in CHOICES[name]:
        raise ValueError(f"latch.config.{name}: {value!r} is not one of {', '.join(sorted(CHOICES[name]))}")
    if name == "log":
        unknown = [w for w in value.split(",") if w and w not in LOG_WORDS]
        if unknown:
            raise ValueError(f"latch.config.log: unknown word {unknown[0]!r} (known: {', '.join(sorted(LOG_WORDS))})")
    return value


class Config:
    """latch.config (see the module's comment). Unknown names are errors, listing the known."""

    def __getattr__(self, name):
        if name not in SETTINGS:
            raise AttributeError(f"latch.config has no setting {name!r}; settings: {', '.join(SETTINGS)}")
        return os.environ.get(SETTINGS[name][0]) or None

    def __setattr__(self, name, value):
        if name not in SETTINGS:
            raise AttributeError(f"latch.config has no setting {name!r}; settings: {', '.join(SETTINGS)}")
        if name in OPEN_ONCE and _latch.runtime_open():
            raise RuntimeError(f"latch.config.{name}: the runtime is already open and keeps the settings it "
                               f"opened with; set it before the first latch call (or {SETTINGS[name][0]} in the "
                               "environment)")
        variable = SETTINGS[name][0]
        if value is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = _text(name, value)

    def __dir__(self):
        return list(SETTINGS)

    def __repr__(self):
        return "latch.config(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in SETTINGS) + ")"


config = Config()


def configure(**settings):
    """Several settings at once: latch.configure(cache="disk", threads=4). All are checked
    before any is set."""
    for name, value in settings.items():
        if name not in SETTINGS:
            raise TypeError(f"latch.configure: unknown setting {name!r}; settings: {', '.join(SETTINGS)}")
        if value is not None:
            _text(name, value)
    for name, value in settings.items():
        setattr(config, name, value)
