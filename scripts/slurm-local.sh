#!/usr/bin/env bash
# slurm-local.sh - start/stop a private single-node Slurm cluster for the
# longtail integration tests and for demos.
#
#   slurm-local.sh up     [--dir DIR] [--timeout SECONDS]
#   slurm-local.sh down   [--dir DIR] [--purge]
#   slurm-local.sh env    [--dir DIR]
#   slurm-local.sh status [--dir DIR]
#
# slurmctld and slurmd run as root with a configuration generated from
# etc/slurm/slurm.conf.in.  Everything they write (state, spool, pid and log
# files) lives in one private directory, by default
# ${TMPDIR:-/tmp}/longtail-slurm-$(id -u); /etc/slurm and the system state
# directories are never used.  See docs/slurm-local.md.
#
# "up" prints `export SLURM_CONF=...` as its last line on stdout, so
#   eval "$(scripts/slurm-local.sh up)"
# points the Slurm client commands of the calling shell at the cluster.
# All other messages go to stderr.
#
# Environment:
#   LONGTAIL_SLURM_DIR           private directory (--dir takes precedence)
#   LONGTAIL_SLURM_TEMPLATE_DIR  directory holding slurm.conf.in
#                                (default: <script dir>/../etc/slurm)
#   LONGTAIL_SLURM_PORT_BASE     first port to use; the cluster uses
#                                PORT_BASE .. PORT_BASE+127 (default: the
#                                first free such window from 61000 up)
#   LONGTAIL_SLURM_TIMEOUT       seconds "up" waits for the node (default 60)
#   LONGTAIL_SLURM_NODE_ADDR     NodeAddr of the node (default: the address
#                                the host name resolves to if it is a
#                                loopback address, else 127.0.0.1)

set -euo pipefail

prog=${0##*/}
script_dir=$(cd "$(dirname "$0")" && pwd)

readonly PORT_WINDOW=128          # ctld, slurmd, 126 srun ports
readonly DEFAULT_PORT_BASE=61000  # above the usual ephemeral range
readonly STOP_TIMEOUT=15          # seconds between TERM and KILL (daemons)
readonly MARKER=.longtail-slurm-local

usage() {
    cat <<EOF
usage: $prog up|down|env|status [--dir DIR] [--purge] [--timeout SECONDS]

  up      start slurmctld and slurmd (as root) and wait until the node is idle;
          prints 'export SLURM_CONF=...' as the last line on stdout
  down    stop the daemons started by 'up' (and any leftover job steps);
          --purge also removes the private directory
  env     print 'export SLURM_CONF=...' if the cluster is up
  status  show whether the daemons are running

Private directory: --dir DIR, else \$LONGTAIL_SLURM_DIR, else
\${TMPDIR:-/tmp}/longtail-slurm-\$(id -u)
EOF
}

msg() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() { printf '%s: error: %s\n' "$prog" "$*" >&2; exit 1; }

# ---------------------------------------------------------------- arguments
cmd=
dir=
purge=0
wait_timeout=${LONGTAIL_SLURM_TIMEOUT:-60}

while [ $# -gt 0 ]; do
    case $1 in
        up|down|env|status)
            [ -z "$cmd" ] || die "more than one command given ('$cmd' and '$1')"
            cmd=$1 ;;
        --dir)
            [ $# -ge 2 ] || die "--dir needs an argument"
            dir=$2; shift ;;
        --dir=*) dir=${1#--dir=} ;;
        --timeout)
            [ $# -ge 2 ] || die "--timeout needs an argument"
            wait_timeout=$2; shift ;;
        --timeout=*) wait_timeout=${1#--timeout=} ;;
        --purge) purge=1 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument '$1'" ;;
    esac
    shift
done
[ -n "$cmd" ] || { usage >&2; exit 2; }
[[ $wait_timeout =~ ^[0-9]+$ ]] || die "timeout must be a number of seconds: '$wait_timeout'"

dir=${dir:-${LONGTAIL_SLURM_DIR:-${TMPDIR:-/tmp}/longtail-slurm-$(id -u)}}
[ -n "$dir" ] || die "empty private directory"
case $dir in
    /*) ;;
    *) dir=$PWD/$dir ;;
esac
dir=${dir%/}
if [ -z "$dir" ]; then
    die "refusing to use / as the private directory"
fi

conf_dir=$dir/etc
conf=$conf_dir/slurm.conf
run_dir=$dir/run
log_dir=$dir/log
ctld_pidfile=$run_dir/slurmctld.pid
slurmd_pidfile=$run_dir/slurmd.pid

# Slurm client commands run by this script must talk to the private cluster,
# whatever the caller's environment or /etc/slurm say.
export SLURM_CONF=$conf

# ---------------------------------------------------------------- processes

# is_our_daemon PID NAME: PID is a live NAME process started with our config.
is_our_daemon() {
    local pid=$1 name=$2 comm args
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [ "$comm" = "$name" ] || return 1
    args=$( { tr '\0' '\n' <"/proc/$pid/cmdline"; } 2>/dev/null) || return 1
    grep -Fqx -- "$conf" <<<"$args"
}

# daemon_pid NAME: print the pid of our running NAME daemon, if any.
daemon_pid() {
    local name=$1 pidfile pid
    pidfile=$run_dir/$name.pid
    [ -r "$pidfile" ] || return 1
    read -r pid <"$pidfile" 2>/dev/null || return 1
    is_our_daemon "$pid" "$name" || return 1
    printf '%s\n' "$pid"
}

all_up() {
    daemon_pid slurmctld >/dev/null && daemon_pid slurmd >/dev/null
}

# ppid_of PID: parent pid from /proc/PID/stat (comm may contain spaces).
ppid_of() {
    local stat state ppid
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    # after "pid (comm) " come: state ppid ...
    read -r state ppid _ <<<"${stat##*) }"
    [ -n "$state" ] && printf '%s\n' "$ppid"
}

# descendants PID...: print all (transitive) children of the given pids.
descendants() {
    local -A parent=()
    local p pp
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        pp=$(ppid_of "$p") || continue
        parent[$p]=$pp
    done
    local -a queue=("$@")
    local -A seen=()
    while [ ${#queue[@]} -gt 0 ]; do
        local cur=${queue[0]}
        queue=("${queue[@]:1}")
        for p in "${!parent[@]}"; do
            if [ "${parent[$p]}" = "$cur" ] && [ -z "${seen[$p]:-}" ]; then
                seen[$p]=1
                queue+=("$p")
                printf '%s\n' "$p"
            fi
        done
    done
}

# ancestors_of_self: our own pid and all its ancestors (never killed).
self_and_ancestors() {
    local p=$$
    while [ -n "$p" ] && [ "$p" != 0 ]; do
        printf '%s\n' "$p"
        p=$(ppid_of "$p") || break
    done
}

# job_processes: slurmstepd processes of this cluster, their descendants and
# orphaned job tasks (environment names our SLURM_CONF and has the
# SLURMD_NODENAME that slurmstepd sets for tasks; an salloc shell has not).
job_processes() {
    local p comm env fds
    local -a stepds=() orphans=()
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" != $$ ] || continue
        comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
        env=$( { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null) || env=
        if [ "$comm" = slurmstepd ]; then
            fds=$(ls -l "/proc/$p/fd/" 2>/dev/null) || fds=
            if grep -Fqx -- "SLURM_CONF=$conf" <<<"$env" ||
               grep -Fq -- " -> $dir/" <<<"$fds"; then
                stepds+=("$p")
            fi
        elif grep -Fqx -- "SLURM_CONF=$conf" <<<"$env" &&
             grep -q '^SLURMD_NODENAME=' <<<"$env"; then
            orphans+=("$p")
        fi
    done
    local -A skip=()
    local s
    while read -r s; do skip[$s]=1; done < <(self_and_ancestors)
    {
        if [ ${#stepds[@]} -gt 0 ]; then
            printf '%s\n' "${stepds[@]}"
            descendants "${stepds[@]}"
        fi
        if [ ${#orphans[@]} -gt 0 ]; then
            printf '%s\n' "${orphans[@]}"
            descendants "${orphans[@]}"
        fi
    } | sort -un | while read -r s; do
        [ -n "${skip[$s]:-}" ] || printf '%s\n' "$s"
    done
}

# alive PID...: true if any of the pids still exists (zombies count as gone).
alive() {
    local p st
    for p in "$@"; do
        st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        st=${st##*) }
        [ "${st%% *}" = Z ] && continue
        return 0
    done
    return 1
}

# terminate WHAT GRACE PID...: TERM, wait up to GRACE seconds, then KILL.
terminate() {
    local what=$1 grace=$2
    shift 2
    [ $# -gt 0 ] || return 0
    msg "stopping $what (pid $*)"
    kill -TERM "$@" 2>/dev/null || true
    local i
    for ((i = 0; i < grace * 5; i++)); do
        alive "$@" || return 0
        sleep 0.2
    done
    msg "$what did not stop within ${grace}s, sending KILL"
    kill -KILL "$@" 2>/dev/null || true
    for ((i = 0; i < 25; i++)); do
        alive "$@" || return 0
        sleep 0.2
    done
    msg "warning: $what (pid $*) still present after KILL"
}

# ---------------------------------------------------------------- setup

need_cmd() {
    local c missing=()
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || missing+=("$c")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    die "command(s) not found in PATH: ${missing[*]}; install the Debian packages slurmctld slurmd slurm-client (and make sure /usr/sbin is in PATH)"
}

# listening_ports: TCP ports that something listens on (one per line).
listening_ports() {
    if command -v ss >/dev/null 2>&1; then
        ss -Htln 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }'
    elif command -v netstat >/dev/null 2>&1; then
        netstat -tln 2>/dev/null | awk 'NR > 2 { n = split($4, a, ":"); print a[n] }'
    fi
}

port_in_use() {
    # Fallback probe when neither ss nor netstat exists.
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# window_free BASE: no port in BASE .. BASE+PORT_WINDOW-1 is in use.
window_free() {
    local base=$1 p used
    used=$(listening_ports | sort -un)
    if [ -n "$used" ] || command -v ss >/dev/null 2>&1 || command -v netstat >/dev/null 2>&1; then
        while read -r p; do
            [[ $p =~ ^[0-9]+$ ]] || continue
            if [ "$p" -ge "$base" ] && [ "$p" -lt $((base + PORT_WINDOW)) ]; then
                return 1
            fi
        done <<<"$used"
        return 0
    fi
    ! port_in_use "$base" && ! port_in_use $((base + 1))
}

choose_port_base() {
    local base
    if [ -n "${LONGTAIL_SLURM_PORT_BASE:-}" ]; then
        base=$LONGTAIL_SLURM_PORT_BASE
        if ! [[ $base =~ ^[0-9]+$ ]] || [ "$base" -lt 1024 ] ||
           [ $((base + PORT_WINDOW)) -gt 65536 ]; then
            die "LONGTAIL_SLURM_PORT_BASE=$base: need 1024 <= base <= $((65536 - PORT_WINDOW))"
        fi
        window_free "$base" ||
            die "ports $base-$((base + PORT_WINDOW - 1)) (LONGTAIL_SLURM_PORT_BASE) are partly in use"
        printf '%s\n' "$base"
        return 0
    fi
    for ((base = DEFAULT_PORT_BASE; base + PORT_WINDOW <= 65536; base += PORT_WINDOW)); do
        if window_free "$base"; then
            printf '%s\n' "$base"
            return 0
        fi
    done
    die "no free window of $PORT_WINDOW TCP ports found above $DEFAULT_PORT_BASE; set LONGTAIL_SLURM_PORT_BASE"
}

resolve_ipv4() {
    getent ahostsv4 "$1" 2>/dev/null | awk 'NR == 1 { print $1 }'
}

# choose_address NODE: set node_addr and comm_params.  Slurm's NoInAddrAny /
# NoCtldInAddrAny bind to the address the host name resolves to; use them
# (and that address as NodeAddr) only when it is a loopback address, so that
# the unauthenticated daemons are not reachable from other machines.
choose_address() {
    local short=$1 full ip_short ip_full
    full=$(hostname)
    ip_short=$(resolve_ipv4 "$short")
    ip_full=$(resolve_ipv4 "$full")
    if [ -n "${LONGTAIL_SLURM_NODE_ADDR:-}" ]; then
        node_addr=$LONGTAIL_SLURM_NODE_ADDR
    elif [[ $ip_short == 127.* ]]; then
        node_addr=$ip_short
    else
        node_addr=127.0.0.1
    fi
    if [[ $node_addr == 127.* ]] && [ "$ip_short" = "$node_addr" ] &&
       [ "$ip_full" = "$node_addr" ]; then
        comm_params="CommunicationParameters=NoCtldInAddrAny,NoInAddrAny"
        listen_desc="listening on $node_addr only"
    else
        comm_params="# CommunicationParameters left at the default (listen on all addresses): host name $full resolves to ${ip_full:-nothing}, NodeAddr is $node_addr"
        listen_desc="listening on ALL addresses"
        msg "warning: host name $full resolves to ${ip_full:-nothing}, not to a loopback address;"
        msg "warning: the daemons (auth/none: no authentication!) will listen on all addresses"
    fi
}

sed_escape() {
    printf '%s' "$1" | sed -e 's/[\\|&]/\\&/g'
}

render_config() {
    local template_dir template node cpus mem_kb mem_mb base
    template_dir=${LONGTAIL_SLURM_TEMPLATE_DIR:-$(cd "$script_dir/.." && pwd)/etc/slurm}
    template=$template_dir/slurm.conf.in
    [ -r "$template" ] || die "template not found: $template (set LONGTAIL_SLURM_TEMPLATE_DIR)"

    node=$(hostname -s)
    [ -n "$node" ] || die "hostname -s returned nothing"
    choose_address "$node"
    cpus=$(nproc)
    mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
    mem_mb=$((mem_kb * 9 / 10 / 1024))   # leave 10% so slurmd never sees "low memory"
    [ "$mem_mb" -gt 0 ] || mem_mb=1
    base=$(choose_port_base)

    local tmp=$conf.tmp.$$
    sed -e "s|@CLUSTER_NAME@|longtail-local|g" \
        -e "s|@SLURM_DIR@|$(sed_escape "$dir")|g" \
        -e "s|@NODE_NAME@|$(sed_escape "$node")|g" \
        -e "s|@NODE_ADDR@|$(sed_escape "$node_addr")|g" \
        -e "s|@COMMUNICATION_PARAMETERS@|$(sed_escape "$comm_params")|g" \
        -e "s|@CPUS@|$cpus|g" \
        -e "s|@REAL_MEMORY@|$mem_mb|g" \
        -e "s|@SLURMCTLD_PORT@|$base|g" \
        -e "s|@SLURMD_PORT@|$((base + 1))|g" \
        -e "s|@SRUN_PORT_MIN@|$((base + 2))|g" \
        -e "s|@SRUN_PORT_MAX@|$((base + PORT_WINDOW - 1))|g" \
        "$template" >"$tmp"
    if grep -n '^[^#]*@[A-Z_]*@' "$tmp" >&2; then
        rm -f "$tmp"
        die "unsubstituted @VARIABLES@ left in $template (see above)"
    fi
    mv -f "$tmp" "$conf"
    # Keep Slurm from reading the system's plugstack.conf (SPANK plugins).
    : >"$conf_dir/plugstack.conf"

    node_name=$node
    msg "config: $conf (node $node, $cpus CPUs, ${mem_mb} MB, ports $base-$((base + PORT_WINDOW - 1)), $listen_desc)"
}

log_tails() {
    local name f
    for name in slurmctld slurmd; do
        # <name>.out has the daemon's stderr: the same messages as its log
        # file, plus whatever it printed before it could open the log file.
        f=$log_dir/$name.log
        [ -s "$f" ] || f=$log_dir/$name.out
        [ -s "$f" ] || continue
        printf '%s: ---- last lines of %s ----\n' "$prog" "$f" >&2
        tail -n 20 "$f" | sed 's/^/    /' >&2
    done
}

# start_daemon NAME ARGS...: start NAME in the foreground mode (-D) in its own
# session, detached from our stdin/stdout, and wait for its pid file.
start_daemon() {
    local name=$1 bin pid i
    shift
    bin=$(command -v "$name")
    rm -f "$run_dir/$name.pid"
    # SLURM_CONF also reaches slurmstepd and thus the jobs.
    SLURM_CONF=$conf setsid "$bin" -D -f "$conf" "$@" \
        </dev/null >>"$log_dir/$name.out" 2>&1 &
    pid=$!
    disown "$pid"   # no "Killed" job report from this shell on "down"
    # The daemon writes its own pid file (SlurmctldPidFile/SlurmdPidFile).
    # setsid does not fork here (a background job of a non-interactive shell
    # is no process group leader), so $! is the daemon itself; record it
    # right away so that "down" can stop it even if it hangs early.
    printf '%s\n' "$pid" >"$run_dir/$name.pid"
    for ((i = 0; i < 50; i++)); do
        is_our_daemon "$pid" "$name" && break
        if ! kill -0 "$pid" 2>/dev/null; then
            msg "$name exited right after start: $(tail -n 1 "$log_dir/$name.out" 2>/dev/null)"
            return 1
        fi
        sleep 0.1
    done
    if ! is_our_daemon "$pid" "$name"; then
        # setsid did fork after all: trust the pid file the daemon wrote.
        local p
        for ((i = 0; i < 50; i++)); do
            if read -r p <"$run_dir/$name.pid" 2>/dev/null && is_our_daemon "$p" "$name"; then
                pid=$p
                break
            fi
            sleep 0.1
        done
        is_our_daemon "$pid" "$name" || { msg "cannot find the pid of $name"; return 1; }
        printf '%s\n' "$pid" >"$run_dir/$name.pid"
    fi
    msg "started $name (pid $pid)"
}

wait_for_idle() {
    local deadline state last='' now
    deadline=$((SECONDS + wait_timeout))
    msg "waiting up to ${wait_timeout}s for node $node_name to become idle (sinfo -h -o %T)"
    while :; do
        daemon_pid slurmctld >/dev/null || { msg "slurmctld died"; return 1; }
        daemon_pid slurmd >/dev/null || { msg "slurmd died"; return 1; }
        state=$(timeout 10 sinfo -h -o %T 2>/dev/null | head -n 1) || state=
        [ "$state" = idle ] && return 0
        now=$SECONDS
        if [ "$state" != "$last" ] || [ $((now % 5)) -eq 0 ]; then
            msg "  node state: ${state:-<no answer from slurmctld yet>}"
            last=$state
        fi
        if [ "$now" -ge "$deadline" ]; then
            msg "timed out after ${wait_timeout}s waiting for node $node_name (last state: ${state:-none})"
            return 1
        fi
        sleep 1
    done
}

print_env() {
    printf 'export SLURM_CONF=%q\n' "$conf"
}

# ---------------------------------------------------------------- commands

cmd_up() {
    if all_up; then
        msg "already up (slurmctld pid $(daemon_pid slurmctld), slurmd pid $(daemon_pid slurmd))"
        print_env
        return 0
    fi
    if daemon_pid slurmctld >/dev/null || daemon_pid slurmd >/dev/null; then
        die "cluster in $dir is only partly running; run '$prog down --dir $dir' first"
    fi
    [ "$(id -u)" -eq 0 ] ||
        die "must run as root: slurmctld and slurmd run as SlurmUser=root/SlurmdUser=root (uid $(id -u))"
    need_cmd slurmctld slurmd sinfo squeue scontrol scancel srun sbatch
    command -v setsid >/dev/null || die "setsid not found (util-linux)"

    [[ $dir != *[[:space:]]* ]] ||
        die "the private directory must not contain white space (slurm.conf cannot quote paths): '$dir'"
    mkdir -p "$dir" "$conf_dir" "$run_dir" "$log_dir" "$dir/state" "$dir/spool" "$dir/tmp"
    chmod 700 "$dir"
    : >"$dir/$MARKER"
    rm -f "$ctld_pidfile" "$slurmd_pidfile"
    render_config

    local ok=1
    start_daemon slurmctld || ok=0
    if [ "$ok" = 1 ]; then
        start_daemon slurmd -N "$node_name" || ok=0
    fi
    if [ "$ok" = 1 ]; then
        wait_for_idle || ok=0
    fi
    if [ "$ok" = 0 ]; then
        log_tails
        msg "startup failed; stopping what was started (logs kept in $log_dir)"
        cmd_down_inner
        exit 1
    fi
    msg "cluster up: partition debug, node $node_name idle; state in $dir"
    print_env
}

cmd_env() {
    all_up || die "private cluster in $dir is not up (run '$prog up')"
    print_env
}

cmd_status() {
    local name pid rc=0
    printf 'private dir: %s\n' "$dir"
    printf 'config:      %s\n' "$conf"
    for name in slurmctld slurmd; do
        if pid=$(daemon_pid "$name"); then
            printf '%-10s   running (pid %s)\n' "$name:" "$pid"
        else
            printf '%-10s   not running\n' "$name:"
            rc=1
        fi
    done
    if [ "$rc" = 0 ]; then
        grep -E '^(SlurmctldPort|SlurmdPort|SrunPortRange)=' "$conf" | sed 's/^/             /'
        timeout 10 sinfo 2>/dev/null || true
    fi
    return "$rc"
}

cancel_jobs() {
    local ids i
    ids=$(timeout 10 squeue -h -o %F 2>/dev/null | sort -u) || ids=
    [ -n "$ids" ] || return 0
    msg "cancelling jobs: ${ids//$'\n'/ }"
    # shellcheck disable=SC2086 # word splitting of the id list is intended
    timeout 10 scancel $ids 2>/dev/null || true
    for ((i = 0; i < 20; i++)); do
        ids=$(timeout 10 squeue -h -o %i 2>/dev/null) || ids=
        [ -z "$ids" ] && return 0
        sleep 0.5
    done
    msg "warning: jobs still listed after scancel: ${ids//$'\n'/ }"
}

cmd_down_inner() {
    local ctld_pid slurmd_pid leftovers
    ctld_pid=$(daemon_pid slurmctld) || ctld_pid=
    slurmd_pid=$(daemon_pid slurmd) || slurmd_pid=
    if [ -n "$ctld_pid" ] && [ -n "$slurmd_pid" ]; then
        cancel_jobs
    fi
    if [ -n "$ctld_pid$slurmd_pid" ] && [ "$(id -u)" -ne 0 ]; then
        die "must run as root to stop the daemons"
    fi
    # Remember the job processes before slurmd goes away.
    leftovers=$(job_processes)
    [ -z "$slurmd_pid" ] || terminate slurmd "$STOP_TIMEOUT" "$slurmd_pid"
    [ -z "$ctld_pid" ] || terminate slurmctld "$STOP_TIMEOUT" "$ctld_pid"
    leftovers=$(printf '%s\n%s\n' "$leftovers" "$(job_processes)" | sort -un | grep . || true)
    if [ -n "$leftovers" ]; then
        # shellcheck disable=SC2086 # one pid per word
        # slurmstepd ignores TERM once its slurmd is gone: short grace.
        terminate "leftover job processes" 3 $leftovers
    fi
    rm -f "$ctld_pidfile" "$slurmd_pidfile"
}

cmd_down() {
    if [ ! -d "$dir" ]; then
        msg "nothing to do: $dir does not exist"
        return 0
    fi
    cmd_down_inner
    if [ "$purge" = 1 ]; then
        if [ -e "$dir/$MARKER" ]; then
            rm -rf -- "$dir"
            msg "removed $dir"
        else
            msg "not removing $dir: it was not created by $prog (no $MARKER)"
        fi
    else
        msg "stopped; logs kept in $log_dir"
    fi
}

node_name=
node_addr=
comm_params=
listen_desc=
case $cmd in
    up) cmd_up ;;
    down) cmd_down ;;
    env) cmd_env ;;
    status) cmd_status ;;
esac
