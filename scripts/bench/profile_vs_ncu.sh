#!/usr/bin/env bash
# Issue 3's evidence, run on the GPU machine: wall time of the labeled suite
#   alone, under `kopt profile`, under `ncu --set full` and `ncu --set basic`,
# and whether `kopt profile` gives every planted kernel the class that
# `kopt analyze` gives it on the --set full capture.
#   scripts/bench/profile_vs_ncu.sh OUT_DIR      (needs target/release/kopt)
set -uo pipefail
OUT=${1:?usage: profile_vs_ncu.sh OUT_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KOPT=$ROOT/target/release/kopt
SUITE=$ROOT/scripts/capture/labeled_suite/suite.py
BUDGET=${BUDGET:-570}          # seconds this script may use in all
T=$(mktemp -d)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
START=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
now() { date +%s.%N; }
: > "$OUT/timings.tsv"
time_it() {  # name timeout cmd...
  local name=$1 limit=$2; shift 2
  local t0 t1 rc
  t0=$(now); timeout "$limit" "$@" > "$T/$name.log" 2>&1; rc=$?; t1=$(now)
  printf "%s\t%s\t%s\n" "$name" "$rc" "$(awk "BEGIN{printf \"%.1f\", $t1-$t0}")" | tee -a "$OUT/timings.tsv"
  [ $rc -eq 0 ] || tail -5 "$T/$name.log"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"

time_it alone 120 python3 "$SUITE"
time_it kopt_profile 300 "$KOPT" profile --runs-dir "$T/runs" --quiet --format json -o "$OUT/profile_report.json" -- python3 "$SUITE"
RUN=$(ls -d "$T"/runs/* 2>/dev/null | head -1)
if [ -n "$RUN" ]; then
  cp "$RUN/run.json" "$OUT/profile_run.json"
  cp "$RUN/pass1-timing.csv" "$OUT/profile_pass1_timing.csv" 2>/dev/null
  cp "$RUN/pass2-targeted.csv" "$OUT/profile_pass2_targeted.csv" 2>/dev/null
  tail -3 "$RUN"/*.log
fi
"$KOPT" analyze "$RUN" --width 150 > "$T/profile_report.txt" 2>&1
if ! grep -q "^kopt_profile	0	" "$OUT/timings.tsv"; then
  echo "kopt profile failed: stopping before the long ncu runs"; cat "$T/kopt_profile.log"
  for f in "$RUN"/*.log; do echo "== $f"; tail -15 "$f"; done
  exit 1
fi

L=$(( $(left) - 60 )); [ $L -gt 30 ] || L=30
time_it ncu_set_full "$L" ncu -f -o "$T/full" --set full python3 "$SUITE"
if [ -f "$T/full.ncu-rep" ]; then
  "$KOPT" analyze "$T/full.ncu-rep" --format json -o "$OUT/full_report.json" 2> "$T/full_analyze.err" || cat "$T/full_analyze.err"
fi
L=$(( $(left) - 15 ))
if [ $L -gt 100 ]; then
  time_it ncu_set_basic "$L" ncu -f -o "$T/basic" --set basic python3 "$SUITE"
else
  printf "ncu_set_basic\tskipped\t-\n" | tee -a "$OUT/timings.tsv"
fi

echo
echo "== kopt profile report (terminal) =="
head -30 "$T/profile_report.txt"
echo
echo "== summary ($(cat "$OUT/device.txt")) =="
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "timings.tsv"))]
t = {r[0]: r for r in rows}
print(f"{'run':16s} {'rc':>7s} {'wall s':>8s}")
for r in rows:
    print(f"{r[0]:16s} {r[1]:>7s} {r[2]:>8s}")
try:
    full, kp = float(t["ncu_set_full"][2]), float(t["kopt_profile"][2])
    print(f"ncu --set full / kopt profile = {full / kp:.1f}x (goal >= 20x)")
except Exception as e:
    print("ratio unavailable:", e)
planted = ["kopt_copy_coalesced", "kopt_gather_strided", "kopt_transpose_smem_naive", "kopt_transpose_smem_padded",
           "kopt_occupancy_smem", "kopt_tiny_step", "kopt_fma_loop", "nvjet", "kopt_gridstride_8blocks"]
def classes(path):
    try:
        d = json.load(open(path))
    except Exception as e:
        return {}
    return {k["name"]: (k["bottleneck"]["class"], k["bottleneck"]["unit"], k["bottleneck"]["at_roofline"]) for k in d["kernels"]}
a, b = classes(os.path.join(out, "profile_report.json")), classes(os.path.join(out, "full_report.json"))
same = 0
for p in planted:
    ka = next((v for n, v in a.items() if n.startswith(p)), None)
    kb = next((v for n, v in b.items() if n.startswith(p)), None)
    ok = ka is not None and ka == kb
    same += ok
    print(f"{p:28s} profile={ka} full={kb} {'same' if ok else 'DIFFERENT'}")
print(f"{same}/{len(planted)} planted kernels get the same class")
PY
