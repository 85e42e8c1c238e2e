"""Score kopt's diagnoses of the training suite against what was measured.

  python3 score.py FIXTURES ANALYSES

FIXTURES holds W.measured.json (measure.py); ANALYSES holds W.json, the
output of `kopt analyze FIXTURES/W.trace.json.gz -f json -o ANALYSES/W.json`.
Prints one line per workload and the acceptance counts of issue #35:
#1 is the best measured fix or within 10% of it; its predicted gain within
1.5x of the measured one; graph capture never #1 on a step that syncs;
every sync and pageable copy named with its file:line. A #1 whose fix the
suite did not measure counts as a miss (unmeasured), never as a hit; so
does one measured slower than the baseline.
"""

import ast
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# kopt's recommendation id -> the suite's variant that applies it.
FIX_OF = {
    "enable_tf32": "tf32",
    "capture_cuda_graph": "graph",
    "remove_host_syncs": "no_sync",
    "pin_host_memory": "pin_memory",
    "use_fused_optimizer": "fused",
    "zero_grad_set_to_none": "set_to_none",
    "use_torch_compile": "compile",
    "use_channels_last": "channels_last",
    "prefetch_input_batches": "workers_pinned",
}
# Workloads whose step syncs with the host (a .item(), a boolean mask, a
# .cpu()/.tolist()/print, or a blocking pageable copy).
SYNCING = {"sync_item_layer", "sync_bool_mask", "sync_cpu_print", "copy_pageable", "dataloader"}
# The statements that sync or copy from pageable memory, by their text.
SITES = {
    "sync_item_layer": ["x.abs().max().item()"],
    "sync_bool_mask": ["x[keep]"],
    "sync_cpu_print": [".mean().cpu()", "loss.tolist()", 'print("loss"'],
    "copy_pageable": ["hx.to(DEV", "hy.to(DEV"],
    "dataloader": ["x.to(DEV, non_blocking=pin)"],
}


def site_lines():
    """Each site's statement line and the def line of its function."""
    src = open(os.path.join(HERE, "workloads.py")).read()
    lines = src.splitlines()
    funcs = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.FunctionDef)]
    out = {}
    for w, pats in SITES.items():
        out[w] = []
        for p in pats:
            ln = next(i + 1 for i, l in enumerate(lines) if p in l)
            f = min((f for f in funcs if f.lineno <= ln <= f.end_lineno), key=lambda f: f.end_lineno - f.lineno)
            out[w].append((ln, f.lineno))
    return out


def predicted(rec):
    m = re.search(r"Predicted:?\s*(?:the step\s*)?(\d+(?:\.\d+)?)x", rec.get("action", ""))
    if m:
        return float(m.group(1))
    # Otherwise the share of the step it saves: 1 / (1 - share).
    pct = (rec.get("gain") or {}).get("workload_pct")
    return round(100 / (100 - pct), 2) if pct is not None and pct < 100 else None


def named_lines(d):
    tl = d.get("timeline") or {}
    text = json.dumps([tl.get("host_syncs"), tl.get("host_copies")])
    # `workloads.py:199/203 in step`: the statements found in the source.
    return {int(n) for m in re.findall(r"workloads\.py:([\d/]+)", text) for n in m.split("/") if n}


def main():
    fixtures, analyses = sys.argv[1], sys.argv[2]
    sites = site_lines()
    names = sorted(f[: -len(".measured.json")] for f in os.listdir(fixtures) if f.endswith(".measured.json"))
    n = {"workloads": 0, "top1": 0, "gain": 0, "graph_ok": 0, "syncing": 0, "sites": 0, "sites_line": 0,
         "sites_func": 0}
    for w in names:
        meas = json.load(open(os.path.join(fixtures, w + ".measured.json")))
        d = json.load(open(os.path.join(analyses, w + ".json")))
        recs = d.get("recommendations") or []
        top = recs[0] if recs else None
        fix = FIX_OF.get(top["id"]) if top else None
        # The precision finding covers TF32 and bf16 autocast: its fix is
        # the one its action headlines.
        if fix == "tf32" and top.get("action", "").startswith("Use bf16 autocast"):
            fix = "bf16_autocast"
        sp = meas["speedup"]
        best = max(list(sp.values()) + [1.0])
        got = sp.get(fix)
        pred = predicted(top) if top else None
        # A fix that slows the step is never a hit, even when nothing helps.
        top1 = got is not None and got > 1.0 and got >= best / 1.1
        gain = got is not None and pred is not None and max(pred / got, got / pred) <= 1.5
        n["workloads"] += 1
        n["top1"] += top1
        n["gain"] += gain
        if w in SYNCING:
            n["syncing"] += 1
            n["graph_ok"] += fix != "graph"
        named = named_lines(d)
        for ln, fn in sites.get(w, []):
            n["sites"] += 1
            n["sites_line"] += ln in named
            n["sites_func"] += ln in named or fn in named
        print(f"{w}: #1 {top['id'] if top else None} ({fix}, predicted {pred}x, measured "
              f"{'-' if got is None else round(got, 2)}x); best measured "
              f"{meas.get('best', {}).get('fix')} {round(best, 2)}x; top1 {'yes' if top1 else 'no'}, "
              f"gain {'yes' if gain else 'no'}; lines named {sorted(named)}")
    print(json.dumps(n))


if __name__ == "__main__":
    main()
