#!/bin/sh
# test-graph-replay.sh: graph_replay.py --compare on the CPU: two dumps of
# one graph from two processes (other addresses, other node priorities) are
# the same; a different grid, a missing node and an unreadable file are
# told apart by the exit status; negative sizes are refused before any GPU
# work.  The replay itself needs a GPU.  Prints TAP.
S=${TALLY_SRCDIR:-$(dirname "$0")/../../..}
echo "1..5"
if ! command -v python3 >/dev/null 2>&1; then
  for i in 1 2 3 4 5; do echo "ok $i # SKIP python3 not found"; done
  exit 0
fi
tmp=$(mktemp -d /tmp/tally-graph-replay-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
. "$S/tests/tap.sh"
gr() { python3 "$S/tests/bench/pairs/graph_replay.py" "$@"; }

# A dump in the driver's verbose layout: two kernel nodes and an edge.
dump() { # FILE ADDR PRIO GRID
  cat > "$1" <<DOT
digraph dot {
subgraph cluster_1 {
"graph_1_node_0"[style="bold" shape="record" label="{KERNEL
| {ID | 0 (topoId: 1) | _Z4fillPfi\<\<\<$4,128,0\>\>\>}
| {{node handle | func handle} | {$2 | 0x0000000032D40020}}
| {priority | $3}
}"];
"graph_1_node_1"[style="bold" shape="record" label="{KERNEL
| {ID | 1 (topoId: 0) | _Z3addPfS_\<\<\<64,256,0\>\>\>}
| {{node handle | func handle} | {0x00000000428260E8 | $2}}
| {priority | $3}
}"];
"graph_1_node_0" -> "graph_1_node_1";
}
}
DOT
}
dump "$tmp/a.dot" 0x0000000042825980 0 32
dump "$tmp/b.dot" 0x00000000DEADBEEF -5 32
dump "$tmp/c.dot" 0x0000000042825980 0 64

same() {
  out=$(gr --compare "$tmp/a.dot" "$tmp/b.dot") || return 1
  echo "$out"
  echo "$out" | grep -q "a.dot: 2 KERNEL; 1 edges" && echo "$out" | grep -q "^same graph"
}
check "two processes' dumps of one graph are the same (addresses, priorities masked)" same

grid() {
  gr --compare "$tmp/a.dot" "$tmp/c.dot" > "$tmp/out"
  rc=$?
  cat "$tmp/out"
  [ "$rc" = 1 ] && grep -q "^different: 2 lines differ" "$tmp/out" &&
    grep -q '^+| {ID | 0 (topoId: 1) | _Z4fillPfi\\<\\<\\<64,128,0' "$tmp/out"
}
check "another grid is a different graph, and the line says which" grid

fewer() {
  head -n 7 "$tmp/a.dot" > "$tmp/d.dot"
  printf '}\n}\n' >> "$tmp/d.dot"
  gr --compare "$tmp/a.dot" "$tmp/d.dot" > "$tmp/out"
  rc=$?
  cat "$tmp/out"
  [ "$rc" = 1 ] && grep -q "d.dot: 1 KERNEL; 0 edges" "$tmp/out"
}
check "a missing node is a different graph" fewer

missing() {
  gr --compare "$tmp/a.dot" "$tmp/none.dot" 2> "$tmp/err"
  rc=$?
  cat "$tmp/err"
  [ "$rc" = 2 ] && grep -q "none.dot" "$tmp/err"
}
check "an unreadable dump exits 2 and names the file" missing

bad_sizes() { # refused by the argument check, before torch is imported
  for opt in "--pin-mb -1" "--hold-mb -2" "--sleep-cycles -1"; do
    gr $opt 2> "$tmp/err" && return 1
    grep -q "at least 0" "$tmp/err" || { cat "$tmp/err"; return 1; }
  done
}
check "negative --pin-mb, --hold-mb, --sleep-cycles are refused" bad_sizes
