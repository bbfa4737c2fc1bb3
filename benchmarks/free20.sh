#!/usr/bin/env bash
# Free clock, 20 seeds, on each networked runtime: complete and zero errors each time?
# usage: benchmarks/free20.sh REPO OUTDIR   (docs/measurements/network.md; needs mosquitto, Docker and the image)
set -u
repo=$1; out=$2; mkdir -p "$out"
M="$repo/.venv/bin/meshcast"
export MESHCAST_STATE_DIR=/tmp/free20-state
common=(--topology mesh:4x4 --algorithm vh --random-dests 3 --clock free --json)
check() {  # label seed file rc
  python3 - "$1" "$2" "$3" "$4" <<'PY'
import json, sys
label, seed, path, rc = sys.argv[1:]
try:
    d = json.load(open(path))
    errs = len(d.get("errors", []))
    ok = rc == "0" and d["run"]["complete"] and errs == 0
    print(f"{label} seed {seed}: exit {rc} complete={d['run']['complete']} errors={errs} wall_s={d['run']['wall_s']:.2f} {'OK' if ok else 'FAIL'}")
except Exception as e:
    print(f"{label} seed {seed}: FAIL no result ({e})")
PY
}
run_set() {  # label extra-args...
  label=$1; shift
  t0=$(date +%s)
  for s in $(seq 1 20); do
    "$M" run "${common[@]}" --seed "$s" "$@" > "$out/$label-$s.json" 2> "$out/$label-$s.err"
    rc=$?
    check "$label" "$s" "$out/$label-$s.json" "$rc"
  done
  echo "$label: $(( $(date +%s) - t0 )) s for 20 runs"
}
cd "$repo"
date -u
run_set processes --runtime processes
"$M" deploy --runtime processes --topology mesh:4x4 --name f20-processes > "$out/deploy-p.log" 2>&1 || { echo "deploy processes failed"; cat "$out/deploy-p.log"; }
run_set dep-processes --deployment f20-processes
"$M" destroy f20-processes >> "$out/deploy-p.log" 2>&1
"$M" deploy --runtime containers --topology mesh:4x4 --name f20-containers > "$out/deploy-c.log" 2>&1 || { echo "deploy containers failed"; cat "$out/deploy-c.log"; }
run_set dep-containers --deployment f20-containers
"$M" destroy f20-containers >> "$out/deploy-c.log" 2>&1
run_set containers --runtime containers
date -u
