"""``kopt.tune``: a parameter sweep over a command template, every trial
checked, timed by the bench engine and cached; on this host's GPUs
(``executor="local"``) or as Ray tasks on many hosts (``executor="ray"``)."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from . import _kopt
from ._api import measure_kwargs

ParamValues = Union[str, Sequence[Any]]


class TuneResult:
    """What a sweep found: ``winner`` (its config as a dict), its speed-up
    over the baseline config with the interval and verdict, and every trial."""

    def __init__(self, report_json: str, jobs: Optional[Dict[int, int]] = None):
        self._json = report_json
        doc = json.loads(report_json)
        self.strategy: str = doc["strategy"]
        self.trials: List[Dict[str, Any]] = doc["trials"]
        w = doc.get("winner") or {}
        self.winner: Optional[Dict[str, str]] = w.get("config")
        self.winner_label: Optional[str] = w.get("label")
        self.speedup: Optional[float] = w.get("speedup_vs_baseline")
        self.interval = w.get("ratio_interval")
        self.verdict: Optional[str] = (w.get("verdict") or {}).get("kind")
        self.measured_trials: int = doc["measured_trials"]
        self.cached_trials: int = doc["cached_trials"]
        self.rejected: List[str] = [t["label"] for t in self.trials if t["status"] == "rejected"]
        self.failed: List[str] = [t["label"] for t in self.trials if t["status"] == "failed"]
        #: Jobs submitted per trial index (the Ray executor), for audits.
        self.jobs: Dict[int, int] = dict(jobs or {})

    def to_dict(self) -> Dict[str, Any]:
        return json.loads(self._json)

    def to_markdown(self) -> str:
        return _kopt.render("tune", self._json, "md")

    def _repr_html_(self) -> str:
        return _kopt.render("tune", self._json, "html")

    def __str__(self) -> str:
        return _kopt.render("tune", self._json, "term")

    def __repr__(self) -> str:
        return f"<kopt.TuneResult {self.strategy}: winner {self.winner_label}>"


def _values(v: ParamValues) -> str:
    if isinstance(v, str):
        return v
    return ",".join(str(x) for x in v)


class _RayExecutor:
    """Trials as Ray tasks (``num_gpus`` each): Ray gives each task its own
    GPU through CUDA_VISIBLE_DEVICES; results come back to this driver,
    which keeps them in its cache."""

    def __init__(self, num_gpus: float, address: Optional[str]):
        try:
            import ray  # noqa: PLC0415 (Ray is an optional extra)
        except ImportError as e:  # pragma: no cover - depends on the install
            raise _kopt.UsageError(
                "executor='ray' needs Ray: pip install 'kopt[ray]'"
            ) from e
        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        self.jobs: Dict[int, int] = {}

        def trial(job: str) -> str:
            from kopt import _kopt as k  # noqa: PLC0415 (runs on the worker)

            return k.tune_run_trial(job)

        def final(job: str) -> str:
            from kopt import _kopt as k  # noqa: PLC0415

            return k.tune_run_final(job)

        self._trial = ray.remote(num_gpus=num_gpus, max_retries=0)(trial)
        self._final = ray.remote(num_gpus=num_gpus, max_retries=0)(final)

    def run_trials(self, jobs_json: str) -> List[str]:
        jobs = json.loads(jobs_json)
        for j in jobs:
            self.jobs[j["index"]] = self.jobs.get(j["index"], 0) + 1
        refs = [self._trial.remote(json.dumps(j)) for j in jobs]
        return list(self.ray.get(refs))

    def run_final(self, job_json: str) -> str:
        return self.ray.get(self._final.remote(job_json))


def tune(
    command: str,
    params: Mapping[str, ParamValues],
    *,
    constraints: Sequence[str] = (),
    strategy: Optional[str] = None,
    trials: Optional[int] = None,
    baseline: Optional[Mapping[str, Any]] = None,
    key: Optional[str] = None,
    fresh: bool = False,
    gpus: Optional[Sequence[Union[int, str]]] = None,
    top: int = 3,
    threshold: Optional[float] = None,
    noise: Optional[float] = None,
    warmup: Optional[int] = None,
    min_samples: Optional[int] = None,
    min_time: Optional[float] = None,
    max_time: Optional[float] = None,
    noise_target: Optional[float] = None,
    seed: Optional[int] = None,
    timing: Optional[str] = None,
    range: Optional[str] = None,
    tracer: Optional[str] = None,
    check: Optional[str] = None,
    tol: Optional[float] = None,
    db: Optional[str] = None,
    executor: str = "local",
    ray_address: Optional[str] = None,
    num_gpus: float = 1,
    device: Optional[str] = None,
    driver: Optional[str] = None,
) -> TuneResult:
    """Sweep ``command`` (a shell command with ``{NAME}`` placeholders) over
    ``params`` (name -> list of values, or a spec such as ``"64..256 step
    64"`` or ``"16..256 x2"``), as ``kopt tune`` does.

    ``executor="local"`` runs one worker per GPU of this host (``gpus``,
    default all visible). ``executor="ray"`` runs each trial as a Ray task
    with ``num_gpus`` (``ray.init(address=ray_address)`` unless Ray is
    already initialised); the final comparison of the best configs is one
    task too, so it runs on one GPU. ``device``/``driver`` name the workers'
    GPU for the cache key when the driver has none.
    """
    pairs = [(str(k), _values(v)) for k, v in params.items()]
    base = None if baseline is None else ",".join(f"{k}={v}" for k, v in baseline.items())
    common: Dict[str, Any] = dict(
        constraints=list(constraints),
        strategy=strategy,
        trials=trials,
        baseline=base,
        key=key,
        fresh=fresh,
        top=top,
        measure=measure_kwargs(locals()),
        db=None if db is None else str(db),
    )
    if executor == "local":
        gpu_ids = None if gpus is None else [str(g) for g in gpus]
        return TuneResult(_kopt.tune(command, pairs, gpus=gpu_ids, **common))
    if executor == "ray":
        if gpus is not None:
            raise _kopt.UsageError("gpus is for executor='local'; Ray places the tasks")
        ex = _RayExecutor(num_gpus, ray_address)
        run_trials: Callable[[str], List[str]] = ex.run_trials
        report = _kopt.tune(
            command,
            pairs,
            run_trials=run_trials,
            run_final=ex.run_final,
            device=device,
            driver=driver,
            **common,
        )
        return TuneResult(report, ex.jobs)
    raise _kopt.UsageError(f"executor {executor!r} is not one of local, ray")
