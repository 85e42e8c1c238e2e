"""``profile_module``: profile a module script on a GPU and diagnose it.

Module scripts follow the KernelBench convention: a script that defines an
``nn.Module`` class (``Model``, or the class ``module_name`` names) and
``get_inputs()`` (and optionally ``get_init_inputs()``) is driven by kopt:
it builds the model on the chosen GPU, warms it up, then runs ``steps``
forward passes, each inside an NVTX range ``kopt_step`` so iterations are
exact. A script that also defines ``get_optimizer(model)`` (or
``train_step(model, inputs, optimizer)``) is a training step: kopt runs
forward, loss, backward and the optimizer with autograd on, each phase in a
``kopt:forward``/``kopt:backward``/``kopt:optimizer`` range (docs/training.md).
Any other script runs as it is.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from . import _kopt
from ._analysis import Analysis
from ._api import text_arg, tracer_path, warn_tracer_missing

if TYPE_CHECKING:
    from typing import Optional, Union

    from ._api import PathLike

def profile_module(
    script_content: str,
    module_name: str,
    gpu_id: Union[int, str] = 0,
    *,
    deep: bool = False,
    profile_top: Optional[int] = None,
    top: Optional[int] = None,
    timeout: Optional[float] = None,
    runs_dir: Optional[PathLike] = None,
    steps: int = 20,
    warmup: int = 3,
    timing_pass: str = "tracer",
    quiet: bool = False,
    ncu: Optional[PathLike] = None,
    db: Optional[PathLike] = None,
    ops: bool = False,
    verify: int = 0,
) -> Analysis:
    """Profile a module script on GPU ``gpu_id`` and diagnose it.

    The script is written into a new run folder (``.kopt/runs/<id>/`` at the
    repository root unless ``runs_dir`` says otherwise) and run with this
    interpreter, under kopt's tracer (the timeline: launch overhead, gaps)
    and ncu's targeted counters on the kernels that carry the time: by
    default only those whose counters could change the first finding (none,
    and no ncu run, when the timeline's first finding saves more than any
    kernel's whole time; the report says so), with ``profile_top=N`` always
    the ``N`` hottest (``deep=True`` adds ``--set full`` for the hottest three); ``top``
    keeps only that many kernels in the report, as in :func:`analyze`. ``ops=True``
    records PyTorch's op ranges with input shapes, so each kernel names the
    op that launched it and the report has a per-op table (at a host cost
    per op: launch-bound figures read higher). ``verify=N`` measures the top
    ``N`` recommendations that have an automatic fix (graph capture,
    channels_last, TF32, SDPA, batch-norm folding): each is applied by
    kopt's optimize harness, checked and timed against eager, shown as
    "verified: measured X" beside its prediction, and the ranking then uses
    the measurement.

    >>> analysis = profile_module(script_content=SCRIPT, module_name="topk_sort", gpu_id=0)
    >>> analysis.primary_bottleneck_component, analysis.primary_bottleneck_type
    >>> for rec in analysis.recommendations: print(rec)

    Raises :class:`ToolMissing` (no ncu, no GPU counters), :class:`WorkloadFailed`
    (the script failed; the message has its last lines) or :class:`UsageError`.
    """
    if not isinstance(script_content, str) or not script_content.strip():
        raise _kopt.UsageError("script_content is empty")
    text_arg("script_content", script_content)
    text_arg("module_name", str(module_name))
    if steps < 1 or warmup < 0:
        raise _kopt.UsageError("steps must be at least 1 and warmup at least 0")
    if not isinstance(verify, int) or verify < 0:
        raise _kopt.UsageError("verify must be a whole number of recommendations, 0 or more")
    tracer = tracer_path()
    if tracer is None and timing_pass == "tracer":
        warn_tracer_missing("profile_module")
    return Analysis(
        _kopt.profile(
            script=script_content,
            python=sys.executable,
            warmup=warmup,
            steps=steps,
            ops=ops,
            module=module_name,
            gpu=str(gpu_id),
            timeout=timeout,
            profile_top=profile_top,
            top=top,
            deep_top=3 if deep else None,
            timing_pass=timing_pass,
            quiet=quiet,
            tracer=tracer,
            ncu=None if ncu is None else os.fspath(ncu),
            runs_dir=None if runs_dir is None else os.fspath(runs_dir),
            db=None if db is None else os.fspath(db),
            verify=verify,
        )
    )


class GenericProfiler:
    """A profiler object: settings once, ``profile()`` per module script."""

    def __init__(self, gpu_id: Union[int, str] = 0, **options):
        self.gpu_id = gpu_id
        self.options = options

    def profile(self, script_content: str, module_name: str) -> Analysis:
        return profile_module(script_content, module_name, self.gpu_id, **self.options)
