#!/usr/bin/env bash
# A lab of Docker hosts on one machine: N Docker daemons, each in a network namespace (and a UTS
# namespace: host name labK) of its own, joined by veths to a bridge that lives in a namespace of
# its own too, on a private range (10.213.0.0/24) that exists only inside those namespaces; then
# one swarm over them. Nothing is added to the host's own interfaces, routes or firewall: the
# bridge is not on the host, so the host's iptables FORWARD policy (DROP, set by its Docker) never
# sees the lab's traffic.
#
# Usage: deploy/swarm-lab.sh up N [--image NAME]... [--managers M]
#          N daemons (N >= 1). lab1 runs `swarm init`; lab2..labM join as managers (default M=1),
#          the others as workers. Each --image is moved from the host's main daemon onto every
#          lab host (docker save, then docker -H unix://SOCK load). Prints one line per host:
#          NAME DOCKER_HOST ADDRESS NODE_ID; writes the same to $LAB_DIR/hosts.json and hosts.env.
#        deploy/swarm-lab.sh down     everything of the lab removed; then `check` (idempotent)
#        deploy/swarm-lab.sh check    exits 1 naming each leftover of a lab, 0 when nothing is left
#        deploy/swarm-lab.sh status   what is up
#
# Every host K has: network namespace $LAB_NAME$K (/run/netns), address 10.213.0.K on its eth0,
# its own containerd and dockerd (data, exec root, sockets and logs in $LAB_DIR/labK/), and its
# containers in the cgroup /$LAB_NAME$K. The bridge is labbr0 in namespace $LAB_NAME-hub.
#
# Environment: MESHCAST_SWARM_LAB_DIR   state dir (default /tmp/meshcast-swarm-lab)
#              MESHCAST_SWARM_LAB_NAME  prefix of namespace and cgroup names (default meshcast-lab)
#              MESHCAST_SWARM_LAB_TIMEOUT  seconds each wait may take (default 60)
#              MESHCAST_SWARM_LAB_STORAGE  storage driver (default: the main daemon's, else vfs)
# Needs root, nsenter and unshare (util-linux), ip (iproute2), dockerd, containerd and docker.
set -euo pipefail

LAB_DIR=${MESHCAST_SWARM_LAB_DIR:-/tmp/meshcast-swarm-lab}
LAB_NAME=${MESHCAST_SWARM_LAB_NAME:-meshcast-lab}
TIMEOUT=${MESHCAST_SWARM_LAB_TIMEOUT:-60}
NET=10.213.0          # the lab's /24: host K is $NET.K, inside the namespaces only
HUB=$LAB_NAME-hub     # the namespace of the bridge
MARK=$LAB_DIR/.meshcast-swarm-lab   # up's mark: down removes only a dir that has it
LAB_RE=${LAB_DIR//./[.]}            # LAB_DIR as a regular expression
PROG=${0##*/}

die() { echo "$PROG: error: $*" >&2; exit 1; }
say() { echo "$PROG: $*" >&2; }

# ---------------------------------------------------------------- preconditions

check_names() {
    [[ $LAB_DIR =~ ^/[A-Za-z0-9._/-]+$ ]] \
        || die "MESHCAST_SWARM_LAB_DIR must be an absolute path of [A-Za-z0-9._/-] (got '$LAB_DIR')"
    [ "$LAB_DIR" != / ] || die "MESHCAST_SWARM_LAB_DIR must not be /"
    # unix socket paths are at most 107 bytes; dockerd puts its own below the exec root
    [ ${#LAB_DIR} -le 48 ] || die "MESHCAST_SWARM_LAB_DIR is too long for socket paths (${#LAB_DIR} > 48 chars)"
    [[ $LAB_NAME =~ ^[a-z][a-z0-9-]{0,19}$ ]] \
        || die "MESHCAST_SWARM_LAB_NAME must be [a-z][a-z0-9-], at most 20 chars (got '$LAB_NAME')"
    [[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "MESHCAST_SWARM_LAB_TIMEOUT must be a positive integer"
}

need_root() {
    [ "$(id -u)" = 0 ] || die "not root: the lab creates network namespaces and runs dockerd (run it with sudo)"
}

need_tools() {
    local tool hint
    for tool in "$@"; do
        case $tool in
            nsenter | unshare | setsid) hint="apt-get install util-linux" ;;
            ip) hint="apt-get install iproute2" ;;
            dockerd | docker) hint="apt-get install docker.io" ;;
            containerd) hint="apt-get install containerd (Debian's docker.io depends on it)" ;;
            fuse-overlayfs) hint="apt-get install fuse-overlayfs" ;;
            *) hint="install it" ;;
        esac
        command -v "$tool" >/dev/null 2>&1 || die "missing $tool ($hint)"
    done
}

# ---------------------------------------------------------------- what belongs to the lab

host_dirs() {  # the per-host dirs of the lab's state, lab1 lab2 ... (in a dir up made)
    local d
    [ -f "$MARK" ] || return 0
    for d in "$LAB_DIR"/lab[0-9]*; do [ -d "$d" ] && echo "$d"; done
    return 0
}

lab_netns() {  # the lab's network namespaces that exist
    local name
    ip netns list 2>/dev/null | while read -r name _; do
        case $name in "$LAB_NAME"[0-9]* | "$HUB") echo "$name" ;; esac
    done
    return 0
}

lab_cgroups() {  # the lab's cgroup dirs (v1: one per controller; v2: one), deepest first
    local d
    for d in /sys/fs/cgroup/"$LAB_NAME"[0-9]* /sys/fs/cgroup/*/"$LAB_NAME"[0-9]*; do
        [ -d "$d" ] && find "$d" -depth -type d
    done
    return 0
}

cmdline_pids() {  # processes whose command line names a host's state dir (dockerd, containerd, shims, fuse-overlayfs)
    local files f p
    # grep's own command line names it too: only the processes still there once grep is done count
    files=$(grep -laE -- "$LAB_RE/lab[0-9]+/" /proc/[0-9]*/cmdline 2>/dev/null) || return 0
    for f in $files; do
        p=${f#/proc/}
        p=${p%/cmdline}
        [ -e "$f" ] && echo "$p"
    done
    return 0
}

lab_pids() {  # every process of the lab: by command line, namespace, cgroup, and their descendants
    local ns cg
    {
        cmdline_pids
        for ns in $(lab_netns); do ip netns pids "$ns" 2>/dev/null || true; done
        for cg in $(lab_cgroups); do cat "$cg/cgroup.procs" 2>/dev/null || true; done
    } | sort -un | descendants
}

descendants() {  # stdin: pids; stdout: those still running and all their descendants, but this script
    local seeds
    seeds=$(tr '\n' ' ')
    [ -n "${seeds// /}" ] || return 0
    ps -e -o pid=,ppid= | awk -v seeds="$seeds" -v self="$$" -v subshell="$BASHPID" '
        BEGIN { n = split(seeds, s, " "); for (i = 1; i <= n; i++) seed[s[i]] = 1 }
        { parent[$1] = $2 }
        END {
            for (p in parent) {
                q = p
                for (i = 0; i < 64 && q > 1; i++) {
                    if (q in seed) { if (p != self && p != subshell) print p; break }
                    q = parent[q]
                }
            }
        }' | sort -n
}

lab_mounts() {  # mount points of the lab (under a host's state dir, or its /run/netns entries), deepest first
    awk -v dir="^$LAB_RE/lab[0-9]+(/|\$)" -v ns="^(/var)?/run/netns/$LAB_NAME([0-9]+|-hub)\$" '
        $5 ~ dir || $5 ~ ns { print length($5), $5 }
    ' /proc/self/mountinfo | sort -rn | cut -d' ' -f2- | uniq
}

lab_rules() {  # firewall rules on the host that name the lab (its range, namespaces or links)
    local save
    for save in iptables-save ip6tables-save iptables-legacy-save iptables-nft-save; do
        command -v "$save" >/dev/null 2>&1 || continue
        "$save" 2>/dev/null | grep -E -e "${NET//./\\.}\." -e "$LAB_NAME" | sed "s/^/$save: /" || true
    done
    if command -v nft >/dev/null 2>&1; then
        nft list ruleset 2>/dev/null | grep -E -e "${NET//./\\.}\." -e "$LAB_NAME" | sed 's/^/nft: /' || true
    fi
}

# ---------------------------------------------------------------- up

now_ms() { local t=${EPOCHREALTIME//[!0-9]/}; echo $((10#$t / 1000)); }
lap_start() { T_START=$(now_ms); T_LAP=$T_START; LAPS=""; }
lap() {  # lap NAME: the time since the last lap, in the summary down prints
    local t
    t=$(now_ms)
    LAPS="${LAPS:+$LAPS, }$1 $(((t - T_LAP) / 100 / 10)).$(((t - T_LAP) / 100 % 10)) s"
    T_LAP=$t
}
elapsed() { local t; t=$(now_ms); echo "$(((t - T_START) / 1000)).$(((t - T_START) / 100 % 10))"; }

wait_for() {  # wait_for SECONDS PIDFILE COMMAND...: until COMMAND succeeds (0); 1 on timeout, 2 if PIDFILE's process died
    local secs=$1 pidfile=$2 deadline pid
    shift 2
    deadline=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        pid=$(cat "$pidfile" 2>/dev/null) || pid=""
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then return 2; fi
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.2
    done
}

log_tail() { echo "--- last lines of $1:" >&2; tail -n 25 "$1" >&2 2>/dev/null || true; }

dk() { local h=$1; shift; docker -H "unix://$LAB_DIR/$h/docker.sock" "$@"; }

main_storage_driver() {
    if [ -n "${MESHCAST_SWARM_LAB_STORAGE:-}" ]; then echo "$MESHCAST_SWARM_LAB_STORAGE"; return; fi
    docker info --format '{{.Driver}}' 2>/dev/null || echo vfs
}

start_host() {  # start_host K STORAGE CGROUPDRIVER: the configs of labK and its containerd, in namespace $LAB_NAME$K
    local k=$1 storage=$2 cgdriver=$3 h="$LAB_DIR/lab$1" ns="$LAB_NAME$1" parent
    mkdir -p "$h/data" "$h/exec" "$h/containerd/root" "$h/containerd/state"
    cat >"$h/containerd.toml" <<EOF
version = 2
root = "$h/containerd/root"
state = "$h/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$h/containerd.sock"
[ttrpc]
  address = "$h/containerd.sock.ttrpc"
[debug]
  address = ""
  level = "warn"
[metrics]
  address = ""
EOF
    # cgroupfs: the lab's containers under /$LAB_NAME$K, so that check can find any left behind
    if [ "$cgdriver" = cgroupfs ]; then parent="/$ns"; else parent=""; fi
    cat >"$h/daemon.json" <<EOF
{
  "storage-driver": "$storage",
  "data-root": "$h/data",
  "exec-root": "$h/exec",
  "pidfile": "$h/dockerd.pid",
  "hosts": ["unix://$h/docker.sock"],
  "containerd": "$h/containerd.sock",
  "bridge": "none",${parent:+
  \"cgroup-parent\": \"$parent\",}
  "labels": ["meshcast-lab=lab$k"]
}
EOF
    # containerd: its own (the main daemon's is not shared), in the host's network namespace
    # shellcheck disable=SC2016  # expanded by that sh
    setsid sh -c 'echo $$ >"$0" && exec nsenter --net="$1" -- containerd --config "$2"' \
        "$h/containerd.pid" "/run/netns/$ns" "$h/containerd.toml" </dev/null >"$h/containerd.log" 2>&1 &
}

start_dockerd() {  # start_dockerd K: dockerd of labK, once its containerd listens
    local k=$1 h="$LAB_DIR/lab$1" ns="$LAB_NAME$1"
    # nsenter, not `ip netns exec` (that remounts /sys: "Devices cgroup isn't mounted"); a UTS
    # namespace of its own, so that its swarm node is named lab$k
    # shellcheck disable=SC2016  # expanded by that sh
    setsid nsenter --net="/run/netns/$ns" -- unshare --uts -- \
        sh -c 'hostname "$0" && exec dockerd --config-file "$1"' "lab$k" "$h/daemon.json" \
        </dev/null >"$h/dockerd.log" 2>&1 &
    # setsid does not fork here (a background job is no group leader): $! is dockerd-to-be
    echo $! >"$h/dockerd.launched"
}

make_network() {  # make_network N: the hub namespace with br0, and one namespace per host joined to it
    local n=$1 k ns
    ip netns add "$HUB"
    ip -n "$HUB" link set lo up
    ip -n "$HUB" link add labbr0 type bridge
    ip -n "$HUB" link set labbr0 up
    for k in $(seq 1 "$n"); do
        ns=$LAB_NAME$k
        ip netns add "$ns"
        # created inside the hub, its peer moved straight into the host's namespace: never on the host
        ip -n "$HUB" link add "lab$k" type veth peer name eth0 netns "$ns"
        ip -n "$HUB" link set "lab$k" master labbr0 up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "$NET.$k/24" dev eth0
        ip -n "$ns" link set eth0 up
    done
}

up_failed() {  # up's exit trap: a failed up removes what it made (its error and log tail are printed)
    local status=$?
    [ $status -ne 0 ] || return 0
    say "up failed: removing what it made"
    cmd_down >/dev/null || true
    exit $status
}

cmd_up() {
    local n="" managers=1 images=() k h storage cgdriver token role rc
    while [ $# -gt 0 ]; do
        case $1 in
            --image) [ $# -ge 2 ] || die "--image needs a NAME"; images+=("$2"); shift 2 ;;
            --image=*) images+=("${1#--image=}"); shift ;;
            --managers) [ $# -ge 2 ] || die "--managers needs a number"; managers=$2; shift 2 ;;
            --managers=*) managers=${1#--managers=}; shift ;;
            -*) die "up: unknown option $1 (usage: up N [--image NAME]... [--managers M])" ;;
            *) [ -z "$n" ] || die "up: one host count only (got '$n' and '$1')"; n=$1; shift ;;
        esac
    done
    [[ $n =~ ^[1-9][0-9]*$ ]] || die "up: N must be a host count >= 1 (usage: up N [--image NAME]...)"
    [ "$n" -le 200 ] || die "up: at most 200 hosts"
    if ! [[ $managers =~ ^[1-9][0-9]*$ ]] || [ "$managers" -gt "$n" ]; then die "up: --managers must be 1..N"; fi
    need_root
    need_tools nsenter unshare setsid ip dockerd containerd docker
    if [ -n "$(host_dirs)" ] || [ -n "$(lab_netns)" ] || [ -n "$(cmdline_pids)" ]; then
        die "a lab is already up (or its leftovers are): '$PROG down' first ('$PROG check' names them)"
    fi
    if [ -d "$LAB_DIR" ] && [ ! -f "$MARK" ] && [ -n "$(ls -A "$LAB_DIR")" ]; then
        die "$LAB_DIR is not empty and not a lab's state dir: set MESHCAST_SWARM_LAB_DIR to a new or empty dir"
    fi
    local img
    for img in "${images[@]}"; do
        docker image inspect "$img" >/dev/null 2>&1 \
            || die "image $img is not on the main Docker daemon (build it first, e.g. make image)"
    done
    storage=$(main_storage_driver)
    [ "$storage" != fuse-overlayfs ] || need_tools fuse-overlayfs
    cgdriver=$(docker info --format '{{.CgroupDriver}}' 2>/dev/null || echo cgroupfs)

    lap_start
    trap up_failed EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    mkdir -p "$LAB_DIR"
    echo "the state of deploy/swarm-lab.sh; its down removes this dir" >"$MARK"
    # `ip netns add` makes /run/netns (and a bind mount of it onto itself) when absent: down undoes that
    [ -d /run/netns ] || echo dir >>"$LAB_DIR/run-netns-made"
    mountpoint -q /run/netns 2>/dev/null || echo mount >>"$LAB_DIR/run-netns-made"
    make_network "$n"
    for k in $(seq 1 "$n"); do start_host "$k" "$storage" "$cgdriver"; done
    for k in $(seq 1 "$n"); do
        h="$LAB_DIR/lab$k"
        rc=0
        wait_for "$TIMEOUT" "$h/containerd.pid" test -S "$h/containerd.sock" || rc=$?
        if [ $rc -ne 0 ]; then
            log_tail "$h/containerd.log"
            [ $rc = 2 ] && die "lab$k: containerd exited at start (log above: $h/containerd.log)"
            die "lab$k: containerd did not come up within $TIMEOUT s (log above: $h/containerd.log)"
        fi
        start_dockerd "$k"
    done
    for k in $(seq 1 "$n"); do
        h="$LAB_DIR/lab$k"
        rc=0
        wait_for "$TIMEOUT" "$h/dockerd.launched" dk "lab$k" version || rc=$?
        if [ $rc -ne 0 ]; then
            log_tail "$h/dockerd.log"
            [ $rc = 2 ] && die "lab$k: dockerd exited at start (log above: $h/dockerd.log)"
            die "lab$k: dockerd did not come up within $TIMEOUT s (log above: $h/dockerd.log)"
        fi
    done
    say "$n daemons up in $(elapsed) s"

    dk lab1 swarm init --advertise-addr "$NET.1" --listen-addr "$NET.1:2377" >/dev/null \
        || { log_tail "$LAB_DIR/lab1/dockerd.log"; die "lab1: swarm init failed"; }
    local pids=()
    for k in $(seq 2 "$n"); do
        if [ "$k" -le "$managers" ]; then role=manager; else role=worker; fi
        token=$(dk lab1 swarm join-token -q "$role")
        timeout "$TIMEOUT" docker -H "unix://$LAB_DIR/lab$k/docker.sock" swarm join --token "$token" \
            --advertise-addr "$NET.$k" --listen-addr "$NET.$k:2377" "$NET.1:2377" >/dev/null &
        pids+=($!)
    done
    for k in "${!pids[@]}"; do
        wait "${pids[$k]}" || { log_tail "$LAB_DIR/lab$((k + 2))/dockerd.log"; die "lab$((k + 2)): swarm join failed or timed out ($TIMEOUT s)"; }
    done
    ready() { [ "$(dk lab1 node ls --format '{{.Status}}' | grep -c '^Ready$')" -eq "$n" ]; }
    wait_for "$TIMEOUT" /dev/null ready || {
        dk lab1 node ls >&2 || true
        die "the swarm's $n nodes were not all Ready within $TIMEOUT s"
    }
    local ids=()
    for k in $(seq 1 "$n"); do
        ids+=("$(dk "lab$k" info --format '{{.Swarm.NodeID}}')")
        dk lab1 node update --label-add "lab=lab$k" "${ids[$((k - 1))]}" >/dev/null
    done
    say "swarm of $n nodes ready at $(elapsed) s"

    if [ ${#images[@]} -gt 0 ]; then
        # saved once, loaded by every host at the same time
        docker save -o "$LAB_DIR/images.tar" "${images[@]}" || die "docker save ${images[*]} failed"
        pids=()
        for k in $(seq 1 "$n"); do
            dk "lab$k" load -q -i "$LAB_DIR/images.tar" >/dev/null &
            pids+=($!)
        done
        for k in "${!pids[@]}"; do wait "${pids[$k]}" || die "lab$((k + 1)): docker load of ${images[*]} failed"; done
        rm -f "$LAB_DIR/images.tar"
        say "images loaded on every host at $(elapsed) s: ${images[*]}"
    fi

    IMAGES="${images[*]}" write_hosts "$n" "$managers" "${ids[@]}"
    for k in $(seq 1 "$n"); do
        echo "lab$k unix://$LAB_DIR/lab$k/docker.sock $NET.$k ${ids[$((k - 1))]}"
    done
    say "up in $(elapsed) s; hosts in $LAB_DIR/hosts.json and hosts.env; '$PROG down' removes it"
    trap - EXIT INT TERM
}

write_hosts() {  # write_hosts N MANAGERS NODE_ID...: hosts.json and hosts.env for callers
    local n=$1 managers=$2 k sep="" role ids
    shift 2
    ids=("$@")
    {
        echo "{"
        echo "  \"dir\": \"$LAB_DIR\","
        echo "  \"subnet\": \"$NET.0/24\","
        echo "  \"manager\": \"unix://$LAB_DIR/lab1/docker.sock\","
        printf '  "images": [%s],\n' "$(for i in ${IMAGES:-}; do printf '"%s", ' "$i"; done | sed 's/, $//')"
        echo "  \"hosts\": ["
        for k in $(seq 1 "$n"); do
            if [ "$k" -le "$managers" ]; then role=manager; else role=worker; fi
            printf '%s    {"name": "lab%d", "docker_host": "unix://%s/lab%d/docker.sock", "socket": "%s/lab%d/docker.sock",' \
                "$sep" "$k" "$LAB_DIR" "$k" "$LAB_DIR" "$k"
            printf ' "address": "%s.%d", "node_id": "%s", "role": "%s", "netns": "%s%d", "label": "lab=lab%d"}' \
                "$NET" "$k" "${ids[k - 1]}" "$role" "$LAB_NAME" "$k" "$k"
            sep=$',\n'
        done
        printf '\n  ]\n}\n'
    } >"$LAB_DIR/hosts.json.tmp"
    mv "$LAB_DIR/hosts.json.tmp" "$LAB_DIR/hosts.json"
    {
        echo "LAB_DIR=$LAB_DIR"
        echo "LAB_HOSTS=\"$(for k in $(seq 1 "$n"); do printf 'lab%d ' "$k"; done | sed 's/ $//')\""
        echo "LAB_MANAGER=unix://$LAB_DIR/lab1/docker.sock"
        # every host's endpoint, comma-separated: the swarm runtime's MESHCAST_SWARM_HOSTS
        echo "LAB_DOCKER_HOSTS=$(for k in $(seq 1 "$n"); do printf 'unix://%s/lab%d/docker.sock,' "$LAB_DIR" "$k"; done | sed 's/,$//')"
        for k in $(seq 1 "$n"); do
            echo "LAB${k}_DOCKER_HOST=unix://$LAB_DIR/lab$k/docker.sock"
            echo "LAB${k}_ADDRESS=$NET.$k"
            echo "LAB${k}_NODE_ID=${ids[k - 1]}"
        done
    } >"$LAB_DIR/hosts.env"
}

# ---------------------------------------------------------------- down


signal_and_wait() {  # signal_and_wait SECONDS PID...: SIGTERM, wait, then SIGKILL what is left
    local secs=$1 p deadline left
    shift
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null || true
    deadline=$((SECONDS + secs))
    while :; do
        left=()
        for p in "$@"; do [ -d "/proc/$p" ] && left+=("$p"); done
        [ ${#left[@]} -gt 0 ] || return 0
        if [ $SECONDS -ge $deadline ]; then
            [ -n "${QUIET:-}" ] || say "killing ${left[*]} (still running after SIGTERM and $secs s)"
            kill -KILL "${left[@]}" 2>/dev/null || true
            sleep 0.5
            return 0
        fi
        sleep 0.2
    done
}

pid_of() {  # pid_of FILE: the pid in FILE, if that process is running and names the state dir
    local p
    p=$(cat "$1" 2>/dev/null) || return 0
    [[ $p =~ ^[0-9]+$ ]] || return 0
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF "$LAB_DIR/" && echo "$p"
    return 0
}

remove_services() {  # remove_services DOCKER_HOST: every service, if that host is a manager (best effort)
    local host=$1 ids
    timeout 10 docker -H "$host" info --format '{{.Swarm.ControlAvailable}}' 2>/dev/null | grep -q true || return 0
    ids=$(timeout 10 docker -H "$host" service ls -q 2>/dev/null) || ids=""
    # shellcheck disable=SC2086  # one argument per service
    [ -z "$ids" ] || timeout 20 docker -H "$host" service rm $ids >/dev/null 2>&1 || true
}

quiesce() {  # quiesce DOCKER_HOST: one lab host's containers killed (best effort)
    local host=$1 ids
    ids=$(timeout 10 docker -H "$host" ps -aq 2>/dev/null) || ids=""
    # shellcheck disable=SC2086  # one argument per container
    [ -z "$ids" ] || timeout 20 docker -H "$host" rm -f $ids >/dev/null 2>&1 || true
}

cmd_down() {
    check_names
    need_root
    need_tools ip
    local h pids m ns cg
    lap_start
    # 1. while the daemons answer: services removed (on the managers), then every container killed
    #    (SIGKILL: no stop timeout to wait for; the hosts in parallel), so that nothing of theirs
    #    is mounted or running when the daemons stop
    for h in $(host_dirs); do
        [ ! -S "$h/docker.sock" ] || remove_services "unix://$h/docker.sock"
    done
    pids=()
    for h in $(host_dirs); do
        if [ -S "$h/docker.sock" ]; then quiesce "unix://$h/docker.sock" & pids+=($!); fi
    done
    # these jobs only: a failed up's daemons are this shell's background jobs too
    for m in "${pids[@]}"; do wait "$m" || true; done
    lap emptied
    # 2. the daemons, then their containerds. A swarm node's dockerd takes 6-8 s to stop (leaving
    #    the swarm or not: it waits for the ingress network's removal), which an empty lab host that
    #    is about to vanish does not need: SIGKILL after 2 s; what it leaves, 3-5 remove
    pids=()
    for h in $(host_dirs); do m=$(pid_of "$h/dockerd.pid"); [ -z "$m" ] || pids+=("$m"); done
    QUIET=1 signal_and_wait 2 "${pids[@]}"
    lap dockerd
    pids=()
    for h in $(host_dirs); do m=$(pid_of "$h/containerd.pid"); [ -z "$m" ] || pids+=("$m"); done
    signal_and_wait 15 "${pids[@]}"
    lap containerd
    # 3. anything else of the lab still running: shims, container processes, fuse-overlayfs
    mapfile -t pids < <(lab_pids)
    signal_and_wait 10 "${pids[@]}"
    lap rest
    # 4. mounts left below the state dir (layers, namespace files) and the lab's /run/netns entries
    for m in $(lab_mounts); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "cannot unmount $m"
    done
    # 5. the namespaces: their veths, bridge, vxlan devices and firewall rules go with them
    for ns in $(lab_netns); do ip netns del "$ns" 2>/dev/null || say "cannot delete namespace $ns"; done
    lap "mounts+namespaces"
    if [ -f "$LAB_DIR/run-netns-made" ] && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
        if grep -qx mount "$LAB_DIR/run-netns-made"; then umount /run/netns 2>/dev/null || true; fi
        if grep -qx dir "$LAB_DIR/run-netns-made"; then rmdir /run/netns 2>/dev/null || true; fi
    fi
    # 6. the containers' cgroups (empty now), the state dir, the shims' sockets
    for cg in $(lab_cgroups); do rmdir "$cg" 2>/dev/null || true; done
    if [ -f "$MARK" ]; then
        pids=()  # the hosts' image layers, in parallel (seconds each for the node image)
        for h in $(host_dirs); do rm -rf --one-file-system "$h" 2>/dev/null & pids+=($!); done
        for m in "${pids[@]}"; do wait "$m" || true; done
        # the mark last: what cannot be removed keeps it, and check names the dir
        find "$LAB_DIR" -mindepth 1 -maxdepth 1 ! -name "${MARK##*/}" -exec rm -rf --one-file-system {} + 2>/dev/null || true
        if [ -z "$(find "$LAB_DIR" -mindepth 1 -maxdepth 1 ! -name "${MARK##*/}" -print -quit)" ]; then
            rm -f "$MARK"
            rmdir "$LAB_DIR" 2>/dev/null || say "cannot remove $LAB_DIR"
        else
            say "cannot remove all of $LAB_DIR"
        fi
    elif [ -d "$LAB_DIR" ]; then
        say "$LAB_DIR has no ${MARK##*/}: not a lab's state dir, left as it is"
    fi
    lap files
    say "down in $(elapsed) s ($LAPS)"
    cmd_check
}

# ---------------------------------------------------------------- check, status

cmd_check() {
    check_names
    need_root
    local found=() p line
    for p in $(lab_pids); do
        line=$(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | cut -c1-160) || continue
        [ -n "$line" ] && found+=("process $p: $line")
    done
    for line in $(lab_netns); do found+=("network namespace $line"); done
    for line in /run/netns/"$LAB_NAME"[0-9]* /run/netns/"$HUB"; do
        [ -e "$line" ] && found+=("namespace file $line")
    done
    while read -r line; do [ -z "$line" ] || found+=("mount $line"); done < <(lab_mounts)
    while read -r line; do
        [ -z "$line" ] || found+=("host link: $line")
    done < <(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | grep -E "^(lab[0-9]+(@|$)|labbr0$|$LAB_NAME)" || true)
    while read -r line; do
        [ -z "$line" ] || found+=("host address: $line")
    done < <(ip -o addr show 2>/dev/null | grep -F " $NET." | awk '{print $2, $4}' || true)
    while read -r line; do [ -z "$line" ] || found+=("rule $line"); done < <(lab_rules)
    for line in $(lab_cgroups); do found+=("cgroup $line"); done
    [ ! -e "$MARK" ] || found+=("directory $LAB_DIR (with ${MARK##*/})")
    if [ ${#found[@]} -eq 0 ]; then
        echo "nothing of the lab is left (processes, namespaces, links, addresses, mounts, rules, cgroups, $LAB_DIR)"
        return 0
    fi
    for line in "${found[@]}"; do echo "leftover: $line"; done
    return 1
}

cmd_status() {
    check_names
    need_root
    local h name p state
    if [ -z "$(host_dirs)" ] && [ -z "$(lab_netns)" ]; then
        echo "no lab is up (no state in $LAB_DIR, no namespace $LAB_NAME*)"
        return 0
    fi
    for h in $(host_dirs); do
        name=${h##*/}
        p=$(pid_of "$h/dockerd.pid")
        if [ -n "$p" ] && state=$(timeout 10 docker -H "unix://$h/docker.sock" info \
            --format '{{.Name}} swarm={{.Swarm.LocalNodeState}} node={{.Swarm.NodeID}} containers={{.ContainersRunning}} images={{.Images}}' 2>/dev/null); then
            echo "$name: dockerd $p up: $state (unix://$h/docker.sock)"
        else
            echo "$name: dockerd not running or not answering (unix://$h/docker.sock)"
        fi
    done
    echo "namespaces: $(lab_netns | tr '\n' ' ')"
    if [ -S "$LAB_DIR/lab1/docker.sock" ]; then
        timeout 10 docker -H "unix://$LAB_DIR/lab1/docker.sock" node ls 2>/dev/null || true
    fi
}

check_names
case ${1:-} in
    up) shift; cmd_up "$@" ;;
    down) [ $# -eq 1 ] || die "down takes no arguments"; cmd_down ;;
    check) [ $# -eq 1 ] || die "check takes no arguments"; cmd_check ;;
    status) [ $# -eq 1 ] || die "status takes no arguments"; cmd_status ;;
    *) sed -n '9,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
