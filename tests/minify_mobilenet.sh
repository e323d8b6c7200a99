#!/bin/sh
# Opt-in (`make minify-mobilenet`, a few minutes, several GB): MobileNetV2's training step
# with one instruction deep in the backward pass (multiply.3798, f32[96,24,56,56]) turned
# into an atan2, the only one in the module, and LATCH_FAULT=compile:atan2 making the backend
# refuse it. The minifier must bring the 3,924 instructions down to the atan2 alone with its
# parameters and constants, and the repro must reproduce with the fault and pass without.
set -u
BUILD=${BUILD:-build}
LATCH=$(cd "$(dirname "$BUILD/latch")" && pwd)/latch
CORPUS=${LATCH_CORPUS:-../shared/corpus/xla}
WORK=$(mktemp -d /tmp/latch-mobilenet-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
sed '2503s/ multiply(/ atan2(/' "$CORPUS/mobilenet_v2.hlo" > "$WORK/culprit.hlo"
[ "$(grep -c ' atan2(' "$WORK/culprit.hlo")" = 1 ] || { echo "FAIL: could not inject the culprit"; exit 1; }
LATCH_FAULT=compile:atan2 "$LATCH" minify "$WORK/culprit.hlo" --check compile -o "$WORK/repro" --quiet || {
  echo "FAIL: latch minify exited $?"; exit 1; }
cat "$WORK/repro/report.txt"
cat "$WORK/repro/repro.hlo"
ops=$(grep -c -v -E '^(HloModule|ENTRY|})|^$| parameter\(| constant\(' "$WORK/repro/repro.hlo")
grep -q ' atan2(' "$WORK/repro/repro.hlo" && [ "$ops" = 1 ] || { echo "FAIL: the repro is not the atan2 alone"; exit 1; }
if LATCH_FAULT=compile:atan2 LATCH_BIN="$LATCH" "$WORK/repro/repro.sh" >/dev/null 2>&1; then
  echo "FAIL: repro.sh passes with the fault"; exit 1; fi
LATCH_BIN="$LATCH" "$WORK/repro/repro.sh" >/dev/null 2>&1 || { echo "FAIL: repro.sh fails without the fault"; exit 1; }
echo "ok: mobilenet_v2 minified to the culprit alone; repro.sh reproduces with the fault and passes without"

# The accuracy case: LATCH_FAULT=accuracy:convolution:0.01 on the cpu backend, the
# unmodified step. The scan finds the first convolution failing on its own from the recorded
# values, then shapes and inputs shrink: the repro is one convolution with at most 64 KB of
# inputs, and repro.sh fails with the fault and passes without.
sh -c "LATCH_FAULT=accuracy:convolution:0.01 /usr/bin/time -f 'minify-mobilenet accuracy: %e s wall, %M KB peak' \
  '$LATCH' minify '$CORPUS/mobilenet_v2.hlo' --check accuracy --backend cpu -o '$WORK/acc' --quiet" || {
  echo "FAIL: latch minify (accuracy) exited $?"; exit 1; }
cat "$WORK/acc/report.txt"
cat "$WORK/acc/repro.hlo"
ops=$(grep -c -v -E '^(HloModule|ENTRY|})|^$| parameter\(| constant\(' "$WORK/acc/repro.hlo")
grep -q ' convolution(' "$WORK/acc/repro.hlo" && [ "$ops" = 1 ] || { echo "FAIL: the repro is not one convolution"; exit 1; }
bytes=$(sed -n 's/^inputs: .* before, \([0-9]*\) bytes after$/\1/p' "$WORK/acc/report.txt")
[ -n "$bytes" ] && [ "$bytes" -le 65536 ] || { echo "FAIL: the repro's inputs take $bytes bytes"; exit 1; }
if LATCH_FAULT=accuracy:convolution:0.01 LATCH_BIN="$LATCH" "$WORK/acc/repro.sh" >/dev/null 2>&1; then
  echo "FAIL: the accuracy repro passes with the fault"; exit 1; fi
LATCH_BIN="$LATCH" "$WORK/acc/repro.sh" >/dev/null 2>&1 || { echo "FAIL: the accuracy repro fails without the fault"; exit 1; }
echo "ok: the accuracy fault minified to one convolution with $bytes input bytes"
