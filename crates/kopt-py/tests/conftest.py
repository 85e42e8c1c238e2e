import os
import shutil
import stat
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    """A fake `ncu` first on PATH (no GPU here): it runs the workload, then
    'records' the labeled suite's captured CSV pages."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu = bin_dir / "ncu"
    shutil.copy(REPO / "crates/kopt/tests/support/fake-ncu.sh", ncu)
    ncu.chmod(ncu.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_PASS1", str(FIXTURES / "labeled-suite-h200-profile/profile_pass1_timing.csv"))
    monkeypatch.setenv("FAKE_PASS2", str(FIXTURES / "labeled-suite-h200-profile/profile_pass2_targeted.csv"))
    monkeypatch.setenv("FAKE_PASS3", str(FIXTURES / "labeled-suite-h100/ncu_details.csv"))
    monkeypatch.setenv("KOPT_TRACER", "/nonexistent/libkopt_tracer.so")
    monkeypatch.delenv("FAKE_NCU_MODE", raising=False)
    return ncu


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    """Every test in its own folder: history and run folders land there."""
    monkeypatch.chdir(tmp_path)
