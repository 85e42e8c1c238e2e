#!/usr/bin/env bash
# The data-parallel suite on one host's GPUs (ddp_suite.py under torchrun),
# then `kopt trace` over torchrun on two cases (every rank traced by kopt's
# tracer, the ranks analysed as one job), packed as OUT/multigpu.tgz.
#   bash run.sh OUT KOPT [NPROC]     (the tracer library next to KOPT)
set -uo pipefail
out=${1:?OUT}; kopt=${2:?KOPT}; nproc=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
kopt=$(cd "$(dirname "$kopt")" && pwd)/$(basename "$kopt")
mkdir -p "$out/m"; out=$(cd "$out" && pwd)
# NVLink multicast stays off on shared hosts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } > "$out/m/card.txt" 2>&1
t0=$(date +%s)
timeout 400 torchrun --standalone --nproc_per_node="$nproc" "$here/ddp_suite.py" "$out/m/kineto" > "$out/m/suite.log" 2>&1
echo "suite exit $? $(( $(date +%s) - t0 ))s" >> "$out/m/card.txt"
for spec in straggler:base tiny_buckets:base; do
  t0=$(date +%s); name=${spec/:/-}
  timeout 120 "$kopt" trace --no-bare-run --runs-dir "$out/m/runs-$name" -o "$out/m/$name.report.txt" -- \
    torchrun --standalone --nproc_per_node="$nproc" "$here/ddp_suite.py" --only "$spec" > "$out/m/$name.log" 2>&1
  echo "kopt trace $spec exit $? $(( $(date +%s) - t0 ))s" >> "$out/m/card.txt"
done
for d in "$out"/m/kineto/*/base; do "$kopt" analyze "$d" > "$d/../kopt-base.txt" 2>&1; done
cd "$out" && find m -name '*.json' -exec gzip -9 {} + ; find m -name 'trace.jsonl*' -exec gzip -9 {} + ; tar czf multigpu.tgz m && rm -rf m && ls -la
