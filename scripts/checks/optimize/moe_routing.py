# Seed 000's MoE routing step at batch 4: softmax + top-k, renormalise,
# sort the chosen expert ids, append the shared expert (launch bound).
import torch


class Model(torch.nn.Module):
    def __init__(self, num_experts=64, top_k=8, shared_expert=64):
        super().__init__()
        self.top_k = top_k
        self.shared_expert = shared_expert

    def forward(self, router_logits):
        probs = torch.softmax(router_logits, dim=-1)
        weights, ids = torch.topk(probs, self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        # Stable: with ties (one expert chosen by several tokens) the order of
        # equal ids is otherwise the implementation's choice, and compiled
        # and eager may both be right yet differ.
        sorted_ids, order = torch.sort(ids.flatten(), stable=True)
        shared = torch.full((ids.shape[0], 1), self.shared_expert, dtype=ids.dtype, device=ids.device)
        ids_with_shared = torch.cat([ids, shared], dim=1)
        ones = torch.ones((weights.shape[0], 1), dtype=weights.dtype, device=weights.device)
        weights_with_shared = torch.cat([weights, ones], dim=1)
        return ids_with_shared, weights_with_shared, sorted_ids, order


def get_inputs():
    return [torch.randn(4, 64)]


def get_init_inputs():
    return [64, 8, 64]
