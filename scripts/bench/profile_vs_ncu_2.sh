#!/usr/bin/env bash
# Second GPU call for issue 3: the same timing table as profile_vs_ncu.sh
# (alone, kopt profile, ncu --set full) plus a PyTorch module profiled by
# --script/--module and a --deep run. Keeps the run folders as fixtures.
#   scripts/bench/profile_vs_ncu_2.sh OUT_DIR
set -uo pipefail
OUT=${1:?usage}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KOPT=$ROOT/target/release/kopt
SUITE=$ROOT/scripts/capture/labeled_suite/suite.py
T=$(mktemp -d); mkdir -p "$OUT"; : > "$OUT/timings.tsv"
export PYTHONUNBUFFERED=1
now() { date +%s.%N; }
time_it() { local name=$1 limit=$2; shift 2; local t0 t1 rc
  t0=$(now); timeout "$limit" "$@" > "$T/$name.log" 2>&1; rc=$?; t1=$(now)
  printf "%s\t%s\t%s\n" "$name" "$rc" "$(awk "BEGIN{printf \"%.1f\", $t1-$t0}")" | tee -a "$OUT/timings.tsv"
  [ $rc -eq 0 ] || tail -8 "$T/$name.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
time_it alone 120 python3 "$SUITE"
time_it kopt_profile 120 "$KOPT" profile --runs-dir "$T/suite" --quiet --format json -o "$OUT/profile_report.json" -- python3 "$SUITE"
R=$(ls -d "$T"/suite/*/ | head -1)
cp "$R/pass1-timing.csv" "$OUT/profile_pass1_timing.csv"; cp "$R/pass2-targeted.csv" "$OUT/profile_pass2_targeted.csv"; cp "$R/run.json" "$OUT/profile_run.json"
python3 "$ROOT/scripts/examples/moe_route.py" --check
time_it kopt_profile_module 120 "$KOPT" profile --runs-dir "$T/moe" --script "$ROOT/scripts/examples/moe_route.py" --module moe_route -o "$OUT/moe_route_report.md" --format md
time_it ncu_set_full 420 ncu -f -o "$T/full" --set full python3 "$SUITE"
"$KOPT" analyze "$T/full.ncu-rep" --format json -o "$OUT/full_report.json" || true
cat "$OUT/moe_route_report.md" | head -40
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "timings.tsv"))]
t = {r[0]: r for r in rows}
for r in rows: print(f"{r[0]:22s} rc={r[1]:>4s} {r[2]:>8s} s")
try: print(f"ncu --set full / kopt profile = {float(t['ncu_set_full'][2]) / float(t['kopt_profile'][2]):.1f}x (goal >= 20x)")
except Exception as e: print("ratio unavailable", e)
planted = ["kopt_copy_coalesced", "kopt_gather_strided", "kopt_transpose_smem_naive", "kopt_transpose_smem_padded",
           "kopt_occupancy_smem", "kopt_tiny_step", "kopt_fma_loop", "nvjet", "kopt_gridstride_8blocks"]
def classes(p):
    try: d = json.load(open(p))
    except Exception: return {}
    return {k["name"]: (k["bottleneck"]["class"], k["bottleneck"]["unit"], k["bottleneck"]["at_roofline"]) for k in d["kernels"]}
a, b = classes(os.path.join(out, "profile_report.json")), classes(os.path.join(out, "full_report.json"))
same = 0
for p in planted:
    ka = next((v for n, v in a.items() if n.startswith(p)), None); kb = next((v for n, v in b.items() if n.startswith(p)), None)
    same += ka is not None and ka == kb
    print(f"{p:28s} profile={ka} full={kb} {'same' if ka is not None and ka == kb else 'DIFFERENT'}")
print(f"{same}/{len(planted)} planted kernels get the same class")
PY
