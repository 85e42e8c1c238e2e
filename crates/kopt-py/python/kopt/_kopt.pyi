"""Type stubs of kopt's native module (the engine, in-process)."""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

__version__: str

class Diagnosis:
    """A diagnosis kept in Rust."""

    def summary(self) -> Dict[str, Any]: ...
    def kernels(self) -> List[Dict[str, Any]]: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self) -> str: ...
    def render(self, format_name: str, width: Optional[int] = None, verbose: bool = False) -> str: ...

def diagnosis_from_json(report_json: str) -> Diagnosis: ...

class KoptError(Exception): ...
class UsageError(KoptError): ...
class InputError(KoptError): ...
class ToolMissing(KoptError): ...
class WorkloadFailed(KoptError): ...
class OutputError(KoptError): ...

def analyze(
    paths: Sequence[str],
    *,
    device: Optional[str] = None,
    top: Optional[int] = None,
    ncu: Optional[str] = None,
    peak_dram_gbs: Optional[float] = None,
    keep_warmup: bool = False,
    bare_command: Optional[Sequence[str]] = None,
    gpu: Optional[str] = None,
    timeout: Optional[float] = None,
    tracer: Optional[str] = None,
    runs_dir: Optional[str] = None,
) -> Diagnosis: ...
def profile(
    argv: Optional[Sequence[str]] = None,
    *,
    script: Optional[str] = None,
    python: Optional[str] = None,
    warmup: int = 3,
    steps: int = 20,
    ops: bool = False,
    module: Optional[str] = None,
    gpu: Optional[str] = None,
    timeout: Optional[float] = None,
    profile_top: Optional[int] = None,
    top: Optional[int] = None,
    deep_top: Optional[int] = None,
    kernel: Optional[str] = None,
    timing_pass: str = "tracer",
    quiet: bool = False,
    tracer: Optional[str] = None,
    ncu: Optional[str] = None,
    runs_dir: Optional[str] = None,
    db: Optional[str] = None,
    run_dir: Optional[str] = None,
    device: Optional[str] = None,
    bare_run: bool = True,
    verify: int = 0,
) -> Diagnosis: ...
def trace(
    argv: Sequence[str],
    *,
    gpu: Optional[str] = None,
    timeout: Optional[float] = None,
    sample: Optional[str] = None,
    quiet: bool = False,
    tracer: Optional[str] = None,
    runs_dir: Optional[str] = None,
    db: Optional[str] = None,
    run_dir: Optional[str] = None,
    bare_run: bool = True,
) -> Diagnosis: ...
def bench(
    variants: Sequence[Tuple[str, str]],
    measure: Dict[str, Any],
    *,
    journal: Optional[str] = None,
    db: Optional[str] = None,
) -> str: ...
def measure_defaults(*, in_process: bool = False) -> Dict[str, Any]: ...
def history(
    *,
    db: Optional[str] = None,
    limit: int = 20,
    run: Optional[int] = None,
    runs: Optional[Tuple[int, int]] = None,
    calibration: bool = False,
    format_name: str = "term",
) -> str: ...
def compare(
    reference: str,
    candidate: str,
    *,
    tol: Optional[float] = None,
    tf32: bool = False,
    db: Optional[str] = None,
    atol: Optional[float] = None,
    rtol: Optional[float] = None,
    allow_dtype_change: bool = False,
) -> str: ...
def gate_decide(
    facts_json: str,
    *,
    threshold: Optional[float] = None,
    noise: Optional[float] = None,
    seed: Optional[int] = None,
    tol: Optional[float] = None,
) -> str: ...
def gate_harness_source() -> str: ...
def device_peaks(device: str) -> Dict[str, Optional[float]]: ...
def should_stop(
    samples: List[float], elapsed: float, *, min_samples: int, min_time: float, noise_target: float, max_time: float
) -> bool: ...
def default_tolerance(dtype: str, tf32: bool = False) -> float: ...
def render(kind: str, report_json: str, format_name: str, *, width: Optional[int] = None) -> str: ...
def create_run_dir(runs_dir: Optional[str] = None) -> str: ...
def cli_main(args: List[str]) -> int: ...
def optimize_choose(diagnosis: Diagnosis, force: List[str] = ...) -> str: ...
def optimize_stacks(
    diagnosis: Diagnosis,
    run_dir: str,
    module: str,
    *,
    force: List[str] = ...,
    threshold: Optional[float] = None,
    noise: Optional[float] = None,
    seed: Optional[int] = None,
    allow_precision: bool = False,
) -> str: ...
def optimize_conclude(
    diagnosis: Diagnosis,
    run_dir: str,
    module: str,
    *,
    script: str = "<in-process>",
    force: List[str] = ...,
    threshold: Optional[float] = None,
    noise: Optional[float] = None,
    seed: Optional[int] = None,
    allow_precision: bool = False,
    journal: Optional[str] = None,
    db: Optional[str] = None,
) -> str: ...
def optimize_harness_source() -> str: ...
def tune(
    template: str,
    params: Sequence[Tuple[str, str]],
    *,
    constraints: Sequence[str] = ...,
    strategy: Optional[str] = None,
    trials: Optional[int] = None,
    baseline: Optional[str] = None,
    key: Optional[str] = None,
    fresh: bool = False,
    gpus: Optional[Sequence[str]] = None,
    top: int = 3,
    measure: Dict[str, Any],
    db: Optional[str] = None,
    run_trials: Optional[Callable[[str], List[str]]] = None,
    run_final: Optional[Callable[[str], str]] = None,
    device: Optional[str] = None,
    driver: Optional[str] = None,
) -> str: ...
def tune_run_trial(job: str, *, gpu: Optional[str] = None, scratch: Optional[str] = None) -> str: ...
def tune_run_final(job: str, *, gpu: Optional[str] = None) -> str: ...
