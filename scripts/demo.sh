#!/usr/bin/env bash
# scripts/demo.sh — the main job on the embedded defaults (README's first command).
#
# Today it installs the dependencies, builds and installs longtail into ./_install, runs
# each program on etc/longtail.ini, runs dataprep on the sample corpus (data/sample:
# shards, verify, length profile), and — where a private Slurm cluster can start (root,
# slurmctld/slurmd present) — runs dataprep as a 3-task Slurm array whose tasks log with
# their `task I/N` prefix, and a verify + profile job that starts `afterok` on the array.
# It grows with the stages into dataprep -> planner -> trainer under jobctl.
#
# Outputs go to demo-out/ (the effective config, the Slurm job logs).
# LONGTAIL_SKIP_SETUP=1 skips scripts/setup-deps.sh; LONGTAIL_DEMO_NO_SLURM=1 skips Slurm.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
out=$top/demo-out
say() { printf '\n== %s\n' "$*"; }

if [ "${LONGTAIL_SKIP_SETUP:-0}" != 1 ]; then
  say "dependencies (scripts/setup-deps.sh)"
  scripts/setup-deps.sh
fi

say "build and install into $top/_install"
[ -x configure ] || ./autogen.sh >/dev/null
mkdir -p _build/demo
if [ ! -f _build/demo/Makefile ]; then
  (cd _build/demo && "$top/configure" --prefix="$top/_install" >configure.out) ||
    { tail -30 _build/demo/configure.out; exit 1; }
fi
sed -n '/-----/,/-----/p' _build/demo/configure.out
make -C _build/demo -j"$(nproc)" >/dev/null
make -C _build/demo install >/dev/null
bin=$top/_install/bin
mkdir -p "$out"

say "the programs"
for p in dataprep planner trainer jobctl; do "$bin/$p" --version; done
"$bin/trainer" devices

say "effective config (etc/longtail.ini) -> demo-out/effective.ini"
"$bin/planner" config --config etc/longtail.ini >"$out/effective.ini"
grep -E '^\[|^(strategy|global_batch|context_len|dp|pp) ' "$out/effective.ini"

say "tokenizer: dataprep encode (data.encoding from the config, vocabulary from the install)"
"$bin/dataprep" encode --config etc/longtail.ini README.md docs/tokenizer.md >"$out/encode.ids"
awk '{ printf "%s: %d tokens, first ids %s %s %s ...\n", (NR == 1 ? "README.md" : "docs/tokenizer.md"), NF, $1, $2, $3 }' \
  "$out/encode.ids"

say "dataprep run: the sample corpus (data.input) -> demo-out/demo/data, then verify and profile"
data=$out/demo/data
"$bin/dataprep" run --config etc/longtail.ini --out "$data" --force
"$bin/dataprep" verify "$data"
"$bin/dataprep" profile --config etc/longtail.ini --model llama-7b --svg "$out/profile.svg" "$data"
echo "length profile chart: demo-out/profile.svg"
"$bin/dataprep" cat "$data" --doc 0 | cut -c1-200
"$bin/dataprep" lengths "$data" | sort -n | awk '{ a[NR] = $1 } END { printf "%d documents; median %d tokens, longest %d\n", NR, a[int((NR + 1) / 2)], a[NR] }'

say "planner simulate: ChunkFlow's Sec. 3 example (unit time), then 1F1B over the corpus' lengths (cost model)"
"$bin/planner" simulate --schedule 1f1b --stages 4 --unit-lengths 4,2,1,1
"$bin/dataprep" lengths "$data" >"$out/lengths.txt"
"$bin/planner" simulate --config etc/longtail.ini --schedule 1f1b --stages 4 --model llama-7b --hardware h200 \
  --lengths-file "$out/lengths.txt" --no-timeline --svg "$out/pipeline.svg"
echo "pipeline Gantt chart: demo-out/pipeline.svg"
echo "(whole documents as micro-batches: the longest one dominates the step, most stages idle, and its"
echo " activations exceed the GPU's memory: the imbalance the planner's strategies are built to remove)"

say "planner build: plan.steps steps of the config's strategy from the dataprep output -> demo-out/demo/plans.db"
rm -f "$out/demo/plans.db" # a fresh plan (an existing file would be resumed, or refused if the config changed)
"$bin/planner" build --config etc/longtail.ini --data "$data" --db "$out/demo/plans.db"
"$bin/planner" validate --db "$out/demo/plans.db"
"$bin/planner" show --db "$out/demo/plans.db" --step 0 --width 80
echo "the plans in SQLite (docs/plans-schema.md):"
sqlite3 -header -column "$out/demo/plans.db" \
  "SELECT step, strategy, n_samples, n_tokens, round(predicted_ms, 2) AS predicted_ms, round(bubble_ratio, 3) AS bubble FROM step_summary ORDER BY predicted_ms DESC LIMIT 5"
say "planner compare: every strategy on the corpus' lengths (auto = the fastest per step)"
"$bin/planner" compare --config etc/longtail.ini --lengths "$out/lengths.txt" \
  --strategies megatron,gpipe,seq1f1b,chunkflow,infinipipe,slimpack,auto --steps 5

say "trainer: the Llama model on the CPU (fp32 reference kernels), trained on whole documents of the output"
# The nano preset (2 layers, hidden 64, the cl100k_base vocabulary) so the demo trains in
# about half a minute on 2 cores; documents truncated at 256 tokens, 4 per step.
ck=$out/demo/checkpoints
rm -rf "$ck"
T=(--config etc/longtail.ini --set model.preset=nano --set plan.context_len=256 --set train.steps=30
   --set train.batch_docs=4 --set train.lr=3e-3 --set train.min_lr=3e-4 --set train.checkpoint_every=10)
"$bin/trainer" train "${T[@]}" --whole --data "$data" --out "$ck" | awk 'NR == 1 || NR % 5 == 0'
echo "eval on the first 32 documents, a fresh model vs the trained checkpoint:"
"$bin/trainer" init "${T[@]}" --out "$ck/init.ckpt"
"$bin/trainer" eval "${T[@]}" -q --ckpt "$ck/init.ckpt" --data "$data" --docs 32 | tail -n 1
"$bin/trainer" eval "${T[@]}" -q --ckpt "$ck/ckpt-00000030.bin" --data "$data" --docs 32 | tail -n 1
echo "greedy text from the checkpoint (30 steps of a 13M-parameter model: expect repetition):"
"$bin/trainer" generate --ckpt "$ck/ckpt-00000030.bin" --encoding cl100k_base --prompt "The" --max-tokens 16
"$bin/trainer" export "$ck/ckpt-00000030.bin" --hf "$out/demo/hf"
echo "Hugging Face export (transformers LlamaForCausalLM): $(ls "$out/demo/hf" | tr '\n' ' ')"

say "trainer: executing stored plans (slimpack, dp 2 x pp 2, nano, context 256): the oracle, then training"
# `trainer check` executes each plan in one process and compares its gradients with every
# sample run whole (docs/trainer.md "trainer check"); `trainer train --db` trains on the plans.
P=(--config etc/longtail.ini --set model.preset=nano --set plan.context_len=256 --set plan.global_batch=8
   --set parallel.dp=2 --set parallel.pp=2 --set plan.strategy=slimpack --set plan.steps=20 --set train.steps=20
   --set train.lr=3e-3 --set train.min_lr=3e-4 --set train.checkpoint_every=10)
rm -rf "$out/demo/plans-nano.db" "$out/demo/run-plans"
"$bin/planner" build "${P[@]}" --data "$data" --db "$out/demo/plans-nano.db"
"$bin/trainer" check "${P[@]}" -q --db "$out/demo/plans-nano.db" --data "$data" --steps 0,1 | grep -v ' tensor='
"$bin/trainer" train "${P[@]}" -q --db "$out/demo/plans-nano.db" --data "$data" --out "$out/demo/run-plans" \
  | awk 'NR == 1 || NR % 5 == 0'
echo "metrics and loss curve: demo-out/demo/run-plans/metrics.jsonl, demo-out/demo/run-plans/loss.svg"

if [ "${LONGTAIL_DEMO_NO_SLURM:-0}" = 1 ]; then
  say "Slurm part skipped (LONGTAIL_DEMO_NO_SLURM=1)"; exit 0
fi
if [ "$(id -u)" != 0 ] || { ! command -v slurmctld >/dev/null 2>&1 && [ ! -x /usr/sbin/slurmctld ]; }; then
  say "Slurm part skipped: the private cluster needs root and slurmctld/slurmd"; exit 0
fi

say "private Slurm cluster (scripts/slurm-local.sh)"
cluster=$out/slurm
trap 'scripts/slurm-local.sh down --dir "$cluster" >/dev/null 2>&1 || true' EXIT
eval "$(scripts/slurm-local.sh up --dir "$cluster")"
logs=$out/jobs
rm -rf "$logs"; mkdir -p "$logs"
sdata=$out/demo/data-slurm
rm -rf "$sdata"
array=$(sbatch --parsable --array=0-2 -D "$top" -o "$logs/dataprep_%A_%a.log" -J lt-demo-dataprep \
  --wrap "'$bin/dataprep' run --config '$top/etc/longtail.ini' --threads 1 --out '$sdata'")
after=$(sbatch --parsable --dependency=afterok:"$array" -D "$top" -o "$logs/profile_%j.log" -J lt-demo-profile \
  --wrap "'$bin/dataprep' verify '$sdata' && '$bin/dataprep' profile --config '$top/etc/longtail.ini' --model llama-7b '$sdata' && '$bin/trainer' devices")
echo "submitted dataprep array job $array (3 tasks, one per sample file) and job $after (afterok:$array)"
for _ in $(seq 120); do
  [ -z "$(squeue -h -j "$array,$after" 2>/dev/null)" ] && break
  sleep 1
done
for f in "$logs"/*.log; do echo "--- ${f#$top/}"; cat "$f"; done
state=$(scontrol show job "$after" | grep -o 'JobState=[A-Z]*' | head -1)
echo "job $after: $state"
[ "$state" = JobState=COMPLETED ]
say "done: outputs in demo-out/"
