#!/usr/bin/env bash
# Capture kopt's labeled-suite fixtures on a GPU machine.
#   scripts/capture/labeled_suite/capture.sh OUT_DIR
# Writes: device.txt, check.log, ncu_raw_base.csv (kopt metric list,
# --print-units base), ncu_raw_auto.csv (same report, ncu's auto-scaled units),
# ncu_details.csv (--set full, details page, short chain), metrics_used.txt,
# timings.txt. Prints a short table last.
set -uo pipefail
OUT=${1:?usage: capture.sh OUT_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
mkdir -p "$OUT"
TMP=$(mktemp -d)
export PYTHONUNBUFFERED=1

{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv;
  ncu --version | tail -1; nvcc --version | tail -1;
  python3 -c 'import torch, cupy; print("torch", torch.__version__, "cupy", cupy.__version__)'; } > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"

now() { date +%s.%N; }
t0=$(now); python3 "$HERE/suite.py" --check > "$OUT/check.log" 2>&1; rc=$?; t1=$(now)
echo "suite alone (with --check): rc=$rc $(awk "BEGIN{printf \"%.1f\", $t1-$t0}") s" | tee "$OUT/timings.txt"
tail -2 "$OUT/check.log"
t0=$(now); python3 "$HERE/suite.py" > /dev/null 2>&1; t1=$(now)
echo "suite alone: $(awk "BEGIN{printf \"%.1f\", $t1-$t0}") s" | tee -a "$OUT/timings.txt"

# kopt's metric list; drop any metric this ncu/chip does not know (named in ncu's error).
grep -v '^\s*#' "$ROOT/crates/kopt-collect/ncu-metrics.txt" | sed '/^\s*$/d' > "$TMP/metrics"
for attempt in 1 2 3 4 5 6 7 8; do
  M=$(paste -sd, "$TMP/metrics")
  t0=$(now)
  ncu -f -o "$TMP/raw" --metrics "$M" python3 "$HERE/suite.py" > "$TMP/ncu_raw.log" 2>&1; rc=$?
  t1=$(now)
  if [ $rc -eq 0 ] && ! grep -q '==ERROR==' "$TMP/ncu_raw.log"; then break; fi
  echo "ncu raw attempt $attempt failed (rc=$rc):"; grep -m5 '==ERROR==' "$TMP/ncu_raw.log"
  bad=0
  while read -r m; do
    base=${m%%.*}
    if grep '==ERROR==' "$TMP/ncu_raw.log" | grep -q "$base"; then
      echo "  dropping $m"; grep -vxF "$m" "$TMP/metrics" > "$TMP/m2"; mv "$TMP/m2" "$TMP/metrics"; bad=1
    fi
  done < <(cat "$TMP/metrics")
  [ $bad -eq 1 ] || { tail -20 "$TMP/ncu_raw.log"; break; }
done
cp "$TMP/metrics" "$OUT/metrics_used.txt"
echo "ncu kopt metrics ($(wc -l < "$TMP/metrics") metrics, full chain): $(awk "BEGIN{printf \"%.1f\", $t1-$t0}") s" | tee -a "$OUT/timings.txt"
ncu -i "$TMP/raw.ncu-rep" --csv --page raw --print-units base > "$OUT/ncu_raw_base.csv"
ncu -i "$TMP/raw.ncu-rep" --csv --page raw > "$OUT/ncu_raw_auto.csv"

# --set full on every planted kernel, a few launches each (the chain shortened to 3).
t0=$(now)
ncu -f -o "$TMP/full" --set full --kernel-name 'regex:kopt_|nvjet|gemm|cutlass|sm90' \
    python3 "$HERE/suite.py" --chain 3 > "$TMP/ncu_full.log" 2>&1; rc=$?
t1=$(now)
echo "ncu --set full (planted kernels, chain 3): rc=$rc $(awk "BEGIN{printf \"%.1f\", $t1-$t0}") s" | tee -a "$OUT/timings.txt"
grep -m5 '==ERROR==' "$TMP/ncu_full.log"
ncu -i "$TMP/full.ncu-rep" --csv --page details > "$OUT/ncu_details.csv"

ls -la "$OUT"
echo
echo "== summary =="
head -2 "$OUT/device.txt"
cat "$OUT/timings.txt"
python3 - "$OUT/ncu_raw_base.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h = rows[0]; data = rows[2:]
ix = {n: i for i, n in enumerate(h)}
def g(r, n): return r[ix[n]] if n in ix else "-"
seen = {}
for r in data:
    name = r[ix["Kernel Name"]][:40]
    if name in seen: continue
    seen[name] = 1
    print(f"{name:40s} t={g(r,'gpu__time_duration.sum'):>10s} SM={g(r,'sm__throughput.avg.pct_of_peak_sustained_elapsed'):>6s} "
          f"MEM={g(r,'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed'):>6s} DRAM={g(r,'dram__throughput.avg.pct_of_peak_sustained_elapsed'):>6s} "
          f"W={g(r,'launch__waves_per_multiprocessor'):>6s}")
print(len(data), "launches in raw capture")
PY
