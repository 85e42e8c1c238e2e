# The training suite's mlp_sgd_forloop step (scripts/checks/training/
# workloads.py) in kopt's training form: 24 Linear+GELU layers of width
# 256, SGD with momentum in its for-loop form, batch 128. Measured there
# (H200): graph capture 8.76x, fused SGD 1.26x, foreach 1.24x, compile 1.08x.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, width=256, depth=24):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.GELU()]
        self.net = nn.Sequential(*layers, nn.Linear(width, 10))

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(128, 256), torch.randint(0, 10, (128,))]


def get_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9, foreach=False)


def loss_fn(output, inputs):
    return F.cross_entropy(output, inputs[-1])
