# kopt's optimize harness: builds the candidate forms of a PyTorch module
# (CUDA graph replay, torch.compile modes), checks each against eager on
# fresh inputs, and times them all interleaved in one process with CUDA
# events. kopt (the engine, or the Python package in-process) decides the
# verdicts from what this writes.
#
#   python3 kopt_optimize.py SCRIPT MODULE_NAME CANDIDATES OUT_DIR MIN_SAMPLES MAX_TIME_S NOISE_TARGET
#
# OUT_DIR receives result.json, reference.safetensors and <candidate>.safetensors.
import json
import os
import struct
import sys
import time
import traceback

import torch

CANDIDATES = {
    "graph": "CUDA graph capture of the forward (static inputs, warm-up on a side stream, replay)",
    "compile_reduce_overhead": 'torch.compile(mode="reduce-overhead") (Inductor kernels replayed from CUDA graphs)',
    "compile_max_autotune": 'torch.compile(mode="max-autotune-no-cudagraphs") (Inductor kernels, autotuned)',
    "compile_max_autotune_graph": 'torch.compile(mode="max-autotune-no-cudagraphs"), then CUDA graph capture of it',
}

WARMUP = 3


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


def build(name, model, capture_inputs):
    """The candidate as a callable; a failure says whether compiling or
    capturing failed."""
    static = lambda: [x.clone() if isinstance(x, torch.Tensor) else x for x in capture_inputs]
    if name == "graph":
        try:
            return capture_graph(model, static())
        except Exception as e:
            raise BuildError("capture", e) from e
    try:
        if name == "compile_reduce_overhead":
            compiled = torch.compile(model, mode="reduce-overhead")
        elif name in ("compile_max_autotune", "compile_max_autotune_graph"):
            compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")
        else:
            raise ValueError(f"unknown candidate {name}")
        for _ in range(WARMUP):
            compiled(*capture_inputs)
        torch.cuda.synchronize()
    except Exception as e:
        raise BuildError("compile", e) from e
    if name == "compile_max_autotune_graph":
        try:
            return capture_graph(compiled, static())
        except Exception as e:
            raise BuildError("capture", e) from e
    return compiled


def relative_noise(v):
    if len(v) < 2:
        return float("inf")
    s = sorted(v)
    med = s[len(s) // 2]
    mad = sorted(abs(x - med) for x in s)[len(s) // 2]
    return 1.4826 * mad / med if med > 0 else float("inf")


def time_variants(fns, inputs, min_samples, max_time_s, noise_target):
    """Interleaved rounds (the order rotates), one CUDA-event-timed step per
    variant per round, until every variant has min_samples and its noise is
    under the target, or max_time_s passes."""
    names = list(fns)
    samples = {n: [] for n in names}
    start_ev = torch.cuda.Event(enable_timing=True)
    end_ev = torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    rnd = 0
    while True:
        done = all(
            len(samples[n]) >= min_samples and relative_noise(samples[n]) <= noise_target for n in names
        )
        if done or time.perf_counter() - t0 > max_time_s:
            break
        for k in range(len(names)):
            n = names[(k + rnd) % len(names)]
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(f"kopt_ab_{n}")
            start_ev.record()
            fns[n](*inputs)
            end_ev.record()
            torch.cuda.nvtx.range_pop()
            end_ev.synchronize()
            samples[n].append(start_ev.elapsed_time(end_ev) * 1e6)  # ms -> ns
        rnd += 1
    return samples, rnd


def run_candidates(model, make_inputs, wanted, out_dir, min_samples, max_time_s, noise_target):
    """Build each wanted candidate of `model`, check it against eager on
    fresh inputs, time all interleaved; write result.json and the outputs
    into out_dir. Returns the result and the callables that ran."""
    fns = {}
    with torch.inference_mode():
        capture_inputs = make_inputs()
        device = next(
            (x.device for x in capture_inputs if isinstance(x, torch.Tensor) and x.is_cuda),
            torch.device("cuda", torch.cuda.current_device()),
        )
        result = {
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name(device),
            "candidates": {},
        }
        for _ in range(WARMUP):
            model(*capture_inputs)
        torch.cuda.synchronize()
        fns["eager"] = model
        for name in [c for c in wanted if c]:
            entry = {"description": CANDIDATES.get(name, name), "status": "ok"}
            t = time.perf_counter()
            try:
                fns[name] = build(name, model, capture_inputs)
                torch.cuda.synchronize()
            except BuildError as e:  # a candidate that cannot be built is REVERT, the run goes on
                entry.update(status="failed", phase=e.phase, error=str(e))
                try:
                    torch.cuda.synchronize()
                except Exception as after:  # a failed capture can poison what follows: say so
                    entry["error"] += f" (then: {one_line(after)})"
            entry["build_s"] = round(time.perf_counter() - t, 3)
            result["candidates"][name] = entry
        # Correctness on fresh inputs, not the ones captured.
        fresh = make_inputs()
        reference = clone_outputs(model(*fresh))
        save_safetensors(os.path.join(out_dir, "reference.safetensors"), reference)
        for name in list(fns):
            if name == "eager":
                continue
            try:
                out = clone_outputs(fns[name](*fresh))
                torch.cuda.synchronize()
                save_safetensors(os.path.join(out_dir, f"{name}.safetensors"), out)
            except Exception as e:
                result["candidates"][name].update(status="failed", phase="run", error=one_line(e))
                del fns[name]
        samples, rounds = time_variants(fns, fresh, min_samples, max_time_s, noise_target)
    result["samples_ns"] = samples
    result["rounds"] = rounds
    with open(os.path.join(out_dir, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result, fns


def main():
    script, module_name, wanted, out_dir = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    min_samples, max_time_s, noise_target = int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kopt_module

    model, make_inputs = kopt_module.build(script, module_name, torch.device("cuda:0"))
    run_candidates(model, make_inputs, wanted.split(","), out_dir, min_samples, max_time_s, noise_target)


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception:
        traceback.print_exc()
        sys.exit(1)
