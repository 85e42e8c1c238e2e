"""The Python package against the CLI and the fixtures (no GPU)."""

import json
import os
import re
import shutil
import struct
import subprocess
import sys

import pytest

import kopt

SUITE = "labeled-suite-h100/ncu_raw_base.csv"


def cli(*args):
    """The `kopt` command: $KOPT_BIN (the cargo-built binary) when set, else
    the console script this wheel installed."""
    exe = os.environ.get("KOPT_BIN") or shutil.which("kopt")
    assert exe, "no kopt command: set KOPT_BIN or install the wheel"
    return subprocess.run([exe, *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    "inputs",
    [
        [SUITE],
        ["labeled-suite-h100/ncu_raw_base.csv", "labeled-suite-h100/ncu_details.csv"],
        ["seed000-h200/moe_trace.json"],
    ],
)
def test_analyze_matches_the_cli_field_by_field(fixtures, inputs):
    paths = [str(fixtures / p) for p in inputs]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        pytest.skip(f"fixture not in this checkout: {missing}")
    out = cli("analyze", *paths, "--format", "json")
    assert out.returncode == 0, out.stderr
    expected = json.loads(out.stdout)
    got = kopt.analyze(*paths)
    assert got.to_dict() == expected
    primary = expected.get("primary") or {}
    assert got.primary_bottleneck_component == primary.get("component_short")
    assert got.primary_bottleneck_type == primary.get("type")
    assert [k.bottleneck for k in got.kernels] == [k["bottleneck"]["class"] for k in expected["kernels"]]
    assert [(r.rank, r.id, r.kernel) for r in got.recommendations] == [
        (r["rank"], r["id"], r["kernel"]) for r in expected["recommendations"]
    ]


def test_warmup_trials_are_left_out_and_kept_on_request(fixtures):
    # Synthetic: cuDNN's algorithm search in the first step (3 kernels, 12
    # launches); the input generated once before the loop is start-up, kept.
    trace = fixtures / "synthetic-timelines/kopt_cudnn_benchmark.jsonl"
    a = kopt.analyze(trace)
    w = a.warmup_trials
    assert w is not None and not w["kept"] and w["launches"] == 12
    assert w["evidence"] == "warmup_steps"
    left_out = {k["name"] for k in w["kernels"]}
    assert len(left_out) == 3
    assert all(k.name not in left_out for k in a.kernels)
    assert any("normal_kernel" in k.name for k in a.kernels)
    assert "Left out: 3 kernels that ran only in warm-up steps" in a.to_text(width=200)
    kept = kopt.analyze(trace, keep_warmup=True)
    assert kept.warmup_trials["kept"]
    assert left_out <= {k.name for k in kept.kernels}
    text = kept.to_text(width=200)
    assert "Kept on request" in text and "--keep-warmup" not in text
    assert kopt.analyze(fixtures / SUITE).warmup_trials is None


def test_analysis_objects_read_well(fixtures):
    a = kopt.analyze(fixtures / SUITE)
    assert a.primary_bottleneck_component and a.primary_bottleneck_type
    assert a.kernels and a.recommendations
    k = a.kernels[0]
    assert k.total_us > 0 and 0 < k.pct_of_total <= 100 and k.launches >= 1
    line = str(a.recommendations[0])
    assert "\n" not in line and line.startswith("#1 ")
    assert a.recommendations[0].title in line
    assert "Key insight" in a.to_text(width=120)
    # #41: one screen by default, the whole report with verbose=True.
    brief, full = a.to_text(width=80), a.to_text(width=80, verbose=True)
    assert len(brief.splitlines()) <= 60 and "evidence: " not in brief
    assert "evidence: " in full and len(full.splitlines()) > len(brief.splitlines())
    assert a.to_markdown().lstrip().startswith("#")
    assert json.loads(a.to_json())["schema"] == "kopt/1"


def test_repr_html_is_self_contained(fixtures):
    import html

    cell = kopt.analyze(fixtures / SUITE)._repr_html_()
    # The page sits in an iframe, its styles kept off the notebook (#27).
    assert cell.startswith('<iframe srcdoc="')
    page = html.unescape(cell.split('srcdoc="', 1)[1].split('" style=', 1)[0])
    assert page.lstrip().lower().startswith("<!doctype html")
    # No network at view time: no external script, style, image or font.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, re.I)
    assert not re.search(r"@import|url\(\s*['\"]?(https?:)?//", page, re.I)
    assert "<script" not in page.lower()


def test_profile_module_end_to_end_with_a_fake_ncu(fake_ncu, tmp_path):
    script = "print('hello from the workload')\n"
    a = kopt.profile_module(script_content=script, module_name="topk_sort", gpu_id=0, runs_dir=tmp_path / "runs", quiet=True)
    assert isinstance(a, kopt.Analysis)
    assert a.primary_bottleneck_component and a.primary_bottleneck_type
    assert a.kernels and a.recommendations
    run_dir = tmp_path / "runs" / os.path.basename(a.run_dir)
    assert (run_dir / "topk_sort.py").read_text() == script
    assert (run_dir / "report.json").is_file()
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "ok" and run["module"] == "topk_sort"
    assert run["visible_devices"] == "0"
    # The same call through GenericProfiler.
    b = kopt.GenericProfiler(gpu_id=1, runs_dir=tmp_path / "runs", quiet=True).profile(script, "topk_sort")
    assert b.primary_bottleneck_type == a.primary_bottleneck_type


def test_a_module_script_is_driven_and_its_failure_surfaces(fake_ncu, tmp_path):
    script = (
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x.topk(2).values\n"
        "def get_inputs():\n"
        "    return [torch.randn(4, 64)]\n"
    )
    with pytest.raises(kopt.WorkloadFailed) as e:
        kopt.profile_module(script, "topk_sort", runs_dir=tmp_path / "runs", quiet=True)
    # No torch here: the driver's import fails, and the message says so in one line.
    assert "torch" in str(e.value) and "\n" not in str(e.value)
    (run_dir,) = list((tmp_path / "runs").iterdir())
    driver = (run_dir / "kopt_profile_driver.py").read_text()
    assert "kopt_step" in driver
    compile(driver, "kopt_profile_driver.py", "exec")
    assert (run_dir / "kopt_module.py").is_file() and (run_dir / "topk_sort.py").is_file()
    argv = json.loads((run_dir / "run.json").read_text())["argv"]
    assert argv[1].endswith("kopt_profile_driver.py") and argv[2].endswith("topk_sort.py")
    assert argv[3:] == ["topk_sort", "3", "20"]


def test_every_error_class_is_raised(fixtures, tmp_path, monkeypatch):
    with pytest.raises(kopt.UsageError):
        kopt.analyze()
    with pytest.raises(kopt.UsageError):
        kopt.analyze(fixtures / SUITE, top=0)
    with pytest.raises(kopt.UsageError):
        kopt.bench(variants=[("only", "true")])
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b'"ID","Kernel Name"\n"x",\n\x00\x01')
    with pytest.raises(kopt.InputError) as e:
        kopt.analyze(bad)
    assert str(bad) in str(e.value)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(kopt.ToolMissing) as e:
        kopt.profile_module("print(1)", "m", runs_dir=tmp_path / "runs", ncu=tmp_path / "no-ncu")
    assert "ncu" in str(e.value)
    ro = tmp_path / "OPTIMIZATIONS.md"
    ro.write_text("# journal\n")
    ro.chmod(0o444)
    with pytest.raises(kopt.OutputError):
        kopt.bench("true", "true", timing="wall", max_time=0.5, min_samples=2, journal="h", db=tmp_path / "h.db")
    for cls in (kopt.UsageError, kopt.InputError, kopt.ToolMissing, kopt.WorkloadFailed, kopt.OutputError):
        assert issubclass(cls, kopt.KoptError) and issubclass(cls, Exception)


def _npy(path, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + struct.pack("<%df" % len(values), *values))


def test_compare_passes_close_outputs_and_fails_others(tmp_path):
    ref, same, off = tmp_path / "ref.npy", tmp_path / "same.npy", tmp_path / "off.npy"
    _npy(ref, [1.0, 2.0, 3.0, 4.0])
    _npy(same, [1.0, 2.0, 3.0, 4.0])
    _npy(off, [1.0, 2.0, 3.0, 5.0])
    ok = kopt.compare(ref, same)
    assert ok.passed and bool(ok) and ok.tensors[0].rel_l2 == 0.0
    bad = kopt.compare(ref, off)
    assert not bad.passed and bad.tensors[0].rel_l2 > 1e-2
    assert "FAIL" in str(bad)


def test_bench_gives_a_verdict_with_its_samples(tmp_path):
    r = kopt.bench("sleep 0.01", "sleep 0.03", timing="wall", min_samples=5, min_time=0, max_time=3, db=tmp_path / "h.db")
    assert r.verdict == "REVERT"
    assert len(r.samples["baseline"]) >= 5
    assert r.speedup < 1.0 and r.interval[0] > 1.0
    assert "REVERT" in r.to_markdown()


def test_the_console_script_is_the_cli(fixtures):
    out = subprocess.run([sys.executable, "-m", "kopt", "analyze", str(fixtures / SUITE), "--top", "3"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Key insight" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "kopt", "analyze", "/nonexistent.csv"], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith("kopt: error: ")


def test_help_is_useful():
    doc = kopt.profile_module.__doc__
    assert "module_name" in doc and "gpu" in doc and "ToolMissing" in doc


def test_the_h200_profile_module_run_reads_back(fixtures):
    """The run folder profile_module left on an H200 (seed 000's MoE step)."""
    a = kopt.analyze(fixtures / "profile-module-h200/run")
    assert a.primary_bottleneck_type == "launch_overhead"
    assert a.timeline is not None and a.timeline.launch_bound
    assert a.recommendations[0].id == "capture_cuda_graph"
    assert a.device.startswith("NVIDIA H200")


def _safetensors(path, values):
    header = json.dumps({"out": {"dtype": "F32", "shape": [len(values)], "data_offsets": [0, 4 * len(values)]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + struct.pack("<%df" % len(values), *values))


def test_optimize_chooses_from_the_diagnosis_and_concludes_from_the_harness(fixtures, tmp_path):
    from kopt import _kopt

    # The H200 profile_module run is launch bound: the graph forms are tried.
    diagnosis = _kopt.analyze([str(fixtures / "profile-module-h200/run")])
    choices = {c["name"]: c for c in json.loads(_kopt.optimize_choose(diagnosis))}
    assert choices["graph"]["tried"] and choices["graph"]["predicted_speedup"] > 1
    assert not choices["compile_max_autotune"]["tried"]
    # What a harness leaves: result.json and the outputs; kopt decides.
    run = tmp_path / "run"
    out = run / "candidates"
    out.mkdir(parents=True)
    _safetensors(out / "reference.safetensors", [1, 2, 3])
    _safetensors(out / "graph.safetensors", [1, 2, 3])
    _safetensors(out / "compile_reduce_overhead.safetensors", [1, 2, 4])
    result = {
        "device": "Fake GPU",
        "candidates": {
            "graph": {"description": "graph", "status": "ok"},
            "compile_reduce_overhead": {"description": "ro", "status": "ok"},
            "compile_max_autotune_graph": {"description": "g", "status": "failed", "phase": "compile", "error": "BackendCompilerFailed: boom"},
        },
        "samples_ns": {
            "eager": [100e3 + i for i in range(30)],
            "graph": [20e3 + i for i in range(30)],
            "compile_reduce_overhead": [50e3 + i for i in range(30)],
        },
    }
    (out / "result.json").write_text(json.dumps(result))
    report = json.loads(
        _kopt.optimize_conclude(diagnosis, str(run), "topk_sort", journal=str(tmp_path / "J.md"), db=str(tmp_path / "h.db"))
    )
    by = {c["name"]: c for c in report["candidates"]}
    assert by["graph"]["verdict"]["kind"] == "KEEP" and by["graph"]["correctness"]["passed"]
    assert by["compile_reduce_overhead"]["verdict"]["kind"] == "REVERT"  # fast but wrong
    assert by["compile_max_autotune_graph"]["failure"]["error"] == "BackendCompilerFailed: boom"
    assert report["best"] == "graph"
    # One journal entry per tried candidate, measured or not (the fake
    # harness leaves out the default-mode compile the MoE's compile finding chose).
    tried = [n for n, c in choices.items() if c["tried"]]
    assert "compile" in tried
    assert (tmp_path / "J.md").read_text().count("\n## ") == len(tried)
    assert "Best: graph" in _kopt.render("optimize", json.dumps(report), "term")


class _FakeHarness:
    """The optimize harness without torch or a GPU: each wanted candidate
    (or stack `a+b`) "built" as a callable, its outputs equal to eager's, a
    stack's time eager's times each part's factor; result.json as the real
    harness writes it."""

    FACTOR = {"graph": 0.2, "compile": 0.76, "compile_reduce_overhead": 0.99}
    FAILS = {"compile_max_autotune_graph"}

    def __init__(self):
        self.runs = []

    def run_candidates(self, model, make_inputs, wanted, out_dir, min_samples, max_time_s, noise_target):
        from pathlib import Path

        self.runs.append(list(wanted))
        out = Path(out_dir)
        _safetensors(out / "reference.safetensors", [1, 2, 3])
        result = {"device": "Fake GPU", "candidates": {}, "samples_ns": {"eager": [100e3 + i for i in range(30)]}}
        fns = {"eager": model}
        for name in wanted:
            parts = name.split("+")
            if any(p in self.FAILS for p in parts):
                result["candidates"][name] = {"description": name, "status": "failed", "phase": "capture", "error": "RuntimeError: boom"}
                continue
            t = 100e3
            for p in parts:
                t *= self.FACTOR.get(p, 1.0)
            result["candidates"][name] = {"description": name, "status": "ok"}
            result["samples_ns"][name] = [t + i for i in range(30)]
            _safetensors(out / f"{name}.safetensors", [1, 2, 3])
            fns[name] = lambda *xs, _n=name: _n
        (out / "result.json").write_text(json.dumps(result))
        return result, fns


def test_in_process_optimize_stacks_the_kept_candidates_as_the_cli_does(fixtures, tmp_path, monkeypatch):
    import types

    from kopt import _kopt, _optimize

    # No torch or GPU here: a stand-in torch that says CUDA is there, the
    # baseline from the H200 profile_module run (launch bound), the fake harness.
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: True)
    monkeypatch.setitem(sys.modules, "torch", torch)
    diagnosis = _kopt.analyze([str(fixtures / "profile-module-h200/run")])
    monkeypatch.setattr(_optimize, "_baseline", lambda *a: diagnosis)
    harness = _FakeHarness()
    monkeypatch.setattr(_optimize, "_harness", lambda: harness)
    model = lambda x: "eager"  # noqa: E731
    r = kopt.optimize(model, [1.0], name="topk_sort", runs_dir=tmp_path / "runs", db=tmp_path / "h.db", journal=tmp_path / "J.md")
    # Singles first (what the diagnosis chose), then the kept ones stacked:
    # graph (5x) and compile (1.3x) kept, stacked best first, as the engine
    # decides for `kopt optimize` (one graph form, one compile form).
    assert "graph" in harness.runs[0] and "compile" in harness.runs[0]
    assert harness.runs[1:] == [["graph+compile"]]
    by = {c.name: c for c in r.candidates}
    assert by["graph"].verdict == "KEEP" and by["compile"].verdict == "KEEP"
    assert by["compile_max_autotune_graph"].verdict == "REVERT"
    stack = by["graph+compile"]
    assert stack.verdict == "KEEP" and stack.correct
    assert abs(stack.measured_speedup - 1 / (0.2 * 0.76)) < 0.1
    assert r.best == "graph+compile"
    assert r.optimized(1.0) == "graph+compile"
    assert list((tmp_path / "runs").glob("*/stacks/result.json"))
    # The journal has the stack too; without stacking, the best single.
    assert "graph+compile" in (tmp_path / "J.md").read_text()
    harness.runs.clear()
    r = kopt.optimize(model, [1.0], name="topk_sort", runs_dir=tmp_path / "runs", db=tmp_path / "h.db", stack=False)
    assert len(harness.runs) == 1 and r.best == "graph"
    assert r.optimized(1.0) == "graph"


def test_optimize_stacks_come_from_the_engine_and_are_judged_from_their_folder(fixtures, tmp_path):
    from kopt import _kopt

    diagnosis = _kopt.analyze([str(fixtures / "profile-module-h200/run")])
    run = tmp_path / "run"
    (run / "candidates").mkdir(parents=True)
    harness = _FakeHarness()
    tried = [c["name"] for c in json.loads(_kopt.optimize_choose(diagnosis)) if c["tried"]]
    harness.run_candidates(None, None, tried, str(run / "candidates"), 10, 1, 0.01)
    assert json.loads(_kopt.optimize_stacks(diagnosis, str(run), "m")) == ["graph+compile"]
    # Not measured yet: the report has the singles alone.
    report = json.loads(_kopt.optimize_conclude(diagnosis, str(run), "m", db=str(tmp_path / "h.db")))
    assert report["best"] == "graph"
    assert "graph+compile" not in {c["name"] for c in report["candidates"]}
    (run / "stacks").mkdir()
    harness.run_candidates(None, None, ["graph+compile"], str(run / "stacks"), 10, 1, 0.01)
    report = json.loads(_kopt.optimize_conclude(diagnosis, str(run), "m", db=str(tmp_path / "h.db")))
    stack = {c["name"]: c for c in report["candidates"]}["graph+compile"]
    assert stack["parts"] == ["graph", "compile"] and stack["verdict"]["kind"] == "KEEP"
    assert report["best"] == "graph+compile"


def test_tf32_is_kept_only_with_allow_precision(fixtures, tmp_path):
    from kopt import _kopt

    diagnosis = _kopt.analyze([str(fixtures / "advice-h100/bert_b32_s128_fp32-plain")])
    choices = {c["name"]: c for c in json.loads(_kopt.optimize_choose(diagnosis))}
    # BERT in fp32: TF32's finding gives tf32 and bf16 autocast a reason.
    assert choices["tf32"]["tried"] and choices["tf32"]["predicted_speedup"] > 1
    assert choices["bf16_autocast"]["tried"] and not choices["channels_last"]["tried"]
    # tf32 2x faster, its outputs 1e-3 off (within TF32's tolerance).
    reports = {}
    for allow in (False, True):
        run = tmp_path / f"run-{allow}"
        out = run / "candidates"
        out.mkdir(parents=True)
        _safetensors(out / "reference.safetensors", [1, 2, 3])
        _safetensors(out / "tf32.safetensors", [1.001, 2.002, 3.003])
        result = {
            "device": "Fake GPU",
            "candidates": {
                "tf32": {"description": "tf32", "status": "ok"},
                "bf16_autocast": {"description": "bf16", "status": "skipped", "reason": "the model already runs in 16-bit floats"},
            },
            "samples_ns": {"eager": [100e3 + i for i in range(30)], "tf32": [50e3 + i for i in range(30)]},
        }
        (out / "result.json").write_text(json.dumps(result))
        reports[allow] = json.loads(
            _kopt.optimize_conclude(diagnosis, str(run), "bert", allow_precision=allow, db=str(tmp_path / "h.db"))
        )
    tf32 = {c["name"]: c for c in reports[False]["candidates"]}["tf32"]
    assert tf32["correctness"]["passed"] and tf32["changes_numerics"]
    assert tf32["verdict"]["kind"] == "REVERT"
    assert "needs --allow-precision" in tf32["verdict"]["reason"]
    assert reports[False]["best"] is None
    kept = {c["name"]: c for c in reports[True]["candidates"]}
    assert kept["tf32"]["verdict"]["kind"] == "KEEP" and reports[True]["best"] == "tf32"
    assert "torch.backends.cuda.matmul.allow_tf32 = True" in kept["tf32"]["by_hand"]
    # The harness found nothing for bf16 autocast: not tried, its reason said.
    assert not kept["bf16_autocast"]["tried"]
    assert "16-bit" in kept["bf16_autocast"]["reason"]


def test_profile_module_verify_must_be_a_count():
    with pytest.raises(kopt.UsageError, match="verify"):
        kopt.profile_module(script_content="class M: pass\n", module_name="m", verify=-1)


def test_optimize_without_torch_says_what_is_missing():
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(kopt.ToolMissing, match="PyTorch"):
            kopt.optimize(lambda x: x, [1])
    else:
        pytest.skip("PyTorch is installed here")


def test_bare_run_can_be_turned_off_from_python():
    import inspect

    from kopt import _kopt

    assert inspect.signature(kopt.trace).parameters["bare_run"].default is True
    for f in (_kopt.trace, _kopt.profile):
        assert "bare_run=True" in (f.__text_signature__ or ""), f.__text_signature__


def test_analyze_times_the_program_of_a_profiler_trace_bare(fixtures, tmp_path):
    """bare_command: the command plays the program's bare run, writing the
    step lines kopt's tracer writes as NVTX injection (170 us a step)."""
    trace = fixtures / "predictions-h200-bare/moe.pt.trace.json.gz"
    tracer = tmp_path / "libkopt_tracer.so"
    tracer.write_bytes(b"stand-in")
    lines = "".join(
        '{"t":"bare_step","pid":1,"name":"ProfilerStep#%d","s":%d,"e":%d}\n'
        % (i + 3, 10**9 + i * 170_000, 10**9 + i * 170_000 + 160_000)
        for i in range(11)
    )
    script = (
        'test -f "${PYTHONPATH%%:*}/sitecustomize.py" && printf \'%s\' \''
        + lines
        + '\' > "$KOPT_BARE_STEPS_OUT"'
    )
    a = kopt.analyze(
        trace,
        bare_command=["/bin/sh", "-c", script],
        tracer=tracer,
        runs_dir=tmp_path / "runs",
    )
    g = a.to_dict()["timeline"]["graph_prediction"]
    assert g["eager_measured_bare"] is True
    assert abs(g["eager_corrected_per_step_ns"] - 170_000) < 1
    plain = kopt.analyze(trace).to_dict()["timeline"]["graph_prediction"]
    assert plain["eager_measured_bare"] is False


def test_analyze_refuses_bare_run_arguments_without_a_program(fixtures):
    trace = fixtures / "predictions-h200-bare/moe.pt.trace.json.gz"
    with pytest.raises(kopt.UsageError, match="gpu"):
        kopt.analyze(trace, gpu=1)
    with pytest.raises(kopt.UsageError, match="needs a program"):
        kopt.analyze(trace, bare_command="")


def test_measuring_keywords_default_to_the_engines(tmp_path):
    d = kopt.measure_defaults()
    assert d["threshold"] == 0.05 and d["min_samples"] == 10 and d["timing"] == "auto"
    # The CLI's --help shows the same defaults: both read the engine's.
    help_text = subprocess.run([sys.executable, "-m", "kopt", "bench", "--help"], capture_output=True, text=True).stdout
    assert f"[default: {d['noise_target']}]" in help_text
    # A keyword left at None takes the engine's default.
    r = kopt.bench("true", "true", timing="wall", min_samples=2, min_time=0, max_time=0.5, db=tmp_path / "h.db")
    assert r.to_dict()["threshold"] == d["threshold"] and r.to_dict()["seed"] == d["seed"]


def test_history_is_the_clis_text(tmp_path):
    db = tmp_path / "h.db"
    kopt.bench("true", "true", timing="wall", min_samples=2, min_time=0, max_time=0.5, db=db)
    listing = kopt.history(db=db)
    assert listing.count("\n") == 1 and "bench" in listing
    cli = subprocess.run([sys.executable, "-m", "kopt", "history", "--db", str(db)], capture_output=True, text=True)
    assert cli.stdout == listing
    shown = kopt.history(run=1, db=db)
    assert shown.startswith("run 1 (bench)") and "baseline" in shown
    assert kopt.history(runs=(1, 1), db=db).startswith("run 1 (")
    with pytest.raises(kopt.UsageError):
        kopt.history(run=1, calibration=True, db=db)
