"""Does measure.py's process slow its own eager baseline? One suite model
timed eager in three phases of one process: first alone (nothing else
built), then beside its CUDA graph, then after torch.compile of the same
model (as measure.py builds them); each phase 5 rounds, CUDA events,
interleaved with the variants built so far. While it runs, nvidia-smi is
read (only read) every 200 ms for the SM clock and power, so a phase's
slowdown can be told from the card's clocks.

  python3 eager_phases.py MODEL [MODEL...]   (one JSON line a model)
"""

import json
import subprocess
import sys
import time

import torch

import measure
import zoo


def med(rs, k):
    v = sorted(r[k] for r in rs)
    return v[len(v) // 2]


def clocks(proc):
    proc.terminate()
    text, _ = proc.communicate(timeout=10)
    sm, watts = [], []
    for line in text.splitlines():
        try:
            a, b = (float(x) for x in line.split(","))
        except ValueError:
            continue
        sm.append(a)
        watts.append(b)
    if not sm:
        return None
    return {"sm_mhz_min": min(sm), "sm_mhz_median": sorted(sm)[len(sm) // 2],
            "watts_max": max(watts), "samples": len(sm)}


def phase(name, variants, steps, res):
    smi = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
         "-lms", "200"], stdout=subprocess.PIPE, text=True)
    rs = measure.timed_rounds(variants, steps)
    res["phases"][name] = {"ms": {k: med(rs, k) for k in variants}, "rounds": rs,
                           "card": clocks(smi)}


def run(name):
    t0 = time.time()
    res = {"model": name, "card": torch.cuda.get_device_name(), "torch": torch.__version__,
           "phases": {}, "errors": {}}
    with torch.inference_mode():
        m, x = zoo.build(name)
        eager = lambda: m(*x)  # noqa: E731
        variants = {"eager": eager}
        for _ in range(5):
            eager()
        torch.cuda.synchronize()
        steps = measure.steps_per_round(eager)
        res["steps_per_round"] = steps
        phase("alone", variants, steps, res)
        try:
            variants["graph"] = measure.graphed(eager)
            variants["graph"]()
            phase("beside_graph", variants, steps, res)
        except Exception as e:  # noqa: BLE001 - a model that cannot be captured
            res["errors"]["graph"] = f"{type(e).__name__}: {e}"[:200]
            variants.pop("graph", None)
        t1 = time.time()
        variants["compile"] = measure.compiled(m, x)
        res["compile_s"] = round(time.time() - t1, 1)
        for _ in range(3):
            variants["compile"]()
        phase("after_compile", variants, steps, res)
    res["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    for n in sys.argv[1:]:
        try:
            run(n)
        except Exception as e:  # noqa: BLE001 - one model's failure is its line
            print(json.dumps({"model": n, "failed": f"{type(e).__name__}: {e}"[:300]}), flush=True)
        torch.cuda.empty_cache()
