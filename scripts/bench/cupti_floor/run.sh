#!/usr/bin/env bash
# CUPTI's own cost per launch on this GPU (no kopt): cupti_floor.cu in every
# collection mode, ROUNDS processes each, interleaved; prints a table.
#   scripts/bench/cupti_floor/run.sh OUT_DIR   (ROUNDS=3 PAIRS=15 CFGS="...")
set -uo pipefail
OUT=${1:?usage}; D=$(cd "$(dirname "$0")" && pwd); mkdir -p "$OUT"; T=$(mktemp -d)
CU=/usr/local/cuda
nvcc -O2 -arch=sm_90 -I$CU/include -I$CU/extras/CUPTI/include "$D/cupti_floor.cu" -o "$T/cf" \
  -L$CU/lib64 -L$CU/extras/CUPTI/lib64 -lcupti -Xlinker -rpath -Xlinker $CU/lib64 || exit 1
CFGS=${CFGS:-pure ck ck_pinned cb_launch kernel}
: > "$OUT/cupti_floor.jsonl"
for r in $(seq "${ROUNDS:-3}"); do
  for c in $CFGS; do "$T/cf" "$c" "${PAIRS:-15}" >> "$OUT/cupti_floor.jsonl" 2> "$T/err_$c" || { echo "$c failed:"; cat "$T/err_$c"; }; done
done
python3 - "$OUT/cupti_floor.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows: by.setdefault(r["cfg"], []).append(r)
med = lambda v: sorted(v)[len(v) // 2]
print(f"CUPTI API version {rows[0]['cupti_api']}")
print("Loop of 10,000 launches + sync, us per launch (median over processes):")
print("| collection | before first enable | off | on | on - off (median of pairs, per process) | + % of before |")
print("|---|--:|--:|--:|---|--:|")
for c, rs in by.items():
    b, off, on = (med([r[k] for r in rs]) for k in ("before_us", "off_us", "on_us"))
    d = [r["diff_us"] for r in rs]
    print(f"| {c} | {b:.3f} | {off:.3f} | {on:.3f} | {', '.join(f'{x:+.3f}' for x in d)} | {100*(on/b-1):+.1f}% |")
print()
print("1,000 launches queued behind a 20 ms spin kernel: host enqueue and GPU time per kernel, us (before / on / after off):")
print("| collection | host enqueue | GPU per kernel | kernel records / launches |")
print("|---|---|---|---|")
for c, rs in by.items():
    e = [med([r["enqueue_us"][i] for r in rs]) for i in range(3)]
    g = [med([r["gpu_us"][i] for r in rs]) for i in range(3)]
    print(f"| {c} | {' / '.join(f'{x:.3f}' for x in e)} | {' / '.join(f'{x:.3f}' for x in g)} | {rs[0]['kernel_records']} / {rs[0]['expected_launches']} |")
PY
