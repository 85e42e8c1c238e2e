"""One training-suite workload in one process: every variant (baseline and
candidate fixes, and for every workload TF32 and torch.compile of the
whole step) timed bare, interleaved, 5 rounds, the median per step, by
wall clock with a device sync at each end of a round (a host-synced step is
timed as the user feels it); then a torch.profiler trace of the baseline
(with_stack=True, a ProfilerStep schedule: wait 1, warmup 2, active 3).

  python3 measure.py WORKLOAD OUTDIR
"""

import gzip
import json
import os
import shutil
import sys
import time

import torch

import workloads


def round_ms(fn, steps):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3 / steps


def graphed(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def tf32(fn):
    def run():
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            fn()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
    return run


def compiled(fn):
    """torch.compile of the whole step (default mode), compiled by its
    first calls here, under COMPILE_S seconds."""
    import signal

    def expire(*_):
        raise TimeoutError(f"compilation over {COMPILE_S} s")

    cfn = torch.compile(fn)
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(COMPILE_S)
    try:
        cfn()
        cfn()
        torch.cuda.synchronize()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return cfn


COMPILE_S = int(os.environ.get("COMPILE_S", "60"))


def main():
    name, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    res = {"model": name, "card": torch.cuda.get_device_name(), "torch": torch.__version__, "errors": {}}
    t0 = time.time()
    variants = workloads.WORKLOADS[name]()
    eager = variants["eager"]
    # Every workload also gets TF32 and torch.compile of its whole step,
    # the fixes kopt may rank first on any of them.
    variants.setdefault("tf32", tf32(eager))
    if os.environ.get("NO_COMPILE") != "1":
        variants["compile"] = "compile"
    for k in list(variants):
        try:
            if variants[k] == "graph":
                variants[k] = graphed(eager)
            elif variants[k] == "compile":
                t1 = time.time()
                variants[k] = compiled(eager)
                res["compile_s"] = round(time.time() - t1, 1)
            for _ in range(3):
                variants[k]()
        except Exception as e:  # noqa: BLE001 - a fix that fails is a row
            res["errors"][k] = f"{type(e).__name__}: {e}"[:300]
            variants.pop(k)
    torch.cuda.synchronize()
    est = min(round_ms(eager, 2) for _ in range(2))
    steps = max(3, min(60, int(120 / max(est, 1e-3))))
    rounds = [{k: round_ms(fn, steps) for k, fn in variants.items()} for _ in range(5)]
    med = {k: sorted(r[k] for r in rounds)[2] for k in variants}
    res.update(steps_per_round=steps, ms=med, rounds=rounds,
               speedup={k: med["eager"] / v for k, v in med.items() if k != "eager"})
    if res["speedup"]:
        b = max(res["speedup"].items(), key=lambda kv: kv[1])
        res["best"] = {"fix": b[0], "speedup": b[1]}
    res["measure_s"] = round(time.time() - t0, 1)
    trace = os.path.join(out, f"{name}.trace.json")
    sched = torch.profiler.schedule(wait=1, warmup=2, active=3, repeat=1)
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, schedule=sched, with_stack=True) as p:
        for _ in range(6):
            eager()
            p.step()
    torch.cuda.synchronize()
    p.export_chrome_trace(trace)
    with open(trace, "rb") as f, gzip.open(trace + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(trace)
    res["seconds"] = round(time.time() - t0, 1)
    with open(os.path.join(out, f"{name}.measured.json"), "w") as f:
        json.dump(res, f)
    print(json.dumps({k: res.get(k) for k in ("model", "ms", "best", "errors", "seconds")}))


if __name__ == "__main__":
    main()
