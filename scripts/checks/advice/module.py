# One suite model as a module script kopt drives (`kopt profile --script
# module.py`): ADVICE_MODEL names it and ADVICE_DIR is this folder (kopt
# runs a copy of the script from the run folder). Built on the CPU; kopt's
# driver moves the model and the inputs to the GPU.
import os
import sys

import torch

sys.path.insert(0, os.environ["ADVICE_DIR"])
import zoo  # noqa: E402

NAME = zoo.env_model()


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net, _ = zoo.build(NAME, device="cpu")

    def forward(self, *x):
        return self.net(*x)


def get_inputs():
    return zoo.build_inputs(NAME)
