#!/usr/bin/env bash
# tests/jobctl/slurm.sh - jobctl on a real Slurm cluster: the private single-node cluster
# of scripts/slurm-local.sh (tests/integration/slurm_lib.sh brings it up). Emits TAP.
#
# Tests:
#   1. `jobctl run` (submit, then follow) of the whole pipeline on the sample corpus and
#      the nano model: a dataprep array, the planner afterok, the trainer afterok on 2 MPI
#      ranks (srun --mpi=pmix); every stage COMPLETED, the loss falling. The run directory
#      and run.name are hostile (quotes, $(...), ';', spaces): nothing of them executed.
#   2. its outputs equal a `jobctl run --local` of the same config: the same shard bytes,
#      the same stored plans, a byte-identical final checkpoint.
#   3. preemption: USR2 to the training job's batch shell (scancel --signal=USR2 --batch)
#      mid-run; the trainer checkpoints, the job requeues itself and resumes; its final
#      checkpoint is byte-identical to the uninterrupted run's.
#   4. a dataprep array task cancelled halfway (scancel JOB_TASK), `jobctl resume`: only
#      that task is submitted again, and the shards equal a clean run's.
#   5. `jobctl cancel` of a queued run: every job CANCELLED, in Slurm and in `jobctl status`.
#
# Environment: top_srcdir, top_builddir (the test harness); LONGTAIL_TEST_JOB_TIMEOUT.

set -u
test_names=(
    "jobctl run on Slurm: dataprep array -> planner -> trainer (2 ranks), all COMPLETED, loss falling, hostile names"
    "the Slurm run's shards, plans and final checkpoint equal jobctl run --local's"
    "preemption: USR2 mid-run, requeue, resume; the final checkpoint byte-identical"
    "a dataprep task cancelled halfway, jobctl resume: that task alone again, the same shards"
    "jobctl cancel: the run's queued jobs CANCELLED"
)
echo "1..${#test_names[@]}"
. "$(dirname "${BASH_SOURCE[0]}")/../integration/slurm_lib.sh"

jobctl=$top_builddir/jobctl/jobctl
[ -x "$jobctl" ] || skip_all "$jobctl is not built"
grep -q '^#define HAVE_MPI 1' "$top_builddir/buildconfig.h" 2>/dev/null || skip_all "the trainer was built without MPI"
export LONGTAIL_VOCAB_DIR=$top_srcdir/data/vocab LONGTAIL_HARDWARE_DIR=$top_srcdir/etc/hardware
# Open MPI in a sandbox (docs/slurm-local.md): shared memory only, no CMA, PMIx's hash store
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none PMIX_MCA_gds=hash
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
job_timeout=${LONGTAIL_TEST_JOB_TIMEOUT:-300}

# The tiny pipeline: the nano model on 2 pipeline stages, 12 slimpack steps.
tiny() { # tiny FILE NAME [EXTRA INI LINES]
    cat >"$1" <<EOF
[run]
name = $2
work_dir = $work/runs
[data]
input = $top_srcdir/data/sample/*.gz $top_srcdir/data/sample/*.bz2
encoding = cl100k_base
threads = 1
[model]
preset = nano
[parallel]
dp = 1
pp = 2
[plan]
strategy = slimpack
global_batch = 4
context_len = 256
steps = 12
[train]
lr = 3e-3
min_lr = 3e-4
warmup_steps = 1
checkpoint_every = 4
threads = 1
[slurm]
time = 00:10:00
${3:-}
EOF
}

# the same files in two data directories (the timings differ by nature)
same_shards() {
    local a=$1 b=$2 f bad=0
    for f in $(cd "$a" && ls | grep -v '\.timings\.json$'); do
        cmp -s "$a/$f" "$b/$f" || { diag "$f differs between $a and $b"; bad=1; }
    done
    [ "$(cd "$a" && ls | grep -vc timings)" = "$(cd "$b" && ls | grep -vc timings)" ] || { diag "file counts differ"; bad=1; }
    return $bad
}

# the same final checkpoint (its parts and manifest) in two run directories
same_checkpoint() {
    local a=$1/train/ckpt-00000012.d b=$2/train/ckpt-00000012.d f bad=0
    [ -d "$a" ] && [ -d "$b" ] || { diag "no final checkpoint in $1 or $2"; return 1; }
    for f in $(cd "$a" && ls); do
        cmp -s "$a/$f" "$b/$f" || { diag "final checkpoint part $f differs between $1 and $2"; bad=1; }
    done
    return $bad
}

# what a plan file stores for the executor (solve times left out)
plan_dump() {
    sqlite3 "$1" "SELECT * FROM plan_ops ORDER BY step, dp_rank, stage, seq;
                  SELECT * FROM plan_slices ORDER BY step, dp_rank, pass, unit, seq;
                  SELECT step, sample_id, length, dp_rank, source FROM samples ORDER BY step, sample_id;"
}

# ------------------------------------------------------------------ 1
hostile_dir="$work/run 'q' \"d\" \$(touch $work/PWNED) ;x"
test_pipeline() {
    tiny "$work/tiny.ini" "tiny;\$(touch PWNED2)'\"x"
    mkdir -p "$work/cwd"
    (cd "$work/cwd" && timeout "$job_timeout" "$jobctl" run --config "$work/tiny.ini" --run-dir "$hostile_dir") \
        >"$work/run.out" 2>"$work/run.err"
    local rc=$? bad=0
    diag "$(tail -n 5 "$work/run.err")"
    [ $rc = 0 ] || { diag "jobctl run exited $rc"; diag_file "$work/run.out"; diag_file "$work/run.err"; bad=1; }
    "$jobctl" status "$hostile_dir" >"$work/status.out" 2>&1
    diag "$(cat "$work/status.out")"
    local s
    for s in dataprep plan train; do
        grep -Eq "^$s +[0-9]+.* COMPLETED " "$work/status.out" || { diag "$s is not COMPLETED"; bad=1; }
    done
    # the loss falls: the mean of the last 3 steps below the mean of the first 3
    python3 - "$hostile_dir/train/metrics.jsonl" <<'EOF' || bad=1
import json, sys
loss = [json.loads(l)["loss"] for l in open(sys.argv[1])]
first, last = sum(loss[:3]) / 3, sum(loss[-3:]) / 3
print("# loss: %d steps, first 3 %.4f, last 3 %.4f" % (len(loss), first, last))
sys.exit(0 if len(loss) == 12 and last < first - 0.3 else 1)
EOF
    [ -z "$(ls "$work"/PWNED* "$work"/cwd/PWNED* 2>/dev/null)" ] || { diag "a hostile value was executed"; bad=1; }
    [ -d "$hostile_dir/train/ckpt-00000012.d" ] || { diag "no final checkpoint"; bad=1; }
    [ "$bad" = 0 ] || { ls -la "$hostile_dir/logs" | while read -r l; do diag "$l"; done; dump_logs; }
    return $bad
}

# ------------------------------------------------------------------ 2
test_local_equal() {
    (cd "$work/cwd" && timeout "$job_timeout" "$jobctl" run --local --config "$work/tiny.ini" --run-dir "$work/local") \
        >"$work/local.out" 2>"$work/local.err" || { diag_file "$work/local.err"; return 1; }
    local bad=0
    same_shards "$hostile_dir/data" "$work/local/data" || bad=1
    plan_dump "$hostile_dir/plans.db" >"$work/plans.slurm" && plan_dump "$work/local/plans.db" >"$work/plans.local" &&
        [ -s "$work/plans.slurm" ] && cmp -s "$work/plans.slurm" "$work/plans.local" || { diag "the plans differ"; bad=1; }
    same_checkpoint "$hostile_dir" "$work/local" || bad=1
    return $bad
}

# ------------------------------------------------------------------ 3
test_preempt() {
    local ids train log bad=0 i
    ids=$(cd "$work/cwd" && "$jobctl" submit --parsable --config "$work/tiny.ini" --run-dir "$work/pre" \
        2>"$work/pre.err") || { diag_file "$work/pre.err"; return 1; }
    train=$(printf '%s\n' "$ids" | tail -n 1)
    for i in $(seq $((job_timeout * 5))); do
        log=$(printf '%s\n' "$work/pre/logs/"*"-train_$train.out") # a name made of run.name
        grep -q '^step=2 ' "$log" 2>/dev/null && break
        sleep 0.2
    done
    grep -q '^step=2 ' "$log" || { diag "training never reached step 2"; diag_file "$log"; return 1; }
    scancel --signal=USR2 --batch "$train" || return 1
    diag "USR2 sent to job $train's batch shell after step 2"
    # the job requeues itself; Slurm holds a requeued job back until its old credential has
    # expired (BeginTime; cred_expire = 30 s on the private cluster: etc/slurm/slurm.conf.in),
    # then starts it again: released earlier, slurmd would kill it ("credential revoked")
    for i in $(seq $((job_timeout * 2))); do
        [ "$(job_field "$train" JobState)" = COMPLETED ] && break
        sleep 0.5
    done
    diag "$(grep -E '^jobctl:|SIGUSR2|resuming' "$log")"
    [ "$(job_field "$train" JobState)" = COMPLETED ] || { diag "job $train did not complete"; dump_job "$train"; bad=1; }
    [ "$(job_field "$train" Restarts)" = 1 ] || { diag "job $train was not requeued once"; bad=1; }
    grep -q 'trainer: SIGUSR2: stopped after step' "$log" && grep -q 'resuming from .*ckpt-' "$log" ||
        { diag "no checkpoint-and-resume in the log"; diag_file "$log" 60; bad=1; }
    same_checkpoint "$hostile_dir" "$work/pre" || bad=1
    return $bad
}

# ------------------------------------------------------------------ 4
test_dataprep_resume() {
    # a third input that takes some seconds: the sample JSONL 60 times (~32 MB), its shard
    # compressed at zstd level 19 (data.zstd_level; the repeated text alone tokenizes fast)
    mkdir -p "$work/big"
    local k
    for k in $(seq 60); do gzip -dc "$top_srcdir/data/sample/mixed-0.jsonl.gz"; done >"$work/big/zz-big.jsonl"
    cp "$top_srcdir/data/sample/mixed-0.jsonl.gz" "$top_srcdir/data/sample/CC-MAIN-20240520-00002.warc.wet.gz" "$work/big/"
    tiny "$work/dp.ini" dp
    sed -i "s|^input = .*|input = $work/big\nzstd_level = 19|" "$work/dp.ini"
    local ids job log bad=0 i
    ids=$("$jobctl" submit --parsable --stages dataprep --config "$work/dp.ini" --run-dir "$work/dp" 2>"$work/dp.err") ||
        { diag_file "$work/dp.err"; return 1; }
    job=$ids
    # zz-big.jsonl sorts last: task 2
    log=$work/dp/logs/lt-dp-dataprep_${job}_2.out
    for i in $(seq $((job_timeout * 10))); do grep -q 'task 2 of 3' "$log" 2>/dev/null && break; sleep 0.1; done
    [ -e "$work/dp/data/task-00002.done" ] && { diag "task 2 finished before it could be cancelled"; return 1; }
    scancel "${job}_2" || return 1
    for i in $(seq $((job_timeout * 2))); do
        [ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && break
        sleep 0.5
    done
    "$jobctl" status "$work/dp" >"$work/dp.status" 2>&1
    diag "$(cat "$work/dp.status")"
    grep -Eq '^dataprep .* CANCELLED +2/3 tasks done' "$work/dp.status" || { diag "status does not show the cancel"; bad=1; }
    "$jobctl" resume "$work/dp" --stages dataprep >"$work/dp.resume" 2>&1 || { diag_file "$work/dp.resume"; return 1; }
    diag "$(cat "$work/dp.resume")"
    grep -Eq 'dataprep +job [0-9]+, tasks 2$' "$work/dp.resume" || { diag "resume did not submit task 2 alone"; bad=1; }
    job=$(sed -n 's/.*dataprep *job \([0-9]*\),.*/\1/p' "$work/dp.resume")
    for i in $(seq $((job_timeout * 2))); do
        [ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && break
        sleep 0.5
    done
    "$jobctl" run --local --stages dataprep --config "$work/dp.ini" --run-dir "$work/dp-clean" >/dev/null 2>"$work/dpc.err" ||
        { diag_file "$work/dpc.err"; return 1; }
    same_shards "$work/dp-clean/data" "$work/dp/data" || bad=1
    return $bad
}

# ------------------------------------------------------------------ 5
test_cancel() {
    local ids bad=0 id
    tiny "$work/c.ini" canc
    # every job held back an hour (--begin): queued, not running
    ids=$("$jobctl" submit --parsable --config "$work/c.ini" --run-dir "$work/canc" \
        --set "slurm.extra_sbatch=--begin=now+3600" 2>"$work/c.err") || { diag_file "$work/c.err"; return 1; }
    "$jobctl" cancel "$work/canc" >"$work/c.out" 2>&1 || { diag_file "$work/c.out"; return 1; }
    sleep 1
    for id in $ids; do
        [ "$(job_field "$id" JobState | sort -u)" = CANCELLED ] || { diag "job $id: $(job_field "$id" JobState)"; bad=1; }
    done
    "$jobctl" status "$work/canc" >"$work/c.status" 2>&1
    [ "$(grep -c ' CANCELLED ' "$work/c.status")" = 3 ] || { diag_file "$work/c.status"; bad=1; }
    return $bad
}

for t in test_pipeline test_local_equal test_preempt test_dataprep_resume test_cancel; do
    if "$t"; then ok; else not_ok; fi
done
exit 0
