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
