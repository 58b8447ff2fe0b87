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
# ---- planner build / validate / show / compare (CONTRACTS.md) -------------------------------
export LONGTAIL_HARDWARE_DIR="$top_srcdir/etc/hardware"
PAPER="$top_srcdir/etc/paper-llama13b.ini"
# Lengths: the first 20,000 documents of the Common Crawl distribution when ../shared is
# there, else a long-tailed list made here (the checks below hold for both).
SHARED=${LONGTAIL_SHARED:-$top_srcdir/../shared}
if [ -r "$SHARED/lengths/commoncrawl.txt" ]; then
  head -n 20000 "$SHARED/lengths/commoncrawl.txt" >"$tmp/cc.txt"
else
  awk 'BEGIN { srand(7); for (i = 0; i < 20000; i++) printf "%d\n", 1 + int(exp(rand() * 12)) }' >"$tmp/cc.txt"
fi
B=(build --config "$PAPER" --set plan.context_len=64K --lengths "$tmp/cc.txt")
check "build: 5 steps of megatron" 0 "5 steps planned with megatron \(0 kept\)" "baseline tuning cp=" \
  -- "${B[@]}" --db "$tmp/m.db" --strategy megatron --steps 5
check "validate: every stored step holds the invariants" 0 "^5 steps valid$" "" -- validate --db "$tmp/m.db"
check "show: one step with its samples and a timeline per pipeline" 0 "^step 2: megatron" "" \
  -- show --db "$tmp/m.db" --step 2 --width 60
check "show: a step that is not stored" 1 "" "step 9" -- show --db "$tmp/m.db" --step 9
# The contract views, read with Python's sqlite3 module (an independent reader).
sql() { python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print("\n".join("|".join(map(str, r)) for r in c.execute(sys.argv[2])))' "$@"; }
n=$((n + 1))
got=$(sql "$tmp/m.db" "SELECT count(*), sum(n_samples) FROM step_summary" 2>&1)
cov=$(sql "$tmp/m.db" "SELECT count(*) FROM (SELECT step, sample_id, pass, sum(tok_end - tok_begin) AS t FROM plan_slices GROUP BY step, sample_id, pass) p JOIN samples s USING (step, sample_id) WHERE p.t = s.length" 2>&1)
if [ "$got" = "5|2560" ] && [ "$cov" = "5120" ]; then
  echo "ok $n - $PROG: step_summary has 5 steps of 512 samples; plan_slices covers every sample once per pass"
else
  echo "not ok $n - $PROG: views: step_summary '$got' (want 5|2560), covered sample-passes '$cov' (want 5120)"
  fails=$((fails + 1))
fi
check "build: resume keeps the stored steps and plans the rest" 0 "3 steps planned with megatron \(5 kept\)" \
  "holds 5 of the steps already" -- "${B[@]}" --db "$tmp/m.db" --strategy megatron --steps 8
check "build: all steps stored already" 0 "all 8 steps were planned already" "" \
  -- "${B[@]}" --db "$tmp/m.db" --strategy megatron --steps 8
check "build: a different config is refused, naming the key" 2 "" "different config.*seed" \
  -- "${B[@]}" --db "$tmp/m.db" --strategy megatron --steps 8 --set plan.seed=99
check "build: a different strategy is refused" 2 "" "strategy" \
  -- "${B[@]}" --db "$tmp/m.db" --strategy gpipe --steps 8
printf '%s\n' 100 200 >"$tmp/other.txt"
{ echo 4096; cat "$tmp/cc.txt"; } >"$tmp/cc2.txt"
check "build: different input data is refused" 2 "" "different input data" \
  -- build --config "$PAPER" --set plan.context_len=64K --lengths "$tmp/cc2.txt" \
  --db "$tmp/m.db" --strategy megatron --steps 8
# Determinism: the same inputs give byte-identical files, whatever the thread count.
for s in megatron gpipe seq1f1b chunkflow; do
  "$BIN" "${B[@]}" --db "$tmp/$s-1.db" --strategy $s --steps 4 --threads 1 --no-timings -q >/dev/null 2>"$tmp/err.$s"
  "$BIN" "${B[@]}" --db "$tmp/$s-2.db" --strategy $s --steps 4 --threads 2 --no-timings -q >/dev/null 2>>"$tmp/err.$s"
  n=$((n + 1))
  if [ -s "$tmp/$s-1.db" ] && cmp -s "$tmp/$s-1.db" "$tmp/$s-2.db" && "$BIN" validate --db "$tmp/$s-1.db" -q >/dev/null 2>&1; then
    echo "ok $n - $PROG: build --strategy $s: valid, byte-identical with 1 and 2 threads"
  else
    echo "not ok $n - $PROG: build --strategy $s: files differ, missing or invalid"
    sed 's/^/# stderr: /' "$tmp/err.$s" | head -5
    fails=$((fails + 1))
  fi
done
# The MILP strategies and auto: build, validate, show, and determinism. CBC solves stopped by
# the clock depend on the machine's speed, so the MILPs run without a time limit here.
BM=("${B[@]}" --set plan.milp_time_limit=0)
STRATS='(megatron|gpipe|seq1f1b|chunkflow|infinipipe|slimpack)'
for s in infinipipe slimpack auto; do
  check "build --strategy $s: 2 steps" 0 "2 steps planned with $s \(0 kept\)" "" \
    -- "${BM[@]}" --db "$tmp/$s-1.db" --strategy $s --steps 2 --threads 1 --no-timings
  check "validate: the $s plans" 0 "^2 steps valid$" "" -- validate --db "$tmp/$s-1.db"
  [ $s = auto ] && step="$STRATS" || step=$s
  check "show: step 1 of the $s plans" 0 "^step 1: $step, predicted [0-9.]+ ms" "" \
    -- show --db "$tmp/$s-1.db" --step 1 --width 60
  case $s in
    slimpack) check "show: the slimpack step's solver status" 0 \
      "^params: m=.*  solver: (optimal|feasible|timeout|infeasible|none)" "" -- show --db "$tmp/$s-1.db" --step 1 ;;
    auto) check "show: the auto step's solver status and runner-up" 0 \
      "^params: .*  solver: [a-z]+.*  runner-up: $STRATS \([0-9.]+ ms\)$" "" -- show --db "$tmp/$s-1.db" --step 1 ;;
  esac
  "$BIN" "${BM[@]}" --db "$tmp/$s-2.db" --strategy $s --steps 2 --threads 2 --no-timings -q >/dev/null 2>"$tmp/err.$s"
  n=$((n + 1))
  if [ -s "$tmp/$s-1.db" ] && cmp -s "$tmp/$s-1.db" "$tmp/$s-2.db"; then
    echo "ok $n - $PROG: build --strategy $s: byte-identical with 1 and 2 threads"
  else
    echo "not ok $n - $PROG: build --strategy $s: files differ or missing"
    sed 's/^/# stderr: /' "$tmp/err.$s" | head -5
    fails=$((fails + 1))
  fi
done
check "build: sample_policy split cuts long documents into context_len pieces" 0 "2 steps planned with seq1f1b" "" \
  -- build --config "$PAPER" --set plan.context_len=8K --set plan.sample_policy=split --lengths "$tmp/cc.txt" \
  --db "$tmp/split.db" --strategy seq1f1b --steps 2
n=$((n + 1))
got=$(sql "$tmp/split.db" "SELECT max(length), (SELECT sample_policy FROM runs) FROM samples" 2>&1)
if [ "$got" = "8192|split" ] && "$BIN" validate --db "$tmp/split.db" -q >/dev/null 2>&1; then
  echo "ok $n - $PROG: split plans are valid, no sample longer than 8K"
else
  echo "not ok $n - $PROG: split plans: '$got' (want 8192|split) or invalid"; fails=$((fails + 1))
fi
# From a dataprep output (--data): a small JSONL corpus, tokenized here.
awk 'BEGIN { for (i = 0; i < 40; i++) { printf "{\"text\": \""; for (j = 0; j <= i * i; j++) printf "word%d ", j; print "\"}" } }' >"$tmp/docs.jsonl"
if "$top_builddir/dataprep/dataprep" run --vocab-dir "$top_srcdir/data/vocab" --encoding cl100k_base --threads 1 \
     --input "$tmp/docs.jsonl" --out "$tmp/ds" -q >/dev/null 2>"$tmp/err"; then
  check "build --data: from a dataprep output (the demo config)" 0 "3 steps planned with slimpack" "" \
    -- build --config "$top_srcdir/etc/longtail.ini" --data "$tmp/ds" --db "$tmp/d.db" --steps 3
  check "validate: the --data plans" 0 "^3 steps valid$" "" -- validate --db "$tmp/d.db"
else
  n=$((n + 1)); echo "not ok $n - $PROG: dataprep run for the --data test failed"; sed 's/^/# /' "$tmp/err" | head -5
  fails=$((fails + 1))
fi
# Bad inputs and impossible configs: clear errors, no file left behind.
check "build without --db" 2 "" "give --db FILE" -- "${B[@]}"
check "build without input" 2 "" "give the input" -- build --config "$PAPER" --db "$tmp/x.db"
check "build with an unknown strategy" 2 "" "invalid choice 'slimpak' for plan.strategy \(--strategy\)" \
  -- "${B[@]}" --db "$tmp/x.db" --strategy slimpak
check "build with an empty lengths file" 1 "" "no lengths in the file" \
  -- build --config "$PAPER" --lengths "$tmp/empty.txt" --db "$tmp/x.db" --steps 1
check "build with a non-numeric lengths file names file:line" 1 "" "bad.txt:2" \
  -- build --config "$PAPER" --lengths "$tmp/bad.txt" --db "$tmp/x.db" --steps 1
check "build: a batch larger than the corpus" 2 "" "global_batch" \
  -- build --config "$PAPER" --lengths "$tmp/other.txt" --db "$tmp/x.db" --steps 1
check "build: a context that cannot fit even at max_cp with full recompute" 2 "" "cannot fit" \
  -- "${B[@]}" --set plan.context_len=16M --set parallel.max_cp=1 --db "$tmp/x.db" --steps 1 --strategy megatron
n=$((n + 1))
if [ ! -e "$tmp/x.db" ] && [ -z "$(ls "$tmp" | grep 'x\.db\.tmp')" ]; then
  echo "ok $n - $PROG: failed builds leave no database or temporary file"
else
  echo "not ok $n - $PROG: failed builds left $(ls "$tmp" | grep 'x\.db' | tr '\n' ' ')"; fails=$((fails + 1))
fi
check "validate: not a plan file" 1 "" "" -- validate --db "$tmp/cc.txt"
check "validate: a missing file" 1 "" "x.db" -- validate --db "$tmp/x.db"
# compare: the contract's TSV header, one row per listed strategy, megatron the reference.
check "compare --format tsv: the contract's header" 0 \
  "^strategy	predicted_ms	bubble_ratio	peak_mem_bytes	speedup_vs_megatron	plan_ms_per_step$" "" \
  -- compare --config "$PAPER" --set plan.context_len=64K --lengths "$tmp/cc.txt" \
  --strategies megatron,gpipe,seq1f1b,chunkflow --steps 3 --format tsv
n=$((n + 1))
rows=$(awk -F'\t' 'NR > 1 && NF == 6 && $2 > 0 && $3 >= 0 && $3 < 1 && $4 > 0 && $6 >= 0 { print $1 }' "$tmp/out" | tr '\n' ' ')
mspeed=$(awk -F'\t' '$1 == "megatron" { print $5 }' "$tmp/out")
if [ "$rows" = "megatron gpipe seq1f1b chunkflow " ] && [ "$mspeed" = "1.000" ]; then
  echo "ok $n - $PROG: compare: a row per strategy in the order given, megatron's speedup 1.000"
else
  echo "not ok $n - $PROG: compare rows '$rows', megatron speedup '$mspeed'"; sed 's/^/# /' "$tmp/out"
  fails=$((fails + 1))
fi
# The table's balance and DP-Merge columns (docs/strategies.md) and auto's picks; the TSV keeps
# the contract's six columns whatever the strategies.
check "compare table: x_bound, plan_ms_p50, cv_fwd, cv_bwd and merges columns" 0 \
  "^strategy +predicted_ms +bubble +peak_mem_GiB +speedup +x_bound +plan_ms/step +plan_ms_p50 +cv_fwd +cv_bwd +merges +choices" "" \
  -- compare --config "$PAPER" --set plan.context_len=64K --set plan.milp_time_limit=0 --lengths "$tmp/cc.txt" \
  --strategies megatron,slimpack,auto --steps 2
n=$((n + 1))
# megatron: 0 merges; every row: its time at least its lower bound (x_bound >= 1.00x), p50 > 0,
# CVs in [0, 1), merges a count; auto: as fast as slimpack or faster, and its picks add up to
# the 2 steps.
rows=$(awk '$1 ~ /^(megatron|slimpack|auto)$/ && $6 ~ /x$/ && $6 + 0 >= 1 && $8 > 0 && $9 >= 0 && $9 < 1 && $10 >= 0 && $10 < 1 && $11 ~ /^[0-9]+$/ { print $1 }' "$tmp/out" | tr '\n' ' ')
mmerges=$(awk '$1 == "megatron" { print $11 }' "$tmp/out")
faster=$(awk '$1 == "slimpack" { s = $2 } $1 == "auto" { a = $2 } END { print (a != "" && a + 0 <= s + 0) ? "yes" : "no" }' "$tmp/out")
picks=$(awk '/^auto picked: / { sub(/^auto picked: /, ""); k = split($0, p, ", "); for (i = 1; i <= k; i++) { split(p[i], w, " "); t += w[2] } print t }' "$tmp/out")
if [ "$rows" = "megatron slimpack auto " ] && [ "$mmerges" = 0 ] && [ "$faster" = yes ] && [ "$picks" = 2 ]; then
  echo "ok $n - $PROG: compare table: the new columns hold numbers; auto's picks cover the 2 steps"
else
  echo "not ok $n - $PROG: compare table: rows '$rows', megatron merges '$mmerges', auto faster '$faster', picks '$picks'"
  sed 's/^/# /' "$tmp/out"; fails=$((fails + 1))
fi
check "compare --format tsv with slimpack and auto: the contract's header, unchanged" 0 \
  "^strategy	predicted_ms	bubble_ratio	peak_mem_bytes	speedup_vs_megatron	plan_ms_per_step$" "" \
  -- compare --config "$PAPER" --set plan.context_len=64K --set plan.milp_time_limit=0 --lengths "$tmp/cc.txt" \
  --strategies slimpack,auto --steps 2 --format tsv
n=$((n + 1))
got=$(awk -F'\t' 'NR > 1 && NF == 6 { print $1 } /picked/ { print "picked" }' "$tmp/out" | tr '\n' ' ')
if [ "$(head -n 1 "$tmp/out")" = "$(printf 'strategy\tpredicted_ms\tbubble_ratio\tpeak_mem_bytes\tspeedup_vs_megatron\tplan_ms_per_step')" ] &&
   [ "$got" = "slimpack auto " ] && [ "$(wc -l <"$tmp/out")" = 3 ]; then
  echo "ok $n - $PROG: compare --format tsv: six columns per row, no table extras"
else
  echo "not ok $n - $PROG: compare --format tsv rows '$got'"; sed 's/^/# /' "$tmp/out"; fails=$((fails + 1))
fi
# auto considers helixpipe where the trainer runs its layer parts over ranks (any tp, no
# sharding) and picks it where it wins: 64 equal 32K samples on the small model (hidden 256:
# attention dominates, HelixPipe 3.1) over 4 stages, at tp 1 and tp 4; with parallel.shard
# over 2 DP ranks it is not a candidate
for i in $(seq 64); do echo 32768; done >"$tmp/uni32k.txt"
HX=(compare --config "$PAPER" --set plan.context_len=32K --set parallel.tp=1 --set parallel.dp=1 --set parallel.pp=4
    --set plan.global_batch=64 --set model.preset=small --set plan.mem=400G --lengths "$tmp/uni32k.txt" --steps 1
    --threads 1)
check "compare: auto picks helixpipe where it is the fastest (tp 1)" 0 "^auto picked: helixpipe 1$" "" \
  -- "${HX[@]}" --strategies megatron,slimpack,helixpipe,auto
check "compare: auto picks helixpipe where it is the fastest (tp 4: each TP rank runs its shard of the parts)" 0 \
  "^auto picked: helixpipe 1$" "" -- "${HX[@]}" --set parallel.tp=4 --strategies megatron,slimpack,helixpipe,auto
n=$((n + 1)) # (helixpipe is still the fastest there: auto's pick is slower)
"$BIN" "${HX[@]}" --set parallel.tp=4 --set parallel.dp=2 --set parallel.shard=zero1 \
  --strategies megatron,slimpack,helixpipe,auto >"$tmp/out" 2>"$tmp/err"
got=$(awk '$1 == "helixpipe" { h = $2 } $1 == "auto" && $2 ~ /^[0-9]/ { a = $2 } /^auto picked: / { p = $3 }
  END { print (p != "helixpipe" && h + 0 < a + 0) ? "ok" : "picked " p ", helixpipe " h " ms, auto " a " ms" }' "$tmp/out")
if [ "$got" = ok ]; then
  echo "ok $n - $PROG: compare: with zero1 over 2 DP ranks auto does not consider helixpipe, the fastest there (its ranks hold the whole model)"
else
  echo "not ok $n - $PROG: compare with zero1: $got"; sed 's/^/# /' "$tmp/out" "$tmp/err" | head -20; fails=$((fails + 1))
fi
check "compare without megatron still has a speedup column" 0 "^chunkflow +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+x" "" \
  -- compare --config "$PAPER" --set plan.context_len=64K --lengths "$tmp/cc.txt" --strategies chunkflow --steps 2
check "compare with an unknown strategy" 2 "" "unknown strategy 'slimpak'" \
  -- compare --config "$PAPER" --lengths "$tmp/cc.txt" --strategies megatron,slimpak
check "compare with a bad --format" 2 "" "--format 'csv'" \
  -- compare --config "$PAPER" --lengths "$tmp/cc.txt" --strategies megatron --format csv
# layout: the candidates of 8 GPUs for the small preset (8 layers, 8 heads, 4 K/V heads, ffn
# 704): tp in 1, 2, 4 (4 K/V heads), pp | 8 / tp; 9 layouts, 6 of dp > 1 in both shard modes
# and 3 of dp 1 in one: 15 x 5 strategies = 75 candidates.
LAYOUT=(layout --set model.preset=small --set plan.global_batch=32 --set plan.context_len=16K
  --lengths "$tmp/cc.txt" --gpus 8 --steps 2)
check "layout without --lengths" 2 "" "give the lengths: --lengths FILE" -- layout --gpus 8
check "layout without --gpus" 2 "" "give --gpus N" -- layout --lengths "$tmp/cc.txt"
check "layout --gpus 0" 2 "" "--gpus '0': want a positive integer" -- layout --lengths "$tmp/cc.txt" --gpus 0
check "layout --gpus eight" 2 "" "--gpus 'eight': want a positive integer" -- layout --lengths "$tmp/cc.txt" --gpus eight
check "layout with a lengths file that does not parse names file:line" 1 "" "bad.txt:2" \
  -- "${LAYOUT[@]}" --lengths "$tmp/bad.txt"
check "layout with a missing lengths file names it" 1 "" "nowhere.txt" -- "${LAYOUT[@]}" --lengths "$tmp/nowhere.txt"
check "layout with an unknown shard mode lists the modes" 2 "" "unknown mode 'zero3' \(the modes: none, zero1, zero2, fsdp\)" \
  -- "${LAYOUT[@]}" --shard none,zero3
check "layout with an unknown strategy" 2 "" "unknown strategy 'slimpak'" -- "${LAYOUT[@]}" --strategies slimpak
# The table: ranked by step time, every row a layout of the 8 GPUs, cp at most dp, MFU in
# (0, 1], peak memory under the cap.
check "layout: a table of ranked candidates" 0 "^ +1 +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +(none|zero1) +[a-z0-9]+ +[0-9.]+" \
  "layout: 100.0% \(75/75 candidates\)" -- "${LAYOUT[@]}"
n=$((n + 1))
got=$(awk '$1 ~ /^[0-9]+$/ && NF >= 11 {
    rows++
    if ($2 * $3 * $4 != 8) bad = bad " layout " $2 "x" $3 "x" $4
    if ($5 < 1 || $5 > $4) bad = bad " cp " $5 " of dp " $4
    if (!($9 > 0 && $9 <= 1)) bad = bad " mfu " $9
    if ($10 > $11) bad = bad " peak " $10 " over " $11
    if (rows > 1 && $8 + 0 < last) bad = bad " row " $1 " faster than row " $1 - 1
    last = $8 + 0
  } END { print rows + 0, (bad == "" ? "ok" : bad) }' "$tmp/out")
if [ "$got" = "75 ok" ]; then
  echo "ok $n - $PROG: layout: 75 rows, step times non-decreasing, tp x pp x dp = 8, cp <= dp, mfu in (0, 1]"
else
  echo "not ok $n - $PROG: layout table: '$got' (want '75 ok')"; sed 's/^/# /' "$tmp/out" | head -20; fails=$((fails + 1))
fi
# The TSV: the contract's header, ok rows ranked, limits reported as not_planned.
check "layout --format tsv --max-candidates 10: its header" 0 \
  "^status	tp	pp	dp	max_cp	shard	strategy	predicted_ms	mfu	peak_mem_bytes	mem_cap_bytes	detail$" "" \
  -- "${LAYOUT[@]}" --format tsv --max-candidates 10 --strategies slimpack,megatron
n=$((n + 1))
got=$(awk -F'\t' 'NR > 1 { count[$1]++; if (NF != 12 || $2 * $3 * $4 != 8) bad = bad " row " NR }
  $1 == "ok" { if (seen && $8 + 0 < last) bad = bad " unranked at " NR; last = $8 + 0; seen = 1 }
  END { print count["ok"] + 0, count["not_planned"] + 0, count["refused"] + 0, (bad == "" ? "ok" : bad) }' "$tmp/out")
if [ "$got" = "10 20 0 ok" ]; then
  echo "ok $n - $PROG: layout --format tsv: 10 candidates planned and ranked, the other 20 not planned"
else
  echo "not ok $n - $PROG: layout tsv: ok, not_planned, refused '$got' (want '10 20 0 ok')"
  sed 's/^/# /' "$tmp/out" | head -20; fails=$((fails + 1))
fi
check "layout --shard zero2,fsdp: candidates in those modes (parallel.shard)" 0 \
  "^ +1 +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +(zero2|fsdp) +slimpack +[0-9.]+" "" \
  -- "${LAYOUT[@]}" --shard zero2,fsdp --strategies slimpack -q
check "layout: a layout whose dp exceeds the global batch is refused, saying so" 0 \
  "^ +1 +1 +8 +zero1 +all +dp = 8 is more than plan.global_batch = 4" "" \
  -- "${LAYOUT[@]}" --set plan.global_batch=4 --strategies megatron,chunkflow -q
# Nothing fits under 1 GiB (2 GiB are reserved): every candidate refused, naming bytes; exit 1.
check "layout: nothing fits a 1 GiB cap" 1 "^ +4 +2 +1 +none +all +model states .* need [0-9]+ bytes, over the 1.0 GiB cap \(1073741824 bytes\)" \
  "no layout of 8 GPUs could be planned" -- "${LAYOUT[@]}" --set plan.mem=1G -q
n=$((n + 1))
"$BIN" "${LAYOUT[@]}" --set plan.mem=1G --format tsv -q >"$tmp/out" 2>"$tmp/err"
rc=$?
got=$(awk -F'\t' 'NR > 1 { rows++; if ($1 != "refused" || $12 !~ / [0-9]+ bytes, over the .* cap \(1073741824 bytes\)/) bad++ }
  END { print rows + 0, bad + 0 }' "$tmp/out")
if [ "$rc" = 1 ] && [ "$got" = "75 0" ]; then
  echo "ok $n - $PROG: layout: under a 1 GiB cap all 75 candidates are refused, each naming the bytes"
else
  echo "not ok $n - $PROG: layout under 1 GiB: exit $rc, rows and rows not refused with bytes '$got' (want 1, '75 0')"
  sed 's/^/# /' "$tmp/out" "$tmp/err" | head -20; fails=$((fails + 1))
fi
check "the paper config is valid" 0 "^preset = llama-13b" "" -- config --config "$PAPER"
unset LONGTAIL_HARDWARE_DIR
finish
