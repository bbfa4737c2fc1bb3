#!/usr/bin/env bash
# SIGCONT to a clean run (issue 44): stop node (1,1) of deployment $1 (kind $2: processes or
# containers, mesh:4x4) for 3 s, continue it, and time a run started at once; three tries.
# Usage: MESHCAST_STATE_DIR=... PATH=.venv/bin:$PATH bash benchmarks/sigcont_clean_run.sh NAME KIND
stop() { if [ "$2" = processes ]; then kill -$3 $(python -c "from coordinator.runtimes import deployments as d; print(d.load('$1').nodes['1,1']['pid'])"); else docker kill --signal=$3 $(docker ps -q --filter label=com.docker.compose.project=meshcast-d-$1 --filter label=com.docker.compose.service=node-1-1) >/dev/null; fi; }
for i in 1 2 3; do
  stop $1 $2 STOP; sleep 3; stop $1 $2 CONT
  t0=$(date +%s.%N)
  meshcast run --deployment $1 --topology mesh:4x4 --algorithm vh --source 0,0 --dests '3,3 0,3 3,0 2,2' --json > "${TMPDIR:-/tmp}/sc.json" 2>"${TMPDIR:-/tmp}/sc.err"; rc=$?
  t1=$(date +%s.%N)
  echo "$2 try $i: rc=$rc complete=$(python -c "import json; print(json.load(open('"${TMPDIR:-/tmp}/sc.json"'))['run']['complete'])" 2>/dev/null) SIGCONT-to-clean-run $(python -c "print(round($t1-$t0,2))") s"
done
