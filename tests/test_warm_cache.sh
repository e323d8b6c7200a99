#!/bin/sh
# A warm start through the disk cache: one process compiles and saves, a
# second loads the cpu backend's optimized executable and runs no pass and builds no plan.
# Shown by LATCH_LOG=compiles, which prints, per executable, where it came from and the cpu
# backend's counts of pass runs and plans built in the process; both runs' outputs must be
# the same bytes. Through `latch run` on a corpus module and through `latch bench` on zoo
# models (--tiny: convolutions with batch norm and residuals, a transformer, the decoder with
# its growing cache, a training step). BUILD comes from make test.
BUILD=${BUILD:-build}
latch="$PWD/$BUILD/latch"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
check() {
  if eval "$1"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "tests/test_warm_cache.sh: check failed: $1" >&2; fi
}

# latch run: compiled, then loaded; the printed outputs (hashes of the bytes) are the same.
hlo=../shared/corpus/xla/single_gemm_fusion.hlo
for n in 1 2; do
  LATCH_LOG=compiles LATCH_CACHE_DIR="$tmp/run-cache" "$latch" run "$hlo" --backend cpu > "$tmp/run$n.log" 2>&1
done
check 'grep -q "^compiled in" "$tmp/run1.log"'
check 'grep -q "passes ran 1 times, 1 plans built" "$tmp/run1.log"'
check 'grep -q "^loaded compiled graph from cache" "$tmp/run2.log"'
check 'grep -q "passes ran 0 times, 0 plans built" "$tmp/run2.log"'
check '[ "$(grep "^output" "$tmp/run1.log")" = "$(grep "^output" "$tmp/run2.log")" ]'
check '[ -n "$(grep "^output" "$tmp/run1.log")" ]'

# latch bench, per model: the second process loads every graph and compiles none.
for model in resnet18 squeezenet1_1 mobilenet_v2 bert_small gpt2 train_cnn; do
  for n in 1 2; do
    LATCH_LOG=compiles LATCH_CACHE_DIR="$tmp/bench-cache" "$latch" bench --model $model --tiny --mode every \
      --repeat 1 --warmup 0 --output "$tmp/$model$n.npy" > "$tmp/$model$n.log" 2>&1
  done
  check 'grep -q "^latch: graph .* compiled in" "$tmp/${model}1.log"'
  check 'grep -q "^latch: graph .* loaded from the disk cache in .*passes ran 0 times, 0 plans built" "$tmp/${model}2.log"'
  check '! grep -q "^latch: graph .* compiled in" "$tmp/${model}2.log"'
  check 'cmp -s "$tmp/${model}1.npy" "$tmp/${model}2.npy"'
done
echo "tests/test_warm_cache.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
