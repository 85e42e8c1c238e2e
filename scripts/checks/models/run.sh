#!/usr/bin/env bash
# Real models against kopt's findings (GPU machine; target/release/kopt and
# target/release/libkopt_tracer.so carried). One or more parts per call
# (resnet256 alone fills most of a 600 s call):
#   scripts/checks/models/run.sh OUT resnet256   kopt profile --ops of
#       ResNet-50 at batch 256 (cuDNN benchmark on): warm-up trials left out,
#       BW at or below the peak, batch-norm folding; then eager vs folded, bare.
#   scripts/checks/models/run.sh OUT resnet1     kopt trace of ResNet-50 at
#       batch 1 and eager vs graph replay, bare.
#   scripts/checks/models/run.sh OUT gpt2        GPT-2 prefill eager vs
#       torch.compile, bare (the elementwise-chain finding's prediction is
#       in fixtures/ops-gpt2-h200); gpt2pad: the same with the vocabulary
#       padded to 50304 (Inductor pads GEMMs itself, so compile's gain on
#       the unpadded model includes the padding fix).
#   scripts/checks/models/run.sh OUT bn256       ResNet-50 at batch 256
#       eager vs batch norm folded, channels_last, both (bare); compile256:
#       eager vs channels_last vs torch.compile with freezing.
set -uo pipefail
out=${1:?OUT_DIR}
[ $# -ge 2 ] || { echo "usage: $0 OUT_DIR PART... (resnet256, resnet1, gpt2, gpt2pad, bn256, compile256)" >&2; exit 2; }
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
kopt=$PWD/target/release/kopt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/card.txt"
cd "$out"
for part in "$@"; do
case $part in
resnet256)
  # Bounded so the folding measurement still fits the call.
  KOPT_BATCH=256 timeout 440 "$kopt" profile --script "$here/resnet50.py" --module resnet50_b256 \
    --ops --profile-top 12 --runs-dir runs --db h.db -q --timeout 300 \
    -f json -o resnet256.report.json --html resnet256.html > resnet256.log 2>&1
  echo "exit $?" >> resnet256.log
  run=$(ls -td runs/*/ | head -1)
  "$kopt" analyze "$run" --width 120 > resnet256.txt 2>&1 || true
  tar czf resnet256.run.tgz -C "$run" . 2>/dev/null
  timeout 100 python3 "$here/measure.py" bn 256 > bn_measured.json 2> bn.log
  ;;
resnet1)
  "$kopt" trace --runs-dir runs --db h.db -q --timeout 200 -f json -o resnet1.report.json \
    -- python3 "$here/measure.py" steps 1 60 > resnet1.log 2>&1
  echo "exit $?" >> resnet1.log
  run=$(ls -td runs/*/ | head -1)
  gzip -9c "$run/trace.jsonl" > resnet1.trace.jsonl.gz 2>/dev/null
  cp "$run/bare_steps.jsonl" resnet1.bare_steps.jsonl 2>/dev/null
  timeout 200 python3 "$here/measure.py" graph 1 > graph_measured.json 2> graph.log
  ;;
gpt2)
  timeout 500 python3 "$here/measure.py" compile > compile_measured.json 2> compile.log
  ;;
gpt2pad)
  timeout 300 python3 "$here/measure.py" compile 50304 > compile_padded_measured.json 2> compile_padded.log
  ;;
bn256)
  timeout 150 python3 "$here/measure.py" bn 256 > bn_measured.json 2> bn.log
  ;;
compile256)
  timeout 400 python3 "$here/measure.py" compile_resnet 256 > compile_resnet_measured.json 2> compile_resnet.log
  ;;
*)
  echo "unknown part $part" >&2
  exit 2
  ;;
esac
rm -rf runs h.db
done
ls -la "$out"
