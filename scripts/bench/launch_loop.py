"""10,000 one-block kernel launches, timed LOOPS times in one process; prints
the median host time per launch (and every loop's) as JSON.
   python3 launch_loop.py [--n 10000] [--loops 5] [--torch-profiler]"""
import argparse, json, statistics, time
import cupy as cp

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=10000)
ap.add_argument("--loops", type=int, default=5)
ap.add_argument("--torch-profiler", action="store_true")
args = ap.parse_args()
k = cp.RawKernel(r'extern "C" __global__ void kopt_noop(int* c) { if (threadIdx.x == 0) c[0] += 1; }', "kopt_noop")
c = cp.zeros(1, dtype=cp.int32)
for _ in range(100):
    k((1,), (32,), (c,))
cp.cuda.Device().synchronize()

spans = []  # each loop's wall-clock start and end (ns, CLOCK_REALTIME like CUPTI's)

def loop():
    w0 = time.time_ns()
    t0 = time.perf_counter()
    for _ in range(args.n):
        k((1,), (32,), (c,))
    cp.cuda.Device().synchronize()
    us = (time.perf_counter() - t0) / args.n * 1e6
    spans.append([w0, time.time_ns()])
    return us

def loops():
    return [loop() for _ in range(args.loops)]

if args.torch_profiler:
    import torch
    from torch.profiler import profile, ProfilerActivity
    torch.cuda.init()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        us = loops()
else:
    us = loops()
assert int(c.get()[0]) == 100 + args.n * args.loops
print(json.dumps({"per_launch_us": statistics.median(us), "loops_us": us, "loops_ns": spans, "n": args.n * args.loops}))
