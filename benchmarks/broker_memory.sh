#!/usr/bin/env bash
# The deployment broker's memory over many runs: RSS of mosquitto after run 1, 10, 50 and 100.
# usage: benchmarks/broker_memory.sh REPO [RUNS]   (docs/measurements/network.md; needs mosquitto)
set -eu
repo=$1; runs=${2:-100}
M="$repo/.venv/bin/meshcast"
export MESHCAST_STATE_DIR=${MESHCAST_STATE_DIR:-/tmp/broker-memory-state}
"$M" destroy bm >/dev/null 2>&1 || true
"$M" deploy --runtime processes --topology torus:4x4 --name bm >/dev/null
pid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['broker_pid'])" "$MESHCAST_STATE_DIR/bm/deployment.json")
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
date -u
echo "broker pid $pid, RSS before any run: $(rss) kB"
fails=0
for i in $(seq 1 "$runs"); do
  "$M" run --deployment bm --topology torus:4x4 --algorithm vh,dp --random-dests 5 --repeat 3 --seed "$i" >/dev/null 2>&1 || fails=$((fails + 1))
  case $i in 1|10|50|100|200) echo "after run $i: RSS $(rss) kB (failed runs so far: $fails)";; esac
done
"$M" destroy bm >/dev/null
date -u
