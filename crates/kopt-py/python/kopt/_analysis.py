"""The diagnosis as Python objects (from kopt's ``kopt/1`` JSON)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from . import _kopt


def _fmt_ns(ns: Optional[float]) -> str:
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


@dataclass(frozen=True)
class Recommendation:
    """One ranked change; ``str()`` is one readable line."""

    rank: int
    id: str
    title: str
    kernel: str
    kernel_short: str
    bottleneck: str
    evidence: str
    action: str
    #: Share of the whole workload's time the change may save, percent (None: no number).
    expected_gain: Optional[float]
    #: How the gain was computed.
    gain_method: Optional[str]

    @classmethod
    def _from(cls, r: Dict[str, Any]) -> "Recommendation":
        gain = r.get("gain") or {}
        return cls(
            rank=r["rank"],
            id=r["id"],
            title=r["title"],
            kernel=r["kernel"],
            kernel_short=r["kernel_short"],
            bottleneck=r["class"],
            evidence=r["evidence"],
            action=r["action"],
            expected_gain=gain.get("workload_pct"),
            gain_method=gain.get("method"),
        )

    def __str__(self) -> str:
        gain = (
            f" (up to {self.expected_gain:.1f}% of the workload)"
            if self.expected_gain is not None
            else ""
        )
        return f"#{self.rank} {self.title} [{self.kernel_short}]{gain}: {self.action}"


@dataclass(frozen=True)
class Kernel:
    """One distinct kernel (its launches grouped): seed 000's table row."""

    name: str
    short_name: str
    launches: int
    latency_us: float
    mean_us: float
    pct_total: float
    bandwidth_gbs: Optional[float]
    bw_sol_pct: Optional[float]
    compute_sol_pct: Optional[float]
    bottleneck: str
    root_cause: str

    @classmethod
    def _from(cls, k: Dict[str, Any]) -> "Kernel":
        bw = k.get("dram_bytes_per_s")
        return cls(
            name=k["name"],
            short_name=k["short_name"],
            launches=k["launches"],
            latency_us=k["total_ns"] / 1e3,
            mean_us=k["mean_ns"] / 1e3,
            pct_total=k["pct_of_total"],
            bandwidth_gbs=None if bw is None else bw / 1e9,
            bw_sol_pct=k.get("dram_sol_pct"),
            compute_sol_pct=k.get("compute_sol_pct"),
            bottleneck=k["bottleneck"]["class"],
            root_cause=k["root_cause"],
        )

    def __str__(self) -> str:
        return (
            f"{self.short_name}: {_fmt_ns(self.latency_us * 1e3)} "
            f"({self.pct_total:.1f}%), {self.bottleneck}: {self.root_cause}"
        )


@dataclass(frozen=True)
class Timeline:
    """What the timeline says about the workload (present when a trace was read)."""

    wall_ns: int
    gpu_busy_ns: int
    busy_pct: float
    kernels: int
    iterations: Optional[int]
    busy_per_iteration_ns: Optional[float]
    launch_bound: bool
    verdict: str

    @classmethod
    def _from(cls, t: Dict[str, Any]) -> "Timeline":
        return cls(
            wall_ns=t["wall_ns"],
            gpu_busy_ns=t["gpu_busy_ns"],
            busy_pct=t["busy_pct"],
            kernels=t["kernels"],
            iterations=t.get("iterations"),
            busy_per_iteration_ns=t.get("busy_per_iteration_ns"),
            launch_bound=t["launch_bound"],
            verdict=t["verdict"],
        )


class Analysis:
    """kopt's diagnosis of a workload.

    ``primary_bottleneck_component`` / ``primary_bottleneck_type`` name the
    kernel and class that cost the most recoverable time; ``recommendations``
    are ranked; ``kernels`` is the per-kernel table; ``to_json()`` gives the
    full ``kopt/1`` document.
    """

    def __init__(self, report_json: str):
        self._json = report_json
        self._doc: Dict[str, Any] = json.loads(report_json)
        primary = self._doc.get("primary") or {}
        self.primary_bottleneck_component: Optional[str] = primary.get("component_short")
        self.primary_bottleneck_type: Optional[str] = primary.get("type")
        self.key_insight: Optional[str] = primary.get("insight")
        self.recommendations: List[Recommendation] = [
            Recommendation._from(r) for r in self._doc.get("recommendations", [])
        ]
        self.kernels: List[Kernel] = [Kernel._from(k) for k in self._doc.get("kernels", [])]
        tl = self._doc.get("timeline")
        self.timeline: Optional[Timeline] = Timeline._from(tl) if tl else None
        self.device: str = self._doc.get("device", {}).get("name", "unknown GPU")
        self.total_kernel_ns: float = self._doc.get("total_kernel_ns", 0.0)
        self.notes: List[str] = list(self._doc.get("notes", []))
        run = self._doc.get("run") or {}
        self.run_dir: Optional[str] = run.get("run_dir")

    def to_dict(self) -> Dict[str, Any]:
        """The ``kopt/1`` document as a dict (a fresh copy)."""
        return json.loads(self._json)

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self._doc, indent=indent)

    def to_markdown(self) -> str:
        return _kopt.render("diagnosis", self._json, "md")

    def to_text(self, width: Optional[int] = None) -> str:
        return _kopt.render("diagnosis", self._json, "term", width=width)

    def to_html(self) -> str:
        """The self-contained HTML report (no external reference)."""
        return _kopt.render("diagnosis", self._json, "html")

    def _repr_html_(self) -> str:
        return self.to_html()

    def __str__(self) -> str:
        return self.to_text(width=120)

    def __repr__(self) -> str:
        return (
            f"<kopt.Analysis {len(self.kernels)} kernels on {self.device}; primary "
            f"{self.primary_bottleneck_component} / {self.primary_bottleneck_type}>"
        )
