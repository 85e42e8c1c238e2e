"""Hostile or careless calls from Python (#27): none may end or crash the
interpreter, and the wheel carries kopt's tracer."""

import subprocess
import sys

import pytest

import kopt
from kopt import _kopt


def run_in_child(code):
    """Run `code` in a fresh interpreter: a call that ended the process
    would end the test run otherwise."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )


def test_cli_main_help_returns_instead_of_ending_the_interpreter():
    r = run_in_child(
        "from kopt import _kopt\n"
        "code = _kopt.cli_main(['kopt', '--help'])\n"
        "print('still here', code)\n"
        "code = _kopt.cli_main(['kopt', 'analyze', '--top', '-1', 'x.csv'])\n"
        "print('still here', code)\n"
    )
    assert r.returncode == 0, r.stderr
    assert "still here 0" in r.stdout
    assert "still here 2" in r.stdout
    assert "Usage:" in r.stdout
    assert r.stderr.startswith("kopt: error: --top -1"), r.stderr


@pytest.mark.parametrize("timeout", [1e300, 1e19, float("inf")])
def test_a_huge_timeout_is_a_usage_error(timeout, fixtures):
    with pytest.raises(kopt.UsageError, match="--timeout"):
        _kopt.analyze(
            [str(fixtures / "labeled-suite-h100/ncu_raw_base.csv")],
            bare_command=["true"],
            timeout=timeout,
        )


def test_a_huge_max_time_is_a_usage_error():
    with pytest.raises(kopt.UsageError, match="--max-time"):
        kopt.bench("true", "true", max_time=1e19)


def test_the_installed_package_carries_the_tracer(monkeypatch):
    # A wheel built the standard way (maturin build, pip install
    # crates/kopt-py) had no libkopt_tracer.so: kopt-py's build script now
    # builds it into the package. Fails when the library is missing.
    import os

    from kopt import _api

    monkeypatch.delenv("KOPT_TRACER", raising=False)
    path = _api.tracer_path()
    assert path is not None, "the kopt package has no libkopt_tracer.so"
    assert os.path.dirname(path) == os.path.dirname(os.path.abspath(kopt.__file__))
    with open(path, "rb") as f:
        assert f.read(4) == b"\x7fELF"


def test_profile_module_warns_loudly_without_the_tracer(monkeypatch, tmp_path):
    from kopt import _api, _module

    monkeypatch.setattr(_module, "tracer_path", lambda: None)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.warns(kopt.TracerMissingWarning, match="timed with ncu instead"):
        with pytest.raises(kopt.KoptError):
            kopt.profile_module("print(1)\n", "m", 0, runs_dir=tmp_path, quiet=True)


def test_kernel_fields_match_the_json_and_latency_us_is_deprecated(fixtures):
    a = kopt.analyze(str(fixtures / "labeled-suite-h100/ncu_raw_base.csv"))
    k = a.kernels[0]
    row = a.to_dict()["kernels"][0]
    assert k.total_us == pytest.approx(row["total_ns"] / 1e3)
    assert k.mean_us == pytest.approx(row["mean_ns"] / 1e3)
    assert k.pct_of_total == row["pct_of_total"]
    with pytest.warns(DeprecationWarning, match="total_us"):
        assert k.latency_us == k.total_us
    with pytest.warns(DeprecationWarning, match="pct_of_total"):
        assert k.pct_total == k.pct_of_total
    assert "total" in repr(k) and " at 0x" not in repr(k)


def test_html_is_isolated_and_results_print_readably(tmp_path, fixtures):
    a = kopt.analyze(str(fixtures / "labeled-suite-h100/ncu_raw_base.csv"))
    html = a._repr_html_()
    assert html.startswith("<iframe srcdoc=") and "<style" not in html.split("srcdoc=")[0]
    r = kopt.bench("true", "true", min_samples=3, min_time=0, max_time=2, warmup=0)
    assert repr(r).startswith("<kopt.BenchResult ") and " at 0x" not in repr(r)
    assert r._repr_html_().startswith("<iframe")


def test_tool_missing_from_python_names_the_keyword(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    rep = tmp_path / "r.ncu-rep"
    rep.write_bytes(b"not really")
    with pytest.raises(kopt.ToolMissing) as e:
        kopt.analyze(str(rep))
    assert "--ncu PATH" not in str(e.value)
    assert "ncu=PATH" in str(e.value)


def test_text_with_a_lone_surrogate_is_a_usage_error_naming_it():
    """A sixth hostile round (L5): a script holding a lone surrogate raised
    a bare UnicodeEncodeError from the native call."""
    bad = "import torch\nx = '\ud800'\n"
    with pytest.raises(kopt.UsageError, match=r"script_content is not valid text: character 19 is '\\ud800'"):
        kopt.profile_module(bad, "m")
    with pytest.raises(kopt.UsageError, match="argument 1 is not valid text"):
        kopt.trace(["python3", "a\udcffb.py"])
    with pytest.raises(kopt.UsageError, match="the command is not valid text"):
        kopt.trace("python3 \udcff.py")
    with pytest.raises(kopt.UsageError, match="command is not valid text"):
        kopt.bench("true \ud800", "true")
