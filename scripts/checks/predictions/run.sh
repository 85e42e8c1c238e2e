#!/usr/bin/env bash
# Graph-capture predictions against measurements (issue 14), GPU machine,
# target/release/kopt and libkopt_tracer.so carried. Usage: run.sh OUT_DIR
# OUT_DIR gets card.txt, measured.jsonl, summary.txt and predictions.tgz
# (kopt traces, torch.profiler traces, every report).
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out/w"
here=$(cd "$(dirname "$0")" && pwd)
kopt=$PWD/target/release/kopt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/card.txt"
cd "$out/w"
python3 "$here/workloads.py" replay_cost | tee -a ../measured.jsonl
for w in moe mlp decode matmuls; do
  steps=60; [ "$w" = matmuls ] && steps=25
  python3 "$here/workloads.py" $w measure | tee -a ../measured.jsonl
  "$kopt" trace --runs-dir runs --db h.db -q -f json -o $w.kopt.json -- python3 "$here/workloads.py" $w steps $steps 2> $w.trace.log
  run=$(ls -td runs/*/ | head -1)
  cp "${run}trace.jsonl" $w.trace.jsonl
  # The bare run kopt trace made (launch-bound steps only).
  [ -f "${run}bare_steps.jsonl" ] && cp "${run}bare_steps.jsonl" $w.bare_steps.jsonl
  python3 "$here/workloads.py" $w profile $w.pt.trace.json
  "$kopt" analyze $w.pt.trace.json -f json -o $w.torch.json 2> $w.analyze.log
done
python3 - <<'PY' | tee ../summary.txt
import json
m = {}
for line in open("../measured.jsonl"):
    d = json.loads(line)
    if "workload" in d:
        m[d["workload"]] = d
for w in ["moe", "mlp", "decode", "matmuls"]:
    row = [w, f"measured {m[w]['speedup']:.2f}x (eager {m[w]['eager_us']:.1f} us, graph {m[w]['graph_us']:.1f} us)"]
    for src in ["kopt", "torch"]:
        try:
            r = json.load(open(f"{w}.{src}.json"))
        except Exception as e:
            row.append(f"{src}: no report ({e})")
            continue
        rec = next((x for x in r["recommendations"] if x["id"] == "capture_cuda_graph"), None)
        p = (rec or {}).get("predicted_speedup")
        t = r.get("timeline") or {}
        g = t.get("graph_prediction") or {}
        bare = " bare-run" if g.get("eager_measured_bare") else ""
        row.append(f"{src}: " + (f"{p['estimate']:.2f}x [{p['low']:.2f}, {p['high']:.2f}]{bare}" if p else "no graph recommendation") + f" (busy {t.get('busy_pct', 0):.1f}%, primary {r['primary']['type'] if r.get('primary') else '-'})")
    print(" | ".join(row))
PY
rm -rf runs h.db
cd "$out" && tar czf predictions.tgz w && rm -rf w
