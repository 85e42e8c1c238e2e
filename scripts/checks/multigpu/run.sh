#!/usr/bin/env bash
# The data-parallel suite on one host's GPUs (ddp_suite.py under torchrun),
# then one case again under kopt's tracer (every rank traced, one file a
# process), packed as OUT/multigpu.tgz.
#   bash run.sh OUT TRACER_LIB [NPROC]
set -uo pipefail
out=${1:?OUT}; tracer=${2:?TRACER_LIB}; nproc=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
tracer=$(cd "$(dirname "$tracer")" && pwd)/$(basename "$tracer")
mkdir -p "$out/m"; out=$(cd "$out" && pwd)
# NVLink multicast stays off on shared hosts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } > "$out/m/card.txt" 2>&1
t0=$(date +%s)
timeout 420 torchrun --standalone --nproc_per_node="$nproc" "$here/ddp_suite.py" "$out/m/kineto" > "$out/m/suite.log" 2>&1
echo "suite exit $? $(( $(date +%s) - t0 ))s" >> "$out/m/card.txt"
t0=$(date +%s)
mkdir -p "$out/m/kopt-trace"
CUDA_INJECTION64_PATH="$tracer" KOPT_TRACE_OUT="$out/m/kopt-trace/trace.jsonl" KOPT_TRACE_RUN=mgpu1 \
  LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} \
  timeout 150 torchrun --standalone --nproc_per_node="$nproc" "$here/ddp_suite.py" "$out/m/traced-kineto" straggler > "$out/m/traced.log" 2>&1
echo "traced exit $? $(( $(date +%s) - t0 ))s" >> "$out/m/card.txt"
cd "$out" && find m -name '*.json' -exec gzip -9 {} + ; tar czf multigpu.tgz m && rm -rf m && ls -la
