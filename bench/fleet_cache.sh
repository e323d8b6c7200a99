#!/bin/sh
# Figures for the compile cache's remote tier, against a private redis-server on
# 127.0.0.1 started here:
#   - time to the first result (the first step, compile or load included: first_step_ms of
#     latch bench --mode every --repeat 1 --warmup 0) in three cases: cold (nothing anywhere),
#     fleet-warm (empty disk, warm Redis), local-warm (warm disk); medians over REPEATS;
#   - compiles in total when 8 processes start together with empty disks and an empty Redis,
#     against the graphs one process compiles;
#   - lookups per second (latch bench --remote-lookups) beside redis-benchmark's GET, one
#     client, 4 KiB values.
# usage: sh bench/fleet_cache.sh [MODEL_ARGS [REPEATS]], e.g.
#   sh bench/fleet_cache.sh "--model resnet50 --size 224" 5
#   sh bench/fleet_cache.sh "" 3          (the zoo's default run: sums over its models)
BUILD=${BUILD:-build}
LATCH=${LATCH:-$BUILD/latch}
MODEL_ARGS=${1---model resnet50 --size 224}
REPEATS=${2:-5}
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --dir "$tmp" --save '' --appendonly no --logfile "$tmp/redis.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT PIPE TERM
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
export LATCH_CACHE=disk LATCH_CACHE_URL="redis://127.0.0.1:$port/0" LATCH_CACHE_SECRET=fleet-bench

# One run: prints "FIRST_MS COMPILES LOAD_MS" summed over the models run (LOAD_MS: time
# answering misses, compiling or loading: the part the tiers change).
run() {
  # shellcheck disable=SC2086
  LATCH_CACHE_DIR="$1" "$LATCH" bench $MODEL_ARGS --mode every --repeat 1 --warmup 0 --json "$tmp/run.json" \
    > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log" >&2; exit 1; }
  python3 - "$tmp/run.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
first = compiles = load = 0
def walk(x):
    global first, compiles, load
    if isinstance(x, dict):
        if "first_step_ms" in x and isinstance(x.get("timed"), dict):
            first += x["first_step_ms"]
            for part in ("timed", "warmup"):
                compiles += x.get(part, {}).get("compiles", 0)
                load += x.get(part, {}).get("compile_ms", 0)
        for v in x.values(): walk(v)
    elif isinstance(x, list):
        for v in x: walk(v)
walk(doc)
print("%.1f %d %.1f" % (first, compiles, load))
PY
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

: > "$tmp/cold"; : > "$tmp/fleet"; : > "$tmp/local"
for r in $(seq "$REPEATS"); do
  redis-cli -p "$port" flushall > /dev/null; rm -rf "$tmp/d"
  run "$tmp/d" >> "$tmp/cold"                      # nothing anywhere
  rm -rf "$tmp/d"
  run "$tmp/d" >> "$tmp/fleet"                     # empty disk, warm Redis
  run "$tmp/d" >> "$tmp/local"                     # warm disk
done
echo "latch bench $MODEL_ARGS --mode every, medians of $REPEATS: time to the first result (first step, ms), of it"
echo "compiling or loading (ms), compiles"
for c in cold fleet local; do
  printf '  %-6s %10s ms first result  %8s ms compile/load  compiles %s\n' "$c" "$(cut -d' ' -f1 "$tmp/$c" | median)" \
    "$(cut -d' ' -f3 "$tmp/$c" | median)" "$(cut -d' ' -f2 "$tmp/$c" | sort -n | uniq | tr '\n' ' ')"
done

# 8 processes at once, empty disks, empty Redis.
redis-cli -p "$port" flushall > /dev/null
one=$(tail -n 1 "$tmp/cold" | cut -d' ' -f2)
pids=
for p in 1 2 3 4 5 6 7 8; do
  # shellcheck disable=SC2086
  LATCH_CACHE_DIR="$tmp/p$p" "$LATCH" bench $MODEL_ARGS --mode every --repeat 1 --warmup 0 --json "$tmp/p$p.json" \
    > "$tmp/p$p.log" 2>&1 &
  pids="$pids $!"
done
for pid in $pids; do wait "$pid"; done
wait_for=8
total=0
for p in 1 2 3 4 5 6 7 8; do
  n=$(grep -o '"compiles": [0-9]*' "$tmp/p$p.json" | awk '{ n += $2 } END { print n + 0 }')
  total=$((total + n))
done
echo "8 processes started together, empty disks and Redis: $total compiles in total (one process alone: $one; $wait_for processes without the lease would compile $((one * wait_for)))"

echo "lookups:"
"$LATCH" bench --remote-lookups 20000 | sed 's/^/  /'
echo "  peer: redis-benchmark GET, one client, 4 KiB values:"
redis-benchmark -p "$port" -t get -n 20000 -c 1 -d 4096 -q 2>/dev/null | tr '\r' '\n' | grep -v '^$' | tail -n 1 | sed 's/^/    /'
