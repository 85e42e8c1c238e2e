#!/usr/bin/env bash
# `kopt profile --script` of a launch-bound module script: its tracer pass,
# then its bare run (two runs, the faster kept), against eager vs graph
# replay measured bare. GPU machine, target/release/kopt and
# libkopt_tracer.so carried. Usage: profile_bare.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
kopt=$PWD/target/release/kopt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/card.txt"
python3 "$here/chain_module.py" > "$out/measured.json"
"$kopt" profile --script "$here/chain_module.py" --module chain --profile-top 2 \
  --runs-dir "$out/runs" --db "$out/h.db" -q -f json -o "$out/profile.json" 2> "$out/profile.log"
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import json, sys
out = sys.argv[1]
m = json.load(open(f"{out}/measured.json"))
r = json.load(open(f"{out}/profile.json"))
g = (r.get("timeline") or {}).get("graph_prediction") or {}
rec = next((x for x in r["recommendations"] if x["id"] == "capture_cuda_graph"), None)
p = (rec or {}).get("predicted_speedup")
print(f"chain: measured {m['speedup']:.2f}x (eager {m['eager_us']:.1f} us, graph {m['graph_us']:.1f} us) | "
      f"kopt profile: {p['estimate']:.2f}x [{p['low']:.2f}, {p['high']:.2f}]" if p else "kopt profile: no graph recommendation",
      f"bare={g.get('eager_measured_bare')} eager {g.get('eager_corrected_per_step_ns', 0)/1e3:.1f} us graph {g.get('graph_per_step_ns', 0)/1e3:.1f} us")
PY
rm -rf "$out/runs" "$out/h.db"
