#!/usr/bin/env bash
# Sampled tracing under stress on the GPU machine: REPEAT runs of several
# PyTorch threads (NVTX ranges, syncs) while the tracer attaches and detaches
# CUPTI every 20 ms. Prints each run's exit status, windows and kernels.
#   scripts/checks/sampled_stress.sh   (needs target/release/{kopt,libkopt_tracer.so})
set -u
K=target/release/kopt
for i in $(seq "${REPEAT:-5}"); do
  rm -rf /tmp/st; timeout 120 $K trace --quiet --sample "${SAMPLE:-5ms/20ms}" --runs-dir /tmp/st --format json -o /tmp/st.json \
    -- python3 scripts/checks/sampled_threads.py --threads "${THREADS:-4}" > /tmp/st.log 2>&1
  rc=$?
  f=$(ls /tmp/st/*/trace.jsonl 2>/dev/null | head -1)
  echo "run $i rc=$rc windows=$(grep -c '"t":"window"' "$f" 2>/dev/null) kernels=$(grep -c '"t":"kernel"' "$f" 2>/dev/null) api=$(grep -c '"t":"api"' "$f" 2>/dev/null) $(grep -h steps /tmp/st/*/trace.log 2>/dev/null | tail -1) $(tail -1 "$f" 2>/dev/null)"
  [ $rc -ne 0 ] && { echo "--- run $i kopt output:"; grep -v "^\[" /tmp/st.log | tail -6; echo "--- workload log:"; tail -6 /tmp/st/*/trace.log 2>/dev/null; }
  grep -iE "malloc|corrupt|segfault|abort|panick" /tmp/st.log /tmp/st/*/trace.log 2>/dev/null | head -3
done
