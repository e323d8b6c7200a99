#!/bin/sh
# The Python package's pytest tests (python/tests) against the build's package, when it was
# built (python3-dev present); their totals in the line tests/run.sh reads.
BUILD=${BUILD:-build}
if [ ! -d "$BUILD/python/latch" ]; then
  echo "tests/test_python.sh: $BUILD/python not built (python3-dev missing): 0 passed, 0 failed"
  exit 0
fi
out=$(PYTHONPATH="$(pwd)/$BUILD/python" /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests 2>&1)
rc=$?
printf '%s\n' "$out" | tail -n 30
passed=$(printf '%s\n' "$out" | grep -Eo '[0-9]+ passed' | tail -n 1 | cut -d' ' -f1)
failed=$(printf '%s\n' "$out" | grep -Eo '[0-9]+ (failed|error)' | awk '{s += $1} END {print s + 0}')
echo "tests/test_python.sh: ${passed:-0} passed, ${failed:-0} failed"
[ "$rc" -eq 0 ]
