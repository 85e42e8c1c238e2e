"""The same module in one kernel (1 + 2x): an honest candidate."""
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.add(torch.ones((), device=x.device), x, alpha=2.0)


def get_inputs():
    return [torch.randn(32 * 2**20, device="cuda")]


def get_init_inputs():
    return []
