"""``kopt.bench(baseline=fn, candidate=fn, inputs=...)``: the in-process gate.

The harness (``_gate_harness``) times both callables in this process and
collects facts; kopt's Rust decision (``kopt_bench::gate``, the same
statistics and KEEP / MARGINAL / REVERT rule as the process-level bench)
reads them and adds ``SUSPECT: <reason>`` for every way the candidate games
the measurement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import _kopt
from ._results import BenchResult


@dataclass(frozen=True)
class Suspicion:
    #: The reason's name: cached-output, partial-output, inconsistent-output,
    #: aliases-input, lower-precision, side-stream, no-kernel,
    #: timing-disagrees, above-peak, l2-flattered, harness-tampered.
    reason: str
    detail: str

    def __str__(self) -> str:
        return f"SUSPECT: {self.reason}: {self.detail}"


@dataclass(frozen=True)
class ShapeResult:
    shape: str
    #: KEEP / MARGINAL / REVERT / SUSPECT (the worse of warm and flushed).
    verdict: str
    warm: BenchResult
    #: The same pair with L2 flushed before each call (``flush_l2=True``).
    flushed: Optional[BenchResult]
    suspect: List[Suspicion]
    checked_calls: int


class GateResult:
    """The in-process verdict: ``verdict`` overall (the worst shape's),
    ``shapes`` one by one, ``suspect`` every reason found."""

    def __init__(self, report_json: str):
        self._json = report_json
        doc = json.loads(report_json)
        self.verdict: str = doc["verdict"]
        self.device: Optional[str] = doc.get("device")
        self.seconds: float = doc["seconds"]
        self.notes: List[str] = list(doc.get("notes", []))
        self.shapes: List[ShapeResult] = []
        for s in doc["shapes"]:
            self.shapes.append(
                ShapeResult(
                    shape=s["shape"],
                    verdict=s["verdict"],
                    warm=BenchResult(json.dumps(s["warm"])),
                    flushed=BenchResult(json.dumps(s["flushed"])) if s.get("flushed") else None,
                    suspect=[Suspicion(x["reason"], x["detail"]) for x in s["suspect"]],
                    checked_calls=s["checked_calls"],
                )
            )
        self.suspect: List[Suspicion] = [x for s in self.shapes for x in s.suspect]
        first = self.shapes[0].warm
        self.speedup: Optional[float] = first.speedup
        self.interval = first.interval

    @property
    def reasons(self) -> List[str]:
        """The SUSPECT reasons' names, each once."""
        out: List[str] = []
        for x in self.suspect:
            if x.reason not in out:
                out.append(x.reason)
        return out

    def to_dict(self) -> Dict[str, Any]:
        return json.loads(self._json)

    def to_markdown(self) -> str:
        return _kopt.render("gate", self._json, "md")

    def __str__(self) -> str:
        return _kopt.render("gate", self._json, "term")


def _stop(samples, elapsed, min_samples, min_time, noise_target, max_time):
    return _kopt.should_stop(
        list(samples),
        elapsed,
        min_samples=min_samples,
        min_time=min_time,
        noise_target=noise_target,
        max_time=max_time,
    )


#: The measuring keywords the in-process bench takes (``kopt.bench``'s,
#: less those for commands).
MEASURE_KEYS = ("threshold", "noise", "warmup", "min_samples", "min_time", "max_time", "noise_target", "seed")


def _measure(given: Dict[str, Any]) -> Dict[str, Any]:
    """The measuring keywords, each one not given (or ``None``) taking the
    engine's in-process default: the rule of every bench, a budget for calls
    timed in this process."""
    unknown = sorted(set(given) - set(MEASURE_KEYS))
    if unknown:
        raise TypeError(f"bench_callables() got unexpected keyword arguments: {', '.join(unknown)}")
    engine = _kopt.measure_defaults(in_process=True)
    return {k: engine[k] if given.get(k) is None else given[k] for k in MEASURE_KEYS}


def _name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def bench_callables(
    baseline: Callable,
    candidate: Callable,
    inputs: Optional[Callable],
    *,
    shapes: Optional[Sequence[Any]] = None,
    out: Optional[Callable] = None,
    bytes: Any = None,
    flops: Any = None,
    flush_l2: bool = False,
    checks: int = 6,
    tol: Optional[float] = None,
    backend: Any = None,
    **measure: Any,
) -> GateResult:
    """``kopt.bench`` on two callables; ``measure``: the keywords in
    ``MEASURE_KEYS``, each one left out or ``None`` taking the engine's
    in-process default."""
    from ._gate_harness import CallFailed, Harness, TorchBackend

    m = _measure(measure)
    if inputs is None:
        raise _kopt.UsageError("benching callables needs inputs=: a callable returning their arguments")
    if not callable(inputs):
        raise _kopt.UsageError("inputs= must be a callable returning the arguments (a list), given a shape when shapes= is set")
    for name, fn in (("baseline", baseline), ("candidate", candidate)):
        if not callable(fn):
            raise _kopt.UsageError(f"{name} must be a callable when the other one is")
    if out is not None and not callable(out):
        raise _kopt.UsageError("out= must be a callable returning the output buffer(s) for the inputs")
    if m["max_time"] <= 0 or m["min_time"] < 0 or checks < 2:
        raise _kopt.UsageError("max_time must be positive, min_time non-negative, checks at least 2")
    if backend is None:
        try:
            backend = TorchBackend()
        except ImportError as e:
            raise _kopt.ToolMissing(f"the in-process bench needs PyTorch: {e}") from None
        except RuntimeError as e:
            raise _kopt.ToolMissing(str(e)) from None
    try:
        facts = Harness(
            backend,
            baseline,
            candidate,
            inputs,
            shapes=shapes,
            out=out,
            bytes=bytes,
            flops=flops,
            flush_l2=flush_l2,
            checks=checks,
            warmup=m["warmup"],
            min_samples=m["min_samples"],
            min_time=m["min_time"],
            max_time=m["max_time"],
            noise_target=m["noise_target"],
            seed=m["seed"],
            should_stop=_stop,
            names=(_name(baseline), _name(candidate)),
        ).run()
    except CallFailed as e:
        raise _kopt.WorkloadFailed(str(e)) from e.__cause__
    except ValueError as e:
        raise _kopt.UsageError(str(e)) from None
    return GateResult(
        _kopt.gate_decide(json.dumps(facts), threshold=m["threshold"], noise=m["noise"], seed=m["seed"], tol=tol)
    )
