"""A launch-bound module script for `kopt profile --script` (issue 14's
profile bare run): 24 tiny elementwise ops on a 4x256 tensor.

    python3 chain_module.py OUT.json   eager vs CUDA-graph replay, bare (JSON)
"""
import json
import sys

import torch


class Model(torch.nn.Module):
    def forward(self, x):
        for i in range(12):
            x = torch.nn.functional.gelu(x) * (1.0 + 1e-3 * i)
        return x


def get_inputs():
    return [torch.randn(4, 256, device="cuda")]


if __name__ == "__main__":
    model, inputs = Model().cuda(), get_inputs()

    def per_step_us(fn, n=500):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        for _ in range(n):
            fn()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) * 1e3 / n

    with torch.inference_mode():
        for _ in range(10):
            model(*inputs)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(*inputs)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            model(*inputs)
        rounds = [(per_step_us(lambda: model(*inputs)), per_step_us(g.replay)) for _ in range(5)]
    eager = sorted(r[0] for r in rounds)[2]
    graph = sorted(r[1] for r in rounds)[2]
    with open(sys.argv[1], "w") as f:
        json.dump({"workload": "chain", "eager_us": eager, "graph_us": graph, "speedup": eager / graph, "rounds": rounds}, f)
