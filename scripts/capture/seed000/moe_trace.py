"""Seed 000 on the GPU machine: a small-batch MoE routing step (topk + sort +
cat, batch 4) traced with torch.profiler, then timed eager vs CUDA-graph
replay, interleaved. Writes OUT/moe_trace.json and OUT/moe_timing.json.
A large-matmul step is traced too (graph capture must not be recommended)."""
import json, os, sys, time
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from moe_route import MoeRoute  # noqa: E402

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
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        step()
torch.cuda.current_stream().wait_stream(s)
with torch.cuda.graph(g):
    step()

def per_call(fn, n=200):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6

eager, graph = [], []
for _ in range(7):
    eager.append(per_call(step))
    graph.append(per_call(g.replay))
med = lambda v: sorted(v)[len(v) // 2]
res = {"eager_us": med(eager), "graph_us": med(graph), "eager_all": eager, "graph_all": graph,
       "device": torch.cuda.get_device_name()}
json.dump(res, open(os.path.join(out, "moe_timing.json"), "w"), indent=1)
print(json.dumps({k: res[k] for k in ("device", "eager_us", "graph_us")}))
