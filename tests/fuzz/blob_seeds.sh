#!/bin/sh
# Seeds for the blob fuzzer (tests/fuzz/fuzz_blob.c): the bodies (what follows the 17-byte
# header) of the blobs the cpu backend writes into the disk cache for small corpus modules
# (a dot, a while loop, a convolution on oneDNN, fused groups) and the tiny zoo models'
# graphs (convolutions with batch norm, a transformer, a training step), each at most
# MAX_BYTES. Usage: blob_seeds.sh LATCH_BINARY CORPUS_DIR OUT_DIR
set -e
latch=$1 corpus=$2 out=$3
MAX_BYTES=${MAX_BYTES:-16384}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
for m in add single_gemm_fusion while_with_known_trip_count isolated_convolution multiple_gemm_fusions \
         sharded_computation large_constant; do
  LATCH_CACHE_DIR="$tmp" "$latch" run "$corpus/$m.hlo" --backend cpu > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
done
for model in train_mlp train_cnn resnet18 bert_small; do
  LATCH_CACHE_DIR="$tmp" "$latch" bench --model $model --tiny --mode every --repeat 1 --warmup 0 > "$tmp/log" 2>&1 ||
    { cat "$tmp/log"; exit 1; }
done
n=0
for entry in "$tmp"/*.latch; do
  at=$(grep -obUa LATCHCPU "$entry" | head -1 | cut -d: -f1)
  [ -n "$at" ] || continue
  size=$(($(wc -c < "$entry") - at - 17))
  [ "$size" -le "$MAX_BYTES" ] || continue
  tail -c "$size" "$entry" > "$out/$(basename "$entry" .latch)"
  n=$((n + 1))
done
# Inputs that once crashed the loader or the run, replayed first in every fuzzing run.
for crash in "$(dirname "$0")"/blob_regressions/*; do
  cp "$crash" "$out/regression-$(basename "$crash")"
  n=$((n + 1))
done
echo "blob_seeds.sh: $n seeds in $out"
[ "$n" -gt 0 ]
