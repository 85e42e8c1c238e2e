"""Bare per-step times, interleaved rounds, CUDA events; one JSON line.

  python3 measure.py bn BATCH        ResNet-50 eager vs batch norm folded
                                     into the convolutions (torch.fx fuse)
  python3 measure.py graph BATCH     ResNet-50 eager vs CUDA-graph replay
  python3 measure.py compile         GPT-2 prefill (bf16, 8 x 512) eager vs
                                     torch.compile (default mode)
  python3 measure.py steps BATCH N   N ResNet-50 steps, each in an NVTX
                                     "step" range (for kopt trace)
"""

import json
import sys

import torch

torch.backends.cudnn.benchmark = True


def step_ms(fn, steps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(steps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / steps


def rounds(variants, steps, n=5):
    """Median per-step ms of each variant over n interleaved rounds."""
    for fn in variants.values():
        for _ in range(5):
            fn()
    rs = [{k: step_ms(fn, steps) for k, fn in variants.items()} for _ in range(n)]
    return {k: sorted(r[k] for r in rs)[n // 2] for k in variants}, rs


def resnet(batch):
    import torchvision

    m = torchvision.models.resnet50(weights=None).to("cuda", torch.bfloat16).eval()
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    return m, x


def bn(batch):
    from torch.fx.experimental.optimization import fuse

    m, x = resnet(batch)
    folded = fuse(m)
    with torch.inference_mode():
        err = (m(x).float() - folded(x).float()).abs().max().item()
        med, rs = rounds({"eager": lambda: m(x), "folded": lambda: folded(x)}, 10)
    return {"case": f"resnet50_b{batch}_bn", "step_ms": med, "speedup": med["eager"] / med["folded"], "max_abs_diff": err, "rounds": rs}


def graph(batch):
    m, x = resnet(batch)
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                m(x)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            m(x)
        med, rs = rounds({"eager": lambda: m(x), "graph": g.replay}, 50)
    return {"case": f"resnet50_b{batch}_graph", "step_ms": med, "speedup": med["eager"] / med["graph"], "rounds": rs}


def compile_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    m = GPT2LMHeadModel(GPT2Config()).to("cuda", torch.bfloat16).eval()
    ids = torch.randint(0, 50257, (8, 512), device="cuda")
    c = torch.compile(m)
    with torch.inference_mode():
        for _ in range(3):
            c(input_ids=ids)
        med, rs = rounds({"eager": lambda: m(input_ids=ids), "compiled": lambda: c(input_ids=ids)}, 20)
    return {"case": "gpt2_compile", "step_ms": med, "speedup": med["eager"] / med["compiled"], "rounds": rs}


def steps(batch, n):
    m, x = resnet(batch)
    with torch.inference_mode():
        for _ in range(n):
            torch.cuda.nvtx.range_push("step")
            m(x)
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "bn":
        print(json.dumps(bn(int(sys.argv[2]))))
    elif what == "graph":
        print(json.dumps(graph(int(sys.argv[2]))))
    elif what == "steps":
        steps(int(sys.argv[2]), int(sys.argv[3]))
    elif what == "compile":
        print(json.dumps(compile_gpt2()))
    else:
        raise SystemExit(__doc__)
