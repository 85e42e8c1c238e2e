#!/usr/bin/env bash
# kopt bench on a PyTorch workload with kopt's tracer as the timing source:
# seed 000's MoE step eager (baseline) vs replayed from a CUDA graph
# (candidate), one NVTX range per step; `--timing auto` must pick GPU time
# per NVTX range. Prints the ablation table last.
#   scripts/bench/graph_ab.sh OUT_DIR  (needs target/release/{kopt,libkopt_tracer.so})
set -uo pipefail
OUT=${1:?usage}; ROOT=$(cd "$(dirname "$0")/../.." && pwd); KOPT=$ROOT/target/release/kopt
mkdir -p "$OUT"; M="python3 $ROOT/scripts/examples/moe_route.py --iters 50 --nvtx"
t0=$(date +%s.%N)
"$KOPT" bench --db "$OUT/history.db" --format json -o "$OUT/graph_ab.json" -n "eager=$M" -n "graph=$M --graph"; rc=$?
t1=$(date +%s.%N)
echo "kopt bench rc=$rc, $(python3 -c "print(round($t1-$t0,1))") s"
python3 - "$OUT/graph_ab.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))["variants"]
print("timed by:", v[0]["source"])
print("| version | median per step | speed-up vs first | samples | noise | verdict |")
print("|---|--:|--:|--:|--:|---|")
for x in v:
    print(f"| {x['name']} | {x['median_s']*1e6:.2f} us | {x['speedup_vs_first']:.2f}x | {x['samples']} | {100*(x['relative_noise'] or 0):.2f}% | {(x.get('verdict') or {}).get('kind', 'baseline')} |")
PY
