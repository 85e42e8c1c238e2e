# Written by kopt: drives a module script for `kopt profile` /
# `profile_module`: warm-up, then STEPS forward passes, each inside an NVTX
# range `kopt_step`, so the profile's iterations are exact.
#   python3 kopt_profile_driver.py SCRIPT MODULE_NAME WARMUP STEPS
import sys

import torch

import kopt_module

path, module_name, warmup, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# kopt sets CUDA_VISIBLE_DEVICES to the chosen GPU: it is cuda:0 here.
device = torch.device("cuda:0")
model, make_inputs = kopt_module.build(path, module_name, device)
inputs = make_inputs()
with torch.inference_mode():
    for _ in range(warmup):
        model(*inputs)
    torch.cuda.synchronize()
    for _ in range(steps):
        torch.cuda.nvtx.range_push("kopt_step")
        model(*inputs)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
