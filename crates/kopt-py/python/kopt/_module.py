"""``profile_module``: seed 000's interface, profiling a module script.

Module scripts follow the KernelBench convention: a script that defines an
``nn.Module`` class (``Model``, or the class ``module_name`` names) and
``get_inputs()`` (and optionally ``get_init_inputs()``) is driven by kopt:
it builds the model on the chosen GPU, warms it up, then runs ``steps``
forward passes, each inside an NVTX range ``kopt_step`` so iterations are
exact. Any other script runs as it is.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Optional, Union

from . import _kopt
from ._analysis import Analysis
from ._api import PathLike, tracer_path

_GET_INPUTS = re.compile(r"^def\s+get_inputs\s*\(", re.M)
_CLASS = re.compile(r"^class\s+(\w+)\s*\(", re.M)

_DRIVER = '''\
# Written by kopt: drives {script_name} (KernelBench convention).
import importlib.util
import sys

import torch

MODULE = {module!r}
PATH = {path!r}
WARMUP = {warmup}
STEPS = {steps}

spec = importlib.util.spec_from_file_location("kopt_user_module", PATH)
mod = importlib.util.module_from_spec(spec)
sys.modules["kopt_user_module"] = mod
spec.loader.exec_module(mod)


def _pick_class():
    classes = {{
        name: obj
        for name, obj in vars(mod).items()
        if isinstance(obj, type)
        and issubclass(obj, torch.nn.Module)
        and obj.__module__ == mod.__name__
    }}
    camel = "".join(p[:1].upper() + p[1:] for p in MODULE.split("_"))
    for want in (MODULE, camel, "Model", "ModelNew"):
        if want in classes:
            return classes[want]
    flat = MODULE.replace("_", "").lower()
    for name, cls in classes.items():
        if name.lower() == flat:
            return cls
    if len(classes) == 1:
        return next(iter(classes.values()))
    sys.exit(
        f"kopt: {{PATH}}: no nn.Module class named {{MODULE!r}} or Model "
        f"(classes: {{', '.join(sorted(classes)) or 'none'}})"
    )


def _to(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    return x


# kopt sets CUDA_VISIBLE_DEVICES to the chosen GPU: it is cuda:0 here.
device = torch.device("cuda:0")
init = mod.get_init_inputs() if hasattr(mod, "get_init_inputs") else []
model = _pick_class()(*init).to(device).eval()
inputs = [_to(x, device) for x in mod.get_inputs()]
with torch.inference_mode():
    for _ in range(WARMUP):
        model(*inputs)
    torch.cuda.synchronize()
    for _ in range(STEPS):
        torch.cuda.nvtx.range_push("kopt_step")
        model(*inputs)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
'''


def is_module_script(script_content: str) -> bool:
    """True when the script follows the KernelBench convention."""
    return bool(_GET_INPUTS.search(script_content)) and bool(_CLASS.search(script_content))


def _safe_name(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")
    return s or "module"


def profile_module(
    script_content: str,
    module_name: str,
    gpu_id: Union[int, str] = 0,
    *,
    deep: bool = False,
    top: int = 20,
    timeout: Optional[float] = None,
    runs_dir: Optional[PathLike] = None,
    steps: int = 20,
    warmup: int = 3,
    timing_pass: str = "tracer",
    quiet: bool = False,
    ncu: Optional[PathLike] = None,
    db: Optional[PathLike] = None,
) -> Analysis:
    """Profile a module script on GPU ``gpu_id`` and diagnose it.

    The script is written into a new run folder (``.kopt/runs/<id>/`` at the
    repository root unless ``runs_dir`` says otherwise) and run with this
    interpreter, under kopt's tracer (the timeline: launch overhead, gaps)
    and ncu's targeted counters on the kernels that carry the time
    (``deep=True`` adds ``--set full`` for the hottest three).

    >>> analysis = profile_module(script_content=SCRIPT, module_name="topk_sort", gpu_id=0)
    >>> analysis.primary_bottleneck_component, analysis.primary_bottleneck_type
    >>> for rec in analysis.recommendations: print(rec)

    Raises :class:`ToolMissing` (no ncu, no GPU counters), :class:`WorkloadFailed`
    (the script failed; the message has its last lines) or :class:`UsageError`.
    """
    if not isinstance(script_content, str) or not script_content.strip():
        raise _kopt.UsageError("script_content is empty")
    if steps < 1 or warmup < 0:
        raise _kopt.UsageError("steps must be at least 1 and warmup at least 0")
    run_dir = Path(_kopt.create_run_dir(None if runs_dir is None else os.fspath(runs_dir)))
    script = run_dir / f"{_safe_name(module_name)}.py"
    script.write_text(script_content)
    target = script
    if is_module_script(script_content):
        target = run_dir / "kopt_driver.py"
        target.write_text(
            _DRIVER.format(
                script_name=script.name,
                module=module_name,
                path=str(script),
                warmup=warmup,
                steps=steps,
            )
        )
    return Analysis(
        _kopt.profile(
            [sys.executable, str(target)],
            module=module_name,
            gpu=str(gpu_id),
            timeout=timeout,
            top=top,
            deep_top=3 if deep else None,
            timing_pass=timing_pass,
            quiet=quiet,
            tracer=tracer_path(),
            ncu=None if ncu is None else os.fspath(ncu),
            run_dir=str(run_dir),
            db=None if db is None else os.fspath(db),
        )
    )


class GenericProfiler:
    """Seed 000's profiler object: settings once, ``profile()`` per module."""

    def __init__(self, gpu_id: Union[int, str] = 0, **options):
        self.gpu_id = gpu_id
        self.options = options

    def profile(self, script_content: str, module_name: str) -> Analysis:
        return profile_module(script_content, module_name, self.gpu_id, **self.options)
