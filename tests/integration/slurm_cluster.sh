#!/usr/bin/env bash
# slurm_cluster.sh - integration test against a private single-node Slurm
# cluster (scripts/slurm-local.sh).  Emits TAP on stdout for automake's
# tap-driver.
#
# Environment (set by the test harness):
#   top_srcdir     source tree (absolute, or relative to the cwd)
#   top_builddir   build tree (absolute, or relative to the cwd)
#   MPI_ALLREDUCE  path of the compiled tests/integration/mpi_allreduce, or
#                  empty when configure found no MPI
#
# Tests:
#   1. sbatch --array=0-2 writes exactly arr_<jobid>_{0,1,2}.log
#   2. --dependency=afterok: B runs only after A finished, both COMPLETED
#   3. --dependency=afterok on a failing job: never runs
#      (PENDING, Reason=DependencyNeverSatisfied), then cancelled
#   4. srun --mpi=pmix -N1 -n2 mpi_allreduce inside sbatch
#   5. dataprep run as an sbatch array over data/sample (--array=1-3: task I
#      = SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT),
#      `dataprep verify` in an afterok job; same documents as a local run
#   6. the distributed trainer as a real job: slimpack plans for dp 2 x pp 2,
#      `trainer check` under srun --mpi=pmix -n 4 (the ranks' gradients against
#      one process and every sample whole), then `trainer train --db` writing a
#      checkpoint in parts; the same losses as a one-process run
#
# When the cluster cannot be started (not root, Slurm not installed, daemons
# fail to come up in this sandbox, ...) every test is reported as
# "ok N - name # SKIP reason".  The script always exits 0; tap-driver judges
# the TAP lines.

set -u

test_names=(
    "sbatch job array 0-2 writes one log per task"
    "afterok dependency runs B after A completed"
    "afterok dependency on a failed job never runs"
    "srun --mpi=pmix -N1 -n2 mpi_allreduce"
    "dataprep run as a 3-task array, verify afterok"
    "trainer on 4 ranks: sbatch + srun --mpi=pmix -n 4 (the oracle, then training in parts)"
)
echo "1..${#test_names[@]}"
. "$(dirname "${BASH_SOURCE[0]}")/slurm_lib.sh"
# ------------------------------------------------------- 1: job array
test_array() {
    local id k f files expect
    cat >"$work/array.sh" <<'EOF'
#!/bin/sh
echo "array_job_id=$SLURM_ARRAY_JOB_ID task_id=$SLURM_ARRAY_TASK_ID job_id=$SLURM_JOB_ID"
EOF
    id=$(submit --array=0-2 -J lt-array -o "$out/arr_%A_%a.log" "$work/array.sh") || return 1
    diag "array job $id submitted"
    wait_done "$id" 3 || { dump_job "$id"; dump_logs; return 1; }
    local bad=0 states
    states=$(job_field "$id" JobState | sort -u)
    if [ "$states" != COMPLETED ]; then
        diag "array tasks not all COMPLETED: ${states//$'\n'/ }"
        bad=1
    fi
    files=$(cd "$out" && find . -maxdepth 1 -name 'arr_*' | sed 's|^\./||' | sort)
    expect=$(printf 'arr_%s_%s.log\n' "$id" 0 "$id" 1 "$id" 2)
    if [ "$files" != "$expect" ]; then
        diag "expected log files:" "$expect"
        diag "found:" "${files:-(none)}"
        bad=1
    fi
    for k in 0 1 2; do
        f=$out/arr_${id}_$k.log
        if ! grep -q "^array_job_id=$id task_id=$k " "$f" 2>/dev/null; then
            diag "$f does not hold 'array_job_id=$id task_id=$k'"
            diag_file "$f"
            bad=1
        fi
    done
    [ "$bad" = 0 ] || { dump_job "$id"; return 1; }
}

# ------------------------------------------------- 2: afterok dependency
test_dependency() {
    local a b reason bad=0 sa sb ea eb t_a t_b check
    cat >"$work/dep_a.sh" <<EOF
#!/bin/sh
sleep 2
date +%s.%N >"$work/a.done"
EOF
    cat >"$work/dep_b.sh" <<EOF
#!/bin/sh
start=\$(date +%s.%N)
if [ -f "$work/a.done" ]; then r=found; else r=missing; fi
printf 'a.done=%s b_start=%s\n' "\$r" "\$start" >"$work/b.done"
EOF
    a=$(submit -J lt-dep-a -o "$out/dep_a.log" "$work/dep_a.sh") || return 1
    b=$(submit -J lt-dep-b -o "$out/dep_b.log" --dependency="afterok:$a" "$work/dep_b.sh") || return 1
    diag "job A=$a, job B=$b (afterok:$a)"
    # A sleeps 2 s, so B must still be waiting for it now.
    reason=$(job_field "$b" Reason)
    sb=$(job_field "$b" JobState)
    if [ "$sb" != PENDING ] || [ "$reason" != Dependency ]; then
        diag "right after submission B should be PENDING/Dependency, is $sb/$reason"
        bad=1
    fi
    if ! wait_done "$a" || ! wait_done "$b"; then
        dump_job "$a"; dump_job "$b"; dump_logs
        return 1
    fi
    sa=$(job_field "$a" JobState); ea=$(job_field "$a" ExitCode)
    sb=$(job_field "$b" JobState); eb=$(job_field "$b" ExitCode)
    if [ "$sa" != COMPLETED ] || [ "$ea" != 0:0 ]; then diag "A: state $sa exit $ea"; bad=1; fi
    if [ "$sb" != COMPLETED ] || [ "$eb" != 0:0 ]; then diag "B: state $sb exit $eb"; bad=1; fi
    if [ ! -r "$work/b.done" ]; then
        diag "B wrote no $work/b.done"
        diag_file "$out/dep_b.log"
        bad=1
    else
        check=$(cat "$work/b.done")
        diag "B recorded: $check"
        case $check in
            "a.done=found "*) ;;
            *) diag "B did not see A's file"; bad=1 ;;
        esac
        t_a=$(cat "$work/a.done" 2>/dev/null)
        t_b=${check##*b_start=}
        if [ -z "$t_a" ] || ! awk -v a="$t_a" -v b="$t_b" 'BEGIN { exit !(b >= a) }'; then
            diag "B started at ${t_b:-?}, before A finished at ${t_a:-?}"
            bad=1
        fi
    fi
    [ "$bad" = 0 ] || { dump_job "$a"; dump_job "$b"; return 1; }
}

# ------------------------------------- 3: afterok on a failing job
test_never_satisfied() {
    local f c sf reason sc deadline bad=0
    cat >"$work/fail.sh" <<'EOF'
#!/bin/sh
exit 3
EOF
    cat >"$work/never.sh" <<EOF
#!/bin/sh
touch "$work/never.ran"
EOF
    f=$(submit -J lt-fail -o "$out/fail.log" "$work/fail.sh") || return 1
    c=$(submit -J lt-never -o "$out/never.log" --dependency="afterok:$f" "$work/never.sh") || return 1
    diag "failing job F=$f, job C=$c (afterok:$f)"
    wait_done "$f" || { dump_job "$f"; dump_logs; return 1; }
    sf=$(job_field "$f" JobState)
    [ "$sf" = FAILED ] || { diag "F should be FAILED, is $sf"; bad=1; }
    deadline=$((SECONDS + 30))
    while :; do
        sc=$(job_field "$c" JobState)
        reason=$(job_field "$c" Reason)
        [ "$reason" = DependencyNeverSatisfied ] && break
        is_final "$sc" && break
        [ "$SECONDS" -lt "$deadline" ] || break
        sleep 0.5
    done
    if [ "$sc" != PENDING ] || [ "$reason" != DependencyNeverSatisfied ]; then
        diag "C should be PENDING/DependencyNeverSatisfied, is $sc/$reason"
        bad=1
    fi
    if [ -e "$work/never.ran" ]; then
        diag "C ran although its dependency failed"
        bad=1
    fi
    scancel "$c" 2>/dev/null
    wait_done "$c" || bad=1
    sc=$(job_field "$c" JobState)
    [ "$sc" = CANCELLED ] || { diag "C should be CANCELLED after scancel, is $sc"; bad=1; }
    [ "$bad" = 0 ] || { dump_job "$f"; dump_job "$c"; return 1; }
}

# ----------------------------------------------- 4: MPI through PMIx
test_mpi() {
    local id st log=$out/mpi.log
    # Direct launch through Slurm's PMIx plugin is what makes the two ranks
    # one MPI job (Debian's Open MPI has no PMI-1/PMI-2 support; --mpi=none
    # fails in MPI_Init).  On the Debian 12 VM this was developed on, no other
    # setting was needed, even as root; these are defensive, for containers
    # (see docs/slurm-local.md):
    #  - OMPI_ALLOW_RUN_AS_ROOT*: Open MPI refuses root without them, but only
    #    in mpirun/orterun; harmless for direct srun launch.
    #  - btl=self,vader: shared memory only; do not probe TCP/InfiniBand
    #    interfaces, which may be missing or unusable in a sandbox.
    #  - vader single copy = none: CMA (process_vm_readv) needs ptrace
    #    permission that containers often lack ("Read -1, expected ...").
    #  - PMIX_MCA_gds=hash: keep PMIx off its shared-memory datastore
    #    (ds12/ds21), which needs a directory shared and mmap-able by the PMIx
    #    server in slurmstepd and the clients.
    cat >"$work/mpi.sh" <<EOF
#!/bin/sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export PMIX_MCA_gds=hash
exec srun --mpi=pmix -N1 -n2 "$MPI_ALLREDUCE"
EOF
    id=$(submit -J lt-mpi -N1 -n2 -o "$log" "$work/mpi.sh") || return 1
    diag "MPI job $id submitted"
    wait_done "$id" || { dump_job "$id"; diag_file "$log"; dump_logs; return 1; }
    st=$(job_field "$id" JobState)
    if [ "$st" = COMPLETED ] && grep -q '^mpi_allreduce: ok world_size=2 slurm_ntasks=2 ' "$log"; then
        diag "$(grep '^mpi_allreduce:' "$log")"
        return 0
    fi
    diag "MPI job $id ended in state $st; expected 'mpi_allreduce: ok world_size=2 slurm_ntasks=2' in $log"
    diag_file "$log"
    dump_job "$id"
    dump_logs
    return 1
}

# ------------------------------------------- 5: dataprep as a Slurm array
test_dataprep_array() {
    local dp=$top_builddir/dataprep/dataprep data=$work/dp-array local_dir=$work/dp-local a b st f
    local vocab=$top_srcdir/data/vocab
    local inputs="$top_srcdir/data/sample/*.gz $top_srcdir/data/sample/*.bz2"
    cat >"$work/dp_task.sh" <<EOF
#!/bin/sh
exec "$dp" run --vocab-dir "$vocab" --encoding cl100k_base --threads 1 --out "$data" --input $inputs
EOF
    a=$(submit --array=1-3 -J lt-dataprep -o "$out/dp_%A_%a.log" "$work/dp_task.sh") || return 1
    cat >"$work/dp_verify.sh" <<EOF
#!/bin/sh
"$dp" verify "$data" && "$dp" cat --vocab-dir "$vocab" "$data" >"$work/dp-array.jsonl"
EOF
    b=$(submit --dependency=afterok:"$a" -J lt-dataprep-verify -o "$out/dp_verify_%j.log" "$work/dp_verify.sh") || return 1
    diag "dataprep array $a (tasks 1-3), verify job $b (afterok)"
    if ! wait_done "$a" 3 || ! wait_done "$b"; then
        dump_job "$a"; dump_job "$b"; dump_logs; return 1
    fi
    st=$(job_field "$b" JobState)
    if [ "$st" != COMPLETED ] || ! grep -q '3 tasks checked.* 0 problems' "$out/dp_verify_$b.log"; then
        diag "verify job $b ended $st"
        diag_file "$out/dp_verify_$b.log"
        for f in "$out"/dp_"$a"_*.log; do diag_file "$f"; done
        return 1
    fi
    # shellcheck disable=SC2086 # $inputs are globs
    "$dp" -q run --vocab-dir "$vocab" --encoding cl100k_base --out "$local_dir" --input $inputs || return 1
    "$dp" cat --vocab-dir "$vocab" "$local_dir" >"$work/dp-local.jsonl" || return 1
    # the same documents (source, tokens, text), whatever task holds them
    if ! cmp -s <(sed 's/^{"task":[0-9]*,"doc":[0-9]*,//' "$work/dp-array.jsonl" | sort) \
                <(sed 's/^{"task":[0-9]*,"doc":[0-9]*,//' "$work/dp-local.jsonl" | sort); then
        diag "the array's documents differ from a one-task run's"
        return 1
    fi
    if ! grep -q 'task 2 of 3' "$out/dp_${a}_3.log"; then
        diag "array task 3 (of --array=1-3) did not run as task 2 of 3:"
        diag_file "$out/dp_${a}_3.log"
        return 1
    fi
}

# ------------------------------------- 6: the distributed trainer under srun
test_trainer() {
    local dp=$top_builddir/dataprep/dataprep pl=$top_builddir/plans/planner tr=$top_builddir/train/trainer
    local id st log=$out/trainer.log d=$work/tr last
    mkdir -p "$d"
    "$dp" -q run --input "$top_srcdir/data/sample/mixed-0.jsonl.gz" --encoding r50k_base \
        --vocab-dir "$top_srcdir/data/vocab" --out "$d/data" >"$d/dp.log" 2>&1 || { diag_file "$d/dp.log"; return 1; }
    cat >"$d/m.ini" <<EOF
[data]
encoding = r50k_base
[model]
preset = nano
layers = 4
[plan]
global_batch = 6
context_len = 128
mem = 80G
steps = 4
[parallel]
dp = 2
pp = 2
[train]
threads = 1
steps = 4
comm_timeout_s = 60
EOF
    LONGTAIL_HARDWARE_DIR=$top_srcdir/etc/hardware "$pl" build --config "$d/m.ini" --data "$d/data" \
        --db "$d/plans.db" --strategy slimpack >"$d/plan.log" 2>&1 || { diag_file "$d/plan.log"; return 1; }
    "$tr" train --config "$d/m.ini" --db "$d/plans.db" --data "$d/data" --out "$d/one" >"$d/one.log" 2>&1 ||
        { diag_file "$d/one.log"; return 1; }
    # -O: 4 tasks on a node that may have fewer CPUs
    cat >"$work/trainer.sh" <<EOF
#!/bin/sh
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none PMIX_MCA_gds=hash
srun --mpi=pmix -O -n 4 "$tr" check --config "$d/m.ini" --db "$d/plans.db" --data "$d/data" >"$d/check.out" || exit 1
exec srun --mpi=pmix -O -n 4 "$tr" train --config "$d/m.ini" --db "$d/plans.db" --data "$d/data" --out "$d/ranks"
EOF
    id=$(submit -J lt-trainer -O -n4 -o "$log" "$work/trainer.sh") || return 1
    diag "trainer job $id submitted"
    wait_done "$id" || { dump_job "$id"; diag_file "$log"; dump_logs; return 1; }
    st=$(job_field "$id" JobState)
    last=$(tail -n 1 "$d/check.out" 2>/dev/null)
    if [ "$st" != COMPLETED ] || [[ ! "$last" =~ ^max_rel_err=.*\ ranks=4\ steps=4$ ]]; then
        diag "trainer job $id ended $st; check's last line: '$last'"
        diag_file "$log"; diag_file "$d/check.out"; dump_job "$id"
        return 1
    fi
    diag "srun -n 4 trainer check: $last"
    if ! grep -q '^part = stage-1.bin ' "$d/ranks/ckpt-00000004.d/manifest.txt" 2>/dev/null ||
       ! "$tr" export "$d/ranks/ckpt-00000004.d" --hf "$d/hf-ranks" >/dev/null 2>&1; then
        diag "no readable checkpoint in parts from the ranks"; diag_file "$log"; return 1
    fi
    # the same losses as one process (4 steps, 6 decimals)
    if ! cmp -s <(grep -o '^step=[0-9]* loss=[0-9.]*' "$d/one.log") <(grep -o '^step=[0-9]* loss=[0-9.]*' "$log"); then
        diag "the ranks' losses differ from one process's:"
        diag_file "$d/one.log"; diag_file "$log"
        return 1
    fi
}

# ---------------------------------------------------------------- run
if test_array; then ok; else not_ok; fi
if test_dependency; then ok; else not_ok; fi
if test_never_satisfied; then ok; else not_ok; fi
if [ -z "$MPI_ALLREDUCE" ]; then
    skip "MPI not found at configure time"
elif [ ! -x "$MPI_ALLREDUCE" ]; then
    diag "MPI_ALLREDUCE=$MPI_ALLREDUCE is not an executable file"
    not_ok
elif test_mpi; then
    ok
else
    not_ok
fi
if [ ! -x "$top_builddir/dataprep/dataprep" ]; then
    diag "$top_builddir/dataprep/dataprep is not built"
    not_ok
elif test_dataprep_array; then
    ok
else
    not_ok
fi
if [ -z "$MPI_ALLREDUCE" ]; then
    skip "MPI not found at configure time"
elif [ ! -x "$top_builddir/train/trainer" ] || [ ! -x "$top_builddir/plans/planner" ]; then
    diag "the trainer or the planner is not built"
    not_ok
elif test_trainer; then
    ok
else
    not_ok
fi
exit 0
