#!/bin/sh
# The Python package's pytest tests (python/tests) against the build's package; their totals
# in the line tests/run.sh reads. A missing build is a failure, not a skip.
BUILD=${BUILD:-build}
if [ ! -d "$BUILD/python/latch" ]; then
  echo "tests/test_python.sh: $BUILD/python is not built (make python; needs python3-dev): 0 passed, 1 failed"
  exit 1
fi
# PY_PRELOAD (make python-sanitize): ASan's runtime (and libstdc++), loaded first in python3;
# leak checks off unless ASAN_OPTIONS says otherwise (CPython and torch free little at exit).
if [ -n "$PY_PRELOAD" ]; then
  export LD_PRELOAD="$PY_PRELOAD" ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
fi
out=$(PYTHONPATH="$(pwd)/$BUILD/python" /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests 2>&1)
rc=$?
printf '%s\n' "$out" | tail -n 30
passed=$(printf '%s\n' "$out" | grep -Eo '[0-9]+ passed' | tail -n 1 | cut -d' ' -f1)
failed=$(printf '%s\n' "$out" | grep -Eo '[0-9]+ (failed|error)' | awk '{s += $1} END {print s + 0}')
# pytest stopped without its totals (a crash, a sanitizer report): one failure, not none
[ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
echo "tests/test_python.sh: ${passed:-0} passed, ${failed:-0} failed"
[ "$rc" -eq 0 ]
