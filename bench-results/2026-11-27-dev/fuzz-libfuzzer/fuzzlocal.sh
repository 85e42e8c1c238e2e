#!/bin/bash
cd /work/main
B=/work/main/fuzz/target/x86_64-unknown-linux-gnu/release
batches=("rocpd demangle" "gzip tune_space" "kopt_trace run_folder" "kineto kineto_serde" "ncu_csv rocprof" "rocprofv3_json npy" "safetensors")
i=0
for b in "${batches[@]}"; do
  i=$((i+1))
  FUZZ_BIN_DIR=$B FUZZ_TARGETS="$b" bash scripts/fuzz/run_all.sh /tmp/fuzzlocal/b$i 600 > /tmp/fuzzlocal/b$i.log 2>&1
  echo "batch $i ($b) rc=$? $(date -u +%T)" >> /tmp/fuzzlocal/progress
done
