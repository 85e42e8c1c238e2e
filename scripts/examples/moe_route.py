"""Seed 000's situation as a PyTorch module: MoE routing (topk + sort + cat)
at batch 4, where every op is a tiny kernel and launch overhead dominates.

    kopt profile --script scripts/examples/moe_route.py --module moe_route
    python3 scripts/examples/moe_route.py --iters 200 --check
    kopt trace -- python3 scripts/examples/moe_route.py --iters 50 --nvtx
    python3 scripts/examples/moe_route.py --time-graph OUT.json  # eager vs CUDA-graph replay
    python3 scripts/examples/moe_route.py --matmul --nvtx         # large bf16 matmuls instead
"""
import argparse
import json
import time

import torch


class MoeRoute(torch.nn.Module):
    def __init__(self, experts=256, top_k=8, shared=4):
        super().__init__()
        self.top_k = top_k
        self.register_buffer("shared", torch.arange(shared, dtype=torch.int64))

    def forward(self, logits):
        w, idx = torch.topk(logits, self.top_k, dim=-1)
        s, order = torch.sort(idx.flatten())
        out = torch.cat([s, self.shared])
        return w.softmax(-1), out, order


def per_call_us(fn, n=200):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def capture_graph(step):
    """The step captured in a CUDA graph (after warm-up on a side stream);
    returns the graph and the step's outputs, which each replay rewrites."""
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        outputs = step()
    return g, outputs


def time_graph(step):
    """Eager vs CUDA-graph replay of one step: 7 interleaved rounds, medians."""
    for _ in range(5):
        step()
    g, _ = capture_graph(step)
    eager, graph = [], []
    for _ in range(7):
        eager.append(per_call_us(step))
        graph.append(per_call_us(g.replay))
    med = lambda v: sorted(v)[len(v) // 2]
    return {"eager_us": med(eager), "graph_us": med(graph), "eager_all": eager,
            "graph_all": graph, "device": torch.cuda.get_device_name()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--nvtx", action="store_true", help="one NVTX range 'step' per iteration")
    ap.add_argument("--matmul", action="store_true", help="a large bf16 matmul step instead (GPU bound)")
    ap.add_argument("--time-graph", metavar="OUT", help="write eager vs graph-replay timings as JSON")
    ap.add_argument("--graph", action="store_true", help="each iteration replays a captured CUDA graph")
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.matmul:
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        step = lambda: a @ b
    else:
        mod = MoeRoute().cuda()
        logits = torch.randn(args.batch, 256, device="cuda")
        step = lambda: mod(logits)
    if args.time_graph:
        res = time_graph(step)
        json.dump(res, open(args.time_graph, "w"), indent=1)
        print(json.dumps({k: res[k] for k in ("device", "eager_us", "graph_us")}))
        return
    if args.graph:
        g, captured = capture_graph(step)
        step = lambda: (g.replay(), captured)[1]
    for _ in range(args.iters):
        if args.nvtx:
            torch.cuda.nvtx.range_push("step")
        result = step()
        if args.nvtx:
            torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    if args.check and not args.matmul:
        w, out, order = result
        ref_w, ref_idx = torch.topk(logits.cpu(), 8, dim=-1)
        assert torch.allclose(w.cpu(), ref_w.softmax(-1), atol=1e-6)
        assert torch.equal(out[:-4].cpu(), torch.sort(ref_idx.flatten()).values)
        print("moe_route check ok")


if __name__ == "__main__":
    main()
