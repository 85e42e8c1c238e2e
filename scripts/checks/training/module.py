"""One training-suite workload in kopt's module form, for `kopt profile
--script module.py --module Model` with TRAIN_WORKLOAD naming it (#38's
profile cost on training steps): train_step runs the workload's baseline
step (data, forward, loss, backward, optimizer) as workloads.py builds it.
The model, inputs and optimizer kopt passes are placeholders: the step
owns its own, built from the same seed as measure.py's."""
import os
import sys

import torch

# kopt runs a copy of this file from its run folder: workloads.py is found
# through TRAINING_DIR (run.sh sets it), else beside this file.
sys.path.insert(0, os.environ.get("TRAINING_DIR") or os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

_step = None


def _baseline():
    global _step
    if _step is None:
        _step = workloads.WORKLOADS[os.environ["TRAIN_WORKLOAD"]]()["eager"]
    return _step


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        _baseline()  # built with the model, as a user's script would
        self.unused = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return x


def get_inputs():
    return []


def train_step(model, inputs, optimizer):
    return _baseline()()
