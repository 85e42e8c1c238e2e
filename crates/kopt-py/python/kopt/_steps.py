"""``profile_steps``: profile the steps of your own training loop.

    >>> with kopt.profile_steps(wait=1, warmup=2, active=5) as p:
    ...     for batch in loader:
    ...         with p.phase("forward"):
    ...             loss = model(batch).loss
    ...         with p.phase("backward"):
    ...             loss.backward()
    ...         with p.phase("optimizer"):
    ...             opt.step(); opt.zero_grad()
    ...         p.step()
    >>> p.analysis.primary_bottleneck_type

The schedule is torch.profiler's: ``wait`` steps unrecorded, ``warmup``
steps recorded and treated as warm-up, ``active`` steps analysed; steps
after them run unprofiled. Run under ``kopt profile`` (kopt's tracer is
injected), each recorded step is an NVTX range ``kopt_step`` and kopt's own
run analyses it: ``analysis`` is then None. Otherwise torch.profiler records
the steps (``with_stack=True``, so host syncs name their source line), the
Kineto trace is written to ``trace`` (a new file in the current folder
unless given) and ``analysis`` is kopt's diagnosis of it. Phases use the
names of docs/training.md (``kopt:forward`` ...).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any, Optional

PHASES = ("data", "forward", "backward", "optimizer")


def under_kopt_tracer() -> bool:
    """Whether this process runs under kopt's tracer (it sets KOPT_TRACE_OUT)."""
    return bool(os.environ.get("KOPT_TRACE_OUT"))


class StepProfiler:
    """The object ``profile_steps`` yields: call ``step()`` after each step."""

    def __init__(self, wait: int, warmup: int, active: int, trace: Optional[str], analyze: bool, top: Optional[int]):
        for name, v in (("wait", wait), ("warmup", warmup), ("active", active)):
            if not isinstance(v, int) or v < 0:
                from ._kopt import UsageError

                raise UsageError(f"profile_steps: {name} must be a whole number, 0 or more (got {v!r})")
        if active < 1:
            from ._kopt import UsageError

            raise UsageError("profile_steps: active must be at least 1")
        self.wait, self.warmup, self.active = wait, warmup, active
        self.trace = trace
        self.analyze, self.top = analyze, top
        self.steps_done = 0
        self.analysis: Any = None
        self.mode = "tracer" if under_kopt_tracer() else "torch.profiler"
        self._torch: Any = None
        self._profiler: Any = None
        self._in_step = False

    # -- the recorded window -------------------------------------------------
    def recording(self) -> bool:
        """Whether the current step is recorded (warm-up or active)."""
        return self.wait <= self.steps_done < self.wait + self.warmup + self.active

    def _open_step(self):
        if self.mode == "tracer" and self.recording() and not self._in_step:
            self._torch.cuda.nvtx.range_push("kopt_step")
            self._in_step = True

    def _close_step(self):
        if self._in_step:
            self._torch.cuda.nvtx.range_pop()
            self._in_step = False

    def __enter__(self) -> "StepProfiler":
        import torch

        self._torch = torch
        if self.mode == "torch.profiler":
            if self.trace is None:
                fd, self.trace = tempfile.mkstemp(prefix="kopt-steps-", suffix=".pt.trace.json", dir=os.getcwd())
                os.close(fd)
            prof = torch.profiler
            self._profiler = prof.profile(
                activities=[prof.ProfilerActivity.CPU, prof.ProfilerActivity.CUDA],
                schedule=prof.schedule(wait=self.wait, warmup=self.warmup, active=self.active, repeat=1),
                on_trace_ready=self._trace_ready,
                with_stack=True,
            )
            self._profiler.__enter__()
        self._open_step()
        return self

    def _trace_ready(self, prof):
        prof.export_chrome_trace(self.trace)

    def step(self) -> None:
        """Mark the end of one step (call it once per iteration)."""
        self._close_step()
        if self._profiler is not None and self.steps_done < self.wait + self.warmup + self.active:
            self._profiler.step()
        self.steps_done += 1
        self._open_step()

    def phase(self, name: str):
        """A context manager marking a phase of the step (``data``,
        ``forward``, ``backward``, ``optimizer``): an NVTX range under kopt's
        tracer, a record_function range in torch.profiler's trace."""
        label = name if name.startswith("kopt:") else f"kopt:{name}"
        if label[len("kopt:") :] not in PHASES:
            from ._kopt import UsageError

            raise UsageError(f"profile_steps: unknown phase {name!r} (one of {', '.join(PHASES)})")
        if self._torch is None or not self.recording():
            return contextlib.nullcontext()
        if self.mode == "tracer":
            return self._torch.cuda.nvtx.range(label)
        return self._torch.profiler.record_function(label)

    def __exit__(self, exc_type, exc, tb):
        self._close_step()
        if self._profiler is not None:
            self._profiler.__exit__(exc_type, exc, tb)
        if exc_type is not None or self.mode != "torch.profiler" or not self.analyze:
            return False
        if self.steps_done < self.wait + self.warmup + self.active:
            import warnings

            warnings.warn(
                f"profile_steps: the loop ran {self.steps_done} steps, the schedule needs "
                f"{self.wait + self.warmup + self.active} (wait {self.wait}, warmup {self.warmup}, "
                f"active {self.active}): nothing to analyse",
                stacklevel=2,
            )
            return False
        from ._api import analyze

        self.analysis = analyze(self.trace, top=self.top)
        return False


def profile_steps(
    wait: int = 1,
    warmup: int = 2,
    active: int = 5,
    *,
    trace: Optional[str] = None,
    analyze: bool = True,
    top: Optional[int] = None,
) -> StepProfiler:
    """Profile the steps of your own loop: ``with profile_steps() as p:``
    ... ``p.step()`` each iteration; ``p.analysis`` after the block (None
    under ``kopt profile``, whose run analyses the steps itself)."""
    return StepProfiler(wait, warmup, active, None if trace is None else os.fspath(trace), analyze, top)


def phase(name: str):
    """Mark a phase of a step run by kopt (``train_step`` scripts): an NVTX
    range under kopt's tracer, a no-op otherwise."""
    label = name if name.startswith("kopt:") else f"kopt:{name}"
    if not under_kopt_tracer():
        return contextlib.nullcontext()
    import torch

    return torch.cuda.nvtx.range(label)
