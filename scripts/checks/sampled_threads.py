"""Stress for sampled tracing: several host threads launch PyTorch work (with
NVTX ranges) while kopt's tracer attaches and detaches CUPTI many times.
    kopt trace --sample 5ms/20ms -- python3 scripts/checks/sampled_threads.py [--threads 4] [--seconds 3]
Exits 0 with the number of steps each thread ran; a crash or hang is the finding."""
import argparse
import threading
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=4)
ap.add_argument("--seconds", type=float, default=3.0)
args = ap.parse_args()
torch.cuda.init()
steps = [0] * args.threads


def work(k):
    x = torch.randn(64, 256, device="cuda")
    s = torch.cuda.Stream()
    end = time.time() + args.seconds
    with torch.cuda.stream(s):
        while time.time() < end:
            torch.cuda.nvtx.range_push(f"step{k}")
            w, i = torch.topk(x, 8, dim=-1)
            y, _ = torch.sort(i.flatten())
            z = torch.cat([y, y]).float().sum()
            torch.cuda.nvtx.range_pop()
            if steps[k] % 50 == 0:
                z.item()  # a sync now and then
            steps[k] += 1
    s.synchronize()


threads = [threading.Thread(target=work, args=(k,)) for k in range(args.threads)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print({"steps": steps})
