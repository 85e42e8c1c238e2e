#!/usr/bin/env bash
# `kopt optimize --script` on the advice suite's models (issue 24), on a GPU
# machine. KOPT_DIR holds kopt, libkopt_tracer.so, zoo.py and measure.py
# (copied from scripts/checks/advice, used read-only) and this folder's
# files.
#   bash suite.sh OUT [MODEL...]
# First measure.py (every fix bare, the best measured single fix) on the
# MEASURE models (default: all given) in one process; then per model
# `kopt optimize --script MODEL.py` (a module script per model built from
# zoo.py) with the timeline-only baseline (STEPS steps, default 5),
# --allow-precision, the compile forms skipped (SKIP, minutes of Inductor a
# model), a small bench budget (MAX_TIME s a harness run, default 3). Also
# `kopt trace` of graph_replay.py (a graph-replaying program) first
# (TRACE=0 leaves it out). BUDGET (s, default 530) stops starting models
# once less than MIN_LEFT (s, default 45) is left. VERIFY (models) then
# runs `kopt profile --verify VERIFY_N (default 2) --profile-top 5` on each
# (ncu counters, the bare run, the top recommendations with an automatic fix
# measured), under the same budget. Everything lands in OUT as one tarball,
# opt-results.tgz.
set -uo pipefail
out=${1:?OUT}; shift
kdir=$(cd "${KOPT_DIR:?KOPT_DIR}" && pwd)
kopt=$kdir/kopt
budget=${BUDGET:-530}
skip=${SKIP:-compile-reduce-overhead compile-max-autotune compile-max-autotune-graph compile-freezing}
start=$(date +%s)
mkdir -p "$out/m"; out=$(cd "$out" && pwd)
models=("$@")
[ ${#models[@]} -gt 0 ] || mapfile -t models < <(cd "$kdir" && python3 -c 'import zoo; print("\n".join(zoo.MODELS))')
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, torchvision, transformers; print("torch", torch.__version__, "torchvision", torchvision.__version__, "transformers", transformers.__version__)'
  "$kopt" --version; echo "skip: $skip"; } > "$out/card.txt" 2>&1
export PYTHONUNBUFFERED=1 KOPT_TRACER=$kdir/libkopt_tracer.so
work=$(mktemp -d)
cd "$work"
if [ "${TRACE:-1}" = 1 ]; then
  t0=$(date +%s)
  timeout 90 "$kopt" trace -q --timeout 80 --runs-dir truns --db h.db -f json -o "$out/m/graph_replay.trace.json" \
    -- python3 "$kdir/graph_replay.py" 50 > "$out/m/graph_replay.trace.log" 2>&1
  echo "exit $? seconds $(( $(date +%s) - t0 ))" >> "$out/m/graph_replay.trace.log"
  run=$(ls -td truns/*/ 2>/dev/null | head -1)
  [ -n "$run" ] && { "$kopt" analyze "$run" --width 160 > "$out/m/graph_replay.trace.txt" 2>&1
    (cd "$run" && tar czf "$out/m/graph_replay.run.tgz" --exclude='*.py' --exclude='sitecustomize*' .); }
fi
measure=(${MEASURE-${models[@]}})
if [ ${#measure[@]} -gt 0 ]; then
  t0=$(date +%s)
  (cd "$kdir" && timeout 200 python3 measure.py "${measure[@]}") > "$out/m/measured.jsonl" 2> "$out/m/measure.log"
  echo "exit $? seconds $(( $(date +%s) - t0 ))" >> "$out/m/measure.log"
fi
# The model as a module script: kopt copies it into its run folder, so it
# names zoo.py's folder itself.
write_model() {
  cat > "$1.py" <<PY
import sys

import torch

sys.path.insert(0, "$kdir")
import zoo  # noqa: E402

NAME = "$1"


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net, _ = zoo.build(NAME, device="cpu")

    def forward(self, *x):
        return self.net(*x)


def get_inputs():
    return zoo.build_inputs(NAME)
PY
}
skips=(); for s in $skip; do skips+=(--skip "$s"); done
for m in "${models[@]}"; do
  left=$(( budget - ($(date +%s) - start) ))
  [ "$left" -lt "${MIN_LEFT:-45}" ] && { echo "skipped $m: ${left}s left" >> "$out/card.txt"; continue; }
  write_model "$m"
  left=$(( budget - ($(date +%s) - start) ))
  limit=$(( left < 290 ? left : 290 ))
  t0=$(date +%s)
  timeout "$limit" "$kopt" optimize --script "$m.py" --module "$m" --no-counters --allow-precision "${skips[@]}" \
    --steps "${STEPS:-5}" --min-samples 10 --max-time "${MAX_TIME:-3}" --timeout "$(( limit > 125 ? 120 : limit - 5 ))" \
    --runs-dir runs --db h.db --journal-file "$out/m/OPTIMIZATIONS.md" -q \
    -f json -o "$out/m/$m.optimize.json" > "$out/m/$m.optimize.log" 2>&1
  echo "exit $? seconds $(( $(date +%s) - t0 ))" >> "$out/m/$m.optimize.log"
  run=$(ls -td runs/*/ 2>/dev/null | head -1)
  [ -n "$run" ] && (cd "$run" && tar czf "$out/m/$m.run.tgz" --exclude='*.py' --exclude='sitecustomize*' \
    --exclude='trace.jsonl*' --exclude='*.safetensors' . ) 2>/dev/null
  rm -rf runs
done
for m in ${VERIFY:-}; do
  left=$(( budget - ($(date +%s) - start) ))
  [ "$left" -lt "${MIN_LEFT:-45}" ] && { echo "skipped verify $m: ${left}s left" >> "$out/card.txt"; continue; }
  write_model "$m"
  limit=$(( left < 290 ? left : 290 ))
  t0=$(date +%s)
  timeout "$limit" "$kopt" profile --script "$m.py" --module "$m" --verify "${VERIFY_N:-2}" --profile-top 5 \
    --timeout "$(( limit > 125 ? 120 : limit - 5 ))" --runs-dir vruns --db h.db -q \
    -f json -o "$out/m/$m.verify.json" > "$out/m/$m.verify.log" 2>&1
  echo "exit $? seconds $(( $(date +%s) - t0 ))" >> "$out/m/$m.verify.log"
  run=$(ls -td vruns/*/ 2>/dev/null | head -1)
  [ -n "$run" ] && "$kopt" analyze "$run" --width 160 > "$out/m/$m.verify.txt" 2>&1
  rm -rf vruns
done
cd "$out"
echo "total seconds $(( $(date +%s) - start ))" >> card.txt
# Reports, logs and run folders without traces or tensors: small, one tarball.
tar czf opt-results.tgz m
rm -rf m "$work"
ls -la "$out"
