"""Callbacks that profile the steps of loops kopt does not drive.

``KoptTrainerCallback`` for Hugging Face ``transformers.Trainer`` and
``KoptLightningCallback`` for Lightning's ``Trainer``: each wraps
:func:`kopt.profile_steps` (same ``wait``/``warmup``/``active`` schedule)
and keeps the result in ``.analysis`` when training ends. Neither package
is a dependency of kopt: each class subclasses the framework's own
``Callback`` base when that package is installed, and is a plain class
(the same methods) otherwise.

    >>> trainer = transformers.Trainer(..., callbacks=[KoptTrainerCallback(active=10)])
    >>> trainer.train(); print(trainer.callback_handler.callbacks[-1].analysis)
"""

from __future__ import annotations

import importlib
from typing import Any, Optional

from ._steps import StepProfiler, profile_steps


def _base(*candidates: str) -> type:
    """The first importable `module:Class` of `candidates`, else object."""
    for spec in candidates:
        module, _, name = spec.partition(":")
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    return object


class _StepsCallback:
    """The shared part: one profile_steps window over the training run."""

    def _kopt_init(self, wait: int, warmup: int, active: int, trace: Optional[str], top: Optional[int]):
        self.profiler: StepProfiler = profile_steps(wait, warmup, active, trace=trace, top=top)
        self._open = False
        self.analysis: Any = None

    def _kopt_begin(self):
        if not self._open:
            self.profiler.__enter__()
            self._open = True

    def _kopt_step(self):
        if self._open:
            self.profiler.step()

    def _kopt_end(self):
        if self._open:
            self._open = False
            self.profiler.__exit__(None, None, None)
            self.analysis = self.profiler.analysis


class KoptTrainerCallback(_StepsCallback, _base("transformers:TrainerCallback")):  # type: ignore[misc]
    """Hugging Face Trainer: profiles steps ``wait`` .. ``wait+warmup+active``."""

    def __init__(self, wait: int = 1, warmup: int = 2, active: int = 5, *, trace: Optional[str] = None, top: Optional[int] = None):
        self._kopt_init(wait, warmup, active, trace, top)

    def on_train_begin(self, args=None, state=None, control=None, **kwargs):
        self._kopt_begin()

    def on_step_end(self, args=None, state=None, control=None, **kwargs):
        self._kopt_step()

    def on_train_end(self, args=None, state=None, control=None, **kwargs):
        self._kopt_end()


class KoptLightningCallback(_StepsCallback, _base("lightning.pytorch:Callback", "pytorch_lightning:Callback")):  # type: ignore[misc]
    """Lightning: profiles training batches ``wait`` .. ``wait+warmup+active``."""

    def __init__(self, wait: int = 1, warmup: int = 2, active: int = 5, *, trace: Optional[str] = None, top: Optional[int] = None):
        self._kopt_init(wait, warmup, active, trace, top)

    def on_train_start(self, trainer=None, pl_module=None):
        self._kopt_begin()

    def on_train_batch_end(self, trainer=None, pl_module=None, outputs=None, batch=None, batch_idx=0):
        self._kopt_step()

    def on_train_end(self, trainer=None, pl_module=None):
        self._kopt_end()


__all__ = ["KoptLightningCallback", "KoptTrainerCallback"]
