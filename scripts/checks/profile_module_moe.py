"""profile_module on a seed-000-like MoE routing module (topk + sort + cat,
batch 4), printed as seed 000 prints it. Run on the GPU machine with the
kopt wheel installed:  python3 profile_module_moe.py OUT_DIR
"""

import sys
from pathlib import Path

import kopt

SCRIPT = '''
import torch


class Model(torch.nn.Module):
    """MoE routing: softmax + top-k over the experts, sort of the chosen
    expert ids, and the shared expert appended to every token's list."""

    def __init__(self, num_experts=64, top_k=8, shared_expert=64):
        super().__init__()
        self.top_k = top_k
        self.shared_expert = shared_expert

    def forward(self, router_logits):
        probs = torch.softmax(router_logits, dim=-1)
        weights, ids = torch.topk(probs, self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        sorted_ids, order = torch.sort(ids.flatten())
        shared = torch.full((ids.shape[0], 1), self.shared_expert, dtype=ids.dtype, device=ids.device)
        ids_with_shared = torch.cat([ids, shared], dim=1)
        ones = torch.ones((weights.shape[0], 1), dtype=weights.dtype, device=weights.device)
        weights_with_shared = torch.cat([weights, ones], dim=1)
        return ids_with_shared, weights_with_shared, sorted_ids, order


def get_inputs():
    return [torch.randn(4, 64)]


def get_init_inputs():
    return [64, 8, 64]
'''


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    analysis = kopt.profile_module(
        script_content=SCRIPT,
        module_name="topk_sort",
        gpu_id=0,
        runs_dir=out / "runs",
        db=out / "history.db",
    )
    print(f"Primary bottleneck: {analysis.primary_bottleneck_component}")
    print(f"Bottleneck type: {analysis.primary_bottleneck_type}")
    for rec in analysis.recommendations:
        print(f"  - {rec}")
    print()
    print(analysis.to_text(width=160))
    (out / "analysis.json").write_text(analysis.to_json())
    (out / "analysis.html").write_text(analysis._repr_html_())


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "profile-module-out"))
