#!/usr/bin/env bash
# What `kopt profile --script` costs against the model's own run (#38), on
# a GPU machine, in one call: for each advice-suite model, its own run
# (kopt's module driver: 3 warm-up and 20 steps, no kopt), then `kopt
# profile --script` of it as a user runs it (the counter pass left to
# kopt), then its own run again; the ratio is the profile's wall time over
# the mean of the two own runs. Prints one line a model and writes
# OUT/profile_cost.tsv, OUT/card.txt and each profile's JSON and log.
#   bash run.sh OUT KOPT_DIR [MODEL...]
# KOPT_DIR holds kopt and libkopt_tracer.so. BUDGET (s, default 560): no
# model is started with less than 70 s left. EXTRA: more `kopt profile`
# flags (EXTRA="--profile-top 20": the counter pass always, as before #38).
# SUITE=training: the training suite's workloads instead
# (scripts/checks/training/module.py, one whole training step each).
set -uo pipefail
out=${1:?OUT}; kdir=$(cd "${2:?KOPT_DIR}" && pwd); shift 2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
adv=$repo/scripts/checks/advice
budget=${BUDGET:-560}
start=$(date +%s)
mkdir -p "$out"; out=$(cd "$out" && pwd)
models=("$@")
if [ "${SUITE:-advice}" = training ]; then
  script=$repo/scripts/checks/training/module.py; var=TRAIN_WORKLOAD; class=Model
  export TRAINING_DIR=$repo/scripts/checks/training
  [ ${#models[@]} -gt 0 ] || mapfile -t models < <(cd "$repo/scripts/checks/training" && python3 -c 'import workloads; print("\n".join(workloads.WORKLOADS))')
else
  script=$adv/module.py; var=ADVICE_MODEL; class=
  [ ${#models[@]} -gt 0 ] || mapfile -t models < <(cd "$adv" && python3 -c 'import zoo; print("\n".join(zoo.MODELS))')
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, torchvision, transformers; print("torch", torch.__version__, "torchvision", torchvision.__version__, "transformers", transformers.__version__)'
  "$kdir/kopt" --version; } > "$out/card.txt" 2>&1
work=$(mktemp -d)
cp "$repo"/crates/kopt-collect/python/kopt_profile_driver.py "$repo"/crates/kopt-collect/python/kopt_module.py "$work/"
cd "$work"
export ADVICE_DIR=$adv PYTHONUNBUFFERED=1 KOPT_TRACER=$kdir/libkopt_tracer.so
now() { date +%s.%N; }
since() { python3 -c 'import sys, time; print("%.2f" % (time.time() - float(sys.argv[1])))' "$1"; }
own() { # model: seconds of the driver's own run, or "failed"
  local t0; t0=$(now)
  if env "$var=$1" timeout 150 python3 kopt_profile_driver.py "$script" "${class:-$1}" 3 20 > "$out/$1.own.log" 2>&1; then
    since "$t0"
  else echo failed; fi
}
printf "model\town_s\town_again_s\tprofile_s\tratio\tfirst\tcounters\n" > "$out/profile_cost.tsv"
for m in "${models[@]}"; do
  left=$(( budget - ($(date +%s) - start) ))
  [ "$left" -ge 70 ] || { echo "skipped $m: ${left}s left" | tee -a "$out/card.txt"; continue; }
  a=$(own "$m")
  t0=$(now)
  env "$var=$m" timeout 200 "$kdir/kopt" profile -q --timeout 180 --runs-dir runs --db h.db \
    -f json -o "$out/$m.json" ${EXTRA:-} --script "$script" --module "${class:-$m}" > "$out/$m.profile.log" 2>&1
  rc=$?
  p=$(since "$t0")
  b=$(own "$m")
  first=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d["recommendations"]; print(r[0]["id"] if r else "-")' "$out/$m.json" 2>/dev/null || echo "exit-$rc")
  counters=$(python3 -c 'import json,glob; r=json.load(open(sorted(glob.glob("runs/*/run.json"))[-1])); print((r.get("counters") or "all hottest").split(":")[0])' 2>/dev/null || echo "?")
  ratio=$(python3 -c "import sys; a,b,p=sys.argv[1:]; print('%.2f' % (float(p)/((float(a)+float(b))/2)))" "$a" "$b" "$p" 2>/dev/null || echo "-")
  printf "%s\t%s\t%s\t%.1f\t%s\t%s\t%s\n" "$m" "$a" "$b" "$p" "$ratio" "$first" "$counters" | tee -a "$out/profile_cost.tsv"
  rm -rf runs
done
