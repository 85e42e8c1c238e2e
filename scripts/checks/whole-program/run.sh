#!/usr/bin/env bash
# The whole-program suite (#35) on a GPU machine:
#   bash scripts/checks/whole-program/run.sh OUT [KOPT_DIR]
# Each workload of workloads.py in its own process (suite.py: bare times of
# the baseline and every fix, then a torch.profiler trace of the baseline),
# then `kopt profile --script train_module.py` (the training form) timed
# against the module's own run. KOPT_DIR holds kopt and libkopt_tracer.so.
set -uo pipefail
export PYTHONUNBUFFERED=1
out=${1:?OUT}
kdir=$(cd "${2:-.gpu-train}" 2>/dev/null && pwd)
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"; out=$(cd "$out" && pwd)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/card.txt"
python3 -c 'import torch; print("torch", torch.__version__)' >> "$out/card.txt"
cd "$here"
for w in $(python3 -c 'import workloads; print(" ".join(workloads.WORKLOADS))'); do
  timeout 90 python3 suite.py "$w" "$out" 2>&1 | tail -3
done
if [ -n "$kdir" ] && [ -x "$kdir/kopt" ]; then
  work=$(mktemp -d)
  t0=$(date +%s.%N)
  python3 - <<'PY' "$here/train_module.py"
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
model = m.Model().cuda().train(); opt = m.get_optimizer(model)
xs = [x.cuda() for x in m.get_inputs()]
for _ in range(30): m.train_step(model, xs, opt)
torch.cuda.synchronize()
PY
  t1=$(date +%s.%N)
  (cd "$work" && timeout 150 "$kdir/kopt" profile -q --script "$here/train_module.py" --runs-dir runs --db h.db \
     -f json -o "$out/train_module.profile.json" > "$out/train_module.profile.log" 2>&1; echo "exit $?" >> "$out/train_module.profile.log")
  t2=$(date +%s.%N)
  python3 -c "import sys; a,b,c=map(float,sys.argv[1:]); print(f'own run (30 steps, one process) {b-a:.1f} s; kopt profile --script {c-b:.1f} s')" "$t0" "$t1" "$t2" | tee "$out/train_module.timing.txt"
  run=$(ls -td "$work"/runs/*/ | head -1)
  "$kdir/kopt" analyze "$run" --width 120 > "$out/train_module.profile.txt" 2>&1
  (cd "$run" && tar czf "$out/train_module.run.tgz" --exclude='*.py' --exclude='sitecustomize*' .)
fi
# The device's copy-back takes 8 files: everything in one tarball.
(cd "$out" && tar czf ../training-suite.tgz . && mv ../training-suite.tgz . && find . -type f ! -name training-suite.tgz -delete)
ls -la "$out"
