# kopt's optimize harness: builds the candidate forms of a PyTorch module
# (CUDA graph replay, torch.compile modes, channels_last, TF32, bf16
# autocast, SDPA, Inductor freezing, cuDNN benchmark, and stacks of them
# joined with "+"), checks each against eager on fresh inputs, and times
# them all interleaved in one process with CUDA events. The user's file is
# never edited: each candidate works on a copy of the model or wraps its
# calls. kopt (the engine, or the Python package in-process) decides the
# verdicts from what this writes.
#
#   python3 kopt_optimize.py SCRIPT MODULE_NAME CANDIDATES OUT_DIR MIN_SAMPLES MAX_TIME_S NOISE_TARGET
#
# OUT_DIR receives result.json, reference.safetensors and <candidate>.safetensors.
import contextlib
import copy
import inspect
import json
import os
import signal
import struct
import sys
import time
import traceback

import torch

CANDIDATES = {
    "graph": "CUDA graph capture of the forward (static inputs, warm-up on a side stream, replay)",
    "compile": "torch.compile(model) (Inductor, default mode: fused kernels)",
    "compile_reduce_overhead": 'torch.compile(mode="reduce-overhead") (Inductor kernels replayed from CUDA graphs)',
    "compile_max_autotune": 'torch.compile(mode="max-autotune-no-cudagraphs") (Inductor kernels, autotuned)',
    "compile_max_autotune_graph": 'torch.compile(mode="max-autotune-no-cudagraphs"), then CUDA graph capture of it',
    "channels_last": "the model and its 4-d inputs in channels_last memory format",
    "tf32": "TF32 for float32 matmuls and cuDNN convolutions",
    "bf16_autocast": 'torch.autocast("cuda", dtype=torch.bfloat16) around the forward',
    "sdpa": "attention through scaled_dot_product_attention (the model's attn_implementation switch)",
    "compile_freezing": "torch.compile with torch._inductor.config.freezing (weights as constants, batch norm folded)",
    "cudnn_benchmark": "cuDNN benchmark mode (the fastest algorithm per input shape)",
}

# torch.compile's mode per compile form; freezing compiles in the default mode.
COMPILE_MODES = {
    "compile": "default",
    "compile_reduce_overhead": "reduce-overhead",
    "compile_max_autotune": "max-autotune-no-cudagraphs",
    "compile_max_autotune_graph": "max-autotune-no-cudagraphs",
    "compile_freezing": "default",
}

WARMUP = 3

# The exit status that asks the engine to run the harness again, in a fresh
# process, without the candidates that failed: a failed build (a CUDA graph
# capture that raised, say) can leave the process's CUDA state broken, and
# then eager itself fails. result.json then holds "restart": true and the
# failed candidates' entries.
RESTART_EXIT = 75


class Broken(Exception):
    """The process's CUDA state no longer runs eager: start afresh."""


# Set by SIGTERM (kopt stopping its run: Ctrl-C, a timeout, a spent budget):
# timing ends at the next step and result.json keeps the samples so far.
STOP = {"signal": None}

# How often result.json is rewritten while timing runs, in seconds: what a
# stop, even a SIGKILL, leaves behind is at most this old.
CHECKPOINT_EVERY_S = 1.0


def on_stop_signal(signum, _frame):
    STOP["signal"] = signal.Signals(signum).name


def write_result(out_dir, result, partial):
    """result.json, whole (a temporary file renamed over it): "partial"
    while the harness still runs, so a reader knows it did not finish."""
    path = os.path.join(out_dir, "result.json")
    with open(path + ".tmp", "w") as f:
        json.dump(dict(result, partial=partial), f, indent=1)
    os.replace(path + ".tmp", path)


def eager_runs(model, make_inputs):
    """None when eager still runs on fresh inputs, else why not (one line)."""
    try:
        model(*make_inputs())
        torch.cuda.synchronize()
        return None
    except Exception as e:
        return one_line(e)


def one_line(e):
    """An exception as one line: its type and the first line of its message."""
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(e).__name__}: {first}"[:400]


def flatten(out, prefix="out"):
    """A forward's outputs as (name, tensor) pairs, in order."""
    if isinstance(out, torch.Tensor):
        return [(prefix, out)]
    if isinstance(out, (list, tuple)):
        pairs = []
        for i, v in enumerate(out):
            pairs.extend(flatten(v, f"{prefix}.{i}"))
        return pairs
    if isinstance(out, dict):
        pairs = []
        for k in sorted(out, key=str):
            pairs.extend(flatten(out[k], f"{prefix}.{k}"))
        return pairs
    return []


def clone_outputs(out):
    return [(n, t.detach().clone()) for n, t in flatten(out)]


_ST_DTYPES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


def save_safetensors(path, pairs):
    """Tensors to a .safetensors file (no dependency: header JSON + raw bytes)."""
    header, blobs, offset = {}, [], 0
    for name, t in pairs:
        t = t.detach().contiguous().cpu()
        if t.dtype not in _ST_DTYPES:
            t = t.to(torch.float32)
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {
            "dtype": _ST_DTYPES[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def capture_graph(fn, static_inputs):
    """Replay `fn` from a CUDA graph: warm-up on a side stream, capture once,
    then each call copies its inputs into the captured ones and replays."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP):
            fn(*static_inputs)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fn(*static_inputs)

    def replay(*inputs):
        for dst, src in zip(static_inputs, inputs):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        graph.replay()
        return static_out

    return replay


class BuildError(Exception):
    """A candidate that could not be built, with the phase that failed."""

    def __init__(self, phase, error):
        super().__init__(one_line(error))
        self.phase = phase


class NotApplicable(Exception):
    """A candidate that does not apply to this model, with the reason."""


def uses_cudnn(model):
    kinds = (torch.nn.modules.conv._ConvNd, torch.nn.RNNBase)
    return any(isinstance(m, kinds) for m in model.modules())


def precision_state():
    """How float32 work runs in this process: eager's numerics."""
    return {
        "matmul_tf32": torch.get_float32_matmul_precision() != "highest",
        "cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
    }


@contextlib.contextmanager
def flags(tf32=False, cudnn_benchmark=False, autocast=False):
    """The process-wide settings a candidate needs, on for its calls only,
    so eager keeps the user's settings when the variants interleave."""
    old_matmul = torch.get_float32_matmul_precision()
    old_cudnn_tf32 = torch.backends.cudnn.allow_tf32
    old_bench = torch.backends.cudnn.benchmark
    try:
        if tf32:
            torch.set_float32_matmul_precision("high")
            torch.backends.cudnn.allow_tf32 = True
        if cudnn_benchmark:
            torch.backends.cudnn.benchmark = True
        with torch.autocast("cuda", dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
            yield
    finally:
        torch.set_float32_matmul_precision(old_matmul)
        torch.backends.cudnn.allow_tf32 = old_cudnn_tf32
        torch.backends.cudnn.benchmark = old_bench


def to_channels_last(x):
    if isinstance(x, torch.Tensor) and x.dim() == 4 and x.is_floating_point():
        return x.contiguous(memory_format=torch.channels_last)
    return x


def switch_attention(model):
    """A copy of `model` with its Hugging Face attention switched to SDPA;
    NotApplicable when it has no such switch or already uses SDPA."""
    configs = [
        m for m in model.modules() if hasattr(getattr(m, "config", None), "_attn_implementation")
    ]
    if not configs:
        raise NotApplicable(
            "the model offers no attention switch (no Hugging Face config with attn_implementation)"
        )
    current = {str(m.config._attn_implementation) for m in configs}
    if current == {"sdpa"}:
        raise NotApplicable("attention already runs through SDPA (attn_implementation='sdpa')")
    # Copies are made outside inference mode: their weights stay ordinary
    # tensors, usable by a caller that runs the result with autograd on.
    with torch.inference_mode(False):
        switched = copy.deepcopy(model)
    for m in switched.modules():
        cfg = getattr(m, "config", None)
        if not hasattr(cfg, "_attn_implementation"):
            continue
        setter = getattr(m, "set_attn_implementation", None)
        if callable(setter):
            setter("sdpa")
        if cfg._attn_implementation != "sdpa":
            cfg._attn_implementation = "sdpa"
    return switched


class Variant:
    """A built candidate: the callable and how it wants its inputs."""

    def __init__(self, fn, prepare=None):
        self.fn = fn
        self.prepare = prepare or (lambda xs: xs)

    def __call__(self, *inputs):
        return self.fn(*inputs)


def applicable(parts, model, state):
    """Why a candidate (or stack) does not apply here, or None."""
    params = list(model.parameters())
    dtypes = {p.dtype for p in params}
    for p in parts:
        if p == "channels_last":
            convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
            if not convs:
                return "no 2-d convolution in the model"
            # 1x1 kernels are contiguous both ways: a wider one tells the layout.
            if any(
                not m.weight.is_contiguous() and m.weight.is_contiguous(memory_format=torch.channels_last)
                for m in convs
            ):
                return "the model is already channels_last"
        if p == "tf32":
            if dtypes and not (dtypes & {torch.float32}):
                return "no float32 parameters: TF32 applies to float32 work only"
            if state["matmul_tf32"] and state["cudnn_tf32"]:
                return "TF32 is already on for matmuls and cuDNN in this process"
        if p == "bf16_autocast" and dtypes and dtypes <= {torch.bfloat16, torch.float16}:
            return "the model already runs in 16-bit floats"
        if p == "cudnn_benchmark":
            if state["cudnn_benchmark"]:
                return "cuDNN benchmark mode is already on in this process"
            if not uses_cudnn(model):
                return "no convolution or RNN for cuDNN to choose algorithms for"
    return None


def build(name, model, capture_inputs):
    """The candidate (`a+b+...` for a stack) as a Variant; a failure says
    whether switching, compiling or capturing failed. Order of application:
    the model's form (attention switch, memory format), then process
    settings around every call, then torch.compile, then graph capture."""
    parts = name.split("+")
    unknown = [p for p in parts if p not in CANDIDATES]
    if unknown:
        raise BuildError("build", ValueError(f"unknown candidate {unknown[0]}"))
    m, prepare = model, None
    if "sdpa" in parts:
        try:
            m = switch_attention(m)
        except NotApplicable:
            raise
        except Exception as e:
            raise BuildError("switch", e) from e
    if "channels_last" in parts:
        with torch.inference_mode(False):
            m = copy.deepcopy(m).to(memory_format=torch.channels_last)
        prepare = lambda xs: [to_channels_last(x) for x in xs]  # noqa: E731
    inputs = prepare(capture_inputs) if prepare else capture_inputs
    settings = dict(
        tf32="tf32" in parts,
        cudnn_benchmark="cudnn_benchmark" in parts,
        autocast="bf16_autocast" in parts,
    )

    def under_flags(fn):
        def call(*xs):
            with flags(**settings):
                return fn(*xs)

        return call

    fn = under_flags(m) if any(settings.values()) else m
    compiled_with = [p for p in parts if p in COMPILE_MODES]
    if compiled_with:
        form = compiled_with[0]
        try:
            config = torch._inductor.config
            patch = config.patch(freezing=True) if form == "compile_freezing" else contextlib.nullcontext()
            with patch:
                compiled = torch.compile(m, mode=COMPILE_MODES[form])
                fn = under_flags(compiled) if any(settings.values()) else compiled
                # Compiling happens on the first calls, under the patch.
                for _ in range(WARMUP):
                    fn(*inputs)
            torch.cuda.synchronize()
        except Exception as e:
            raise BuildError("compile", e) from e
    if "graph" in parts or "compile_max_autotune_graph" in parts:
        static = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        try:
            with flags(**settings):
                fn = capture_graph(fn, static)
        except Exception as e:
            raise BuildError("capture", e) from e
    return Variant(fn, prepare)


def relative_noise(v):
    if len(v) < 2:
        return float("inf")
    s = sorted(v)
    med = s[len(s) // 2]
    mad = sorted(abs(x - med) for x in s)[len(s) // 2]
    return 1.4826 * mad / med if med > 0 else float("inf")


def time_inputs(fns, inputs):
    """Each variant's own inputs (channels_last converts them once, as a
    user would at loading), so the timed step is the forward alone."""
    return {n: (f.prepare(inputs) if isinstance(f, Variant) else inputs) for n, f in fns.items()}


def time_variants(fns, inputs, min_samples, max_time_s, noise_target, checkpoint=None):
    """Interleaved rounds (the order rotates), one CUDA-event-timed step per
    variant per round, until every variant has min_samples and its noise is
    under the target, or max_time_s passes, or a stop signal arrives (the
    round in progress is dropped so every variant keeps as many samples).
    ``checkpoint(samples, rounds)`` is called about every
    CHECKPOINT_EVERY_S seconds."""
    names = list(fns)
    own = time_inputs(fns, inputs)
    samples = {n: [] for n in names}
    start_ev = torch.cuda.Event(enable_timing=True)
    end_ev = torch.cuda.Event(enable_timing=True)
    t0 = last = time.perf_counter()
    rnd = 0
    while True:
        done = all(
            len(samples[n]) >= min_samples and relative_noise(samples[n]) <= noise_target for n in names
        )
        if done or STOP["signal"] or time.perf_counter() - t0 > max_time_s:
            break
        if checkpoint is not None and time.perf_counter() - last >= CHECKPOINT_EVERY_S:
            checkpoint(samples, rnd)
            last = time.perf_counter()
        for k in range(len(names)):
            n = names[(k + rnd) % len(names)]
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(f"kopt_ab_{n}")
            start_ev.record()
            fns[n](*own[n])
            end_ev.record()
            torch.cuda.nvtx.range_pop()
            end_ev.synchronize()
            samples[n].append(start_ev.elapsed_time(end_ev) * 1e6)  # ms -> ns
            if STOP["signal"]:
                for m in names:
                    del samples[m][rnd:]
                return samples, rnd
        rnd += 1
    return samples, rnd


def timed_into(result, out_dir):
    """The checkpoint for time_variants: result.json with the samples so far."""

    def checkpoint(samples, rounds):
        write_result(out_dir, dict(result, samples_ns=samples, rounds=rounds), partial=True)

    return checkpoint


def finish(result, out_dir, samples, rounds):
    """The timing's end in result.json; a stop signal is said in it."""
    result["samples_ns"], result["rounds"] = samples, rounds
    if STOP["signal"]:
        result["stopped"] = f"stopped by {STOP['signal']} after {rounds} timing round(s)"
    write_result(out_dir, result, partial=False)


def as_reference(pairs, reference):
    """A candidate's outputs in the reference's dtypes (bf16 autocast
    returns 16-bit tensors), paired by name; the check judges the values."""
    dtypes = {n: t.dtype for n, t in reference}
    return [(n, t.to(dtypes[n]) if n in dtypes and t.is_floating_point() else t) for n, t in pairs]


def run_candidates(model, make_inputs, wanted, out_dir, min_samples, max_time_s, noise_target, restart_exit=False):
    """Build each wanted candidate of `model`, check it against eager on
    fresh inputs and time it interleaved with eager, one candidate after
    the other; write result.json (after each) and the outputs into out_dir. Returns the result and the callables that ran. A build
    that breaks the process's CUDA state ends the run early: result.json
    then asks for a restart (``RESTART_EXIT``) without the failed ones, or,
    in the caller's own process (``restart_exit`` False), it is an error."""
    result = {"candidates": {}}
    try:
        return _run_candidates(model, make_inputs, wanted, out_dir, min_samples, max_time_s, noise_target, result)
    except Broken as b:
        failed = {n: e for n, e in result["candidates"].items() if e.get("status") == "failed"}
        if not restart_exit:
            raise RuntimeError(
                f"candidate {b} failed and left this process's CUDA state broken ({failed[str(b)]['error']}); "
                f"leave it out (force/skip) or run `kopt optimize`, which retries the rest in a fresh process"
            ) from None
        write_result(out_dir, {"restart": True, "candidates": failed, "samples_ns": {}}, partial=False)
        sys.exit(RESTART_EXIT)


def build_candidate(name, model, make_inputs, capture_inputs, state, result):
    """Build one candidate into result["candidates"][name]; returns its
    callable, or None when it was skipped or failed. A failure that leaves
    CUDA's state broken raises Broken."""
    entry = {"description": "; then ".join(CANDIDATES.get(p, p) for p in name.split("+")), "status": "ok"}
    result["candidates"][name] = entry
    t = time.perf_counter()
    fn = None
    try:
        why_not = applicable(name.split("+"), model, state) if isinstance(model, torch.nn.Module) else None
        if why_not:
            raise NotApplicable(why_not)
        fn = build(name, model, capture_inputs)
        torch.cuda.synchronize()
    except NotApplicable as e:  # said, not tried: the model has nothing for it
        entry.update(status="skipped", reason=str(e))
    except Exception as e:  # a candidate that cannot be built is FAIL, the run goes on
        phase = e.phase if isinstance(e, BuildError) else "build"
        entry.update(status="failed", phase=phase, error=str(e) if isinstance(e, BuildError) else one_line(e))
        try:
            torch.cuda.synchronize()
        except Exception as after:  # a failed capture can poison what follows: say so
            entry["error"] += f" (then: {one_line(after)})"
        broken = eager_runs(model, make_inputs)
        if broken:
            entry["error"] += f" (it left CUDA's state broken: eager then raised {broken}; the rest ran in a fresh process)"
            entry["build_s"] = round(time.perf_counter() - t, 3)
            raise Broken(name)
    entry["build_s"] = round(time.perf_counter() - t, 3)
    return fn


def _run_candidates(model, make_inputs, wanted, out_dir, min_samples, max_time_s, noise_target, result):
    fns = {}
    with torch.inference_mode():
        capture_inputs = make_inputs()
        device = next(
            (x.device for x in capture_inputs if isinstance(x, torch.Tensor) and x.is_cuda),
            torch.device("cuda", torch.cuda.current_device()),
        )
        state = precision_state()
        result.update(
            {
                "torch": torch.__version__,
                "device": torch.cuda.get_device_name(device),
                "precision": {
                    "matmul_tf32": state["matmul_tf32"],
                    "cudnn_tf32": state["cudnn_tf32"],
                    "uses_cudnn": uses_cudnn(model) if isinstance(model, torch.nn.Module) else False,
                },
            }
        )
        for _ in range(WARMUP):
            model(*capture_inputs)
        torch.cuda.synchronize()
        fns["eager"] = model
        # Correctness on fresh inputs, not the ones captured; eager's
        # outputs before any candidate is built.
        fresh = make_inputs()
        reference = clone_outputs(model(*fresh))
        save_safetensors(os.path.join(out_dir, "reference.safetensors"), reference)
        names = [c for c in wanted if c]
        samples, rounds = {"eager": []}, 0
        # Each candidate is built, checked and timed against eager before the
        # next is built: a stop keeps every verdict measured so far. Each pair
        # gets its share of max_time_s, as many samples a variant as one
        # interleaved loop over all of them would take.
        pair_time_s = max_time_s * 2 / (len(names) + 1) if names else max_time_s
        for name in names:
            if STOP["signal"]:
                result["candidates"][name] = {
                    "description": "; then ".join(CANDIDATES.get(p, p) for p in name.split("+")),
                    "status": "skipped",
                    "reason": f"not tried: stopped by {STOP['signal']}",
                }
                continue
            fn = build_candidate(name, model, make_inputs, capture_inputs, state, result)
            if fn is None:
                write_result(out_dir, dict(result, samples_ns=samples, rounds=rounds), partial=True)
                continue
            pair = {"eager": model, name: fn}
            try:
                own = time_inputs(pair, fresh)
                out = as_reference(clone_outputs(fn(*own[name])), reference)
                torch.cuda.synchronize()
                save_safetensors(os.path.join(out_dir, f"{name}.safetensors"), out)
            except Exception as e:
                result["candidates"][name].update(status="failed", phase="run", error=one_line(e))
                continue
            fns[name] = fn
            so_far = {n: list(v) for n, v in samples.items()}

            def checkpoint(pair_samples, pair_rounds):
                merged = dict(so_far)
                merged["eager"] = so_far["eager"] + pair_samples["eager"]
                merged[name] = pair_samples[name]
                write_result(out_dir, dict(result, samples_ns=merged, rounds=rounds + pair_rounds), partial=True)

            got, n = time_variants(pair, fresh, min_samples, pair_time_s, noise_target, checkpoint=checkpoint)
            samples["eager"].extend(got["eager"])
            samples[name] = got[name]
            rounds += n
            write_result(out_dir, dict(result, samples_ns=samples, rounds=rounds), partial=True)
    finish(result, out_dir, samples, rounds)
    return result, fns


# ---- training steps (docs/training.md) -------------------------------------
# A training-form script's candidates change the step, not the forward:
# the optimizer's fused or foreach form, bf16 autocast around forward and
# loss, torch.compile of the model, and CUDA graph capture of the whole
# step (forward, backward and the optimizer's step; a step that syncs with
# the host fails to capture, and that failure is its verdict).
TRAINING_CANDIDATES = {
    "graph": "CUDA graph capture of the whole step (forward, backward, optimizer; capturable=True where the optimizer takes it; static inputs; warm-up on a side stream)",
    "fused_optimizer": "the optimizer rebuilt with fused=True (one kernel per step for all parameters)",
    "foreach_optimizer": "the optimizer rebuilt with foreach=True (multi-tensor kernels)",
    "bf16_autocast": 'torch.autocast("cuda", dtype=torch.bfloat16) around forward and loss',
    "tf32": "TF32 for float32 matmuls and cuDNN convolutions, around the whole step (backward too)",
    "compile": "torch.compile(model) (Inductor, default mode) inside the training step",
}
TRAINING_CHECK_STEPS = 5


def rebuilt_optimizer(optimizer, **form):
    """`optimizer` rebuilt over the same parameter groups with `form`
    (fused=True or foreach=True); NotApplicable when its class has none."""
    if optimizer is None:
        raise NotApplicable("the script's train_step has no optimizer from get_optimizer(model)")
    cls = type(optimizer)
    drop = ("fused", "foreach", *form)
    groups = [{k: v for k, v in g.items() if k not in drop} for g in optimizer.param_groups]
    defaults = {k: v for k, v in optimizer.defaults.items() if k not in drop}
    # Only what the class's constructor takes: a subclass's defaults can
    # hold its parent's settings (torch 2.11's AdamW keeps Adam's
    # decoupled_weight_decay, which AdamW() refuses); the groups keep them.
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        params = {}
    if params and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        defaults = {k: v for k, v in defaults.items() if k in params}
    try:
        return cls(groups, **defaults, **form)
    except (TypeError, ValueError, RuntimeError) as e:
        raise NotApplicable(f"{cls.__name__} has no {next(iter(form))} form: {one_line(e)}") from e


def build_training(variant, mod, model, device):
    """A kopt_module.TrainStep with the candidate (or stack `a+b`) applied."""
    import kopt_module

    parts = variant.split("+")
    unknown = [p for p in parts if p not in TRAINING_CANDIDATES]
    if unknown:
        raise NotApplicable(f"{unknown[0]} is not a candidate for a training step (those: {', '.join(TRAINING_CANDIDATES)})")
    if "graph" in parts and "compile" in parts:
        raise NotApplicable("graph capture over torch.compile is compile's mode=\"reduce-overhead\", not a training candidate")
    if "compile" in parts:
        model = torch.compile(model)
    step = kopt_module.TrainStep(mod, model, device)
    if "fused_optimizer" in parts:
        step.optimizer = rebuilt_optimizer(step.optimizer, fused=True)
    elif "foreach_optimizer" in parts:
        step.optimizer = rebuilt_optimizer(step.optimizer, foreach=True)
    if "bf16_autocast" in parts:
        step.forward_context = lambda: torch.autocast("cuda", dtype=torch.bfloat16)
    if "tf32" in parts:
        # The flags for the whole step: backward's GEMMs are half of it.
        untouched = step.step

        def step_in_tf32(i):
            with flags(tf32=True):
                return untouched(i)

        step.step = step_in_tf32
    if "graph" in parts:
        return GraphedTrainStep(step)
    return step


def takes(cls, name):
    try:
        return name in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False


class GraphedTrainStep:
    """A training step captured whole in a CUDA graph (torch's
    whole-network capture): WARMUP eager steps on a side stream, then one
    capture of forward, backward and the optimizer's step over static
    inputs, replayed for every later step. Each warm-up step is a step, so
    after N steps the weights are those of N eager steps."""

    WARMUP = 3

    def __init__(self, step):
        if callable(step.custom):
            raise NotApplicable("the script's own train_step: capture it by hand (static inputs, capturable optimizer)")
        opt = step.optimizer
        if opt is not None and takes(type(opt), "capturable") and not opt.defaults.get("fused"):
            step.optimizer = rebuilt_optimizer(opt, capturable=True)
        self.inner, self.graph, self.done = step, None, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _body(self, inputs):
        s = self.inner
        with s.forward_context():
            loss = s.loss_of(s.model(*inputs[: s.model_inputs]), inputs)
        loss.backward()
        s.optimizer.step()
        return loss

    def step(self, i):
        s = self.inner
        if self.graph is not None:
            if callable(s.get_batch):
                for static, x in zip(s.inputs, s.batch(i)):
                    static.copy_(x)
            self.graph.replay()
            return self.loss
        if callable(s.get_batch):
            fresh = s.batch(i)
            for static, x in zip(s.inputs, fresh):
                static.copy_(x)
        if self.done < self.WARMUP:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                s.optimizer.zero_grad(set_to_none=True)
                loss = self._body(s.inputs)
            torch.cuda.current_stream().wait_stream(side)
            self.done += 1
            # Detached: a loss kept with its autograd graph makes the next
            # backward's gradient streams mismatch (torch warns each step).
            s.loss = loss.detach()
            return s.loss
        # Grads allocated inside the capture, from the graph's pool: the
        # replayed backward writes them, the replayed step reads them.
        s.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = self._body(s.inputs)
        self.graph, self.loss = graph, static_loss.detach()
        s.loss = self.loss
        # Capturing records the step without running it: run it once.
        graph.replay()
        return static_loss


def training_params(step):
    """The step's parameters as float32 copies, in the model's order."""
    model = getattr(step.model, "_orig_mod", step.model)
    return [p.detach().float().clone() for _, p in model.named_parameters()]


def training_state(step):
    """What a training candidate must reproduce: the loss, and every
    parameter after the check steps as one vector, named `l2:` so that the
    engine judges it by its relative L2 alone. One by one, a
    zero-initialised bias that moved by a few learning rates judges the
    optimizer's rounding, not the candidate; element by element, Adam's
    first steps flip the sign of updates whose gradients are rounding
    noise. A fused AdamW (H200, a 4-layer encoder) differed from the
    foreach form by 2e-4 relative on LayerNorm biases, 1e-6 on the loss."""
    pairs = [("loss", step.loss.detach().float().reshape(1))] if isinstance(step.loss, torch.Tensor) else []
    params = [p.reshape(-1) for p in training_params(step)]
    if params:
        pairs.append(("l2:parameters", torch.cat(params)))
    return pairs


def run_training_candidates(script, module_name, wanted, out_dir, min_samples, max_time_s, noise_target):
    """Each candidate from the same seed and initial weights: after
    TRAINING_CHECK_STEPS steps its loss and parameters are saved beside
    eager's for the gate; then every step is timed, interleaved."""
    import kopt_module

    device = torch.device("cuda:0")
    result = {"candidates": {}, "training": True, "torch": torch.__version__, "device": torch.cuda.get_device_name(device)}

    def fresh(variant):
        torch.manual_seed(0)
        mod, model = kopt_module.instantiate(script, module_name, device)
        if variant == "eager":
            return kopt_module.TrainStep(mod, model, device)
        return build_training(variant, mod, model, device)

    steps = {}
    for name in ["eager"] + [c for c in wanted if c]:
        entry = {"description": "; then ".join(TRAINING_CANDIDATES.get(p, p) for p in name.split("+")), "status": "ok"}
        t = time.perf_counter()
        try:
            step = fresh(name)
            for i in range(TRAINING_CHECK_STEPS):
                step.step(i)
            torch.cuda.synchronize()
            pairs = training_state(step)
            save_safetensors(os.path.join(out_dir, "reference.safetensors" if name == "eager" else f"{name}.safetensors"), pairs)
            steps[name] = step
        except NotApplicable as e:
            entry.update(status="skipped", reason=str(e))
        except Exception as e:
            if name == "eager":
                raise
            entry.update(status="failed", phase="build", error=one_line(e))
        entry["build_s"] = round(time.perf_counter() - t, 3)
        if name != "eager":
            result["candidates"][name] = entry
    counter = {"i": TRAINING_CHECK_STEPS}

    def timed(step):
        def call():
            counter["i"] += 1
            return step.step(counter["i"])

        return call

    with torch.enable_grad():
        samples, rounds = time_variants(
            {n: timed(s) for n, s in steps.items()},
            [],
            min_samples,
            max_time_s,
            noise_target,
            checkpoint=timed_into(result, out_dir),
        )
    finish(result, out_dir, samples, rounds)
    return result


def main():
    script, module_name, wanted, out_dir = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    min_samples, max_time_s, noise_target = int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kopt_module

    signal.signal(signal.SIGTERM, on_stop_signal)

    if kopt_module.is_training(kopt_module.load(script, module_name)):
        run_training_candidates(script, module_name, wanted.split(","), out_dir, min_samples, max_time_s, noise_target)
        return
    model, make_inputs = kopt_module.build(script, module_name, torch.device("cuda:0"))
    run_candidates(model, make_inputs, wanted.split(","), out_dir, min_samples, max_time_s, noise_target, restart_exit=True)


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception:
        traceback.print_exc()
        sys.exit(1)
