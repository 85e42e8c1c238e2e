"""analyze, trace, bench, compare: thin calls into the engine."""

from __future__ import annotations

import os
import sys
# typing.TYPE_CHECKING without importing typing (10 ms of start-up).
TYPE_CHECKING = False

from . import _kopt
from ._analysis import Analysis

if TYPE_CHECKING:  # annotations only (start-up time)
    from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

    from ._gate import GateResult
    from ._results import BenchResult, CompareResult

    PathLike = Union[str, "os.PathLike[str]"]


def tracer_path() -> Optional[str]:
    """kopt's CUPTI tracer library: $KOPT_TRACER, else the one inside this package."""
    env = os.environ.get("KOPT_TRACER")
    if env:
        return env
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libkopt_tracer.so")
    return bundled if os.path.isfile(bundled) else None


class TracerMissingWarning(RuntimeWarning):
    """kopt's tracer library is not installed: timing falls back to ncu and
    the report has no timeline."""


def warn_tracer_missing(what: str) -> None:
    """Say loudly (a warning, on stderr by default) that ``what`` times
    every launch with ncu because the tracer library is missing."""
    import warnings

    warnings.warn(
        f"kopt: {what}: kopt's tracer library (libkopt_tracer.so) is not inside "
        "this kopt package and KOPT_TRACER is not set: every launch is timed with "
        "ncu instead, and the report has no timeline (launch overhead, gaps, "
        "graph-capture prediction). Reinstall kopt from a wheel that carries it "
        "(pip install crates/kopt-py builds one) or set KOPT_TRACER=/path/libkopt_tracer.so.",
        TracerMissingWarning,
        stacklevel=3,
    )


# The measuring keywords bench and tune share; the engine takes them as one
# dict (its Measurement), so each signature lists them once for users and
# hands them on with measure_kwargs(locals()). Each defaults to None: the
# engine's default, the CLI's too (measure_defaults() lists them).
MEASURE_KEYS = (
    "threshold",
    "noise",
    "warmup",
    "min_samples",
    "min_time",
    "max_time",
    "noise_target",
    "seed",
    "timing",
    "range",
    "tracer",
    "check",
    "tol",
)


def measure_defaults() -> dict:
    """The measuring keywords' defaults (``threshold``, ``noise``, ``warmup``,
    ``min_samples``, ``min_time``, ``max_time``, ``noise_target``, ``seed``,
    ``timing``): the engine's, which a keyword left at ``None`` gets."""
    return _kopt.measure_defaults()


def measure_kwargs(ns: dict) -> dict:
    """The measuring keywords out of a caller's ``locals()``, paths as str."""
    m = {k: ns.get(k) for k in MEASURE_KEYS}
    for k in ("tracer", "check"):
        m[k] = _opt_path(m[k])
    return m


def refuse_given(message: str, **given: Any) -> None:
    """A :class:`UsageError` for the first keyword in ``given`` the caller
    set (anything but ``None`` and ``False``): one that does not apply to
    this call. ``message`` names it through ``{name}``."""
    for name, value in given.items():
        if value is not None and value is not False:
            raise _kopt.UsageError(message.format(name=name))


def _opt_path(p: Optional[PathLike]) -> Optional[str]:
    return None if p is None else os.fspath(p)


def analyze_ranks(folder: PathLike, format: Optional[str] = None):
    """Read a distributed job from its ranks' traces.

    ``folder``: torch.profiler traces, one per rank (``*.json`` or
    ``*.json.gz``; the rank from the trace's ``distributedInfo`` or its
    file name), or the run folder of ``kopt trace`` over a launcher such as
    torchrun. Returns the job's diagnosis as a dict (ranks, collectives,
    straggler, recommendations, notes), or the report as text when
    ``format`` is ``"term"``, ``"md"``, ``"html"`` or ``"json"``
    (docs/multigpu.md).
    """
    import json

    text = _kopt.analyze_ranks(os.fspath(folder), format or "json")
    return text if format else json.loads(text)


def analyze(
    *paths: PathLike,
    device: Optional[str] = None,
    top: Optional[int] = None,
    ncu: Optional[PathLike] = None,
    peak_dram_gbs: Optional[float] = None,
    keep_warmup: bool = False,
    bare_command: Optional[Union[str, Sequence[str]]] = None,
    gpu: Optional[Union[int, str]] = None,
    timeout: Optional[float] = None,
    tracer: Optional[PathLike] = None,
    runs_dir: Optional[PathLike] = None,
) -> Analysis:
    """Diagnose profiler output you already have.

    ``paths``: ncu CSV pages (``--page raw`` or ``details``), ``.ncu-rep``
    reports (needs ncu), torch.profiler / Kineto traces, kopt traces
    (``.jsonl``) or ``kopt profile`` run folders. Raises :class:`InputError`
    for unreadable or malformed input. ``keep_warmup=True`` keeps warm-up /
    autotuning trial kernels (launched only in the warm-up steps) in the
    table and totals; by default they are left out and listed in
    ``warmup_trials``.

    ``bare_command``: the program that made a torch.profiler (or kopt)
    trace. When the trace's steps look launch bound, kopt runs it once more
    with its torch.profiler replaced by step markers and no CUPTI, and times
    the same steps, so the graph-capture prediction starts from the eager
    step without the profiler's cost (``gpu``, ``timeout``, ``tracer`` and
    ``runs_dir`` apply to that run).
    """
    if not paths:
        raise _kopt.UsageError("analyze() needs at least one path")
    argv = None if bare_command is None else _argv(bare_command)
    if argv is not None and not argv:
        raise _kopt.UsageError("analyze(bare_command=...) needs a program to run")
    if argv is None:
        refuse_given(
            "analyze({name}=...) applies to the bare run: give bare_command too",
            gpu=gpu,
            timeout=timeout,
            tracer=tracer,
            runs_dir=runs_dir,
        )
    return Analysis(
        _kopt.analyze(
            [os.fspath(p) for p in paths],
            device=device,
            top=top,
            ncu=_opt_path(ncu),
            peak_dram_gbs=peak_dram_gbs,
            keep_warmup=keep_warmup,
            bare_command=argv,
            gpu=None if gpu is None else str(gpu),
            timeout=timeout,
            tracer=_opt_path(tracer),
            runs_dir=_opt_path(runs_dir),
        )
    )


def text_arg(name: str, value: str) -> str:
    """``value`` when it can be passed on as UTF-8 text; else a
    :class:`UsageError` naming the argument and the character. A lone
    surrogate (from ``os.fsdecode`` of undecodable bytes, or a ``\\ud800``
    escape) cannot be encoded, and the native call would raise a bare
    ``UnicodeEncodeError`` naming neither."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _kopt.UsageError(
            f"{name} is not valid text: character {e.start + 1} is {value[e.start:e.end]!r}, "
            f"a lone surrogate ({e.reason}); kopt passes text on as UTF-8"
        ) from None
    return value


def _argv(command_or_script: Union[str, Sequence[str]]) -> List[str]:
    import shlex

    if isinstance(command_or_script, (list, tuple)):
        return [text_arg(f"argument {i}", str(a)) for i, a in enumerate(command_or_script)]
    text = text_arg("the command", str(command_or_script))
    if text.endswith(".py") and os.path.isfile(text):
        return [sys.executable, text]
    return shlex.split(text)


def trace(
    command_or_script: Union[str, Sequence[str]],
    *,
    gpu: Optional[Union[int, str]] = None,
    timeout: Optional[float] = None,
    sample: Optional[str] = None,
    quiet: bool = False,
    runs_dir: Optional[PathLike] = None,
    db: Optional[PathLike] = None,
    bare_run: bool = True,
) -> Analysis:
    """Run a program (argv list, command string, or a ``.py`` file run with
    this interpreter) under kopt's CUPTI tracer and diagnose its timeline.
    With ``bare_run`` (default), a launch-bound program with NVTX step
    ranges runs a second time untraced so the graph-capture prediction
    starts from its bare step time."""
    return Analysis(
        _kopt.trace(
            _argv(command_or_script),
            gpu=None if gpu is None else str(gpu),
            timeout=timeout,
            sample=sample,
            quiet=quiet,
            tracer=tracer_path(),
            runs_dir=_opt_path(runs_dir),
            db=_opt_path(db),
            bare_run=bare_run,
        )
    )


def bench(
    baseline: Optional[Union[str, Callable]] = None,
    candidate: Optional[Union[str, Callable]] = None,
    *,
    variants: Optional[Sequence[Tuple[str, str]]] = None,
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
    check: Optional[PathLike] = None,
    tol: Optional[float] = None,
    journal: Optional[str] = None,
    db: Optional[PathLike] = None,
    inputs: Optional[Callable] = None,
    shapes: Optional[Sequence[Any]] = None,
    out: Optional[Callable] = None,
    bytes: Any = None,
    flops: Any = None,
    flush_l2: bool = False,
    checks: int = 6,
) -> Union[BenchResult, GateResult]:
    """A/B benchmark of two shell commands (or an ablation of ``variants``,
    ``[(name, command), ...]``, the first the baseline): interleaved runs,
    a bootstrap interval, and a KEEP / MARGINAL / REVERT verdict. A
    measuring keyword left at ``None`` takes the engine's default (the CLI's
    too): :func:`kopt.measure_defaults` lists them.

    Given two callables and ``inputs`` (a callable returning the argument
    list; called with each shape when ``shapes=[...]`` is set), both are
    timed in this process (CUDA events, device synchronised, random order)
    and guarded: checked on fresh inputs several times, output buffers
    (``out``: a callable returning them for the inputs; the functions then
    get ``out=``) poisoned, and every way of gaming the timer named as
    ``SUSPECT: <reason>`` (never KEEP). ``bytes`` / ``flops`` per call (or a
    callable of the shape) check rates against the device's peaks;
    ``flush_l2=True`` times the pair again with L2 flushed before each call.
    Returns a :class:`GateResult` (defaults: ``warmup=3, min_samples=20,
    min_time=0.2, max_time=2`` seconds of timing in all)."""
    from ._results import BenchResult

    if callable(baseline) or callable(candidate):
        from ._gate import bench_callables

        refuse_given(
            "{name}= applies to commands, not to callables",
            variants=variants,
            journal=journal,
            check=check,
            range=range,
        )
        return bench_callables(
            baseline,
            candidate,
            inputs,
            shapes=shapes,
            out=out,
            bytes=bytes,
            flops=flops,
            flush_l2=flush_l2,
            checks=checks,
            threshold=threshold,
            noise=noise,
            warmup=warmup,
            min_samples=min_samples,
            min_time=min_time,
            max_time=max_time,
            noise_target=noise_target,
            seed=seed,
            tol=tol,
        )
    refuse_given(
        "{name}= applies to callables, not to commands",
        inputs=inputs,
        shapes=shapes,
        out=out,
        bytes=bytes,
        flops=flops,
        flush_l2=flush_l2,
    )

    if variants is None:
        if baseline is None or candidate is None:
            raise _kopt.UsageError("give baseline and candidate, or variants=[(name, command), ...]")
        variants = [("baseline", baseline), ("candidate", candidate)]
    elif baseline is not None or candidate is not None:
        raise _kopt.UsageError("give baseline and candidate, or variants, not both")
    tracer = tracer_path()
    return BenchResult(
        _kopt.bench(
            [(text_arg("a variant's name", str(n)), text_arg(f"variant {n!r}'s command", str(c))) for n, c in variants],
            measure_kwargs(locals()),
            journal=journal,
            db=_opt_path(db),
        )
    )


def history(
    *,
    run: Optional[int] = None,
    runs: Optional[Tuple[int, int]] = None,
    calibration: bool = False,
    limit: int = 20,
    format: str = "term",
    db: Optional[PathLike] = None,
) -> str:
    """The run history as ``kopt history`` prints it: the newest ``limit``
    runs, one run (``run=ID``, with its report), two side by side
    (``runs=(A, B)``), or how well predictions held (``calibration=True``);
    ``format`` is term, md, json or html. Text read back from the database
    is escaped: nothing in it can drive a terminal."""
    return _kopt.history(
        db=_opt_path(db), limit=limit, run=run, runs=runs, calibration=calibration, format_name=format
    )


def compare(
    reference: PathLike,
    candidate: PathLike,
    tol: Optional[float] = None,
    *,
    tf32: bool = False,
    db: Optional[PathLike] = None,
    atol: Optional[float] = None,
    rtol: Optional[float] = None,
    allow_dtype_change: bool = False,
) -> CompareResult:
    """The correctness gate on two ``.npy`` / ``.safetensors`` files: tensors
    paired by name, relative L2 error against a dtype-aware tolerance and
    every element within ``atol + rtol*|reference|`` (torch.allclose's rule,
    by dtype unless given), NaN/Inf and shape checks; a changed dtype fails
    unless ``allow_dtype_change``."""
    from ._results import CompareResult

    return CompareResult(
        _kopt.compare(
            os.fspath(reference),
            os.fspath(candidate),
            tol=tol,
            tf32=tf32,
            db=_opt_path(db),
            atol=atol,
            rtol=rtol,
            allow_dtype_change=allow_dtype_change,
        )
    )
