# Written by kopt: drives a module script for `kopt profile` /
# `profile_module`: WARMUP then STEPS forward passes (or training steps,
# for a script in training form: docs/training.md), each inside an NVTX
# range `kopt_step`, so the profile's iterations are exact. The warm-up
# passes are steps too: kopt's steady-state detection cuts the slow first
# ones, and kernels launched only there (cuDNN's benchmark search, Triton's
# autotuner) are known as trials instead of passing for set-up.
# With a fifth argument `ops`, the steps also run under PyTorch's
# emit_nvtx(record_shapes=True): every op an NVTX range with its input
# shapes, so kopt traces each kernel back to its op (at a host cost per op).
# With `variant=NAME` (`kopt optimize`'s kept result), the steps run the
# module as the optimize harness builds that candidate or stack (`a+b`):
# built, compiled and captured before the first step, its inputs prepared
# as the harness times them.
# With `bare_out=PATH` (under kopt's tracer), the traced steps are followed
# by the bare ones in the same process: the tracer is asked to stop
# (`kopt_tracer_stop`), CUPTI detaches at the next CUDA call, and WARMUP +
# STEPS more steps run without op ranges or NVTX, each timed by the host
# clock into PATH as kopt's bare-run step lines. No second import and model
# build: `kopt profile` then costs about one run of the program. When the
# tracer cannot stop, PATH is not written and kopt times a separate run.
#   python3 kopt_profile_driver.py SCRIPT MODULE_NAME WARMUP STEPS [ops] [variant=NAME] [bare_out=PATH]
import contextlib
import ctypes
import json
import os
import sys
import time

import torch

import kopt_module

path, module_name, warmup, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
record_ops = "ops" in sys.argv[5:]
variant = next((a[len("variant=") :] for a in sys.argv[5:] if a.startswith("variant=")), None)
bare_out = next((a[len("bare_out=") :] for a in sys.argv[5:] if a.startswith("bare_out=")), None)
# kopt sets CUDA_VISIBLE_DEVICES to the chosen GPU: it is cuda:0 here.
device = torch.device("cuda:0")
mod, model = kopt_module.instantiate(path, module_name, device)
training = kopt_module.is_training(mod)
if training:
    # A training step (docs/training.md): autograd on, train mode, phases
    # in NVTX ranges kopt:data/forward/backward/optimizer inside kopt_step.
    if variant:
        import kopt_optimize

        trainer = kopt_optimize.build_training(variant, mod, model, device)
    else:
        trainer = kopt_module.TrainStep(mod, model, device)
    run_step = trainer.step
else:
    model = model.eval()
    inputs = [kopt_module.to_device(x, device) for x in mod.get_inputs()]
    if variant:
        import kopt_optimize

        # As the harness does: eager warmed up, then the variant built (and
        # compiled, captured) on these inputs, all in inference mode. Each
        # of these is a step too: what runs only here (cuDNN's algorithm
        # search, Inductor's autotuning) then falls in warm-up steps and is
        # known as a trial; launched before the first step it would pass
        # for the program's set-up and stay in the kernel table.
        with torch.inference_mode():
            for _ in range(kopt_optimize.WARMUP):
                with torch.cuda.nvtx.range("kopt_step"):
                    model(*inputs)
            with torch.cuda.nvtx.range("kopt_step"):
                built = kopt_optimize.build(variant, model, inputs)
            inputs = built.prepare(inputs)
            torch.cuda.synchronize()
        model = built

    def run_step(_i):
        return model(*inputs)


def tracer_stopped():
    """Ask kopt's tracer (the CUDA injection library) to end the trace here;
    True when it did. The library is the one CUDA loaded: dlopen of its path
    returns the loaded copy."""
    path = os.environ.get("CUDA_INJECTION64_PATH")
    if not path:
        return False
    try:
        stop = ctypes.CDLL(path).kopt_tracer_stop
    except (OSError, AttributeError):
        return False
    stop.restype = ctypes.c_int
    return stop() == 1


def bare_steps(path):
    """The steps again, untraced, in this process: WARMUP + STEPS of them as
    the traced loop runs them (a sync after the warm-up), each timed from
    before its first call to after its last, written as bare-step lines."""
    if training:
        # The phases' NVTX ranges would reach CUPTI's NVTX handler.
        trainer.phase = lambda _name: contextlib.nullcontext()
    torch.cuda.synchronize()  # the CUDA call whose exit detaches CUPTI
    spans = []
    with kopt_module.autograd_context(training):
        for i in range(warmup + steps):
            start = time.monotonic_ns()
            run_step(i)
            spans.append((start, time.monotonic_ns()))
            if i + 1 == warmup:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
    pid = os.getpid()
    lines = "".join(
        json.dumps({"t": "bare_step", "pid": pid, "name": "kopt_step", "s": s, "e": e, "in_process": True}) + "\n"
        for s, e in spans
    )
    # Written whole once the steps ran: a failed step leaves no partial file.
    with open(path, "w") as f:
        f.write(lines)


ops = torch.autograd.profiler.emit_nvtx(record_shapes=True) if record_ops else contextlib.nullcontext()
with kopt_module.autograd_context(training), ops:
    for i in range(warmup + steps):
        torch.cuda.nvtx.range_push("kopt_step")
        run_step(i)
        torch.cuda.nvtx.range_pop()
        if i + 1 == warmup:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
if bare_out and tracer_stopped():
    bare_steps(bare_out)
