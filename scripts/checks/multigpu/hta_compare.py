"""kopt's per-rank breakdown and overlap against HTA's on the same traces.

    python3 hta_compare.py KOPT TRACE_DIR [TRACE_DIR...]

Needs HolisticTraceAnalysis (PyPI) installed. For each folder of per-rank
traces: HTA's temporal breakdown (idle, compute, non-compute shares of the
kernel span) and communication/computation overlap, kopt's `analyze -f json`
of the same folder, the largest difference in points, and each tool's wall
time (HTA: load + both analyses; kopt: the whole command). Prints one JSON
object per folder; exits 1 when a share differs by more than 5 points.
"""

import json
import os
import subprocess
import sys
import time


def hta(folder):
    from hta.trace_analysis import TraceAnalysis

    t0 = time.perf_counter()
    ta = TraceAnalysis(trace_dir=folder)
    tb = ta.get_temporal_breakdown(visualize=False)
    ov = ta.get_comm_comp_overlap(visualize=False)
    dt = time.perf_counter() - t0
    rows = {}
    for _, r in tb.iterrows():
        rows[int(r["rank"])] = {
            "idle_pct": float(r["idle_time_pctg"]),
            "compute_pct": float(r["compute_time_pctg"]),
            "non_compute_pct": float(r["non_compute_time_pctg"]),
        }
    for _, r in ov.iterrows():
        rows[int(r["rank"])]["overlap_pct"] = float(r["comp_comm_overlap_pctg"])
    return rows, dt


def kopt(binary, folder):
    t0 = time.perf_counter()
    out = subprocess.run([binary, "analyze", folder, "-f", "json"], check=True, capture_output=True, text=True).stdout
    dt = time.perf_counter() - t0
    rows = {}
    for r in json.loads(out)["ranks"]:
        span = r["span_ns"] or 1
        rows[r["rank"]] = {
            "idle_pct": 100 * r["idle_ns"] / span,
            "compute_pct": 100 * r["compute_ns"] / span,
            "non_compute_pct": 100 * (span - r["compute_ns"] - r["idle_ns"]) / span,
            "overlap_pct": r["overlap_pct"],
        }
    return rows, dt


def main():
    binary, folders = sys.argv[1], sys.argv[2:]
    worst_all = 0.0
    for folder in folders:
        h, h_s = hta(folder)
        k, k_s = kopt(binary, folder)
        worst = max(abs(h[r][key] - k[r][key]) for r in h for key in h[r] if r in k)
        worst_all = max(worst_all, worst)
        print(json.dumps({
            "folder": os.path.basename(os.path.normpath(folder)),
            "hta": h, "kopt": k,
            "max_diff_points": round(worst, 2),
            "hta_s": round(h_s, 3), "kopt_s": round(k_s, 3),
            "speedup": round(h_s / k_s, 1),
        }))
    sys.exit(1 if worst_all > 5.0 else 0)


if __name__ == "__main__":
    main()
