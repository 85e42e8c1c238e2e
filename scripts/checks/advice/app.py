"""A plain inference loop of one suite model, as an application runs it:
no NVTX, no profiler, the predictions copied to the host every step.

  python3 app.py MODEL [STEPS]
"""

import sys

import torch

import zoo

name = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
with torch.inference_mode():
    model, x = zoo.build(name)
    preds = []
    for _ in range(steps):
        y = model(*x)
        preds.append(y.float().mean().cpu())
print(name, len(preds), "steps")
