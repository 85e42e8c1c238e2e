#!/usr/bin/env bash
# kopt's in-process gate against gaming candidates, on a CUDA GPU:
#   scripts/checks/gate/run.sh OUT_DIR [WHEEL]
# Needs python3 with torch (CUDA) and triton (for the do_bench comparison).
# Installs the kopt wheel (default: the newest in target/wheels) offline
# into a scratch folder on PYTHONPATH, runs suite.py (every candidate's
# verdict, seconds per verdict against do_bench and torch.utils.benchmark),
# then `kopt bench --script` on module scripts (an honest and a cached
# candidate). Writes gate_suite.{json,md}, suite.log, cli_*.txt, card.txt.
set -uo pipefail
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run.sh OUT_DIR [WHEEL]}
mkdir -p "$out"
wheel=${2:-$(ls -1t target/wheels/kopt-*.whl 2>/dev/null | head -n 1)}
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$wheel" || exit 1
export PYTHONPATH=$site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/card.txt"
python3 -c "import torch; print(torch.__version__, torch.version.cuda); import triton; print('triton', triton.__version__)" 2>&1 | tee "$out/versions.txt"
python3 "$here/suite.py" "$out" 2>&1 | tee "$out/suite.log"
status=${PIPESTATUS[0]}
for cand in fused cached; do
  start=$SECONDS
  python3 -m kopt bench --script "$here/module_base.py" --candidate-script "$here/module_$cand.py" \
    --python python3 2>&1 | tee "$out/cli_$cand.txt"
  echo "exit ${PIPESTATUS[0]}, $((SECONDS - start)) s" | tee -a "$out/cli_$cand.txt"
done
exit "$status"
