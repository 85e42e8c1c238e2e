#!/usr/bin/env bash
# Capture the stall suite (suite.cu beside this script) on a GPU machine.
#   scripts/capture/stall_suite/run.sh OUT_DIR
# Needs nvcc and ncu on PATH; kopt and libkopt_tracer.so beside this script
# (a carried copy) or in target/release/ of the checkout. The metric lists
# compared for replay passes: metrics_new.txt beside the script (else the
# checkout's crates/kopt-collect/ncu-metrics.txt) and, if present,
# metrics_old.txt (the list before issue 29, kept in
# bench-results/2026-11-26-h100/stall-suite/metrics_old.txt).
# Writes OUT_DIR/stall-suite.tar.gz holding:
#   device.txt, suite.log (the suite alone), missing_metrics.txt,
#   full_raw.csv / full_details.csv   (ncu --set full, one launch per kernel)
#   basic_raw.csv / basic_details.csv (ncu --set basic, one launch per kernel)
#   profile/ (kopt profile -- ./suite, default passes: pass CSVs, logs, run.json,
#             report.json), passes.txt (ncu's replay passes per kernel, kopt's
#             metric list before and after issue #29), timings.tsv
set -uo pipefail
OUT=${1:?usage: run.sh OUT_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
W=$(mktemp -d)/stall-suite
mkdir -p "$W/profile"
T=$(mktemp -d)
ROOT=$(cd "$HERE/../../.." 2>/dev/null && pwd)
KOPT=$HERE/kopt
[ -x "$KOPT" ] || KOPT=$ROOT/target/release/kopt
[ -f "$HERE/metrics_new.txt" ] || cp "$ROOT/crates/kopt-collect/ncu-metrics.txt" "$T/metrics_new.txt"
mlist() { if [ -f "$HERE/metrics_$1.txt" ]; then echo "$HERE/metrics_$1.txt"; elif [ -f "$T/metrics_$1.txt" ]; then echo "$T/metrics_$1.txt"; fi; }
now() { date +%s.%N; }
time_it() { local name=$1 limit=$2; shift 2; local t0 t1 rc
  t0=$(now); timeout "$limit" "$@" > "$T/$name.log" 2>&1; rc=$?; t1=$(now)
  printf "%s\t%s\t%s\n" "$name" "$rc" "$(awk "BEGIN{printf \"%.1f\", $t1-$t0}")" | tee -a "$W/timings.tsv"
  [ $rc -eq 0 ] || tail -8 "$T/$name.log"; }
finish() { cp "$T"/*.log "$W/" 2>/dev/null; tar -C "$(dirname "$W")" -czf "$OUT/stall-suite.tar.gz" stall-suite; ls -la "$OUT"; }
trap finish EXIT

{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv;
  ncu --version | tail -1; nvcc --version | tail -2; date -u; } > "$W/device.txt" 2>&1
cat "$W/device.txt"

nvcc -O3 -arch=sm_90 -lineinfo -o "$T/suite" "$HERE/suite.cu" || { echo "nvcc failed"; exit 1; }
time_it alone 60 "$T/suite"
cp "$T/alone.log" "$W/suite.log"; cat "$W/suite.log"

# Which of kopt's metrics this ncu does not know (by base name).
ncu --query-metrics > "$T/query.txt" 2>&1
for f in "$(mlist new)"; do
  grep -v '^\s*#' "$f" | sed '/^\s*$/d' | while read -r m; do
    base=${m%%.*}
    case $base in smsp__sass_*|launch__*|device__*) continue;; esac
    grep -q "^$base\b" "$T/query.txt" || echo "$m"
  done
done > "$W/missing_metrics.txt"
echo "metrics ncu --query-metrics does not list:"; cat "$W/missing_metrics.txt"

# (c) kopt profile with default passes.
time_it kopt_profile 200 "$KOPT" profile --runs-dir "$T/runs" --format json -o "$W/profile/report.json" -- "$T/suite"
if ! awk -F"\t" '$1=="kopt_profile" && $2==0 {f=1} END {exit !f}' "$W/timings.tsv" && [ -s "$W/missing_metrics.txt" ]; then
  # A metric this ncu lacks: profile again through an ncu that drops it (said in timings.tsv).
  cat > "$T/ncu-filter" <<EOF2
#!/usr/bin/env bash
args=(); prev=
for a in "\$@"; do
  [ "\$prev" = --metrics ] && a=\$(echo "\$a" | tr , '\\n' | grep -vxFf "$W/missing_metrics.txt" | paste -sd,)
  args+=("\$a"); prev=\$a
done
exec ncu "\${args[@]}"
EOF2
  chmod +x "$T/ncu-filter"; rm -rf "$T/runs"
  time_it kopt_profile_filtered 200 "$KOPT" profile --ncu "$T/ncu-filter" --runs-dir "$T/runs" --format json -o "$W/profile/report.json" -- "$T/suite"
fi
R=$(ls -d "$T"/runs/*/ 2>/dev/null | head -1)
[ -n "$R" ] && cp "$R"/*.csv "$R"/*.json "$R"/*.log "$R"/*.jsonl "$W/profile/" 2>/dev/null
ls "$W/profile"

# (a) --set full, one launch of each kernel.
time_it ncu_full 200 ncu -f -o "$T/full" --set full --kernel-name 'regex:stall_' \
  --filter-mode per-launch-config --launch-count 1 "$T/suite" 1
ncu -i "$T/full.ncu-rep" --csv --page raw --print-units base > "$W/full_raw.csv"
ncu -i "$T/full.ncu-rep" --csv --page details > "$W/full_details.csv"

# (b) --set basic, one launch of each kernel.
time_it ncu_basic 100 ncu -f -o "$T/basic" --set basic --kernel-name 'regex:stall_' \
  --filter-mode per-launch-config --launch-count 1 "$T/suite" 1
ncu -i "$T/basic.ncu-rep" --csv --page raw --print-units base > "$W/basic_raw.csv"
ncu -i "$T/basic.ncu-rep" --csv --page details > "$W/basic_details.csv"

# Replay passes per kernel: kopt's list before and after #29 (one launch each).
for v in old new; do
  [ -n "$(mlist $v)" ] || continue
  M=$(grep -v '^\s*#' "$(mlist $v)" | sed '/^\s*$/d' | grep -vxFf "$W/missing_metrics.txt" | paste -sd,)
  timeout 100 ncu --metrics "$M" --kernel-name 'regex:stall_' --filter-mode per-launch-config \
    --launch-count 1 "$T/suite" 1 > "$T/passes_$v.log" 2>&1
  echo "== $v ($(echo "$M" | tr , '\n' | wc -l) metrics)"; grep -E '==PROF==.*pass|==ERROR==' "$T/passes_$v.log"
done > "$W/passes.txt"
cat "$W/passes.txt"
[ -x "$KOPT" ] && "$KOPT" analyze "$W/full_details.csv" --format md > "$W/full_details_report.md" 2>&1
