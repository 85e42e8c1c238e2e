"""The diagnosis as Python objects. The diagnosis itself stays in Rust
(``_kopt.Diagnosis``); the kernel table becomes Python objects only when
``kernels`` is first read."""

from __future__ import annotations

# typing.TYPE_CHECKING without importing typing (10 ms of start-up).
TYPE_CHECKING = False

from . import _kopt

if TYPE_CHECKING:  # annotations only: importing typing's names costs start-up time
    from typing import Any, Dict, List, Optional


def _fmt_ns(ns: "Optional[float]") -> str:
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


class Recommendation:
    """One ranked change; ``str()`` is one readable line."""

    __slots__ = (
        "rank", "id", "title", "kernel", "kernel_short", "bottleneck",
        "evidence", "action", "expected_gain", "gain_method", "predicted_speedup",
    )

    def __init__(self, r: "Dict[str, Any]"):
        gain = r.get("gain") or {}
        self.rank: int = r["rank"]
        self.id: str = r["id"]
        self.title: str = r["title"]
        self.kernel: str = r["kernel"]
        self.kernel_short: str = r["kernel_short"]
        self.bottleneck: str = r["class"]
        self.evidence: str = r["evidence"]
        self.action: str = r["action"]
        #: Share of the whole workload's time the change may save, percent (None: no number).
        self.expected_gain: "Optional[float]" = gain.get("workload_pct")
        #: How the gain was computed.
        self.gain_method: "Optional[str]" = gain.get("method")
        #: The predicted speed-up {estimate, low, high, model}, where the timeline gives one.
        self.predicted_speedup: "Optional[Dict[str, Any]]" = r.get("predicted_speedup")

    def __str__(self) -> str:
        gain = (
            f" (up to {self.expected_gain:.1f}% of the workload)"
            if self.expected_gain is not None
            else ""
        )
        return f"#{self.rank} {self.title} [{self.kernel_short}]{gain}: {self.action}"

    def __repr__(self) -> str:
        return f"<kopt.Recommendation #{self.rank} {self.id} [{self.kernel_short}]>"


def _isolated_html(page: str, height: int = 640) -> str:
    """A full HTML page as a notebook cell shows it: inside an iframe
    (``srcdoc``), so its ``<style>`` cannot restyle the notebook."""
    import html

    return (
        f'<iframe srcdoc="{html.escape(page, quote=True)}" '
        f'style="width:100%;height:{height}px;border:0" sandbox="allow-scripts"></iframe>'
    )


class Kernel:
    """One distinct kernel (its launches grouped): a row of the kernel table."""

    __slots__ = (
        "name", "short_name", "launches", "total_us", "mean_us", "pct_of_total",
        "bandwidth_gbs", "bw_sol_pct", "compute_sol_pct", "bottleneck", "root_cause",
    )

    def __init__(self, k: "Dict[str, Any]"):
        bw = k.get("dram_bytes_per_s")
        self.name: str = k["name"]
        self.short_name: str = k["short_name"]
        self.launches: int = k["launches"]
        #: Time of all its launches together (the JSON's total_ns), in us.
        self.total_us: float = k["total_ns"] / 1e3
        #: One launch's mean time (the JSON's mean_ns), in us.
        self.mean_us: float = k["mean_ns"] / 1e3
        self.pct_of_total: float = k["pct_of_total"]
        self.bandwidth_gbs: "Optional[float]" = None if bw is None else bw / 1e9
        self.bw_sol_pct: "Optional[float]" = k.get("dram_sol_pct")
        self.compute_sol_pct: "Optional[float]" = k.get("compute_sol_pct")
        self.bottleneck: str = k["bottleneck"]["class"]
        self.root_cause: str = k["root_cause"]

    @property
    def latency_us(self) -> float:
        """Deprecated: the total time of every launch, not one launch's
        latency; use ``total_us`` (or ``mean_us`` for one launch)."""
        import warnings

        warnings.warn(
            "Kernel.latency_us is the total time of all launches: use total_us "
            "(or mean_us for one launch)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.total_us

    @property
    def pct_total(self) -> float:
        """Deprecated: ``pct_of_total``, the JSON's name."""
        import warnings

        warnings.warn("Kernel.pct_total is now pct_of_total", DeprecationWarning, stacklevel=2)
        return self.pct_of_total

    def __str__(self) -> str:
        return (
            f"{self.short_name}: {_fmt_ns(self.total_us * 1e3)} "
            f"({self.pct_of_total:.1f}%), {self.bottleneck}: {self.root_cause}"
        )

    def __repr__(self) -> str:
        return (
            f"<kopt.Kernel {self.short_name} {self.bottleneck} {self.pct_of_total:.1f}% "
            f"total {self.total_us:.1f} us over {self.launches} launch(es)>"
        )


class Timeline:
    """What the timeline says about the workload (present when a trace was read)."""

    __slots__ = (
        "wall_ns", "gpu_busy_ns", "busy_pct", "kernels", "iterations",
        "busy_per_iteration_ns", "launch_bound", "verdict",
    )

    def __init__(self, t: "Dict[str, Any]"):
        self.wall_ns: int = t["wall_ns"]
        self.gpu_busy_ns: int = t["gpu_busy_ns"]
        self.busy_pct: float = t["busy_pct"]
        self.kernels: int = t["kernels"]
        self.iterations: "Optional[int]" = t.get("iterations")
        self.busy_per_iteration_ns: "Optional[float]" = t.get("busy_per_iteration_ns")
        self.launch_bound: bool = t["launch_bound"]
        self.verdict: str = t["verdict"]


class Analysis:
    """kopt's diagnosis of a workload.

    ``primary_bottleneck_component`` / ``primary_bottleneck_type`` name the
    kernel and class that cost the most recoverable time; ``recommendations``
    are ranked; ``kernels`` is the per-kernel table; ``to_dict()`` /
    ``to_json()`` give the full ``kopt/1`` document.
    """

    def __init__(self, diagnosis: "_kopt.Diagnosis"):
        self._d = diagnosis
        self._kernels: "Optional[List[Kernel]]" = None
        s = diagnosis.summary()
        primary = s.get("primary") or {}
        self.primary_bottleneck_component: "Optional[str]" = primary.get("component_short")
        self.primary_bottleneck_type: "Optional[str]" = primary.get("type")
        self.key_insight: "Optional[str]" = primary.get("insight")
        self.recommendations: "List[Recommendation]" = [
            Recommendation(r) for r in s.get("recommendations", [])
        ]
        tl = s.get("timeline")
        self.timeline: "Optional[Timeline]" = Timeline(tl) if tl else None
        self.device: str = s.get("device", {}).get("name", "unknown GPU")
        self.total_kernel_ns: float = s.get("total_kernel_ns", 0.0)
        self.kernel_count: int = s.get("kernel_count", 0)
        self.notes: "List[str]" = list(s.get("notes", []))
        run = s.get("run") or {}
        self.run_dir: "Optional[str]" = run.get("run_dir")

    @classmethod
    def from_json(cls, report_json: str) -> "Analysis":
        """An analysis read back from its kopt/1 JSON (a run folder's report.json)."""
        return cls(_kopt.diagnosis_from_json(report_json))

    @property
    def kernels(self) -> "List[Kernel]":
        """The per-kernel table (built on first use)."""
        if self._kernels is None:
            self._kernels = [Kernel(k) for k in self._d.kernels()]
        return self._kernels

    @property
    def warmup_trials(self) -> "Optional[Dict[str, Any]]":
        """Warm-up and autotuning trials: kernels that ran only in the cut
        warm-up steps (or only in the first iteration of an ncu capture),
        left out of the table and the gains unless ``keep_warmup=True``:
        ``kernels`` (name, launches, total_ns), ``launches``, ``total_ns``,
        ``how_found``, ``evidence`` (``"warmup_steps"`` or
        ``"first_iteration"``), ``kept``; None when there were none. Kernels
        of the start-up before the first step are kept."""
        return self._d.to_dict().get("warmup_trials")

    def to_dict(self) -> "Dict[str, Any]":
        """The ``kopt/1`` document as a dict (a fresh copy)."""
        return self._d.to_dict()

    def to_json(self) -> str:
        return self._d.to_json()

    def to_markdown(self) -> str:
        return self._d.render("md")

    def to_text(self, width: "Optional[int]" = None, verbose: bool = False) -> str:
        """The terminal report: one screen, or the whole of it with verbose=True."""
        return self._d.render("term", width, verbose)

    def to_html(self) -> str:
        """The self-contained HTML report (no external reference)."""
        return self._d.render("html")

    def _repr_html_(self) -> str:
        # In an iframe: the report's styles stay in it, not on the notebook.
        return _isolated_html(self.to_html())

    def __str__(self) -> str:
        return self.to_text(width=120)

    def __repr__(self) -> str:
        return (
            f"<kopt.Analysis {self.kernel_count} kernels on {self.device}; primary "
            f"{self.primary_bottleneck_component} / {self.primary_bottleneck_type}>"
        )
