#!/usr/bin/env bash
# kopt optimize's harness, one candidate after the other (#37), on a GPU
# machine: first seed 000's MoE routing step and the .item() forward run
# whole (their verdicts against the committed fixtures: graph capture kept
# at 3x or more on the MoE step, a failed capture on the .item() forward);
# then a BERT-base encoder stopped with SIGTERM at STOP_AT seconds (default
# 60): what the run folder keeps. The max-autotune forms are skipped (minutes
# of Inductor a model). MODULES (default the two above) may be empty.
# Everything comes back as results.tgz.
#   bash stop_gpu.sh OUT KOPT   (libkopt_tracer.so next to KOPT)
set -u
out=${1:?OUT}; kopt=$(cd "$(dirname "${2:?KOPT}")" && pwd)/$(basename "$2")
stop_at=${STOP_AT:-60}   # one or more seconds, space-separated
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"; out=$(cd "$out" && pwd)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  "$kopt" --version; } > "$out/card.txt" 2>&1
export PYTHONUNBUFFERED=1 KOPT_TRACER=$(dirname "$kopt")/libkopt_tracer.so
skip=(--skip compile-max-autotune --skip compile-max-autotune-graph)
cd "$out"
for m in ${MODULES-moe_routing:topk_sort item_in_forward:Model}; do
  script=${m%%:*}; module=${m##*:}; t0=$(date +%s)
  "$kopt" optimize --script "$here/$script.py" --module "$module" "${skip[@]}" \
    --runs-dir runs --db history.db --journal-file OPTIMIZATIONS.md --timeout 300 -q \
    -f json -o "$script.optimize.json" > "$script.log" 2>&1
  echo "$script exit $? $(( $(date +%s) - t0 ))s" >> card.txt
done
for at in $stop_at; do
  t0=$(date +%s)
  timeout -s TERM "$at" "$kopt" optimize --script "$here/bert_encoder.py" --module Model "${skip[@]}" \
    --runs-dir "runs-stop-$at" --db history.db --journal-file OPTIMIZATIONS.md -q \
    -f json -o "bert_stopped_$at.optimize.json" > "bert_stopped_$at.log" 2>&1
  echo "bert_encoder SIGTERM at ${at}s: exit $? $(( $(date +%s) - t0 ))s" >> card.txt
  sleep 6
  for f in $(find "runs-stop-$at" -name optimize.json); do cp "$f" "bert_stopped_$at.run-folder.optimize.json"; done
  for f in $(find "runs-stop-$at" -name result.json); do cp "$f" "bert_stopped_$at.$(basename "$(dirname "$f")").result.json"; done
done
python3 -c 'import sqlite3; [print(r) for r in sqlite3.connect("history.db").execute("select id, kind, verdict, summary from runs")]' > history.txt 2>&1
find runs runs-stop-* -name optimize.json -o -name result.json -o -name harness.log 2>/dev/null > kept.txt
tar czf results.tgz *.json *.log *.txt $(cat kept.txt) 2>/dev/null
rm -rf runs runs-stop-* *.json *.log history.db OPTIMIZATIONS.md kept.txt
cat card.txt
