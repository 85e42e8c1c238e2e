"""GPT-2 prefill (bf16, batch 8 x 512, random weights) with the vocabulary
as it is (50257) and padded to 50304: per-step time, bare, interleaved
rounds, CUDA events. Prints one JSON line."""

import json

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def step_ms(model, ids, steps=20):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(steps):
        model(input_ids=ids)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / steps


models = {
    v: GPT2LMHeadModel(GPT2Config(vocab_size=v)).to("cuda", torch.bfloat16).eval()
    for v in (50257, 50304)
}
ids = torch.randint(0, 50257, (8, 512), device="cuda")
rounds = []
with torch.inference_mode():
    for m in models.values():
        for _ in range(3):
            m(input_ids=ids)
    for _ in range(5):
        rounds.append({v: step_ms(m, ids) for v, m in models.items()})
med = {v: sorted(r[v] for r in rounds)[2] for v in models}
print(json.dumps({"step_ms": med, "speedup": med[50257] / med[50304], "rounds": rounds}))
