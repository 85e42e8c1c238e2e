"""Host cost of kopt's sync-only bare run (CUPTI's callbacks for the
synchronising calls alone): run once plainly and once with the tracer as
CUDA's injection and KOPT_BARE_SYNCS_OUT set, and compare. Prints one JSON
line: microseconds a launch (tiny kernels, no sync between) and a sync call
(cudaStreamSynchronize on an idle stream, through torch.cuda.synchronize),
the medians of 5 rounds.

  python3 sync_cost.py
"""

import json
import os
import time

import torch

x = torch.zeros(16, device="cuda")
for _ in range(200):
    x.add_(1)
torch.cuda.synchronize()


def per_call_us(fn, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


launch = sorted(per_call_us(lambda: x.add_(1), 20000) for _ in range(5))[2]
sync = sorted(per_call_us(torch.cuda.synchronize, 20000) for _ in range(5))[2]
print(json.dumps({"mode": "sync-only bare" if os.environ.get("KOPT_BARE_SYNCS_OUT") else "plain",
                  "launch_us": launch, "sync_us": sync, "card": torch.cuda.get_device_name()}))
