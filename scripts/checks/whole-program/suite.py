"""One workload of the whole-program suite (#35), in its own process:
   python3 suite.py NAME OUT
times the baseline step and every fix bare (CUDA events over a block of
steps, median of interleaved rounds), then records the baseline under
torch.profiler (with_stack=True, ProfilerStep schedule) into
OUT/NAME.pt.trace.json.gz and the times into OUT/NAME.measured.json."""
import gzip
import json
import os
import shutil
import statistics
import sys
import time

import torch

import workloads

name, out = sys.argv[1], sys.argv[2]
step, fixes = workloads.WORKLOADS[name]()
variants = {"baseline": step, **fixes}
for fn in variants.values():
    for _ in range(3):
        fn()
torch.cuda.synchronize()


def block_ms(fn, n):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    a.record()
    for _ in range(n):
        fn()
    b.record()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e3 / n
    return max(a.elapsed_time(b) / n, wall)


# Steps a block: about 50 ms of the baseline.
one = block_ms(step, 3)
n = max(3, min(200, int(50 / max(one, 1e-3))))
rounds = {k: [] for k in variants}
deadline = time.time() + 25
for r in range(9):
    for k, fn in variants.items():
        rounds[k].append(block_ms(fn, n))
    if time.time() > deadline and r >= 2:
        break
med = {k: statistics.median(v) for k, v in rounds.items()}
doc = {
    "name": name,
    "device": torch.cuda.get_device_name(),
    "torch": torch.__version__,
    "steps_per_block": n,
    "step_ms": med,
    "speedup": {k: med["baseline"] / v for k, v in med.items() if k != "baseline"},
    "rounds_ms": rounds,
}
with open(os.path.join(out, f"{name}.measured.json"), "w") as f:
    json.dump(doc, f, indent=1)
print(name, {k: round(v, 3) for k, v in doc["speedup"].items()}, flush=True)

sched = torch.profiler.schedule(wait=1, warmup=2, active=6, repeat=1)
path = os.path.join(out, f"{name}.pt.trace.json")
with torch.profiler.profile(
    activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
    schedule=sched,
    with_stack=True,
) as p:
    for _ in range(10):
        step()
        p.step()
p.export_chrome_trace(path)
with open(path, "rb") as src, gzip.open(path + ".gz", "wb", 6) as dst:
    shutil.copyfileobj(src, dst)
os.remove(path)
