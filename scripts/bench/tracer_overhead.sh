#!/usr/bin/env bash
# Issue 4's evidence on the GPU machine: host cost per launch of one-block
# kernels (5 loops of 10,000 per process, median) bare, under `kopt trace` in
# each API-recording mode, and under torch.profiler; 5 interleaved rounds,
# medians; whether kopt's trace holds every kernel and launch call. Then NVTX
# ranges through the tracer, and kopt trace around a torch.profiler session.
#   scripts/bench/tracer_overhead.sh OUT_DIR  (needs target/release/{kopt,libkopt_tracer.so})
#   ROUNDS=11 MODES="kopt_select kopt_off" PIN=2-5 SKIP_EXTRAS=1 ...  (rounds, tracer modes,
#   CPUs every run is pinned to, overhead table only)
set -uo pipefail
OUT=${1:?usage}; ROOT=$(cd "$(dirname "$0")/../.." && pwd); KOPT=$ROOT/target/release/kopt
T=$(mktemp -d); mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
L=$ROOT/scripts/bench/launch_loop.py
: > "$OUT/overhead.jsonl"
ROUNDS=${ROUNDS:-5}; MODES=${MODES:-kopt_select kopt_off kopt_all kopt_select_perthread kopt_hw}
PINNED=""; [ -n "${PIN:-}" ] && PINNED="taskset -c $PIN"
want() { case " $MODES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
traced() { # mode, env...
  local mode=$1; shift
  want "$mode" || return 0
  env "$@" $PINNED "$KOPT" trace --runs-dir "$T/runs_$mode" --format json -o "$T/report_$mode.json" -- python3 "$L" > "$T/$mode.log" 2>&1 || tail -5 "$T/$mode.log"
  echo "{\"mode\":\"$mode\",\"r\":$(grep per_launch_us "$T/$mode.log" | tail -1)}" >> "$OUT/overhead.jsonl"
}
for round in $(seq "$ROUNDS"); do
  echo "{\"mode\":\"bare\",\"r\":$($PINNED python3 "$L")}" >> "$OUT/overhead.jsonl"
  traced kopt_select KOPT_TRACER_APIS=select
  traced kopt_off KOPT_TRACER_APIS=off
  traced kopt_all KOPT_TRACER_APIS=all
  traced kopt_select_perthread KOPT_TRACER_APIS=select KOPT_TRACER_PER_THREAD_BUFFERS=1
  traced kopt_hw KOPT_TRACER_APIS=select KOPT_TRACER_HW_TRACE=1
  traced kopt_prealloc KOPT_TRACER_APIS=select KOPT_TRACER_PREALLOC=16
  traced kopt_sync KOPT_TRACER_APIS=select KOPT_TRACER_SYNC_DRAIN=1
  traced kopt_bigbuf KOPT_TRACER_APIS=select KOPT_TRACER_BUFFER_MB=64
  echo "{\"mode\":\"torch_profiler\",\"r\":$($PINNED python3 "$L" --torch-profiler 2>/dev/null | tail -1)}" >> "$OUT/overhead.jsonl"
done
for m in $MODES; do
  python3 -c "import json,sys; r=json.load(open('$T/report_$m.json')); t=r.get('timeline') or {}; k=[x for x in r['kernels'] if x['name'].startswith('kopt_noop')]; print(json.dumps({'mode':'$m','noop_kernels':k[0]['launches'] if k else 0,'launch_calls':t.get('kernel_launch_calls'),'sync_calls':t.get('sync_calls')}))" >> "$OUT/recorded.jsonl" 2>/dev/null
  grep -h "kopt-tracer" "$T/$m.log" | sort | uniq -c | head -3
  echo "$m end record: $(grep -h '"t":"end"' "$T"/runs_$m/*/trace.jsonl | tail -1)"
done
R=$(ls -d "$T"/runs_*/*/ | head -1); head -c 1000000 "$R/trace.jsonl" > "$OUT/loop_trace_head.jsonl"
SKIP=${SKIP_EXTRAS:-}  # set: only the overhead table
if [ -z "$SKIP" ]; then
# NVTX ranges: 20 repetitions of a CUDA C++ kernel, each inside nvtxRangePush("step").
nvcc -O3 -arch=sm_90 -o "$T/vk" "$ROOT/scripts/bench/verdict_trials/vk.cu" && \
  "$KOPT" trace --runs-dir "$T/nvtx" --format json -o "$OUT/nvtx_report.json" -- "$T/vk" --reps 20 --nvtx > "$T/nvtx.log" 2>&1; echo "nvtx trace rc=$?"
N=$(ls -d "$T"/nvtx/*/ | head -1); cp "$N/trace.jsonl" "$OUT/nvtx_trace.jsonl" 2>/dev/null
python3 -c "import json; r=json.load(open('$OUT/nvtx_report.json')); t=r['timeline']; print('nvtx: iterations', t.get('iterations'), 'kernels', t.get('kernels'))" 2>&1
grep -c range_start "$OUT/nvtx_trace.jsonl" 2>/dev/null | sed 's/^/nvtx range_start records: /'
# kopt trace around a program that starts torch.profiler itself (one CUPTI client at a time).
"$KOPT" trace --runs-dir "$T/conflict" --format json -o "$T/conflict.json" -- python3 "$L" --n 2000 --loops 1 --torch-profiler > "$OUT/conflict.log" 2>&1; echo "conflict run rc=$?"
grep -iE "kopt|cupti|warn|error" "$OUT/conflict.log" | sort | uniq -c | head -8
echo "conflict end record: $(grep -h '"t":"end"' "$T"/conflict/*/trace.jsonl | tail -1)"
python3 -c "import json; r=json.load(open('$T/conflict.json')); print('conflict notes:', [n[:90] for n in r['notes']])" 2>&1
python3 -c "import json; r=json.load(open('$T/conflict.json')); k=[x for x in r['kernels'] if x['name'].startswith('kopt_noop')]; print('conflict: kopt recorded noop kernels', k[0]['launches'] if k else 0, '(expected 2100)')" 2>&1
fi
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "overhead.jsonl")) if l.strip()]
by = {}
for r in rows:
    v = r["r"]
    if isinstance(v, dict): by.setdefault(r["mode"], []).append(v["per_launch_us"])
med = lambda v: sorted(v)[len(v) // 2]
rec = {}
try:
    for l in open(os.path.join(out, "recorded.jsonl")):
        x = json.loads(l); rec[x["mode"]] = x
except OSError:
    pass
b = med(by["bare"]) if "bare" in by else None
print("| mode | host us per launch (median of the rounds) | vs bare | rounds | noop kernels / launch calls recorded (expected 50100) |")
print("|---|--:|--:|---|---|")
for m in ("bare", "kopt_select", "kopt_off", "kopt_all", "kopt_select_perthread", "kopt_hw", "kopt_prealloc", "kopt_sync", "kopt_bigbuf", "torch_profiler"):
    if m not in by: continue
    rel = f"{100*(med(by[m])/b-1):+.1f}%" if b else "-"
    r = rec.get(m, {})
    print(f"| {m} | {med(by[m]):.2f} | {rel} | {', '.join(f'{x:.2f}' for x in by[m])} | {r.get('noop_kernels','-')} / {r.get('launch_calls','-')} |")
PY
