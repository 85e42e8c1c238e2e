"""Training steps without a GPU: kopt's module driver (kopt_module.TrainStep),
profile_steps and the Trainer/Lightning callbacks, against a fake torch."""

import contextlib
import importlib.util
import shutil
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
KINETO_FIXTURE = REPO / "fixtures/h100-probe/torch_trace.json"


class FakeTorch(types.ModuleType):
    """The parts of torch kopt's step code touches, recording what it did."""

    def __init__(self):
        super().__init__("torch")
        self.events = []
        events = self.events

        class Range:
            def __init__(self, name, kind):
                self.name, self.kind = name, kind

            def __enter__(self):
                events.append((self.kind, "push", self.name))

            def __exit__(self, *exc):
                events.append((self.kind, "pop", self.name))

        nvtx = types.SimpleNamespace(
            range_push=lambda name: events.append(("nvtx", "push", name)),
            range_pop=lambda: events.append(("nvtx", "pop", None)),
            range=lambda name: Range(name, "nvtx"),
        )
        self.cuda = types.SimpleNamespace(nvtx=nvtx)
        self.nn = types.SimpleNamespace(Module=type("Module", (), {}))

        class Profile:
            def __init__(self, activities, schedule, on_trace_ready, with_stack):
                self.on_trace_ready, self.with_stack, self.steps = on_trace_ready, with_stack, 0
                events.append(("profiler", "schedule", schedule))

            def __enter__(self):
                return self

            def step(self):
                self.steps += 1
                events.append(("profiler", "step", self.steps))

            def __exit__(self, *exc):
                self.on_trace_ready(self)

            def export_chrome_trace(self, path):
                shutil.copy(KINETO_FIXTURE, path)

        self.profiler = types.SimpleNamespace(
            profile=Profile,
            schedule=lambda **kw: kw,
            ProfilerActivity=types.SimpleNamespace(CPU="cpu", CUDA="cuda"),
            record_function=lambda name: Range(name, "record_function"),
        )

    def named(self, kind):
        return [name for k, what, name in self.events if k == kind and what == "push"]


@pytest.fixture
def fake_torch(monkeypatch):
    torch = FakeTorch()
    torch.Tensor = Tensor
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def load_harness(name):
    """kopt-collect's harness module `name` (kopt_module, kopt_optimize), loaded fresh."""
    path = REPO / f"crates/kopt-collect/python/{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_kopt_module():
    return load_harness("kopt_module")


class Tensor:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def to(self, device):
        return self

    def dim(self):
        return 0

    def backward(self):
        self.log.append("backward")

    def detach(self):
        return self


class Optimizer:
    def __init__(self, log):
        self.log, self.pre, self.post = log, [], []

    def step(self):
        for h in self.pre:
            h(self, (), {})
        self.log.append("step")
        for h in self.post:
            h(self, (), {})

    def zero_grad(self, set_to_none=False):
        self.log.append(f"zero_grad(set_to_none={set_to_none})")

    def register_step_pre_hook(self, h):
        self.pre.append(h)

    def register_step_post_hook(self, h):
        self.post.append(h)


class Model:
    def __init__(self, log):
        self.log = log

    def train(self):
        self.log.append("train")
        return self

    def __call__(self, *xs):
        self.log.append(f"forward({len(xs)})")
        return Tensor(self.log, "out")


def script(log, **defs):
    mod = types.SimpleNamespace(get_inputs=lambda: [Tensor(log, "x"), Tensor(log, "y")])
    for k, v in defs.items():
        setattr(mod, k, v)
    return mod


def test_training_form_is_told_apart_from_a_forward(fake_torch):
    km = load_kopt_module()
    log = []
    assert not km.is_training(script(log))
    assert km.is_training(script(log, get_optimizer=lambda m: Optimizer(log)))
    assert km.is_training(script(log, train_step=lambda m, x, o: None))


def test_declarative_step_runs_each_phase_in_its_range(fake_torch):
    km = load_kopt_module()
    log = []
    mod = script(
        log,
        get_optimizer=lambda m: Optimizer(log),
        loss_fn=lambda out, inputs: Tensor(log, "loss"),
        get_batch=lambda i: [Tensor(log, "x"), Tensor(log, "y")],
    )
    step = km.TrainStep(mod, Model(log), "cuda:0")
    step.step(0)
    # The model gets all inputs but the target when there is a loss_fn.
    assert log == ["train", "forward(1)", "backward", "step", "zero_grad(set_to_none=True)"]
    assert fake_torch.named("nvtx") == ["kopt:data", "kopt:forward", "kopt:backward", "kopt:optimizer#Optimizer"]


def test_without_loss_fn_the_output_is_the_loss_and_no_data_phase(fake_torch):
    km = load_kopt_module()
    log = []
    step = km.TrainStep(script(log, get_optimizer=lambda m: Optimizer(log)), Model(log), "cuda:0")
    step.step(0)
    assert "forward(2)" in log and "backward" in log
    assert fake_torch.named("nvtx") == ["kopt:forward", "kopt:backward", "kopt:optimizer#Optimizer"]


def test_custom_train_step_gets_its_optimizer_marked_by_hooks(fake_torch):
    km = load_kopt_module()
    log = []

    def train_step(model, inputs, opt):
        model(*inputs).backward()
        opt.step()
        return "loss"

    step = km.TrainStep(script(log, get_optimizer=lambda m: Optimizer(log), train_step=train_step), Model(log), "cuda:0")
    assert step.step(0) == "loss"
    assert fake_torch.named("nvtx") == ["kopt:optimizer#Optimizer"]
    pops = [e for e in fake_torch.events if e[1] == "pop"]
    assert len(pops) == 1, "the optimizer range is closed after the step"


def test_profile_steps_under_kopts_tracer_marks_the_scheduled_steps(fake_torch, monkeypatch, tmp_path):
    import kopt

    monkeypatch.setenv("KOPT_TRACE_OUT", str(tmp_path / "trace.jsonl"))
    with kopt.profile_steps(wait=1, warmup=1, active=2) as p:
        for _ in range(6):
            with p.phase("forward"):
                pass
            p.step()
    assert p.mode == "tracer" and p.analysis is None
    pushes = fake_torch.named("nvtx")
    # Steps 1..3 recorded (wait 1, then warmup 1 + active 2), each with its phase.
    assert pushes == ["kopt_step", "kopt:forward"] * 3
    pops = [e for e in fake_torch.events if e[0] == "nvtx" and e[1] == "pop"]
    assert len(pops) == 6, "every range is closed"


def test_profile_steps_with_torch_profiler_analyses_the_trace(fake_torch, monkeypatch, tmp_path):
    import kopt

    monkeypatch.delenv("KOPT_TRACE_OUT", raising=False)
    trace = tmp_path / "steps.pt.trace.json"
    with kopt.profile_steps(wait=0, warmup=1, active=2, trace=str(trace)) as p:
        for _ in range(5):
            with p.phase("backward"):
                pass
            p.step()
    schedule = [e[2] for e in fake_torch.events if e[:2] == ("profiler", "schedule")]
    assert schedule == [{"wait": 0, "warmup": 1, "active": 2, "repeat": 1}]
    # The profiler steps through the schedule only, not the steps after it.
    assert [e[2] for e in fake_torch.events if e[:2] == ("profiler", "step")] == [1, 2, 3]
    assert fake_torch.named("record_function") == ["kopt:backward"] * 3
    assert trace.is_file()
    assert isinstance(p.analysis, kopt.Analysis)
    assert p.analysis.kernels, "the fixture trace's kernels are analysed"


def test_profile_steps_says_when_the_loop_was_too_short(fake_torch, monkeypatch, tmp_path):
    import kopt

    monkeypatch.delenv("KOPT_TRACE_OUT", raising=False)
    with pytest.warns(UserWarning, match="the loop ran 2 steps, the schedule needs 8"):
        with kopt.profile_steps(trace=str(tmp_path / "t.json")) as p:
            p.step()
            p.step()
    assert p.analysis is None


def test_profile_steps_rejects_bad_schedules_and_phases(fake_torch):
    import kopt

    with pytest.raises(kopt.UsageError, match="active must be at least 1"):
        kopt.profile_steps(active=0)
    with pytest.raises(kopt.UsageError, match="wait must be a whole number"):
        kopt.profile_steps(wait=-1)
    with pytest.raises(kopt.UsageError, match="unknown phase 'loss'"):
        kopt.profile_steps().phase("loss")


@pytest.mark.parametrize("which", ["trainer", "lightning"])
def test_callbacks_profile_the_frameworks_steps(fake_torch, monkeypatch, tmp_path, which):
    from kopt.integrations import KoptLightningCallback, KoptTrainerCallback

    monkeypatch.delenv("KOPT_TRACE_OUT", raising=False)
    trace = str(tmp_path / f"{which}.json")
    if which == "trainer":
        cb = KoptTrainerCallback(wait=0, warmup=1, active=1, trace=trace)
        cb.on_train_begin(None, None, None)
        for _ in range(3):
            cb.on_step_end(None, None, None)
        cb.on_train_end(None, None, None)
    else:
        cb = KoptLightningCallback(wait=0, warmup=1, active=1, trace=trace)
        cb.on_train_start(None, None)
        for i in range(3):
            cb.on_train_batch_end(None, None, None, None, i)
        cb.on_train_end(None, None)
    assert cb.analysis is not None and cb.analysis.kernels


DRIVER = REPO / "crates/kopt-collect/python/kopt_profile_driver.py"


def run_driver(fake_torch, monkeypatch, tmp_path, script_text, stop_result, warmup=2, steps=3):
    """kopt's module driver run as `kopt profile` runs it under the tracer,
    told to time its bare steps in process; the tracer's stop answers
    `stop_result` (None: the library has no such function)."""
    import contextlib
    import ctypes
    import runpy

    events = fake_torch.events
    fake_torch.device = lambda name: name
    fake_torch.cuda.synchronize = lambda: events.append(("cuda", "sync", None))
    fake_torch.inference_mode = contextlib.nullcontext
    fake_torch.enable_grad = contextlib.nullcontext
    fake_torch.autograd = types.SimpleNamespace(
        profiler=types.SimpleNamespace(emit_nvtx=lambda record_shapes: contextlib.nullcontext())
    )

    def cdll(path):
        events.append(("tracer", "open", path))
        if stop_result is None:
            return types.SimpleNamespace()

        def stop():
            events.append(("tracer", "stop", None))
            return stop_result

        return types.SimpleNamespace(kopt_tracer_stop=stop)

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/kopt/libkopt_tracer.so")
    script = tmp_path / "m.py"
    script.write_text(script_text)
    out = tmp_path / "bare_steps.jsonl"
    monkeypatch.syspath_prepend(str(DRIVER.parent))
    monkeypatch.delitem(sys.modules, "kopt_module", raising=False)
    argv = [str(DRIVER), str(script), "Model", str(warmup), str(steps), "ops", f"bare_out={out}"]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(DRIVER), run_name="__main__")
    return out


FORWARD_SCRIPT = """
import torch
class Model(torch.nn.Module):
    def to(self, device):
        return self
    def eval(self):
        return self
    def __call__(self, x):
        torch.events.append(("model", "call", None))
def get_inputs():
    return [1]
"""


def test_the_driver_times_its_bare_steps_after_the_tracer_stops(fake_torch, monkeypatch, tmp_path):
    import json

    out = run_driver(fake_torch, monkeypatch, tmp_path, FORWARD_SCRIPT, stop_result=1)
    kinds = [(k, what) for k, what, _ in fake_torch.events]
    # Traced steps in NVTX ranges, then the stop, a CUDA call (where CUPTI
    # detaches) and as many steps again without any range.
    stop = kinds.index(("tracer", "stop"))
    assert kinds[stop + 1] == ("cuda", "sync")
    assert kinds[:stop].count(("model", "call")) == 5 and kinds[:stop].count(("nvtx", "push")) == 5
    assert kinds[stop:].count(("model", "call")) == 5 and ("nvtx", "push") not in kinds[stop:]
    lines = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(lines) == 5
    assert all(l["t"] == "bare_step" and l["name"] == "kopt_step" and l["in_process"] for l in lines)
    assert all(l["s"] <= l["e"] for l in lines)
    assert [l["s"] for l in lines] == sorted(l["s"] for l in lines)


@pytest.mark.parametrize("stop_result", [0, None])
def test_a_tracer_that_does_not_stop_leaves_no_bare_steps(fake_torch, monkeypatch, tmp_path, stop_result):
    # Refused (0), or an older library without the function: the steps are
    # not timed in process (CUPTI would still tax them); kopt runs them apart.
    out = run_driver(fake_torch, monkeypatch, tmp_path, FORWARD_SCRIPT, stop_result=stop_result)
    assert not out.exists()
    calls = [e for e in fake_torch.events if e[0] == "model"]
    assert len(calls) == 5


def test_a_failing_bare_step_leaves_the_traced_run_standing(fake_torch, monkeypatch, tmp_path, capsys):
    # The sixth call (the first after the traced five) raises: the driver
    # says so and exits normally, writing no bare steps.
    script = FORWARD_SCRIPT.replace(
        '        torch.events.append(("model", "call", None))',
        '        torch.events.append(("model", "call", None))\n'
        '        if sum(1 for e in torch.events if e[0] == "model") > 5:\n'
        '            raise RuntimeError("CUDA out of memory")',
    )
    out = run_driver(fake_torch, monkeypatch, tmp_path, script, stop_result=1)
    assert not out.exists()
    assert "the steps timed after the trace failed (RuntimeError: CUDA out of memory)" in capsys.readouterr().err


def load_kopt_optimize(monkeypatch):
    torch = sys.modules["torch"]
    for dtype in ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"):
        if not hasattr(torch, dtype):
            setattr(torch, dtype, f"torch.{dtype}")
    monkeypatch.syspath_prepend(str(REPO / "crates/kopt-collect/python"))
    return load_harness("kopt_optimize")


class ParentOptimizer:
    """Like torch 2.11's Adam: its defaults hold a setting its subclass's
    constructor does not take."""

    def __init__(self, params, lr=1e-3, decoupled_weight_decay=False, foreach=None, fused=None):
        self.param_groups = [dict(g) for g in params]
        self.defaults = {"lr": lr, "decoupled_weight_decay": decoupled_weight_decay,
                         "foreach": foreach, "fused": fused}


class ChildOptimizer(ParentOptimizer):
    """Like AdamW: no decoupled_weight_decay argument."""

    def __init__(self, params, lr=1e-3, foreach=None, fused=None):
        super().__init__(params, lr=lr, decoupled_weight_decay=True, foreach=foreach, fused=fused)


def test_the_fused_form_is_rebuilt_from_what_the_constructor_takes(fake_torch, monkeypatch):
    ko = load_kopt_optimize(monkeypatch)
    old = ChildOptimizer([{"params": ["w"], "lr": 0.5}], lr=0.5, foreach=False)
    new = ko.rebuilt_optimizer(old, fused=True)
    assert type(new) is ChildOptimizer
    assert new.defaults["fused"] is True and new.defaults["lr"] == 0.5
    assert new.param_groups[0]["params"] == ["w"]

    class Unfusable(ParentOptimizer):
        def __init__(self, params, lr=1e-3):
            super().__init__(params, lr=lr)

    with pytest.raises(ko.NotApplicable, match="Unfusable has no fused form"):
        ko.rebuilt_optimizer(Unfusable([{"params": ["w"]}]), fused=True)


def test_tf32_on_a_training_step_covers_the_whole_step(fake_torch, monkeypatch):
    ko = load_kopt_optimize(monkeypatch)
    seen = []

    @contextlib.contextmanager
    def flags(tf32=False, **_):
        seen.append(("enter", tf32))
        yield
        seen.append(("exit", tf32))

    monkeypatch.setattr(ko, "flags", flags)
    km = load_kopt_module()
    monkeypatch.setitem(sys.modules, "kopt_module", km)
    log = []
    mod = script(log, get_optimizer=lambda m: Optimizer(log))
    step = ko.build_training("tf32", mod, Model(log), "cuda")
    step.step(0)
    assert seen == [("enter", True), ("exit", True)]
    assert "backward" in log and "step" in log
    assert "tf32" in ko.TRAINING_CANDIDATES


class Vec:
    """Just enough of a tensor for training_state."""

    def __init__(self, values):
        self.values = list(values)

    def detach(self):
        return self

    def float(self):
        return self

    def clone(self):
        return Vec(self.values)

    def reshape(self, *_):
        return self

    def __sub__(self, other):
        return Vec(a - b for a, b in zip(self.values, other.values))


def test_a_training_step_is_judged_by_the_loss_and_all_its_parameters(fake_torch, monkeypatch):
    ko = load_kopt_optimize(monkeypatch)
    fake_torch.cat = lambda parts: Vec(v for p in parts for v in p.values)
    weight, bias = Vec([0.9, 2.2]), Vec([1e-5])
    model = types.SimpleNamespace(named_parameters=lambda: [("w", weight), ("b", bias)])
    step = types.SimpleNamespace(model=model, loss=None)
    pairs = ko.training_state(step)
    # One vector, judged by its relative L2 alone (the engine reads `l2:`).
    assert [n for n, _ in pairs] == ["l2:parameters"]
    assert pairs[0][1].values == pytest.approx([0.9, 2.2, 1e-5])


def test_a_copied_script_imports_its_neighbours_from_its_own_folder(fake_torch, tmp_path, monkeypatch):
    # kopt runs a copy of the script in its run folder; the script's
    # `import helpers` failed there (the folder it came from was not on
    # sys.path, as Python puts it for a script it runs).
    src = tmp_path / "project"
    src.mkdir()
    (src / "helpers_for_kopt_test.py").write_text("WIDTH = 7\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "Model.py").write_text("import helpers_for_kopt_test\nWIDTH = helpers_for_kopt_test.WIDTH\n")
    (run / "kopt_source_dir.txt").write_text(str(src))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "helpers_for_kopt_test", raising=False)
    km = load_kopt_module()
    assert km.load(str(run / "Model.py"), "Model").WIDTH == 7
    assert str(src) in sys.path


def test_graph_capture_of_a_training_step_warms_up_captures_once_and_replays(fake_torch, monkeypatch):
    ko = load_kopt_optimize(monkeypatch)
    km = load_kopt_module()
    monkeypatch.setitem(sys.modules, "kopt_module", km)
    log = []

    class Graph:
        def replay(self):
            log.append("replay")

    @contextlib.contextmanager
    def capture(graph):
        log.append("capture begin")
        yield
        log.append("capture end")

    @contextlib.contextmanager
    def on(stream):
        yield

    stream = types.SimpleNamespace(wait_stream=lambda other: None)
    fake_torch.cuda.Stream = lambda: stream
    fake_torch.cuda.current_stream = lambda: stream
    fake_torch.cuda.stream = on
    fake_torch.cuda.CUDAGraph = Graph
    fake_torch.cuda.graph = capture
    mod = script(log, get_optimizer=lambda m: Optimizer(log))
    step = ko.build_training("graph", mod, Model(log), "cuda")
    for i in range(5):
        step.step(i)
    warm = ["zero_grad(set_to_none=True)", "forward(2)", "backward", "step"]
    at = log.index("capture begin")
    assert log[at - 13 : at - 1] == warm * 3, log
    assert log[at - 1 :] == [
        "zero_grad(set_to_none=True)",
        "capture begin",
        "forward(2)",
        "backward",
        "step",
        "capture end",
        "replay",
        "replay",
    ], log
    assert step.loss is not None and step.model is not None
    with pytest.raises(ko.NotApplicable, match="reduce-overhead"):
        ko.build_training("graph+compile", mod, Model(log), "cuda")
    custom = script(log, get_optimizer=lambda m: Optimizer(log), train_step=lambda m, x, o: None)
    with pytest.raises(ko.NotApplicable, match="capture it by hand"):
        ko.build_training("graph", custom, Model(log), "cuda")
