#!/usr/bin/env bash
# Every deployment figure (first asked for by issue #13), in one run, each step timed and logged (README, "Measured on
# this machine"). From the checkout, after `make compiled` and `make image`:
#
#     benchmarks/deploy_figures.sh [OUTDIR]        (default /tmp/deploy-figures-<date>)
#
# OUTDIR gets bench.json (`meshcast bench --large --json`), malani/ (the reproduction and its
# /usr/bin/time line), and one log line per deployment run: 1,024 and 256 node processes, 64 node
# containers five times in a pod (`--network pod`; set here through its fallback
# MESHCAST_CONTAINER_NETWORK, which deploy_bench.py's runs read) and twice each on the host's and
# the compose network (`bridge`, the runtime's default), 256 containers in a pod.
# Nothing here asserts: it prints what it measured and says where each figure came from.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/deploy-figures-$(date -u +%Y%m%d-%H%M)}
mkdir -p "$out"
py=.venv/bin/python
log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" | tee -a "$out/log.txt"; }
step() {  # step NAME COMMAND...: run it, its output to OUTDIR/NAME.txt, its last line to the log
    local name=$1
    shift
    log "start $name: $*"
    "$@" >"$out/$name.txt" 2>&1
    local rc=$?
    log "end $name (rc $rc): $(tail -n 1 "$out/$name.txt")"
}
changed=$(git diff --quiet HEAD -- node coordinator || echo ' +uncommitted')
build=$(find node -name '*.so' | grep -q . && echo compiled || echo plain)
log "commit $(git rev-parse --short HEAD)$changed, build: $build"
log "relay chain: $($py benchmarks/relay_cost.py 2>&1 | tail -n 1)"
log "start bench: .venv/bin/meshcast bench --large --json"
.venv/bin/meshcast bench --large --json >"$out/bench.json" 2>"$out/bench.err"
log "end bench (rc $?): $out/bench.json"
rm -rf "$out/malani"
step malani /usr/bin/time -f '%e s wall, %U+%S CPU-s, %M KB max RSS' \
    .venv/bin/meshcast reproduce malani --algorithms diag,dist,pair,min --out "$out/malani"
step processes-1024 $py benchmarks/deploy_bench.py processes torus:32x32 300
step processes-256 $py benchmarks/deploy_bench.py processes torus:16x16 300
export MESHCAST_BROKER_IMAGE=${MESHCAST_BROKER_IMAGE:-meshcast-local/meshcast:latest}
for i in 1 2 3 4 5; do  # a pod: the fastest start (the default, bridge, is measured below)
    MESHCAST_CONTAINER_NETWORK=pod step "containers-64-pod-$i" \
        $py benchmarks/deploy_bench.py containers torus:8x8 300
done
n=0
for net in host bridge host bridge; do
    n=$((n + 1))
    MESHCAST_CONTAINER_NETWORK=$net step "containers-64-$net-$n" \
        $py benchmarks/deploy_bench.py containers torus:8x8 300
done
MESHCAST_CONTAINER_NETWORK=pod step containers-256-pod $py benchmarks/deploy_bench.py containers torus:16x16 120
log "done: $out"
