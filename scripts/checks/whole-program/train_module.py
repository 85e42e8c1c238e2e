"""A training step in kopt's module form: `kopt profile --script
train_module.py` drives train_step with autograd on (#35)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
        )

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))]


def get_optimizer(model):
    return torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)


def train_step(model, inputs, optimizer):
    x, y = inputs
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()
