"""``kopt.optimize``: the mechanical fixes applied to a live PyTorch model,
checked and measured in this process, kept or reverted."""

from __future__ import annotations

import json
import os
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

from . import _kopt

if TYPE_CHECKING:
    from ._api import PathLike


class CandidateResult:
    """One candidate: tried or skipped (with the reason), its correctness,
    its measured and predicted speed-up, its verdict."""

    def __init__(self, c: Dict[str, Any]):
        self.name: str = c["name"]
        self.description: str = c["description"]
        self.tried: bool = c["tried"]
        self.reason: str = c["reason"]
        self.predicted_speedup: Optional[float] = c.get("predicted_speedup")
        self.measured_speedup: Optional[float] = c.get("measured_speedup")
        self.correct: Optional[bool] = (c.get("correctness") or {}).get("passed")
        failure = c.get("failure") or {}
        self.error: Optional[str] = failure.get("error")
        self.verdict: Optional[str] = (c.get("verdict") or {}).get("kind")

    def __repr__(self) -> str:
        return f"<kopt.CandidateResult {self.name}: {self.verdict or 'skipped'}>"


class OptimizeResult:
    """What ``optimize`` did. ``optimized`` is the best kept candidate as a
    callable (a CUDA graph replay wrapper or a compiled module), or the
    original model when none was kept; ``report`` is the ``kopt/1`` report."""

    def __init__(self, report_json: str, optimized: Callable, fns: Dict[str, Callable]):
        self._json = report_json
        doc = json.loads(report_json)
        self.best: Optional[str] = doc.get("best")
        self.candidates: List[CandidateResult] = [CandidateResult(c) for c in doc["candidates"]]
        self.run_dir: str = doc["run_dir"]
        self.optimized = optimized
        #: Every candidate that was built and ran, by name (``eager`` too).
        self.callables = fns

    @property
    def speedup(self) -> Optional[float]:
        best = next((c for c in self.candidates if c.name == self.best), None)
        return best.measured_speedup if best else None

    def to_dict(self) -> Dict[str, Any]:
        return json.loads(self._json)

    def to_markdown(self) -> str:
        return _kopt.render("optimize", self._json, "md")

    def __str__(self) -> str:
        return _kopt.render("optimize", self._json, "term")


def _harness() -> types.ModuleType:
    module = types.ModuleType("kopt_optimize_harness")
    exec(compile(_kopt.optimize_harness_source(), "kopt_optimize.py", "exec"), module.__dict__)
    return module


def _fresh_inputs(example_inputs: Sequence[Any]) -> Callable[[], List[Any]]:
    """New random values shaped like the examples (integer tensors kept), so
    the correctness check does not run on the inputs that were captured."""
    import torch

    def make():
        out = []
        for x in example_inputs:
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                out.append(torch.randn_like(x))
            elif isinstance(x, torch.Tensor):
                out.append(x.clone())
            else:
                out.append(x)
        return out

    return make


def _baseline(fn: Callable, inputs: Sequence[Any], out: Path, steps: int) -> "_kopt.Diagnosis":
    """A torch.profiler trace of the eager steps, diagnosed by kopt."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    out.mkdir(parents=True, exist_ok=True)
    trace = out / "baseline.pt.trace.json"
    with torch.inference_mode(), profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=2, active=steps),
        on_trace_ready=lambda p: p.export_chrome_trace(str(trace)),
    ) as prof:
        for _ in range(1 + 2 + steps):
            fn(*inputs)
            prof.step()
        torch.cuda.synchronize()
    return _kopt.analyze([str(trace)])


def optimize(
    model_or_fn: Callable,
    example_inputs: Sequence[Any],
    *,
    make_inputs: Optional[Callable[[], Sequence[Any]]] = None,
    candidates: Optional[Sequence[str]] = None,
    name: Optional[str] = None,
    threshold: Optional[float] = None,
    min_samples: Optional[int] = None,
    max_time: Optional[float] = None,
    noise_target: Optional[float] = None,
    seed: Optional[int] = None,
    allow_precision: bool = False,
    stack: bool = True,
    profile_steps: int = 10,
    journal: Optional[PathLike] = None,
    runs_dir: Optional[PathLike] = None,
    db: Optional[PathLike] = None,
) -> OptimizeResult:
    """Apply the mechanical fixes to a model (or any function of tensors),
    prove them, keep or revert.

    1. Baseline: a torch.profiler trace of the eager steps, diagnosed by kopt.
    2. Candidates the diagnosis gives a reason for (``candidates`` forces
       some): ``graph`` (CUDA graph capture), ``compile`` (default mode), ``compile_reduce_overhead``,
       ``compile_max_autotune``, ``compile_max_autotune_graph``,
       ``channels_last``, ``tf32``, ``bf16_autocast``, ``sdpa``,
       ``compile_freezing``, ``cudnn_benchmark``.
    3. Each checked against eager on fresh inputs (``make_inputs``, default:
       random values shaped like ``example_inputs``) with the tolerance of
       what it changes; ``tf32`` and ``bf16_autocast`` change numerics and
       are kept only with ``allow_precision=True``.
    4. Each timed interleaved with eager in this process, right after it
       is built and checked (CUDA events per step).
    5. KEEP / MARGINAL / REVERT per candidate; with ``stack`` (default),
       the kept ones combined greedily as ``kopt optimize`` does (the
       engine's decision: best measured first, one graph form and one
       compile form at most), each stack checked and timed in a second
       interleaved run; the best KEEP single or stack is the result; a
       journal entry each when ``journal`` names a file.

    Returns an :class:`OptimizeResult`: ``.optimized`` is the callable to use
    (the best kept candidate, else the model itself), ``.report`` as
    ``str(result)`` / ``to_markdown()`` / ``to_dict()``.
    """
    try:
        import torch
    except ImportError as e:
        raise _kopt.ToolMissing(f"kopt.optimize needs PyTorch: {e}") from None
    if not torch.cuda.is_available():
        raise _kopt.ToolMissing("kopt.optimize needs a CUDA GPU (torch.cuda.is_available() is False)")
    label = name or getattr(type(model_or_fn), "__name__", None) or getattr(model_or_fn, "__name__", "model")
    force = list(candidates or [])
    # Unset measuring keywords take the engine's defaults, the CLI's too.
    defaults = _kopt.measure_defaults()
    min_samples = defaults["min_samples"] if min_samples is None else min_samples
    max_time = defaults["max_time"] if max_time is None else max_time
    noise_target = defaults["noise_target"] if noise_target is None else noise_target
    make = make_inputs or _fresh_inputs(example_inputs)
    run_dir = Path(_kopt.create_run_dir(None if runs_dir is None else os.fspath(runs_dir)))
    diagnosis = _baseline(model_or_fn, list(example_inputs), run_dir / "baseline", profile_steps)
    choices = json.loads(_kopt.optimize_choose(diagnosis, force))
    wanted = [c["name"] for c in choices if c["tried"]]
    fns: Dict[str, Callable] = {"eager": model_or_fn}
    if wanted:
        out = run_dir / "candidates"
        out.mkdir(parents=True, exist_ok=True)
        first = [list(example_inputs)]

        def inputs():
            # The examples are the captured inputs; every later call is fresh.
            return first.pop() if first else list(make())

        _, fns = _harness().run_candidates(
            model_or_fn, inputs, wanted, str(out), min_samples, max_time, noise_target
        )
    judged = dict(force=force, threshold=threshold, seed=seed, allow_precision=allow_precision)
    stacks = json.loads(_kopt.optimize_stacks(diagnosis, str(run_dir), label, **judged)) if stack and wanted else []
    if stacks:
        out = run_dir / "stacks"
        out.mkdir(parents=True, exist_ok=True)
        first = [list(example_inputs)]

        def stack_inputs():
            return first.pop() if first else list(make())

        _, stacked = _harness().run_candidates(
            model_or_fn, stack_inputs, stacks, str(out), min_samples, max_time, noise_target
        )
        fns.update({n: f for n, f in stacked.items() if n != "eager"})
    report = _kopt.optimize_conclude(
        diagnosis,
        str(run_dir),
        label,
        journal=None if journal is None else os.fspath(journal),
        db=None if db is None else os.fspath(db),
        **judged,
    )
    best = json.loads(report).get("best")
    return OptimizeResult(report, fns.get(best, model_or_fn) if best else model_or_fn, fns)
