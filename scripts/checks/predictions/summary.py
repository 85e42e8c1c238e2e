"""One line per workload: the measured graph speed-up and each report's
prediction. Run in the folder holding measured.jsonl's parent output and
the reports <w>.<source>.json.

    python3 summary.py SOURCES WORKLOAD...   SOURCES: comma-separated, e.g. kopt,torch
"""
import json
import sys

sources, workloads = sys.argv[1].split(","), sys.argv[2:]
m = {}
for line in open("../measured.jsonl"):
    d = json.loads(line)
    if "workload" in d:
        m[d["workload"]] = d
for w in workloads:
    row = [w, f"measured {m[w]['speedup']:.2f}x (eager {m[w]['eager_us']:.1f} us, graph {m[w]['graph_us']:.1f} us)"]
    for src in sources:
        try:
            r = json.load(open(f"{w}.{src}.json"))
        except Exception as e:
            row.append(f"{src}: no report ({e})")
            continue
        rec = next((x for x in r["recommendations"] if x["id"] == "capture_cuda_graph"), None)
        p = (rec or {}).get("predicted_speedup")
        t = r.get("timeline") or {}
        g = t.get("graph_prediction") or {}
        bare = " bare" if g.get("eager_measured_bare") else ""
        eager = f" eager {g['eager_corrected_per_step_ns'] / 1e3:.1f} us" if g else ""
        pred = f"{p['estimate']:.2f}x [{p['low']:.2f}, {p['high']:.2f}]{bare}{eager}" if p else "no graph recommendation"
        steps = (t.get("steps") or {}).get("source", "-")
        primary = r["primary"]["type"] if r.get("primary") else "-"
        row.append(f"{src}: {pred} (busy {t.get('busy_pct', 0):.1f}%, steps {steps}, primary {primary})")
    print(" | ".join(row))
