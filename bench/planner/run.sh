#!/bin/sh
# bench/planner/run.sh — the planner's benchmarks (docs/PERFORMANCE.md, "Planner: build and
# compare"):
#
#   1. build: `planner build` of STEPS steps (default 10,000) with the paper setting
#      (etc/paper-llama13b.ini: Llama-13B, DP 8 x PP 4 x TP 4, h200, global batch 512) at
#      128K context on ../shared/lengths/commoncrawl.txt, for megatron and chunkflow, on
#      THREADS threads (default: every CPU): wall seconds (target < 60 s on 2 cores), peak
#      RSS, bytes of database per step; then `planner validate` of each file.
#   2. compare: `planner compare` over every strategy for every file of
#      ../shared/lengths at 64K, 128K and 256K context, COMPARE_STEPS steps each (default 20),
#      as Markdown tables.
#
# Usage: bench/planner/run.sh [BUILD_DIR]   (default _build/default; `make` there first)
# Env:   STEPS, THREADS, COMPARE_STEPS, STRATEGIES (default: all eight strategies),
#        LENGTHS_DIR (default ../shared/lengths), PARTS ("build compare", either or both),
#        OUT (output directory, default bench/planner/out).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build/default}
planner=$build/plans/planner
[ -x "$planner" ] || { echo "bench/planner: no $planner (build first: make -C $build)" >&2; exit 2; }
STEPS=${STEPS:-10000}
THREADS=${THREADS:-0}
COMPARE_STEPS=${COMPARE_STEPS:-20}
STRATEGIES=${STRATEGIES:-megatron,gpipe,seq1f1b,chunkflow,infinipipe,slimpack,helixpipe,auto}
LENGTHS_DIR=${LENGTHS_DIR:-$top/../shared/lengths}
PARTS=${PARTS:-build compare}
OUT=${OUT:-$top/bench/planner/out}
config=$top/etc/paper-llama13b.ini
mkdir -p "$OUT"
export LONGTAIL_HARDWARE_DIR="$top/etc/hardware"
threads_flag=
[ "$THREADS" -gt 0 ] && threads_flag="--threads $THREADS"

echo "# bench/planner on $(uname -n): $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# $(date -u +%Y-%m-%dT%H:%MZ), longtail $(git -C "$top" describe --always --dirty 2>/dev/null || echo '?')"

for part in $PARTS; do
case $part in
build)
    echo
    echo "## build: $STEPS steps, etc/paper-llama13b.ini at 128K, commoncrawl, threads=${THREADS:-all}"
    echo
    echo "| strategy | wall s | ms/step | peak RSS MB | DB bytes | bytes/step | validate s |"
    echo "|---|---|---|---|---|---|---|"
    for s in megatron chunkflow; do
        db=$OUT/build-$s.db
        rm -f "$db"
        /usr/bin/time -f '%e %M' -o "$OUT/time-$s.txt" "$planner" build --config "$config" \
            --set plan.context_len=128K --lengths "$LENGTHS_DIR/commoncrawl.txt" --db "$db" \
            --strategy "$s" --steps "$STEPS" $threads_flag --quiet > "$OUT/build-$s.txt"
        read -r wall rss < "$OUT/time-$s.txt"
        bytes=$(stat -c %s "$db")
        t0=$(date +%s.%N)
        "$planner" validate --db "$db" --quiet > /dev/null
        t1=$(date +%s.%N)
        awk -v s="$s" -v w="$wall" -v r="$rss" -v b="$bytes" -v n="$STEPS" -v t0="$t0" -v t1="$t1" 'BEGIN {
            printf "| %s | %.1f | %.2f | %.0f | %.0f | %.0f | %.1f |\n", s, w, 1000 * w / n, r / 1024, b, b / n, t1 - t0 }'
        sed 's/^/    /' "$OUT/build-$s.txt"
    done
    ;;
compare)
    echo
    echo "## compare: $STRATEGIES, $COMPARE_STEPS steps, etc/paper-llama13b.ini"
    for f in "$LENGTHS_DIR"/*.txt; do
        name=$(basename "$f" .txt)
        for ctx in 64K 128K 256K; do
            echo
            echo "### $name, context $ctx"
            echo
            echo '```'
            "$planner" compare --config "$config" --set plan.context_len=$ctx --lengths "$f" \
                --strategies "$STRATEGIES" --steps "$COMPARE_STEPS" $threads_flag --quiet || true
            echo '```'
        done
    done
    ;;
*) echo "bench/planner: unknown part '$part' (want build, compare)" >&2; exit 2 ;;
esac
done
