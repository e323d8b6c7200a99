#!/bin/sh
# The Python package as a user installs it: `pip install --no-build-isolation .` into a fresh
# venv (with the system's site-packages, where Debian's torch is), imported from outside the
# tree; the entry point torch.compile(backend="latch") finds; `pip wheel`'s wheel; and
# `make install-python`'s copy under a prefix. The extension links the library make built
# ($BUILD/liblatch.a), so this takes seconds, not a rebuild of latch.
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
unset MAKEFLAGS MFLAGS MAKELEVEL
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
check() {
  if eval "$1"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "tests/test_pip_install.sh: check failed: $1" >&2; fi
}

"$PYTHON" -m venv --system-site-packages "$tmp/venv" > "$tmp/venv.log" 2>&1
check '[ -x "$tmp/venv/bin/pip" ] || { cat "$tmp/venv.log" >&2; false; }'
LATCH_BUILD="$BUILD" "$tmp/venv/bin/pip" install --no-build-isolation --no-deps --no-cache-dir --no-index "$root" \
  > "$tmp/pip.log" 2>&1
check 'grep -q "Successfully installed latch-0.1" "$tmp/pip.log" || { tail -n 30 "$tmp/pip.log" >&2; false; }'

# From outside the tree: the venv's copy, a compiled function against eager, the entry point.
cat > "$tmp/use.py" <<'PY'
import sys
from importlib.metadata import entry_points

import torch
import latch
import latch.torch as lt

where = sys.argv[1]
assert latch.__file__.startswith(where), (latch.__file__, where)
model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
compiled = lt.compile(model)
x = torch.arange(8, dtype=torch.float32).reshape(2, 4) / 8
with torch.no_grad():
    want = model(x)
    got = compiled(x)
assert (got - want).abs().max().item() < 1e-5, (got, want)
(ep,) = [e for e in entry_points(group="torch_dynamo_backends") if e.name == "latch"]
assert ep.load() is lt.backend
print("used latch from", latch.__file__)
PY
(cd "$tmp" && "$tmp/venv/bin/python" use.py "$tmp/venv/") > "$tmp/use.log" 2>&1
check 'grep -q "used latch from $tmp/venv/" "$tmp/use.log" || { cat "$tmp/use.log" >&2; false; }'

# A wheel, with the extension and the entry point in it.
LATCH_BUILD="$BUILD" "$tmp/venv/bin/pip" wheel --no-build-isolation --no-deps --no-cache-dir --no-index \
  -w "$tmp/wheels" "$root" > "$tmp/wheel.log" 2>&1
check 'ls "$tmp"/wheels/latch-0.1-*.whl > /dev/null 2>&1 || { tail -n 30 "$tmp/wheel.log" >&2; false; }'
"$PYTHON" - "$tmp"/wheels/latch-0.1-*.whl > "$tmp/names.txt" <<'PY'
import sys, zipfile
print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))
PY
check 'grep -q "^latch/_latch.*\.so$" "$tmp/names.txt" && grep -q "^latch/torch/compile.py$" "$tmp/names.txt"'
check 'grep -q "^latch-0.1.dist-info/entry_points.txt$" "$tmp/names.txt"'

# make install-python: the package under the prefix's site-packages, the path said last.
make -s install-python BUILD="$BUILD" PREFIX="$tmp/prefix" > "$tmp/install.log" 2>&1
site=$(sed -n 's/^latch for Python: PYTHONPATH=\([^ ]*\) .*/\1/p' "$tmp/install.log" | tail -n 1)
check '[ -n "$site" ] && [ -f "$site/latch/__init__.py" ] || { cat "$tmp/install.log" >&2; false; }'
(cd "$tmp" && PYTHONPATH="$site" "$PYTHON" use.py "$site/") > "$tmp/use2.log" 2>&1
check 'grep -q "used latch from $site/" "$tmp/use2.log" || { cat "$tmp/use2.log" >&2; false; }'

echo "tests/test_pip_install.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
