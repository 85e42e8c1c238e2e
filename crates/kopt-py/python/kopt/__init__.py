"""kopt: profile-guided GPU kernel optimization, from Python.

The engine runs in-process (a Rust extension); every function returns typed
objects built from kopt's versioned ``kopt/1`` JSON.

    >>> import kopt
    >>> analysis = kopt.analyze("report.csv")            # ncu CSV, .ncu-rep, trace, run folder
    >>> print(analysis.primary_bottleneck_component, analysis.primary_bottleneck_type)
    >>> for rec in analysis.recommendations:
    ...     print(rec)

``profile_module(script_content, module_name, gpu_id)`` profiles a module
script on the GPU; ``bench`` and ``compare`` give A/B
verdicts and the correctness gate. Errors are :class:`KoptError` subclasses
carrying kopt's one-line messages.
"""

from ._kopt import (
    InputError,
    KoptError,
    OutputError,
    ToolMissing,
    UsageError,
    WorkloadFailed,
    __version__,
)
from ._analysis import Analysis, Kernel, Recommendation, Timeline
from ._api import (
    TracerMissingWarning,
    analyze,
    analyze_ranks,
    bench,
    compare,
    history,
    measure_defaults,
    trace,
)

# The rest loads on first use (PEP 562): `import kopt` stays cheap.
_LAZY = {
    "BenchResult": "._results",
    "GateResult": "._gate",
    "CompareResult": "._results",
    "TensorResult": "._results",
    "VariantResult": "._results",
    "GenericProfiler": "._module",
    "profile_module": "._module",
    "CandidateResult": "._optimize",
    "OptimizeResult": "._optimize",
    "optimize": "._optimize",
    "TuneResult": "._tune",
    "tune": "._tune",
    "profile_steps": "._steps",
    "phase": "._steps",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kopt' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "Analysis",
    "BenchResult",
    "CandidateResult",
    "CompareResult",
    "GateResult",
    "GenericProfiler",
    "InputError",
    "Kernel",
    "KoptError",
    "OptimizeResult",
    "OutputError",
    "Recommendation",
    "TensorResult",
    "Timeline",
    "TracerMissingWarning",
    "TuneResult",
    "ToolMissing",
    "UsageError",
    "VariantResult",
    "WorkloadFailed",
    "__version__",
    "analyze",
    "analyze_ranks",
    "bench",
    "compare",
    "history",
    "measure_defaults",
    "optimize",
    "phase",
    "profile_module",
    "profile_steps",
    "trace",
    "tune",
]
