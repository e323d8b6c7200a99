#!/bin/sh
# No circle of files inside runtime/cpu/: file A depends on file B when an undefined symbol
# of A's object is defined (global) by B's, as nm reads them from the build's objects. The
# files must then form layers, each depending only on files below it: the check peels off,
# round after round, the files that depend on no file left, and fails naming the files that
# never come off (each depends on another of them: a circle), with the symbols that tie
# them. It prints the layers, lowest first. BUILD comes from make test.
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
dir=runtime/cpu
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
for c in "$dir"/*.c; do
  f=$(basename "$c" .c); o="$BUILD/obj/$dir/$f.o"
  if [ ! -f "$o" ]; then echo "FAIL no object $o (run make first)"; exit 1; fi
  nm "$o" | awk -v f="$f" '$1 == "U" { print "U", f, $2 } NF == 3 && $2 ~ /^[TDBRGSVW]$/ { print "D", f, $3 }'
done > "$tmp"
awk '
  $1 == "D" { def[$3] = $2; files[$2] = 1 }
  $1 == "U" { use[++n] = $2 " " $3; files[$2] = 1 }
  END {
    for (i = 1; i <= n; i++) {
      split(use[i], u, " "); to = def[u[2]]
      if (to == "" || to == u[1]) continue
      if (!((u[1], to) in edge)) { edge[u[1], to] = u[2]; out[u[1]]++; edges++ }
    }
    left = 0; for (f in files) left++
    nfiles = left
    round = 0
    while (left > 0) {
      layer = ""
      for (f in files) if (!(f in done) && out[f] == 0) layer = layer " " f
      if (layer == "") break
      round++; printf "layer %d:%s\n", round, layer
      k = split(layer, peel, " ")
      for (i = 1; i <= k; i++) { done[peel[i]] = 1; left-- }
      for (key in edge) {
        split(key, e, SUBSEP)
        if (!(e[1] in done) && (e[2] in done) && !((key) in counted)) { counted[key] = 1; out[e[1]]-- }
      }
    }
    # What is left holds the circles: peel off from above too (files no file left depends
    # on), then walk from a file left along dependencies left until a file comes again.
    do { changed = 0
      for (f in files) if (!(f in done)) {
        needed = 0
        for (key in edge) { split(key, e, SUBSEP); if (e[2] == f && !(e[1] in done)) { needed = 1; break } }
        if (!needed) { done[f] = 1; changed = 1 }
      }
    } while (changed)
    bad = 0; tangled = ""
    for (f in files) if (!(f in done)) tangled = tangled " " f ".c"
    for (f in files) if (!(f in done) && !(f in shown)) {
      path = ""; delete seen; at = f
      while (!(at in seen) && !(at in shown)) {
        seen[at] = 1; order[at] = path
        for (key in edge) { split(key, e, SUBSEP); if (e[1] == at && !(e[2] in done)) { next_file = e[2]; sym = edge[key]; break } }
        path = path at ".c -(" sym ")-> "; at = next_file
      }
      if (at in seen) { printf "FAIL a circle: %s%s.c\n", substr(path, length(order[at]) + 1), at; bad++ }
      for (g in seen) shown[g] = 1
    }
    if (bad) printf "files in or between circles:%s\n", tangled
    printf "test_cpu_layers: %d passed, %d failed (%d files, %d dependencies, %d layers)\n", edges, bad, nfiles, edges, round
    exit bad > 0
  }' "$tmp"
