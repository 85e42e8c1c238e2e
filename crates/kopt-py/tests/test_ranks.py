"""kopt.analyze_ranks: a folder of per-rank traces read as one job (#36)."""

import shutil

import pytest

import kopt


def test_a_real_pair_of_ranks_reads_as_one_job(fixtures):
    d = kopt.analyze_ranks(fixtures / "multigpu-hta")
    assert d["world_size"] == 128
    assert [r["rank"] for r in d["ranks"]] == [0, 1]
    for r in d["ranks"]:
        assert 0 <= r["overlap_pct"] <= 100
        assert r["exposed_comm_ns"] + r["overlapped_comm_ns"] == r["comm_ns"]
    assert any("2 of 128 ranks" in n for n in d["notes"])


def test_the_same_job_as_text(fixtures):
    text = kopt.analyze_ranks(fixtures / "multigpu-hta", format="term")
    assert text.startswith("kopt: 128 ranks")
    assert "Ranks" in text


def test_a_folder_with_one_trace_is_refused_by_name(fixtures, tmp_path):
    shutil.copy(fixtures / "multigpu-hta" / "rank-0.json.gz", tmp_path / "rank-0.json.gz")
    with pytest.raises(kopt.InputError, match="not a folder of per-rank traces"):
        kopt.analyze_ranks(tmp_path)
