#!/usr/bin/env bash
# scripts/demo.sh — the main job on the embedded defaults (README's first command).
#
# Today it installs the dependencies, builds and installs longtail into ./_install, runs
# each program on etc/longtail.ini, and — where a private Slurm cluster can start (root,
# slurmctld/slurmd present) — runs the programs as Slurm jobs: a 2-task array whose
# tasks log with their `task I/N` prefix, and a job that starts `afterok` on the array.
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
array=$(sbatch --parsable --array=0-1 -o "$logs/check_%A_%a.log" -J lt-demo-check \
  --wrap "'$bin/planner' --log-level debug config --config '$top/etc/longtail.ini' >/dev/null && echo task \$SLURM_ARRAY_TASK_ID: config ok && '$bin/dataprep' encode --config '$top/etc/longtail.ini' '$top/README.md' | wc -w")
after=$(sbatch --parsable --dependency=afterok:"$array" -o "$logs/devices_%j.log" -J lt-demo-devices \
  --wrap "'$bin/trainer' devices")
echo "submitted array job $array (2 tasks) and job $after (afterok:$array)"
for _ in $(seq 120); do
  [ -z "$(squeue -h -j "$array,$after" 2>/dev/null)" ] && break
  sleep 1
done
for f in "$logs"/*.log; do echo "--- ${f#$top/}"; cat "$f"; done
state=$(scontrol show job "$after" | grep -o 'JobState=[A-Z]*' | head -1)
echo "job $after: $state"
[ "$state" = JobState=COMPLETED ]
say "done: outputs in demo-out/"
