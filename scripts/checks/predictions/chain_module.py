"""A launch-bound module script for `kopt profile --script` (issue 14's
profile bare run): 24 tiny elementwise ops on a 4x256 tensor.

    python3 chain_module.py    eager vs CUDA-graph replay, bare (a JSON line)
"""
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
    import os

    # The measurement is workloads.py's; kopt copies only this file.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from workloads import measure_model

    measure_model("chain", Model().cuda(), get_inputs())
