#!/usr/bin/env bash
# The bare steps timed in the traced process (the tracer stops, CUPTI
# detaches, kopt's driver times the steps again) against the separate bare
# runs, in one call (#38): for each model, its own run (kopt's module
# driver, 3 warm-up and 20 steps, no kopt), `kopt profile --script` with the
# kopt of OLD_DIR (separate bare runs), the same with NEW_DIR (in process),
# and its own run again. Prints one line a model and writes OUT/ab.tsv,
# OUT/card.txt and OUT/runs.tgz (each profile's JSON, log, run.json, bare
# steps and the trace's last lines).
#   bash in_process.sh OUT OLD_DIR NEW_DIR [MODEL...]
# MODEL: an advice-suite model name, or `train` (the whole-program suite's
# training step in module form). BUDGET (s, default 560): no model is
# started with less than 100 s left.
set -uo pipefail
out=${1:?OUT}; old=$(cd "${2:?OLD_DIR}" && pwd); new=$(cd "${3:?NEW_DIR}" && pwd); shift 3
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
adv=$repo/scripts/checks/advice
budget=${BUDGET:-560}
start=$(date +%s)
mkdir -p "$out/runs"; out=$(cd "$out" && pwd)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__)'
  "$old/kopt" --version; "$new/kopt" --version; } > "$out/card.txt" 2>&1
work=$(mktemp -d)
cp "$repo"/crates/kopt-collect/python/kopt_profile_driver.py "$repo"/crates/kopt-collect/python/kopt_module.py "$work/"
cd "$work"
export ADVICE_DIR=$adv PYTHONUNBUFFERED=1
now() { date +%s.%N; }
since() { python3 -c 'import sys, time; print("%.2f" % (time.time() - float(sys.argv[1])))' "$1"; }
script_of() { if [ "$1" = train ]; then echo "$repo/scripts/checks/whole-program/train_module.py Model"; else echo "$adv/module.py $1"; fi; }
own() { # model: seconds of the driver's own run, or "failed"
  local t0 s; t0=$(now); read -r -a s <<< "$(script_of "$1")"
  if ADVICE_MODEL=$1 timeout 150 python3 kopt_profile_driver.py "${s[0]}" "${s[1]}" 3 20 > "$out/runs/$1.own.log" 2>&1; then
    since "$t0"
  else echo failed; fi
}
prof() { # model tag kdir: wall seconds; leaves OUT/runs/MODEL.TAG.*
  local t0 s; t0=$(now); read -r -a s <<< "$(script_of "$1")"
  ADVICE_MODEL=$1 KOPT_TRACER=$3/libkopt_tracer.so timeout 200 "$3/kopt" profile -q --timeout 180 \
    --runs-dir "runs-$2" --db "h-$2.db" -f json -o "$out/runs/$1.$2.json" --script "${s[0]}" --module "${s[1]}" \
    > "$out/runs/$1.$2.log" 2>&1
  since "$t0"
  local d; d=$(ls -d runs-"$2"/*/ | tail -1)
  cp "$d/run.json" "$out/runs/$1.$2.run.json" 2>/dev/null
  cp "$d/bare_steps.jsonl" "$out/runs/$1.$2.bare_steps.jsonl" 2>/dev/null
  tail -c 600 "$d/trace.jsonl" > "$out/runs/$1.$2.trace-tail.txt" 2>/dev/null
  rm -rf "runs-$2"
}
summary() { # model tag: first finding, its gain, bare mean step (ms)
  python3 - "$out/runs/$1.$2.json" "$out/runs/$1.$2.bare_steps.jsonl" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1])); r = d["recommendations"]
    first = "%s %s" % (r[0]["id"], r[0].get("predicted_speedup")) if r else "-"
    g = (d.get("timeline") or {}).get("graph_prediction") or {}
    eager = g.get("eager_corrected_per_step_ns")
    bare = "%s/%.3f" % (g.get("eager_measured_bare"), eager / 1e6) if eager else "-"
except Exception as e:
    first, bare = "unread(%s)" % e, "-"
try:
    s = sorted(json.loads(l)["s"] for l in open(sys.argv[2]) if l.strip())
    p = [b - a for a, b in zip(s, s[1:])][3:]
    mean = "%.3f" % (sum(p) / len(p) / 1e6)
except Exception:
    mean = "-"
print("%s\t%s\t%s" % (first, bare, mean))
PY
}
printf "model\town_s\tprofile_old_s\tprofile_new_s\town_again_s\tratio_old\tratio_new\told_first\told_pred_bare_eager_ms\told_bare_mean_ms\tnew_first\tnew_pred_bare_eager_ms\tnew_bare_mean_ms\n" > "$out/ab.tsv"
for m in "${@:-resnet50_b1_fp32}"; do
  left=$(( budget - ($(date +%s) - start) ))
  [ "$left" -ge 100 ] || { echo "skipped $m: ${left}s left" | tee -a "$out/card.txt"; continue; }
  a=$(own "$m"); po=$(prof "$m" old "$old"); pn=$(prof "$m" new "$new"); b=$(own "$m")
  ratios=$(python3 -c "import sys; a,b,o,n=map(float,sys.argv[1:]); m=(a+b)/2; print('%.2f\t%.2f' % (o/m, n/m))" "$a" "$b" "$po" "$pn" 2>/dev/null || printf -- "-\t-")
  printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$m" "$a" "$po" "$pn" "$b" "$ratios" "$(summary "$m" old)" "$(summary "$m" new)" | tee -a "$out/ab.tsv"
done
cd "$out" && tar czf runs.tgz runs && rm -rf runs
