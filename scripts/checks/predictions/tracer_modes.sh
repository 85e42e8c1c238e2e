#!/usr/bin/env bash
# Where the tracer's cost in a PyTorch step comes from (issue 14): the decode
# step (308 framework ops, 56 kernels) and the MLP, timed by themselves (CUDA
# events, steady state) bare and under kopt trace with each KOPT_TRACER_APIS
# mode, in interleaved rounds; then one `all` run per workload whose
# api_counts line says how many runtime and driver calls a step makes.
# GPU machine, target/release/kopt and libkopt_tracer.so carried.
# Usage: scripts/checks/predictions/tracer_modes.sh OUT_DIR [ROUNDS]
set -uo pipefail
out=${1:?OUT_DIR}
rounds=${2:-2}
mkdir -p "$out/w"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
kopt=$PWD/target/release/kopt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/card.txt"
cd "$out/w"
steps=300
for r in $(seq "$rounds"); do
  for w in decode mlp; do
    KOPT_MODE=bare python3 "$here/workloads.py" $w timed $steps ../timed.jsonl
    for mode in select callbacks off; do
      KOPT_MODE=$mode KOPT_TRACER_APIS=$mode "$kopt" trace --runs-dir runs --db h.db -q \
        -f json -o $w.$mode.json -- python3 "$here/workloads.py" $w timed $steps ../timed.jsonl \
        2> $w.$mode.log
      cp "$(ls -td runs/*/ | head -1)trace.jsonl" $w.$mode.trace.jsonl
    done
  done
done
for w in decode mlp; do
  KOPT_MODE=all KOPT_TRACER_APIS=all "$kopt" trace --runs-dir runs --db h.db -q \
    -f json -o $w.all.json -- python3 "$here/workloads.py" $w timed $steps ../timed.jsonl 2> $w.all.log
  cp "$(ls -td runs/*/ | head -1)trace.jsonl" $w.all.trace.jsonl
done
python3 - "$steps" <<'PY' | tee ../summary.txt
import collections, json, statistics, sys
steps = int(sys.argv[1])
t = collections.defaultdict(list)
for line in open("../timed.jsonl"):
    d = json.loads(line)
    t[(d["workload"], d["mode"])].append(d["step_us"])
for w in ["decode", "mlp"]:
    bare = statistics.median(t[(w, "bare")])
    kernels = sum(1 for l in open(f"{w}.select.trace.jsonl") if '"t":"kernel"' in l) / steps
    row = [f"{w}: {kernels:.0f} kernels/step, bare {bare:.1f} us"]
    for m in ["select", "callbacks", "off", "all"]:
        v = statistics.median(t[(w, m)]) if t[(w, m)] else float("nan")
        row.append(f"{m} {v:.1f} us (+{(v - bare) / kernels:.2f} us/kernel)")
    print(" | ".join(row))
    for l in open(f"{w}.all.trace.jsonl"):
        if '"t":"api_counts"' in l:
            c = json.loads(l)["calls"]
            top = sorted(c.items(), key=lambda x: -x[1])[:12]
            print(f"  {w} calls/step (all {steps} steps): {sum(c.values()) / steps:.0f} total; "
                  + ", ".join(f"{k} {v / steps:.1f}" for k, v in top))
    preds = []
    for m in ["select", "callbacks", "off"]:
        try:
            r = json.load(open(f"{w}.{m}.json"))
            rec = next((x for x in r["recommendations"] if x["id"] == "capture_cuda_graph"), None)
            p = (rec or {}).get("predicted_speedup")
            preds.append(f"{m} {p['estimate']:.2f}x" if p else f"{m} none")
        except Exception as e:
            preds.append(f"{m} no report ({e})")
    print("  predicted graph speed-up (last round):", ", ".join(preds))
    print("  rounds:", {m: [round(x, 1) for x in t[(w, m)]] for m in ["bare", "select", "callbacks", "off", "all"]})
PY
rm -rf runs h.db
cd "$out" && tar czf modes.tgz w && rm -rf w
