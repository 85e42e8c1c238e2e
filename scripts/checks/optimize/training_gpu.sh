#!/usr/bin/env bash
# kopt optimize on a GPU, two cases last session left unchecked:
#  - a training-form module (for-loop Adam CNN): the fused/foreach optimizer
#    candidates judged and timed;
#  - an inference module with a host sync in its forward: graph capture fails,
#    FAIL with its reason, the other candidates still judged.
#   bash training_gpu.sh OUT KOPT   (the tracer library next to KOPT)
set -u
out=${1:?OUT}; kopt=${2:?KOPT}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"; out=$(cd "$out" && pwd)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/card.txt"
python3 -c 'import torch; print("torch", torch.__version__)' >> "$out/card.txt"
t0=$(date +%s)
timeout 280 "$kopt" optimize --script "$here/../whole-program/train_module.py" --module Model \
  --skip compile-max-autotune --skip compile-max-autotune-graph \
  -f json -o "$out/train_module.optimize.json" > "$out/train_module.log" 2>&1
echo "train_module exit $? $(( $(date +%s) - t0 ))s" >> "$out/card.txt"
t0=$(date +%s)
timeout 200 "$kopt" optimize --script "$here/item_in_forward.py" --module Model \
  --candidate graph --candidate tf32 --candidate compile \
  -f json -o "$out/item_in_forward.optimize.json" > "$out/item_in_forward.log" 2>&1
echo "item_in_forward exit $? $(( $(date +%s) - t0 ))s" >> "$out/card.txt"
