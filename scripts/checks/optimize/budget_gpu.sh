#!/usr/bin/env bash
# kopt optimize --budget on two transformers (#37): GPT-2 prefill (bf16)
# and a BERT-base encoder (fp32), each with a 120 s budget; the wall time
# of each whole command, its report and log into OUT.
#   bash budget_gpu.sh OUT KOPT [BUDGET]   (the tracer library next to KOPT)
# BUDGET `default` passes no --budget (kopt's default run). MODULES: other
# module scripts (paths), e.g. MODULES=llama_1b.py for the 1B-class run.
set -u
out=${1:?OUT}; kopt=${2:?KOPT}; budget=${3:-120}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"; out=$(cd "$out" && pwd)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/card.txt"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' >> "$out/card.txt"
flag=(--budget "$budget"); limit=$budget
[ "$budget" = default ] && { flag=(); limit=120; }
read -r -a modules <<< "${MODULES:-$here/../ops/gpt2_prefill.py $here/bert_encoder.py}"
for m in "${modules[@]}"; do
  [ -f "$m" ] || m=$here/$m
  name=$(basename "$m" .py); t0=$(date +%s)
  timeout $(( limit + 60 )) "$kopt" optimize --script "$m" --module Model "${flag[@]}" \
    -f json -o "$out/$name.optimize.json" > "$out/$name.log" 2>&1
  echo "$name exit $? $(( $(date +%s) - t0 ))s" >> "$out/card.txt"
done
