# torchvision ResNet-50 (random weights, eval, bf16, channels-first) as a
# module script kopt drives. cuDNN's algorithm search is on, as in most
# inference code: its trial kernels run in the warm-up steps only.
# KOPT_BATCH sets the batch (default 256).
import os

import torch
import torchvision

torch.backends.cudnn.benchmark = True
BATCH = int(os.environ.get("KOPT_BATCH", "256"))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torchvision.models.resnet50(weights=None).to(torch.bfloat16).eval()

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(BATCH, 3, 224, 224, dtype=torch.bfloat16)]
