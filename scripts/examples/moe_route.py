"""Seed 000's situation as a PyTorch module: MoE routing (topk + sort + cat)
at batch 4, where every op is a tiny kernel and launch overhead dominates.

    kopt profile --script scripts/examples/moe_route.py --module moe_route
    python3 scripts/examples/moe_route.py --iters 200 --check
"""
import argparse

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    mod = MoeRoute().cuda()
    logits = torch.randn(args.batch, 256, device="cuda")
    for _ in range(args.iters):
        w, out, order = mod(logits)
    torch.cuda.synchronize()
    if args.check:
        ref_w, ref_idx = torch.topk(logits.cpu(), 8, dim=-1)
        assert torch.allclose(w.cpu(), ref_w.softmax(-1), atol=1e-6)
        assert torch.equal(out[:-4].cpu(), torch.sort(ref_idx.flatten()).values)
        print("moe_route check ok")


if __name__ == "__main__":
    main()
