#!/usr/bin/env bash
# kopt trace's bare run over each NVTX form (nvtx_forms.cu): the steps it
# timed and whether the prediction used them. GPU machine, target/release/kopt
# and libkopt_tracer.so carried. Usage: nvtx_forms.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
kopt=$PWD/target/release/kopt
nvcc -o "$out/nvtx_forms" "$here/nvtx_forms.cu" 2>&1 | tee "$out/summary.txt"
for form in wide registered startend; do
  "$kopt" trace --runs-dir "$out/runs" --db "$out/h.db" -q -f json -o "$out/$form.json" \
    -- "$out/nvtx_forms" $form 2> "$out/$form.log"
  run=$(ls -td "$out"/runs/*/ | head -1)
  n=$(cat "${run}bare_steps.jsonl" 2>/dev/null | wc -l)
  python3 - "$out/$form.json" "$form" "$n" <<'PY' | tee -a "$out/summary.txt"
import json, sys
r = json.load(open(sys.argv[1]))
t = r.get("timeline") or {}
g = t.get("graph_prediction") or {}
s = t.get("steps") or {}
print(f"{sys.argv[2]}: steps {s.get('source')} {s.get('family')} {s.get('found')}; bare lines {sys.argv[3]}; used {g.get('eager_measured_bare')}")
PY
done
rm -rf "$out/runs" "$out/h.db" "$out/nvtx_forms"
