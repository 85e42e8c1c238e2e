"""Bench and compare results as Python objects."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from . import _kopt


@dataclass(frozen=True)
class VariantResult:
    name: str
    command: str
    source: str
    samples_s: List[float]
    median_s: float
    speedup: float
    #: (low, high) of median(this) / median(first), None for the first variant.
    interval: Optional[Tuple[float, float]]
    #: KEEP / MARGINAL / REVERT, None for the first variant.
    verdict: Optional[str]
    reason: Optional[str]
    correct: Optional[bool]

    @classmethod
    def _from(cls, v: Dict[str, Any]) -> "VariantResult":
        iv = v.get("ratio_interval")
        vd = v.get("verdict") or {}
        return cls(
            name=v["name"],
            command=v["command"],
            source=v["source"],
            samples_s=list(v["values_s"]),
            median_s=v["median_s"],
            speedup=v["speedup_vs_first"],
            interval=(iv["low"], iv["high"]) if iv else None,
            verdict=vd.get("kind"),
            reason=vd.get("reason"),
            correct=v.get("correct"),
        )


class BenchResult:
    """An A/B (or ablation) verdict: ``verdict`` is the worst candidate's."""

    def __init__(self, report_json: str):
        self._json = report_json
        doc = json.loads(report_json)
        self.variants: List[VariantResult] = [VariantResult._from(v) for v in doc["variants"]]
        self.verdict: str = doc["verdict"]
        self.device: Optional[str] = doc.get("device")
        cand = self.variants[1] if len(self.variants) > 1 else None
        self.speedup: Optional[float] = cand.speedup if cand else None
        self.interval = cand.interval if cand else None
        self.samples = {v.name: v.samples_s for v in self.variants}

    def to_dict(self) -> Dict[str, Any]:
        return json.loads(self._json)

    def to_markdown(self) -> str:
        return _kopt.render("bench", self._json, "md")

    def _repr_html_(self) -> str:
        from ._analysis import _isolated_html

        return _isolated_html(_kopt.render("bench", self._json, "html"), height=360)

    def __str__(self) -> str:
        return _kopt.render("bench", self._json, "term")

    def __repr__(self) -> str:
        cand = self.variants[1] if len(self.variants) > 1 else None
        if cand is None:
            return f"<kopt.BenchResult {self.verdict}: one variant>"
        iv = "" if self.interval is None else f", 95% [{self.interval[0]:.3f}, {self.interval[1]:.3f}]"
        return (
            f"<kopt.BenchResult {self.verdict}: {cand.name} {self.speedup:.3f}x vs "
            f"{self.variants[0].name}{iv}; {len(self.variants)} variants>"
        )


@dataclass(frozen=True)
class TensorResult:
    name: str
    passed: bool
    rel_l2: Optional[float]
    max_abs: Optional[float]
    tolerance: float
    problems: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)


class CompareResult:
    """The correctness gate: ``passed`` is False for any mismatch, or when nothing was compared."""

    def __init__(self, report_json: str):
        self._json = report_json
        doc = json.loads(report_json)
        self.passed: bool = doc["passed"]
        self.problems: List[str] = list(doc.get("problems", []))
        self.tensors: List[TensorResult] = [
            TensorResult(
                name=t["name"],
                passed=t["passed"],
                rel_l2=t.get("rel_l2"),
                max_abs=t.get("max_abs"),
                tolerance=t["tolerance"],
                problems=list(t.get("problems", [])),
                warnings=list(t.get("warnings", [])),
            )
            for t in doc["tensors"]
        ]

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        failed = [t.name for t in self.tensors if not t.passed]
        what = "PASS" if self.passed else "FAIL"
        tail = f"; failing: {', '.join(failed[:5])}" if failed else ""
        return f"<kopt.CompareResult {what}: {len(self.tensors)} tensor(s){tail}>"

    def to_dict(self) -> Dict[str, Any]:
        return json.loads(self._json)

    def __str__(self) -> str:
        return _kopt.render("compare", self._json, "term")
