#!/usr/bin/env bash
# The advice suite on a GPU machine (kopt, libkopt_tracer.so and this
# folder carried in one folder, KOPT_DIR, default .gpu-advice):
#   bash run.sh OUT [PARTS] [MODEL...]
# PARTS (comma list, default measure,plain,ops): synccost (sync_cost.py:
# the sync-only bare run's host cost a launch and a sync, into
# OUT/sync_cost.txt), measure (measure.py: every candidate fix bare,
# torch.compile included, one process a model), measureall (all the models
# in one process, first), plain (`kopt profile -- python3 app.py`: no
# NVTX), script (`kopt profile --script module.py`), ops (the same with
# --ops); tplain, tscript, tops: the same workloads under `kopt trace`
# alone (the tracer's pass and its bare run, no ncu pass: the captures
# that `kopt analyze` reads back; tscript/tops run kopt's own module
# driver, kopt_profile_driver.py and kopt_module.py from
# crates/kopt-collect/python, copied beside this script). Parts run one
# after the other, each over every model (ORDER=model: all parts of a
# model, then the next; JOBS="part:model ...": those, in that order).
# Each model's files go to OUT/m/; at the end they
# are packed into at most six tarballs OUT/advice-N.tgz. BUDGET (s,
# default 540) stops starting a part of a model once less than MIN_LEFT
# (s, default 70) is left; MEASURE_TIMEOUT (s, default 200) bounds one
# model's measure.py, COMPILE_S (default 120) its torch.compile;
# MEASURE_MODELS (space list, default the models given) are the ones
# measureall measures. No profile or trace runs past the budget: each is
# killed 10 s before it ends.
set -uo pipefail
out=${1:?OUT}; shift
parts=${1:-measure,plain,ops}; [ $# -gt 0 ] && shift
here=$(cd "$(dirname "$0")" && pwd)
kdir=$(cd "${KOPT_DIR:-$here}" && pwd)
kopt=$kdir/kopt
budget=${BUDGET:-540}
start=$(date +%s)
mkdir -p "$out/m"; out=$(cd "$out" && pwd)
models=("$@")
[ ${#models[@]} -gt 0 ] || mapfile -t models < <(cd "$here" && python3 -c 'import zoo; print("\n".join(zoo.MODELS))')
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, torchvision, transformers; print("torch", torch.__version__, "torchvision", torchvision.__version__, "transformers", transformers.__version__)'
  "$kopt" --version; } > "$out/card.txt" 2>&1
export ADVICE_DIR=$here PYTHONUNBUFFERED=1
work=$(mktemp -d)
cd "$work"
cap() { # seconds: at most $1, and 10 s short of the budget's end
  local left=$(( budget - ($(date +%s) - start) - 10 ))
  echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}
prof() { # tag model args...
  local tag=$1 m=$2; shift 2
  local t0=$(date +%s)
  timeout "$(cap 150)" "$kopt" profile -q --profile-top 3 --timeout 120 --runs-dir runs --db h.db \
    -f json -o "$out/m/$m.$tag.json" "$@" > "$out/m/$m.$tag.log" 2>&1
  echo "exit $? seconds $(( $(date +%s) - t0 ))" >> "$out/m/$m.$tag.log"
  local run; run=$(ls -td runs/*/ 2>/dev/null | head -1)
  [ -n "$run" ] || return
  "$kopt" analyze "$run" --width 160 > "$out/m/$m.$tag.txt" 2>&1
  (cd "$run" && for f in trace.jsonl*; do [ -f "$f" ] && gzip -9 "$f"; done
   tar czf "$out/m/$m.$tag.run.tgz" --exclude='*.py' --exclude='sitecustomize*' . ) 2>/dev/null
  rm -rf runs
}
trc() { # tag model argv...
  local tag=$1 m=$2; shift 2
  local t0=$(date +%s)
  timeout "$(cap 120)" "$kopt" trace -q --timeout 100 --runs-dir runs --db h.db \
    -f json -o "$out/m/$m.$tag.json" -- "$@" > "$out/m/$m.$tag.log" 2>&1
  echo "exit $? seconds $(( $(date +%s) - t0 ))" >> "$out/m/$m.$tag.log"
  local run; run=$(ls -td runs/*/ 2>/dev/null | head -1)
  [ -n "$run" ] || return
  "$kopt" analyze "$run" --width 160 > "$out/m/$m.$tag.txt" 2>&1
  (cd "$run" && for f in trace.jsonl*; do [ -f "$f" ] && gzip -9 "$f"; done
   tar czf "$out/m/$m.$tag.run.tgz" --exclude='*.py' --exclude='sitecustomize*' . ) 2>/dev/null
  rm -rf runs
}
if [[ ,$parts, == *,synccost,* ]]; then
  # The sync-only bare run's cost a launch and a sync call, against none.
  (cd "$here" && for i in 1 2; do
     timeout 60 python3 sync_cost.py
     KOPT_BARE_SYNCS_OUT="$work/syncs.jsonl" CUDA_INJECTION64_PATH="$kdir/libkopt_tracer.so" \
       timeout 60 python3 sync_cost.py
     echo "sync lines: $(wc -l < "$work/syncs.jsonl")"; rm -f "$work/syncs.jsonl"
   done) > "$out/sync_cost.txt" 2>&1
fi
if [[ ,$parts, == *,measureall,* ]]; then
  t0=$(date +%s)
  read -ra mm <<< "${MEASURE_MODELS:-${models[*]}}"
  (cd "$here" && timeout "$(cap 200)" python3 measure.py "${mm[@]}") > "$out/measured.jsonl" 2> "$out/measure.log"
  echo "exit $? seconds $(( $(date +%s) - t0 ))" >> "$out/measure.log"
fi
# Part by part, each over every model (ORDER=model: model by model), so a
# budget that runs out leaves whole parts done first.
run_part() { # part model
  local p=$1 m=$2
  export ADVICE_MODEL=$m
  case $p in
    measure)
      local t0=$(date +%s)
      (cd "$here" && timeout "${MEASURE_TIMEOUT:-200}" python3 measure.py "$m") > "$out/m/$m.measured.json" 2> "$out/m/$m.measure.log"
      echo "exit $? seconds $(( $(date +%s) - t0 ))" >> "$out/m/$m.measure.log" ;;
    plain) prof plain "$m" -- python3 "$here/app.py" "$m" 20 ;;
    script) prof script "$m" --script "$here/module.py" --module "$m" ;;
    ops) prof ops "$m" --script "$here/module.py" --module "$m" --ops ;;
    tplain) trc tplain "$m" python3 "$here/app.py" "$m" 20 ;;
    tscript) trc tscript "$m" python3 "$here/kopt_profile_driver.py" "$here/module.py" "$m" 3 20 ;;
    tops) trc tops "$m" python3 "$here/kopt_profile_driver.py" "$here/module.py" "$m" 3 20 ops ;;
  esac
}
IFS=, read -ra part_list <<< "$parts"
jobs=()
if [ -n "${JOBS:-}" ]; then
  # JOBS: "part:model ..." run in that order (the models given are unused).
  for j in $JOBS; do jobs+=("${j%%:*} ${j#*:}"); done
elif [ "${ORDER:-part}" = model ]; then
  for m in "${models[@]}"; do for p in "${part_list[@]}"; do jobs+=("$p $m"); done; done
else
  for p in "${part_list[@]}"; do for m in "${models[@]}"; do jobs+=("$p $m"); done; done
fi
for j in "${jobs[@]}"; do
  read -r p m <<< "$j"
  case $p in measure|plain|script|ops|tplain|tscript|tops) ;; *) continue ;; esac
  left=$(( budget - ($(date +%s) - start) ))
  [ "$left" -lt "${MIN_LEFT:-70}" ] && { echo "skipped $p $m: ${left}s left" >> "$out/card.txt"; continue; }
  t0=$(date +%s)
  run_part "$p" "$m"
  echo "$p $m $(( $(date +%s) - t0 ))s" >> "$out/card.txt"
done
cd "$out"
echo "total seconds $(( $(date +%s) - start ))" >> card.txt
# At most six tarballs of whole models (what comes back is 8 files).
mv measured.jsonl measure.log m/ 2>/dev/null
mapfile -t done_models < <(ls m | sed 's/\..*//' | grep -v '^measure' | sort -u)
per=$(( (${#done_models[@]} + 5) / 6 ))
for ((i = 0; i * per < ${#done_models[@]}; i++)); do
  files=()
  for m in "${done_models[@]:i*per:per}"; do files+=(m/"$m".*); done
  tar czf "advice-$((i+1)).tgz" "${files[@]}"
done
tar czf advice-measured.tgz m/measure* sync_cost.txt 2>/dev/null
rm -rf m "$work"
ls -la "$out"
