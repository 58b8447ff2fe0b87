#!/usr/bin/env bash
# tests/plans/cli.sh — the `planner` program keeps the command-line contract (tests/cli_common.sh),
# and `planner simulate` its own (CONTRACTS.md: the unit-time mode, the last line
# "step_time=T bubble_ratio=R"), checked against the papers' numbers.
PROG=planner
BIN=${top_builddir:?}/plans/planner
. "${top_srcdir:?}/tests/cli_common.sh"

# last_line_is NAME WANT -- ARGS...: exit 0 and the last stdout line equal to WANT.
last_line_is() {
  local name=$1 want=$2; shift 3
  n=$((n + 1))
  local got rc
  got=$("$BIN" "$@" 2>"$tmp/err" | tail -n 1)
  rc=${PIPESTATUS[0]}
  if [ "$rc" = 0 ] && [ "$got" = "$want" ]; then
    echo "ok $n - $PROG: $name"
  else
    echo "not ok $n - $PROG: $name: exit $rc, last line '$got', want '$want'"
    sed 's/^/# stderr: /' "$tmp/err" | head -5
    fails=$((fails + 1))
  fi
}

# ChunkFlow Sec. 3 (Figure 2): sequences of 4, 2, 1, 1 units, P = 4, B = 2F, 1F1B in this
# (longest-first) order: the bubbles are 57.14 % of the time; four equal sequences: 42.86 %
# (= (P-1)/(m+P-1) = 3/7). Each stage is busy 3 x the total length (24 and 12), so the step times
# follow from the ratios: 24 / (4 x 56) = 3/7 busy; 12 / (4 x 21) = 4/7 busy.
last_line_is "simulate 1f1b, ChunkFlow Sec. 3 example (57.14 %)" "step_time=56 bubble_ratio=0.571429" \
  -- simulate --schedule 1f1b --stages 4 --unit-lengths 4,2,1,1
last_line_is "simulate 1f1b, --order longest-first sorts" "step_time=56 bubble_ratio=0.571429" \
  -- simulate --schedule 1f1b --stages 4 --unit-lengths 1,2,1,4 --order longest-first
last_line_is "simulate 1f1b, four equal sequences (42.86 %)" "step_time=21 bubble_ratio=0.428571" \
  -- simulate --schedule 1f1b --stages 4 --unit-lengths 1,1,1,1
last_line_is "simulate gpipe, m = 8, P = 4: (P-1)/(m+P-1)" "step_time=33 bubble_ratio=0.272727" \
  -- simulate --schedule gpipe --stages 4 --unit-lengths 1,1,1,1,1,1,1,1
check "simulate prints a timeline with one row per stage" 0 "^s3 " "" \
  -- simulate --schedule 1f1b --stages 4 --unit-lengths 4,2,1,1
check "simulate --critical-path names ops" 0 "^critical path: F0@s0" "" \
  -- simulate --schedule 1f1b --stages 4 --unit-lengths 4,2,1,1 --critical-path --no-timeline
check "simulate --svg writes a Gantt chart" 0 "step_time=" "" \
  -- simulate --schedule seq1f1b --stages 2 --slices 2 --unit-lengths 4,2 --svg "$tmp/g.svg"
n=$((n + 1))
if python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); sys.exit(0 if r.tag.endswith("svg") and len(list(r.iter("{http://www.w3.org/2000/svg}rect"))) >= 12 else 1)' "$tmp/g.svg" 2>"$tmp/err"; then
  echo "ok $n - $PROG: the SVG parses and has a box per op"
else
  echo "not ok $n - $PROG: the SVG parses and has a box per op"; fails=$((fails + 1))
fi
check "simulate chunkflow runs" 0 "^step_time=[0-9.]+ bubble_ratio=0\.[0-9]+$" "" \
  -- simulate --schedule chunkflow --stages 4 --chunk-size 2 --k 1 --unit-lengths 4,2,1,1
check "simulate multi-1f1b runs" 0 "^step_time=" "" \
  -- simulate --schedule multi-1f1b --stages 2 --groups 2,2 --unit-lengths 1,1,1,1
check "simulate with the cost model (llama-7b on h200)" 0 "^step_time=[0-9.]+ bubble_ratio=0\.[0-9]+$" "" \
  -- simulate --schedule 1f1b --stages 4 --lengths 32K,4K,4K,2K,1K --model llama-7b --hardware h200 \
  --hardware-dir "$top_srcdir/etc/hardware"
printf '4096\n0\n16384\n1024\n' >"$tmp/lens.txt"
export LONGTAIL_HARDWARE_DIR="$top_srcdir/etc/hardware"
check "simulate: profile from \$LONGTAIL_HARDWARE_DIR, config's model and TP, empty documents skipped" 0 \
  "^schedule seq1f1b, 4 stages, 40 layers, 3 samples -> 12 units, cost model" "" \
  -- simulate --schedule seq1f1b --slices 4 --stages 4 --set model.preset=llama-13b --set parallel.tp=4 \
  --set plan.hardware=a800-80g --lengths-file "$tmp/lens.txt"
unset LONGTAIL_HARDWARE_DIR

# Usage errors: status 2, one error line.
check "simulate without --schedule" 2 "" "^planner: error: which schedule\?" -- simulate --stages 2 --unit-lengths 1
check "simulate with an unknown schedule" 2 "" "^planner: error: --schedule 'zb'" \
  -- simulate --schedule zb --stages 2 --unit-lengths 1
check "simulate without lengths" 2 "" "exactly one of --unit-lengths" -- simulate --schedule 1f1b --stages 2
check "simulate with a bad length" 2 "" "'x' is not a length" -- simulate --schedule 1f1b --stages 2 --unit-lengths 1,x
check "simulate with zero stages" 2 "" "--stages '0'" -- simulate --schedule 1f1b --stages 0 --unit-lengths 1
check "simulate chunkflow without --chunk-size" 2 "" "needs --chunk-size" \
  -- simulate --schedule chunkflow --stages 2 --unit-lengths 1
check "simulate with an unknown hardware profile" 2 "" "h900" \
  -- simulate --schedule 1f1b --stages 2 --lengths 1K --hardware h900
# Bad lengths files: file:line, status 1.
printf '12\nabc\n' >"$tmp/bad.txt"
check "simulate with a non-numeric lengths file names file:line" 1 "" "bad.txt:2" \
  -- simulate --schedule 1f1b --stages 2 --lengths-file "$tmp/bad.txt"
: >"$tmp/empty.txt"
check "simulate with an empty lengths file" 1 "" "no lengths in the file" \
  -- simulate --schedule 1f1b --stages 2 --lengths-file "$tmp/empty.txt"
check "simulate with a missing lengths file" 1 "" "cannot open" \
  -- simulate --schedule 1f1b --stages 2 --lengths-file "$tmp/none.txt"
finish
