"""10,000 one-block kernel launches; prints host time per launch as JSON.
   python3 launch_loop.py [--n 10000] [--torch-profiler]"""
import argparse, json, time
import cupy as cp

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=10000)
ap.add_argument("--torch-profiler", action="store_true")
args = ap.parse_args()
k = cp.RawKernel(r'extern "C" __global__ void kopt_noop(int* c) { if (threadIdx.x == 0) c[0] += 1; }', "kopt_noop")
c = cp.zeros(1, dtype=cp.int32)
for _ in range(100):
    k((1,), (32,), (c,))
cp.cuda.Device().synchronize()

def loop():
    t0 = time.perf_counter()
    for _ in range(args.n):
        k((1,), (32,), (c,))
    cp.cuda.Device().synchronize()
    return (time.perf_counter() - t0) / args.n * 1e6

if args.torch_profiler:
    import torch
    from torch.profiler import profile, ProfilerActivity
    torch.cuda.init()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        us = loop()
else:
    us = loop()
assert int(c.get()[0]) == 100 + args.n
print(json.dumps({"per_launch_us": us, "n": args.n}))
