#!/usr/bin/env bash
# kopt profile with kopt's tracer as pass 1 vs ncu as pass 1, on the labeled
# suite (212 launches) and on seed 000's MoE module; wall time of each, and
# whether both give the same classes. Prints a table last.
#   scripts/bench/profile_pass1.sh OUT_DIR  (needs target/release/{kopt,libkopt_tracer.so})
set -uo pipefail
OUT=${1:?usage}; ROOT=$(cd "$(dirname "$0")/../.." && pwd); KOPT=$ROOT/target/release/kopt
T=$(mktemp -d); mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
SUITE="python3 $ROOT/scripts/capture/labeled_suite/suite.py"
MOE="python3 $ROOT/scripts/examples/moe_route.py --iters 20"
: > "$OUT/profile_times.jsonl"
run() { # label, timing-pass, workload...
  local label=$1 pass=$2; shift 2
  local t0=$(date +%s.%N)
  "$KOPT" profile --timing-pass "$pass" --runs-dir "$T/runs_$label" --format json -o "$OUT/$label.json" --quiet -- "$@" > "$T/$label.log" 2>&1; local rc=$?
  local t1=$(date +%s.%N)
  echo "{\"label\":\"$label\",\"rc\":$rc,\"seconds\":$(python3 -c "print($t1-$t0)")}" >> "$OUT/profile_times.jsonl"
  [ $rc -ne 0 ] && tail -5 "$T/$label.log"
  grep -h "pass" "$T/$label.log" | head -4
}
run suite_tracer tracer $SUITE
run suite_ncu ncu $SUITE
run moe_tracer tracer $MOE
run moe_ncu ncu $MOE
R=$(ls -d "$T"/runs_moe_tracer/*/ | head -1); mkdir -p "$OUT/moe_run"; cp "$R"/{run.json,trace.jsonl,pass2-targeted.csv} "$OUT/moe_run/" 2>/dev/null
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
times = {json.loads(l)["label"]: json.loads(l) for l in open(os.path.join(out, "profile_times.jsonl"))}
def classes(label):
    try:
        r = json.load(open(os.path.join(out, label + ".json")))
    except Exception:
        return {}, None, None
    return ({k["short_name"]: k["bottleneck"]["class"] for k in r["kernels"]}, r.get("primary", {}).get("type"),
            (r.get("timeline") or {}).get("launch_bound"))
print("| workload | pass 1 | seconds | rc | primary | launch bound (timeline) | classes equal to the ncu-pass-1 run |")
print("|---|---|--:|--:|---|---|---|")
for w in ("suite", "moe"):
    base, _, _ = classes(w + "_ncu")
    for p in ("tracer", "ncu"):
        l = f"{w}_{p}"; t = times.get(l, {})
        c, prim, lb = classes(l)
        same = sum(1 for k, v in c.items() if base.get(k) == v)
        print(f"| {w} | {p} | {t.get('seconds', 0):.1f} | {t.get('rc')} | {prim} | {lb} | {same}/{len(c)} |")
PY
