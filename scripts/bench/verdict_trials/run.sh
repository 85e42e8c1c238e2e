#!/usr/bin/env bash
# Issue 5's evidence on the GPU machine: a compute-bound kernel (vk.cu) and
# two variants, 10% less and 3% more work, each benchmarked against the
# baseline TRIALS times by `kopt bench`; counts of KEEP / MARGINAL / REVERT and
# the wall time of every verdict. TIMING: reported (the samples vk prints,
# CUDA events) or gpu (kopt's tracer, one NVTX range per repetition).
#   scripts/bench/verdict_trials/run.sh OUT_DIR [TIMING] [TRIALS]
set -uo pipefail
OUT=${1:?usage: run.sh OUT_DIR [reported|gpu] [TRIALS]}; TIMING=${2:-reported}; TRIALS=${3:-20}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../.." && pwd); KOPT=$ROOT/target/release/kopt
T=$(mktemp -d); mkdir -p "$OUT"
nvcc -O3 -arch=sm_90 -o "$T/vk" "$HERE/vk.cu" || { echo "nvcc failed"; exit 1; }
NVTX=""; [ "$TIMING" = gpu ] && NVTX="--nvtx"
"$T/vk" --reps 5 | head -2
RES="$OUT/verdicts_$TIMING.jsonl"; : > "$RES"
for trial in $(seq 1 "$TRIALS"); do
  for variant in faster10:0.90 slower3:1.03; do
    name=${variant%%:*}; scale=${variant##*:}
    t0=$(date +%s.%N)
    "$KOPT" bench --timing "$TIMING" --seed "$trial" --max-time 4 --db "$T/history.db" --format json \
      --baseline "$T/vk --scale 1.00 $NVTX" --candidate "$T/vk --scale $scale $NVTX" \
      > "$T/b.json" 2> "$T/b.err"; rc=$?
    t1=$(date +%s.%N)
    python3 - "$T/b.json" "$name" "$trial" "$rc" "$t0" "$t1" >> "$RES" <<'PY' || { echo "trial $trial $name: rc=$rc"; tail -3 "$T/b.err"; }
import json, sys
path, name, trial, rc, t0, t1 = sys.argv[1:]
v = json.load(open(path))["variants"]
c = v[1]
print(json.dumps({"variant": name, "trial": int(trial), "rc": int(rc), "seconds": float(t1) - float(t0),
    "verdict": c["verdict"]["kind"], "speedup": c["speedup_vs_first"], "interval": c["ratio_interval"],
    "samples": [v[0]["samples"], c["samples"]], "source": v[0]["source"]}))
PY
  done
done
python3 - "$RES" "$TIMING" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"timing source: {rows[0]['source'] if rows else '-'}")
print("| variant | trials | KEEP | MARGINAL | REVERT | speed-up (median) | verdict seconds (median / max) |")
print("|---|--:|--:|--:|--:|--:|--:|")
for name in ("faster10", "slower3"):
    r = [x for x in rows if x["variant"] == name]
    if not r: continue
    cnt = lambda k: sum(1 for x in r if x["verdict"] == k)
    sp = sorted(x["speedup"] for x in r); s = sorted(x["seconds"] for x in r)
    print(f"| {name} | {len(r)} | {cnt('KEEP')} | {cnt('MARGINAL')} | {cnt('REVERT')} | {sp[len(sp)//2]:.3f}x | {s[len(s)//2]:.2f} / {s[-1]:.2f} |")
PY
