# Compute bound: two 8192-wide bf16 matmuls (the GPU is busy; launches do
# not set the pace, so a CUDA graph has nothing to save).
import torch


class Model(torch.nn.Module):
    def __init__(self, n=8192):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(n, n, dtype=torch.bfloat16) / n**0.5)
        self.w2 = torch.nn.Parameter(torch.randn(n, n, dtype=torch.bfloat16) / n**0.5)

    def forward(self, x):
        return (x @ self.w1) @ self.w2


def get_inputs():
    return [torch.randn(8192, 8192, dtype=torch.bfloat16)]
