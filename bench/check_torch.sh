#!/bin/sh
# `make check-torch`: latch's zoo against PyTorch's own models on the same weights. For each
# model, bench/torch_zoo.py exports a seeded torchvision model with every weight and
# batch-norm statistic perturbed off its initial value (weights, an input and PyTorch's
# output), `latch bench --weights` runs it, and the logits are compared. Opt-in:
# needs Debian's python3-torch and python3-torchvision (not in CI).
#   MODELS="resnet18 ..."  SIZE=64  BATCH=2  LATCH_BIN=build/latch  OUT=build/check-torch
set -u
LATCH_BIN=${LATCH_BIN:-build/latch}
OUT=${OUT:-build/check-torch}
SIZE=${SIZE:-64}
BATCH=${BATCH:-2}
MODELS=${MODELS:-"mlp resnet18 mobilenet_v2 squeezenet1_1 alexnet resnet50 vgg16 vit_b_16 bert_small bert_base gpt2 gpt2_small gpt2_small_gen"}
PYTHON=${PYTHON:-/usr/bin/python3}
worst=0
for m in $MODELS; do
  dir=$OUT/$m
  rm -rf "$dir" && mkdir -p "$dir"
  if ! "$PYTHON" bench/torch_zoo.py export --model "$m" --out "$dir" --batch "$BATCH" --size "$SIZE" --perturb >"$dir/export.log" 2>&1; then
    echo "$m: export failed:"; tail -n 3 "$dir/export.log"; worst=1; continue
  fi
  if ! "$LATCH_BIN" bench --model "$m" --weights "$dir/weights" --input "$dir/input.npy" --output "$dir/latch.npy" \
      --batch "$BATCH" --size "$SIZE" --mode every --warmup 0 --repeat 1 >"$dir/latch.log" 2>&1; then
    echo "$m: latch bench failed:"; tail -n 3 "$dir/latch.log"; worst=1; continue
  fi
  "$PYTHON" - "$dir" "$m" <<'PY' || worst=1
import sys
import numpy as np
d, name = sys.argv[1], sys.argv[2]
want = np.load(d + "/output.npy").astype(np.float64)
got = np.load(d + "/latch.npy").astype(np.float64)
if want.shape != got.shape:
    print(f"{name}: shapes differ: torch {want.shape}, latch {got.shape}")
    sys.exit(1)
diff = np.abs(got - want).max()
rel = diff / max(np.abs(want).max(), 1e-30)
same_top = (got.argmax(-1) == want.argmax(-1)).mean()
ok = rel < 1e-3
print(f"{name:14s} shape {str(want.shape):12s} max|torch| {np.abs(want).max():9.4g}  max abs diff {diff:9.3g}  "
      f"rel {rel:9.3g}  top-1 agree {same_top:.0%}  {'ok' if ok else 'MISMATCH'}")
sys.exit(0 if ok else 1)
PY
done
exit $worst
