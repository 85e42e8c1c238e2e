#!/usr/bin/env bash
# Smoke check of the tracer and kopt bench on the GPU machine: NVTX ranges,
# both drain modes, the device record, a forked child, and --timing auto with
# and without NVTX ranges.  scripts/checks/tracer_smoke.sh (needs target/release/{kopt,libkopt_tracer.so})
set -u
K=target/release/kopt
nvidia-smi --query-gpu=name --format=csv,noheader
nvcc -O3 -arch=sm_90 -o /tmp/vk scripts/bench/verdict_trials/vk.cu || exit 1
$K trace --quiet --runs-dir /tmp/a --format json -o /tmp/a.json -- /tmp/vk --reps 20 --nvtx; echo "trace rc=$?"
grep -c range_start /tmp/a/*/trace.jsonl; tail -1 /tmp/a/*/trace.jsonl
KOPT_TRACER_SYNC_DRAIN=1 $K trace --quiet --runs-dir /tmp/b --format json -o /tmp/b.json -- /tmp/vk --reps 20 --nvtx; echo "sync rc=$?"; tail -1 /tmp/b/*/trace.jsonl
python3 -c "import json; r=json.load(open('/tmp/a.json')); print('device', r['device']['name'], 'iterations', r['timeline']['iterations'])"
timeout 60 $K trace --quiet --runs-dir /tmp/f --format json -o /tmp/f.json -- python3 scripts/checks/fork_child.py > /tmp/f.log 2>&1; echo "fork rc=$?"; tail -1 /tmp/f/*/trace.jsonl
# Sampled: a CUDA C++ (runtime API) program, and the forked child.
$K trace --quiet --sample 5ms/50ms --runs-dir /tmp/s --format json -o /tmp/s.json -- /tmp/vk --reps 400 --nvtx; echo "sampled rc=$?"
python3 -c "import json; r=json.load(open('/tmp/s.json')); t=r.get('timeline') or {}; print('sampled C++:', t.get('sampling'), 'kernels', t.get('kernels'), 'launch calls', t.get('kernel_launch_calls'), 'iterations', t.get('iterations'), r['notes'][:1])"
timeout 60 $K trace --quiet --sample 10ms/100ms --runs-dir /tmp/fs --format json -o /tmp/fs.json -- python3 scripts/checks/fork_child.py > /tmp/fs.log 2>&1; echo "sampled fork rc=$?"; tail -1 /tmp/fs/*/trace.jsonl
for nv in "--nvtx" ""; do
  $K bench --db /tmp/h.db --max-time 2 --format json -o /tmp/bench.json --baseline "/tmp/vk --reps 30 $nv" --candidate "/tmp/vk --reps 30 --scale 0.9 $nv"; echo "bench rc=$?"
  python3 -c "import json; v=json.load(open('/tmp/bench.json'))['variants']; print(v[0]['source'][:60], '|', v[1]['verdict']['kind'], round(v[1]['speedup_vs_first'],3))"
done
$K history show 1 | grep device
