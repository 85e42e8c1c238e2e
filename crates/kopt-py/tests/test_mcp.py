"""`kopt mcp` end to end with the official MCP Python SDK as the client: the
SDK starts the server as a subprocess over stdio, initializes, lists the
tools, calls them (it checks each structured result against the tool's
output schema), cancels a long profile and reads a run folder resource."""

import json
import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

mcp = pytest.importorskip("mcp", reason="the MCP Python SDK (`pip install mcp`) is not installed")
anyio = pytest.importorskip("anyio")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402


def _kopt() -> str:
    exe = os.environ.get("KOPT_BIN") or shutil.which("kopt")
    assert exe, "no kopt command: set KOPT_BIN or install the wheel"
    return exe


def _params(cwd: Path, *args: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith("FAKE_") or k in ("KOPT_TRACER", "PATH")}
    env.setdefault("KOPT_TRACER", "/nonexistent/libkopt_tracer.so")
    return StdioServerParameters(command=_kopt(), args=["mcp", *args], env=env, cwd=str(cwd))


def _run(body, cwd: Path, *args: str):
    async def main():
        async with stdio_client(_params(cwd, *args)) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.server_info.name == "kopt"
                return await body(session)

    return anyio.run(main)


def _npy(path: Path, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    path.write_bytes(
        b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + struct.pack("<%df" % len(values), *values)
    )


def _text(result) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def test_tools_listed_with_schemas(tmp_path):
    async def body(session):
        tools = (await session.list_tools()).tools
        names = [t.name for t in tools]
        assert names == ["analyze", "analyze_ranks", "profile", "trace", "bench", "compare", "optimize", "tune", "details", "history", "journal_add"]
        for t in tools:
            assert t.input_schema["type"] == "object"
            assert t.output_schema["type"] == "object"
        long = {t.name: t for t in tools if "budget_s" in t.input_schema.get("properties", {})}
        assert set(long) == {"profile", "trace", "bench", "optimize", "tune"}
        # #37: the whole list fits an agent's tool budget (it was 146 KB).
        listed = json.dumps(
            {"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]}, separators=(",", ":")
        )
        assert len(listed) <= 20_000, len(listed)
        # compare writes a history row: it does not claim to be read-only.
        by = {t.name: t for t in tools}
        assert by["compare"].annotations is None or by["compare"].annotations.read_only_hint is not True
        assert all(t.title for t in tools)

    _run(body, tmp_path)


def test_a_summary_without_counters_says_they_are_missing(tmp_path, fixtures):
    # #37: an AMD kernel trace without counters summarised as "unknown" alone.
    shutil.copy(fixtures / "amd/rocprofv3-docs/kernel_trace.csv", tmp_path / "kernel_trace.csv")

    async def body(session):
        r = await session.call_tool("analyze", {"files": ["kernel_trace.csv"]})
        assert not r.is_error, _text(r)
        assert "counters" in _text(r).lower(), _text(r)

    _run(body, tmp_path)


def test_details_through_the_sdk(tmp_path, fixtures):
    shutil.copy(fixtures / "labeled-suite-h100/ncu_raw_base.csv", tmp_path / "base.csv")

    async def body(session):
        await session.list_tools()
        r = await session.call_tool("details", {"files": ["base.csv"], "section": "findings"})
        assert not r.is_error, _text(r)
        assert r.structured_content["findings"], _text(r)
        r = await session.call_tool("details", {"files": ["base.csv"], "kernel": "transpose"})
        assert not r.is_error, _text(r)
        assert "transpose" in r.structured_content["kernel"]["name"].lower()

    _run(body, tmp_path)


def test_analyze_fixture_same_primary_as_the_cli(tmp_path, fixtures):
    csv = fixtures / "labeled-suite-h100/ncu_raw_base.csv"
    shutil.copy(csv, tmp_path / "base.csv")
    cli = json.loads(subprocess.run([_kopt(), "analyze", "-f", "json", str(csv)], check=True, capture_output=True).stdout)

    async def body(session):
        await session.list_tools()
        r = await session.call_tool("analyze", {"files": ["base.csv"]})
        assert not r.is_error, _text(r)
        assert r.structured_content["primary"] == cli["primary"]
        assert "Primary bottleneck" in _text(r)
        outside = await session.call_tool("analyze", {"files": [str(csv)]})
        assert outside.is_error and "--allow-path" in _text(outside)

    _run(body, tmp_path)


def test_bench_two_sleeps_keeps_the_faster(tmp_path):
    async def body(session):
        await session.list_tools()
        r = await session.call_tool(
            "bench",
            {"baseline": ["sleep", "0.2"], "candidate": ["sleep", "0.02"], "budget_s": 60, "min_samples": 5, "max_time_s": 3},
        )
        assert not r.is_error, _text(r)
        assert r.structured_content["verdict"] == "KEEP"
        assert r.structured_content["schema"] == "kopt/1"
        assert r.meta["kopt/device_s"] > 0 and r.meta["kopt/estimate_s"] <= 60
        # #37: the estimate an agent budgets with is within 2x of the cost.
        ratio = r.meta["kopt/estimate_s"] / r.meta["kopt/device_s"]
        assert 0.5 <= ratio <= 2.0, r.meta
        assert "KEEP" in _text(r)

    _run(body, tmp_path)


def test_compare_generated_arrays_a_planted_nan_fails(tmp_path):
    _npy(tmp_path / "ref.npy", [1.0, 2.0, 3.0, 4.0])
    _npy(tmp_path / "same.npy", [1.0, 2.0, 3.0, 4.0])
    _npy(tmp_path / "nan.npy", [1.0, float("nan"), 3.0, 4.0])

    async def body(session):
        await session.list_tools()
        ok = await session.call_tool("compare", {"reference": "ref.npy", "candidate": "same.npy"})
        assert not ok.is_error and ok.structured_content["passed"] is True
        bad = await session.call_tool("compare", {"reference": "ref.npy", "candidate": "nan.npy"})
        assert not bad.is_error, _text(bad)
        assert bad.structured_content["passed"] is False
        assert bad.structured_content["tensors"][0]["nan"] == [0, 1]
        assert "FAILED" in _text(bad)

    _run(body, tmp_path)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return ") Z " not in stat


def test_profile_resource_then_cancel_kills_the_workload(tmp_path, fake_ncu, monkeypatch):
    ncu_log = tmp_path / "ncu-args.log"
    monkeypatch.setenv("FAKE_NCU_ARGS_LOG", str(ncu_log))
    work = tmp_path / "work.sh"
    work.write_text('echo $$ > "$(dirname "$0")/pid"\nexec sleep "$(cat "$(dirname "$0")/duration")"\n')
    (tmp_path / "duration").write_text("0")
    pid_file = tmp_path / "pid"

    async def body(session):
        await session.list_tools()
        messages = []

        async def progress(p, total, message):
            messages.append(message)

        first = await session.call_tool(
            "profile", {"command": ["sh", str(work)], "budget_s": 120}, progress_callback=progress
        )
        assert not first.is_error, _text(first)
        assert first.structured_content["primary"] is not None
        assert any(m and m.startswith("pass 1/") for m in messages), messages
        run_id = Path(first.structured_content["run"]["run_dir"]).name

        uris = [str(r.uri) for r in (await session.list_resources()).resources]
        assert f"kopt://runs/{run_id}/report.json" in uris
        report = await session.read_resource(f"kopt://runs/{run_id}/report.json")
        assert json.loads(report.contents[0].text)["primary"] == first.structured_content["primary"]
        md = await session.read_resource(f"kopt://runs/{run_id}/report.md")
        assert md.contents[0].text.strip()

        history = await session.call_tool("history", {})
        assert history.structured_content["runs"][0]["kind"] == "profile"

        # Now a long one: the history prices it (no timing pass), ncu starts
        # the workload, the client gives up; the workload must be gone.
        pid_file.unlink()
        (tmp_path / "duration").write_text("60")
        ncu_runs = len(ncu_log.read_text().splitlines())
        with anyio.move_on_after(30) as scope:
            async with anyio.create_task_group() as tg:

                async def call():
                    await session.call_tool("profile", {"command": ["sh", str(work)], "budget_s": 120})

                tg.start_soon(call)
                while not pid_file.exists() or not pid_file.read_text().strip():
                    await anyio.sleep(0.05)
                pid = int(pid_file.read_text())
                assert _alive(pid)
                # ncu started it (no timing run first: the history priced it).
                assert len(ncu_log.read_text().splitlines()) == ncu_runs + 1
                tg.cancel_scope.cancel()
        assert not scope.cancelled_caught, "the workload never started"
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert not _alive(pid), f"workload {pid} still running after the cancel"
        # The server still answers.
        again = await session.call_tool("history", {"limit": 1})
        assert not again.is_error

    _run(body, tmp_path)


def test_errors_are_answered_and_the_session_goes_on(tmp_path):
    async def body(session):
        await session.list_tools()
        r = await session.call_tool("analyze", {"files": 5})
        assert r.is_error and "invalid arguments" in _text(r)
        with pytest.raises(Exception):
            await session.call_tool("no_such_tool", {})
        r = await session.call_tool("bench", {"baseline": ["sleep", "1"], "candidate": ["sleep", "1"], "budget_s": 0.5})
        assert r.is_error and _text(r).startswith("refused")
        r = await session.call_tool("history", {})
        assert not r.is_error

    _run(body, tmp_path)


def _servers_of(parent: int):
    """The `kopt mcp` processes whose parent is `parent`."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"mcp" in cmd:
            out.append(int(d.name))
    return out


def test_killing_the_server_leaves_no_workload(tmp_path):
    # #37: SIGKILL to the server left its workload running.
    work = tmp_path / "work.sh"
    work.write_text('echo $$ > "$(dirname "$0")/pid"\nexec sleep 60\n')
    pid_file = tmp_path / "pid"
    found = {}

    async def body(session):
        await session.list_tools()
        with anyio.move_on_after(30):
            async with anyio.create_task_group() as tg:

                async def call():
                    try:
                        await session.call_tool(
                            "bench", {"baseline": ["sh", str(work)], "candidate": ["true"], "budget_s": 300}
                        )
                    except Exception:  # the server is gone: the call cannot end well
                        pass

                tg.start_soon(call)
                while not pid_file.exists() or not pid_file.read_text().strip():
                    await anyio.sleep(0.05)
                found["workload"] = int(pid_file.read_text())
                servers = _servers_of(os.getpid())
                assert len(servers) == 1, servers
                os.kill(servers[0], 9)
                found["killed"] = servers[0]
                tg.cancel_scope.cancel()

    try:
        _run(body, tmp_path)
    except AssertionError:
        raise
    except Exception:  # the SDK's transport ends with the server
        pass
    pid = found.get("workload")
    assert pid, "the workload never started"
    assert found.get("killed"), "the server was not killed"
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), f"workload {pid} still running after the server was killed"
