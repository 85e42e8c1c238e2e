#!/usr/bin/env bash
# kopt optimize on three modules (GPU machine, target/release/kopt and
# libkopt_tracer.so carried): seed 000's launch-bound MoE routing step, a
# compute-bound pair of 8192-wide bf16 matmuls, and a forward with .item().
# Usage: scripts/checks/optimize/run.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
kopt=$PWD/target/release/kopt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/card.txt"
python3 -c "import torch; print('torch', torch.__version__)" | tee -a "$out/card.txt"
cd "$out"
for m in moe_routing:topk_sort big_matmuls:Model item_in_forward:Model; do
  script=${m%%:*}; module=${m##*:}
  echo "== $script"
  PYTHONUNBUFFERED=1 "$kopt" optimize --script "$here/$script.py" --module "$module" \
    --runs-dir runs --db history.db --journal-file OPTIMIZATIONS.md --timeout 400 -q \
    -f md -o "$script.md" > "$script.log" 2>&1
  echo "exit $?" >> "$script.log"
  cat "$script.md" 2>/dev/null || tail -20 "$script.log"
done
# What comes back is small: each run's optimize.json, the harness's result
# and log, and the baseline's report (traces and CSVs stay there).
tar czf runs.tgz history.db *.log $(find runs -name optimize.json -o -name result.json -o -name harness.log -o -name report.json) && rm -rf runs history.db *.log
