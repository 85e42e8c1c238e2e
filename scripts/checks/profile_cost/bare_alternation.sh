#!/usr/bin/env bash
# Is a step timed in the traced process, after the tracer stopped and CUPTI
# detached, as fast as one timed in a process CUPTI never attached to?
# Alternates, N times per model, (a) a bare run as kopt ran it before #38
# (kopt's tracer as NVTX injection only, timing the kopt_step ranges) and
# (b) a traced run whose driver times its steps in process afterwards
# (`bare_out=`); prints each process's mean step (ms, after 3 warm-up
# steps) and the medians. Writes OUT/alternation.tsv and OUT/card.txt.
#   bash bare_alternation.sh OUT KOPT_DIR N MODEL...
set -uo pipefail
out=${1:?OUT}; kdir=$(cd "${2:?KOPT_DIR}" && pwd); n=${3:?N}; shift 3
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
adv=$repo/scripts/checks/advice
mkdir -p "$out"; out=$(cd "$out" && pwd)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__)'; } > "$out/card.txt" 2>&1
work=$(mktemp -d)
cp "$repo"/crates/kopt-collect/python/kopt_profile_driver.py "$repo"/crates/kopt-collect/python/kopt_module.py "$work/"
cd "$work"
export ADVICE_DIR=$adv
cupti=$(ls /usr/local/cuda/lib64/libcupti.so* 2>/dev/null | head -1)
mean() { python3 -c '
import json, sys
s = sorted(json.loads(l)["s"] for l in open(sys.argv[1]) if l.strip())
p = [b - a for a, b in zip(s, s[1:])][3:]
print("%.3f" % (sum(p) / len(p) / 1e6))' "$1" 2>/dev/null || echo failed; }
printf "model\trun\tseparate_bare_ms\tin_process_ms\n" > "$out/alternation.tsv"
for m in "$@"; do
  for i in $(seq "$n"); do
    rm -f a.jsonl b.jsonl t.jsonl*
    ADVICE_MODEL=$m NVTX_INJECTION64_PATH=$kdir/libkopt_tracer.so KOPT_BARE_STEPS_OUT=a.jsonl KOPT_BARE_STEPS_RANGE=kopt_step \
      timeout 120 python3 kopt_profile_driver.py "$adv/module.py" "$m" 3 20 > /dev/null 2>&1
    ADVICE_MODEL=$m CUDA_INJECTION64_PATH=$kdir/libkopt_tracer.so NVTX_INJECTION64_PATH=$cupti KOPT_TRACE_OUT=t.jsonl \
      LD_LIBRARY_PATH=/usr/local/cuda/lib64 timeout 120 python3 kopt_profile_driver.py "$adv/module.py" "$m" 3 20 ops "bare_out=$PWD/b.jsonl" > /dev/null 2>&1
    printf "%s\t%s\t%s\t%s\n" "$m" "$i" "$(mean a.jsonl)" "$(mean b.jsonl)" | tee -a "$out/alternation.tsv"
  done
done
python3 - "$out/alternation.tsv" <<'PY' | tee -a "$out/alternation.tsv"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
for m in dict.fromkeys(r["model"] for r in rows):
    v = lambda k: [float(r[k]) for r in rows if r["model"] == m and r[k] not in ("failed", "")]
    a, b = v("separate_bare_ms"), v("in_process_ms")
    if a and b:
        print("# %s: median separate %.3f ms, in process %.3f ms, ratio %.3f" % (m, statistics.median(a), statistics.median(b), statistics.median(b) / statistics.median(a)))
PY
