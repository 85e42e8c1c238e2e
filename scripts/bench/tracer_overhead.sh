#!/usr/bin/env bash
# Issue 4's evidence on the GPU machine: host cost per launch of one-block
# kernels (5 loops of 10,000 per process, median) bare, under `kopt trace` in
# each API-recording mode, and under torch.profiler; 5 interleaved rounds,
# medians; whether kopt's trace holds every kernel and launch call. Then NVTX
# ranges through the tracer, and kopt trace around a torch.profiler session.
#   scripts/bench/tracer_overhead.sh OUT_DIR  (needs target/release/{kopt,libkopt_tracer.so})
#   ROUNDS=11 MODES="kopt_select kopt_off" PIN=2-5 SKIP_EXTRAS=1 LOOPS=25 ...  (rounds,
#   tracer modes, CPUs every run is pinned to, overhead table only, loops per process)
# kopt_sample10 / kopt_sample1s / kopt_sample20: `kopt trace --sample 10ms/100ms` / `50ms/1s` / `20ms/1s`.
# The table's headline is the mean over every loop (a sampled trace slows the
# loops its windows fall in, so the median of loops would hide its cost).
set -uo pipefail
OUT=${1:?usage}; ROOT=$(cd "$(dirname "$0")/../.." && pwd); KOPT=$ROOT/target/release/kopt
T=$(mktemp -d); mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
L=$ROOT/scripts/bench/launch_loop.py
: > "$OUT/overhead.jsonl"
ROUNDS=${ROUNDS:-5}; MODES=${MODES:-kopt_select kopt_off kopt_all kopt_select_perthread kopt_hw}
PINNED=""; [ -n "${PIN:-}" ] && PINNED="taskset -c $PIN"
want() { case " $MODES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
LOOPS=${LOOPS:-5}
traced() { # mode, env... [-- kopt trace args...]
  local mode=$1; shift
  want "$mode" || return 0
  local envs=() kargs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  [ "${1:-}" = "--" ] && { shift; kargs=("$@"); }
  env "${envs[@]}" $PINNED "$KOPT" trace "${kargs[@]}" --timeout 120 --runs-dir "$T/runs_$mode" --format json -o "$T/report_$mode.json" -- python3 "$L" --loops "$LOOPS" > "$T/$mode.log" 2>&1 || tail -5 "$T/$mode.log"
  local win; win=$(ls -t "$T"/runs_$mode/*/trace.jsonl 2>/dev/null | head -1 | xargs -r grep -h '"t":"window"' | python3 -c "import json,sys; print(json.dumps([[r['s'], r['e']] for r in map(json.loads, sys.stdin)]))")
  echo "{\"mode\":\"$mode\",\"r\":$(grep per_launch_us "$T/$mode.log" | tail -1),\"windows\":${win:-[]}}" >> "$OUT/overhead.jsonl"
}
for round in $(seq "$ROUNDS"); do
  echo "{\"mode\":\"bare\",\"r\":$($PINNED python3 "$L" --loops "$LOOPS")}" >> "$OUT/overhead.jsonl"
  traced kopt_select KOPT_TRACER_APIS=select
  traced kopt_off KOPT_TRACER_APIS=off
  traced kopt_all KOPT_TRACER_APIS=all
  traced kopt_select_perthread KOPT_TRACER_APIS=select KOPT_TRACER_PER_THREAD_BUFFERS=1
  traced kopt_hw KOPT_TRACER_APIS=select KOPT_TRACER_HW_TRACE=1
  traced kopt_prealloc KOPT_TRACER_APIS=select KOPT_TRACER_PREALLOC=16
  traced kopt_sync KOPT_TRACER_APIS=select KOPT_TRACER_SYNC_DRAIN=1
  traced kopt_bigbuf KOPT_TRACER_APIS=select KOPT_TRACER_BUFFER_MB=64
  traced kopt_sample10 KOPT_TRACER_APIS=select -- --sample 10ms/100ms
  traced kopt_sample1s KOPT_TRACER_APIS=select -- --sample 50ms/1s
  traced kopt_sample20 KOPT_TRACER_APIS=select -- --sample 20ms/1s
  echo "{\"mode\":\"torch_profiler\",\"r\":$($PINNED python3 "$L" --loops "$LOOPS" --torch-profiler 2>/dev/null | tail -1)}" >> "$OUT/overhead.jsonl"
done
for m in $MODES; do
  python3 -c "import json,sys; r=json.load(open('$T/report_$m.json')); t=r.get('timeline') or {}; k=[x for x in r['kernels'] if x['name'].startswith('kopt_noop')]; print(json.dumps({'mode':'$m','noop_kernels':k[0]['launches'] if k else 0,'launch_calls':t.get('kernel_launch_calls'),'sync_calls':t.get('sync_calls'),'sampling':t.get('sampling'),'notes':r.get('notes',[])[:2]}))" >> "$OUT/recorded.jsonl" 2>/dev/null
  grep -h "kopt-tracer" "$T/$m.log" | sort | uniq -c | head -3
  echo "$m end record: $(grep -h '"t":"end"' "$T"/runs_$m/*/trace.jsonl | tail -1), windows: $(grep -hc '"t":"window"' "$T"/runs_$m/*/trace.jsonl | tail -1)"
done
S=$(ls -d "$T"/runs_kopt_sample10/*/ 2>/dev/null | head -1); [ -n "$S" ] && cp "$S/trace.jsonl" "$OUT/loop_sampled_trace.jsonl"
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
by, mean_by = {}, {}
for r in rows:
    v = r["r"]
    if isinstance(v, dict):
        by.setdefault(r["mode"], []).append(v["per_launch_us"])
        mean_by.setdefault(r["mode"], []).append(sum(v["loops_us"]) / len(v["loops_us"]))
med = lambda v: sorted(v)[len(v) // 2]
rec = {}
try:
    for l in open(os.path.join(out, "recorded.jsonl")):
        x = json.loads(l); rec[x["mode"]] = x
except OSError:
    pass
b = med(mean_by["bare"]) if "bare" in mean_by else None
print("| mode | host us per launch: mean of every loop, median of the rounds | vs bare | each round | median-of-loops figure | noop kernels / launch calls recorded |")
print("|---|--:|--:|---|--:|---|")
for m in ("bare", "kopt_select", "kopt_off", "kopt_all", "kopt_select_perthread", "kopt_hw", "kopt_prealloc", "kopt_sync", "kopt_bigbuf", "kopt_sample10", "kopt_sample1s", "kopt_sample20", "torch_profiler"):
    if m not in mean_by: continue
    x = med(mean_by[m])
    rel = f"{100*(x/b-1):+.1f}%" if b else "-"
    r = rec.get(m, {})
    print(f"| {m} | {x:.2f} | {rel} | {', '.join(f'{v:.2f}' for v in mean_by[m])} | {med(by[m]):.2f} | {r.get('noop_kernels','-')} / {r.get('launch_calls','-')} |")
# Paired by round (each mode's process against the bare one run just before
# it): the machine's drift between rounds cancels.
rounds, cur = [], {}
for r in rows:
    if r["mode"] == "bare" and cur:
        rounds.append(cur); cur = {}
    if isinstance(r["r"], dict): cur[r["mode"]] = r
rounds.append(cur)
mean = lambda r: sum(r["r"]["loops_us"]) / len(r["r"]["loops_us"])
print()
print("| mode | per-round ratio to bare: median | each round | self-referenced (sampled: all loops vs the same process's loops outside every window) |")
print("|---|--:|---|---|")
for m in [m for m in mean_by if m != "bare"]:
    ratios = [mean(R[m]) / mean(R["bare"]) for R in rounds if m in R and "bare" in R]
    selfref = []
    for R in rounds:
        w = R.get(m, {}).get("windows") or []
        if not w or "loops_ns" not in R[m]["r"]: continue
        v = R[m]["r"]
        out = [us for us, (a, b) in zip(v["loops_us"], v["loops_ns"]) if not any(s < b and a < e for s, e in w)]
        if out: selfref.append(mean(R[m]) / med(out))
    sr = f"median {100*(med(selfref)-1):+.1f}% ({', '.join(f'{100*(x-1):+.1f}' for x in selfref)})" if selfref else "-"
    print(f"| {m} | {100*(med(ratios)-1):+.1f}% | {', '.join(f'{100*(x-1):+.0f}' for x in ratios)} | {sr} |")
# Sampled modes: loops that overlap a window against loops that do not, in
# the same processes (the loops of the bare run beside them for reference).
split = {}
for r in rows:
    v, w = r["r"], r.get("windows") or []
    if not isinstance(v, dict) or not w or "loops_ns" not in v: continue
    for us, (a, b) in zip(v["loops_us"], v["loops_ns"]):
        inside = any(s < b and a < e for s, e in w)
        split.setdefault(r["mode"], {"in": [], "out": []})["in" if inside else "out"].append(us)
if split:
    print()
    print("| sampled mode | loops overlapping a window: median us/launch (n) | loops outside every window (n) | outside vs bare loops |")
    print("|---|--:|--:|--:|")
    bare_loops = [x for r in rows if r["mode"] == "bare" and isinstance(r["r"], dict) for x in r["r"]["loops_us"]]
    for m, d in split.items():
        rel = f"{100*(med(d['out'])/med(bare_loops)-1):+.1f}%" if d["out"] and bare_loops else "-"
        print(f"| {m} | {med(d['in']) if d['in'] else float('nan'):.2f} ({len(d['in'])}) | {med(d['out']) if d['out'] else float('nan'):.2f} ({len(d['out'])}) | {rel} |")
PY
