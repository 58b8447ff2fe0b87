# tests/integration/slurm_lib.sh - what the tests on the private single-node Slurm
# cluster share (tests/integration/slurm_cluster.sh, tests/jobctl/slurm.sh): TAP helpers,
# a Slurm environment of the caller's own left out, the cluster brought up in a private
# directory (scripts/slurm-local.sh) and taken down at exit, job helpers.
#
# Source it after defining test_names and printing the TAP plan. It sets dir (the
# private cluster's directory), work and out (scratch directories in it) and exports
# SLURM_CONF. When the cluster cannot start (not root, Slurm not installed, daemons that
# do not come up) every test is reported "ok N - name # SKIP reason" and the script exits
# 0; tap-driver judges the TAP lines.

cwd=$(pwd)
abspath() {
    case $1 in
        /*) printf '%s\n' "$1" ;;
        *) printf '%s\n' "$cwd/$1" ;;
    esac
}

top_srcdir=$(abspath "${top_srcdir:-$(dirname "$0")/../..}")
top_builddir=$(abspath "${top_builddir:-.}")
MPI_ALLREDUCE=${MPI_ALLREDUCE:-}
[ -z "$MPI_ALLREDUCE" ] || MPI_ALLREDUCE=$(abspath "$MPI_ALLREDUCE")
slurm_local=$top_srcdir/scripts/slurm-local.sh
# Run it through bash: a source tree unpacked by "make distcheck" may lack
# the executable bit.
slurm_local_cmd() { bash "$slurm_local" "$@"; }
wait_timeout=${LONGTAIL_TEST_JOB_TIMEOUT:-60}


test_num=0
failures=0

diag() {
    local line
    while IFS= read -r line || [ -n "$line" ]; do
        printf '# %s\n' "$line"
    done <<<"$*"
}
diag_file() {   # diag_file FILE [LINES]
    if [ -r "$1" ]; then
        diag "---- ${1} ----"
        diag "$(tail -n "${2:-40}" "$1")"
    else
        diag "---- ${1}: (missing) ----"
    fi
}
ok() { test_num=$((test_num + 1)); echo "ok $test_num - ${test_names[test_num - 1]}"; }
not_ok() { test_num=$((test_num + 1)); failures=$((failures + 1)); echo "not ok $test_num - ${test_names[test_num - 1]}"; }
skip() { test_num=$((test_num + 1)); echo "ok $test_num - ${test_names[test_num - 1]} # SKIP $1"; }
skip_all() {
    diag "skipping all tests: $1"
    while [ "$test_num" -lt "${#test_names[@]}" ]; do
        skip "$1"
    done
    exit 0
}

# Do not let a surrounding Slurm job/allocation (CI running under Slurm) or a
# user's Slurm defaults leak into the private cluster.
while IFS= read -r var; do
    unset "$var"
done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|SQUEUE|SINFO|SCONTROL|PMIX|PMI|OMPI_COMM_WORLD)_' || true)

# ----------------------------------------------------------- preconditions
[ -r "$slurm_local" ] || skip_all "$slurm_local not found"
[ "$(id -u)" -eq 0 ] ||
    skip_all "needs root: the private cluster runs slurmctld/slurmd as root (running as uid $(id -u))"
for c in slurmctld slurmd sbatch srun squeue scontrol scancel sinfo; do
    command -v "$c" >/dev/null 2>&1 ||
        skip_all "'$c' not found in PATH (Debian packages: slurmctld slurmd slurm-client)"
done

# ------------------------------------------------------------- bring-up
dir=$(mktemp -d "${TMPDIR:-/tmp}/longtail-slurm-test.XXXXXX") ||
    skip_all "mktemp -d failed"
started=0
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    local down_out
    if [ "$started" = 1 ]; then
        if [ "$failures" -eq 0 ] && [ "$test_num" -eq "${#test_names[@]}" ]; then
            down_out=$(slurm_local_cmd down --dir "$dir" --purge 2>&1) ||
                diag "slurm-local.sh down --purge failed for $dir:" "$down_out"
        else
            down_out=$(slurm_local_cmd down --dir "$dir" 2>&1) ||
                diag "slurm-local.sh down failed for $dir:" "$down_out"
            diag "kept private cluster dir for debugging: $dir"
        fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

up_out=$dir/up.stdout
up_err=$dir/up.stderr
started=1   # from here on "down" must run, even if "up" fails half-way
if ! slurm_local_cmd up --dir "$dir" >"$up_out" 2>"$up_err"; then
    diag_file "$up_err" 80
    reason=$(grep -E 'error:|timed out|died|exited' "$up_err" | head -n 1)
    reason=${reason#slurm-local.sh: }
    diag "kept private cluster dir for debugging: $dir"
    slurm_local_cmd down --dir "$dir" >/dev/null 2>&1 || true
    started=0
    skip_all "private Slurm cluster did not start: ${reason:-see diagnostics above}"
fi
env_line=$(tail -n 1 "$up_out")
case $env_line in
    "export SLURM_CONF="*) eval "$env_line" ;;
    *)
        diag_file "$up_out"
        diag_file "$up_err"
        skip_all "slurm-local.sh up printed no 'export SLURM_CONF=' line"
        ;;
esac
[ -r "$SLURM_CONF" ] || skip_all "SLURM_CONF=$SLURM_CONF is not readable"
case $SLURM_CONF in
    "$dir"/*) ;;
    *) skip_all "SLURM_CONF=$SLURM_CONF is not inside the private dir $dir" ;;
esac
diag "private cluster up: SLURM_CONF=$SLURM_CONF"
while IFS= read -r line; do
    diag "$line"
done < <(grep 'warning:' "$up_err")

work=$dir/work
out=$dir/out
mkdir -p "$work" "$out"

# -------------------------------------------------------------- helpers

# submit ARGS...: sbatch --parsable; prints the job id.
submit() {
    local id
    id=$(sbatch --parsable --chdir="$work" "$@" 2>"$work/sbatch.err") || {
        diag "sbatch $* failed:"
        diag_file "$work/sbatch.err"
        return 1
    }
    id=${id%%;*}
    [[ $id =~ ^[0-9]+$ ]] || { diag "sbatch printed no job id: '$id'"; return 1; }
    printf '%s\n' "$id"
}

# job_field ID FIELD: FIELD=value from "scontrol -o show job ID", one line per
# job (array tasks are separate jobs).
job_field() {
    scontrol -o show job "$1" 2>/dev/null |
        sed -n "s/.*[[:space:]]$2=\([^[:space:]]*\).*/\1/p"
}

is_final() {
    case $1 in
        COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) return 0 ;;
        *) return 1 ;;
    esac
}

# wait_done ID [COUNT]: wait until COUNT (default 1) records of job ID are in
# a final state.
wait_done() {
    local id=$1 want=${2:-1} deadline states s n
    deadline=$((SECONDS + wait_timeout))
    while :; do
        states=$(job_field "$id" JobState)
        n=0
        for s in $states; do
            is_final "$s" && n=$((n + 1))
        done
        [ "$n" -ge "$want" ] && return 0
        if [ "$SECONDS" -ge "$deadline" ]; then
            diag "timed out after ${wait_timeout}s waiting for job $id (states: ${states//$'\n'/ })"
            return 1
        fi
        sleep 0.5
    done
}

dump_job() {
    diag "---- scontrol show job $1 ----"
    diag "$(scontrol show job "$1" 2>&1)"
}

dump_logs() {
    diag_file "$dir/log/slurmctld.log" 25
    diag_file "$dir/log/slurmd.log" 25
}

