# Written by kopt: drives a module script for `kopt profile` /
# `profile_module`: WARMUP then STEPS forward passes, each inside an NVTX
# range `kopt_step`, so the profile's iterations are exact. The warm-up
# passes are steps too: kopt's steady-state detection cuts the slow first
# ones, and kernels launched only there (cuDNN's benchmark search, Triton's
# autotuner) are known as trials instead of passing for set-up.
# With a fifth argument `ops`, the steps also run under PyTorch's
# emit_nvtx(record_shapes=True): every op an NVTX range with its input
# shapes, so kopt traces each kernel back to its op (at a host cost per op).
# A script in the training form (train_step, see kopt_module.py) runs one
# train_step a step with autograd on.
# With `variant=NAME` (`kopt optimize`'s kept result), the steps run the
# module as the optimize harness builds that candidate or stack (`a+b`):
# built, compiled and captured before the first step, its inputs prepared
# as the harness times them.
#   python3 kopt_profile_driver.py SCRIPT MODULE_NAME WARMUP STEPS [ops] [variant=NAME]
import contextlib
import sys

import torch

import kopt_module

path, module_name, warmup, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
record_ops = "ops" in sys.argv[5:]
variant = next((a[len("variant=") :] for a in sys.argv[5:] if a.startswith("variant=")), None)
# kopt sets CUDA_VISIBLE_DEVICES to the chosen GPU: it is cuda:0 here.
device = torch.device("cuda:0")
if variant:
    import kopt_optimize

    model, make_inputs = kopt_module.build(path, module_name, device)
    inputs = make_inputs()
    # As the harness does: eager warmed up, then the variant built (and
    # compiled, captured) on these inputs, all in inference mode.
    with torch.inference_mode():
        for _ in range(kopt_optimize.WARMUP):
            model(*inputs)
        built = kopt_optimize.build(variant, model, inputs)
        inputs = built.prepare(inputs)
        torch.cuda.synchronize()

    def step(xs):
        return built(*xs)

    training = False
else:
    step, make_inputs, training = kopt_module.build_step(path, module_name, device)
    inputs = make_inputs()
ops = torch.autograd.profiler.emit_nvtx(record_shapes=True) if record_ops else contextlib.nullcontext()
# A forward runs in inference mode; a training step needs autograd.
grad = contextlib.nullcontext() if training else torch.inference_mode()
with grad, ops:
    for i in range(warmup + steps):
        torch.cuda.nvtx.range_push("kopt_step")
        step(inputs)
        torch.cuda.nvtx.range_pop()
        if i + 1 == warmup:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
