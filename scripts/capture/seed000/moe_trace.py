"""Seed 000 on the GPU machine: a small-batch MoE routing step (topk + sort +
cat, batch 4) traced with torch.profiler, then timed eager vs CUDA-graph
replay, interleaved. Writes OUT/moe_trace.json and OUT/moe_timing.json.
A large-matmul step is traced too (graph capture must not be recommended)."""
import json, os, sys
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from moe_route import MoeRoute, time_graph  # noqa: E402

out = sys.argv[1]
torch.manual_seed(0)
mod = MoeRoute().cuda()
logits = torch.randn(4, 256, device="cuda")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

def step():
    return mod(logits)

def big():
    return a @ b

for f in (step, big):
    for _ in range(5):
        f()
torch.cuda.synchronize()

from torch.profiler import profile, ProfilerActivity  # noqa: E402
for name, f, n in (("moe_trace", step, 20), ("matmul_trace", big, 10)):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            f()
            prof.step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(os.path.join(out, f"{name}.json"))

# Eager vs graph replay, interleaved repeats, median per-call time.
res = time_graph(step)
json.dump(res, open(os.path.join(out, "moe_timing.json"), "w"), indent=1)
print(json.dumps({k: res[k] for k in ("device", "eager_us", "graph_us")}))
