"""kopt.tune on CPU workloads of known time: the local executor, and Ray
(a local instance, CPU-only tasks) when it is installed."""

import collections
import sys
from pathlib import Path

import pytest

import kopt

SCRIPT = r"""B=$1; W=$2
echo "$B $W" >> "$(dirname "$0")/runs.log"
ns=$(( (B - 128) * (B - 128) * 4 + (W - 4) * (W - 4) * 5000 + 100000 ))
for i in 1 2 3 4 5 6 7 8 9 10; do echo "{\"kopt_sample_ns\": $((ns + i))}"; done
"""

PARAMS = {"B": [32, 64, 128, 256], "W": "1..8 x2"}


def _setup(tmp_path: Path) -> str:
    (tmp_path / "work.sh").write_text(SCRIPT)
    return f"sh {tmp_path / 'work.sh'} {{B}} {{W}}"


def _runs(tmp_path: Path) -> collections.Counter:
    lines = (tmp_path / "runs.log").read_text().split("\n")
    return collections.Counter(line for line in lines if line)


def _kw(tmp_path: Path, **extra):
    kw = dict(min_time=0.0, noise_target=0.01, warmup=0, db=str(tmp_path / "h.db"))
    kw.update(extra)
    return kw


def test_local_finds_the_known_best_and_caches(tmp_path):
    cmd = _setup(tmp_path)
    r = kopt.tune(cmd, PARAMS, **_kw(tmp_path))
    assert r.winner == {"B": "128", "W": "4"}
    assert r.verdict == "KEEP" and r.speedup > 1.5
    assert r.measured_trials == 16 and r.cached_trials == 0
    again = kopt.tune(cmd, PARAMS, **_kw(tmp_path))
    assert again.measured_trials == 0 and again.cached_trials == 16
    assert again.winner == r.winner
    assert "B=128,W=4" in str(again)


def test_bad_requests_raise_usage_errors(tmp_path):
    cmd = _setup(tmp_path)
    with pytest.raises(kopt.UsageError, match="executor"):
        kopt.tune(cmd, PARAMS, executor="dask", **_kw(tmp_path))
    with pytest.raises(kopt.UsageError, match="constraint"):
        kopt.tune(cmd, PARAMS, constraints=["B *"], **_kw(tmp_path))


def test_ray_runs_every_trial_once_and_agrees_with_local(tmp_path):
    ray = pytest.importorskip("ray")
    cmd = _setup(tmp_path)
    local = kopt.tune(cmd, PARAMS, key="local", **_kw(tmp_path))
    (tmp_path / "runs.log").unlink()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": ":".join(sys.path)}})
    try:
        r = kopt.tune(cmd, PARAMS, key="ray", executor="ray", num_gpus=0, **_kw(tmp_path))
    finally:
        ray.shutdown()
    assert r.measured_trials == 16 and r.cached_trials == 0
    assert sorted(r.jobs) == list(range(16)) and set(r.jobs.values()) == {1}
    runs = _runs(tmp_path)
    final = {t["name"].replace("B=", "").replace(",W=", " ") for t in r.to_dict()["final_comparison"]["variants"]}
    for config, n in runs.items():
        # One process per trial (10 samples a run); the final comparison's reruns apart.
        assert n == 1 or config in final, (config, n)
    assert len(runs) == 16
    assert r.winner == local.winner
