"""Every candidate fix of a suite model measured bare in one process:
CUDA events, warm-up, 5 interleaved rounds, the median per-step time; one
JSON object a line on stdout, per model (several models run one after the
other in the same process, each freed before the next). torch.compile
(default mode) is one of the fixes: its compilation runs in the first call,
before the warm-up, so it is not timed (`compile_s` says how long it took;
longer than COMPILE_S, default 120 s, and the fix is an error row).
ADVICE_NO_COMPILE=1 leaves it out.

  python3 measure.py MODEL [MODEL...]
"""

import copy
import json
import os
import signal
import sys
import time

import torch

import zoo


def step_ms(fn, steps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(steps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / steps


def steps_per_round(fn):
    """Steps a round times: about 0.12 s of `fn`, 3 to 100 (fn warm)."""
    est = min(step_ms(fn, 2) for _ in range(2))
    return max(3, min(100, int(0.12 / max(est / 1e3, 1e-6))))


def timed_rounds(variants, steps, n=5):
    """n rounds, each timing every variant once (interleaved), in ms a step."""
    return [{k: step_ms(fn, steps) for k, fn in variants.items()} for _ in range(n)]


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
        torch.set_float32_matmul_precision("high")
        torch.backends.cudnn.allow_tf32 = True
        try:
            return fn()
        finally:
            torch.set_float32_matmul_precision("highest")

    return run


def autocast(fn):
    def run():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return fn()

    return run


class CompileTimeout(Exception):
    pass


def compiled(m, x):
    """torch.compile of the model (default mode), compiled by its first
    call here, under a time limit."""
    import torch._dynamo

    torch._dynamo.reset()
    mc = torch.compile(m)

    def expire(*_):
        raise CompileTimeout(f"compilation over {COMPILE_S} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(COMPILE_S)
    try:
        mc(*x)
        torch.cuda.synchronize()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return lambda: mc(*x)


COMPILE_S = int(os.environ.get("COMPILE_S", "120"))


def main():
    for name in sys.argv[1:]:
        try:
            measure(name)
        except Exception as e:  # noqa: BLE001 - one model's failure is its line
            print(json.dumps({"model": name, "failed": f"{type(e).__name__}: {e}"[:300]}))
        torch.cuda.empty_cache()
        sys.stdout.flush()


def measure(name):
    t0 = time.time()
    res = {"model": name, "card": torch.cuda.get_device_name(), "torch": torch.__version__,
           "errors": {}}
    with torch.inference_mode():
        m, x = zoo.build(name)
        eager = lambda: m(*x)  # noqa: E731
        variants = {"eager": eager}
        fixes = zoo.fixes(name)
        if os.environ.get("ADVICE_NO_COMPILE") != "1":
            fixes.append("compile")
        for fix in fixes:
            try:
                if fix == "graph":
                    variants[fix] = graphed(eager)
                elif fix == "channels_last":
                    mc = copy.deepcopy(m).to(memory_format=torch.channels_last)
                    xc = [x[0].contiguous(memory_format=torch.channels_last)]
                    variants[fix] = lambda mc=mc, xc=xc: mc(*xc)
                elif fix == "bn_fold":
                    mf = zoo.fold_bn(m)
                    variants[fix] = lambda mf=mf: mf(*x)
                elif fix == "tf32":
                    variants[fix] = tf32(eager)
                elif fix == "bf16_autocast":
                    variants[fix] = autocast(eager)
                elif fix in ("sdpa", "pad"):
                    mv, xv = zoo.build(name, variant=fix)
                    variants[fix] = lambda mv=mv, xv=xv: mv(*xv)
                elif fix == "compile":
                    t1 = time.time()
                    variants[fix] = compiled(m, x)
                    res["compile_s"] = round(time.time() - t1, 1)
                variants[fix]()
            except Exception as e:  # noqa: BLE001 - a fix that does not apply is a row
                res["errors"][fix] = f"{type(e).__name__}: {e}"[:300]
                variants.pop(fix, None)
        for fn in variants.values():
            for _ in range(3):
                fn()
        torch.cuda.synchronize()
        steps = steps_per_round(eager)
        rounds = timed_rounds(variants, steps)
    med = {k: sorted(r[k] for r in rounds)[2] for k in variants}
    res["steps_per_round"] = steps
    res["ms"] = med
    res["speedup"] = {k: med["eager"] / v for k, v in med.items() if k != "eager"}
    best = max(res["speedup"].items(), key=lambda kv: kv[1]) if res["speedup"] else None
    res["best"] = {"fix": best[0], "speedup": best[1]} if best else None
    res["rounds"] = rounds
    res["seconds"] = time.time() - t0
    print(json.dumps(res))


if __name__ == "__main__":
    main()
