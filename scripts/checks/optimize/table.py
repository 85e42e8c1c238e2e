"""The issue-24 table from suite.sh's results: per model, the candidates
kopt optimize tried and kept, its best (measured, predicted), the wall
time, and measure.py's best single fix; prints Markdown rows and writes
suite.json (what the fixture test reads).

  python3 table.py RESULTS_DIR [MEASURED.json|MEASURED.jsonl ...] > rows.md

RESULTS_DIR is suite.sh's m/ folder (MODEL.optimize.json, .optimize.log);
measure.py's lines come from RESULTS_DIR/measured.jsonl and the extra
files given (an earlier call's, named in the row).
"""

import glob
import json
import os
import re
import sys


def measured_lines(paths):
    out = {}
    for p in paths:
        if not os.path.exists(p):
            continue
        for line in open(p):
            line = line.strip()
            if line.startswith("{"):
                d = json.loads(line)
                if "speedup" in d:
                    out[d["model"]] = dict(d, source=os.path.basename(p))
    return out


def main():
    results = sys.argv[1]
    measured = measured_lines([os.path.join(results, "measured.jsonl")] + sys.argv[2:])
    rows = []
    for path in sorted(glob.glob(os.path.join(results, "*.optimize.json"))):
        model = os.path.basename(path).split(".")[0]
        r = json.load(open(path))
        log = open(os.path.join(results, f"{model}.optimize.log")).read()
        wall = re.search(r"exit (\d+) seconds (\d+)", log)
        singles = [c for c in r["candidates"] if not c.get("parts")]
        stacks = [c for c in r["candidates"] if c.get("parts")]
        tried = [c["name"] for c in singles if c["tried"]]
        kind = lambda c: (c.get("verdict") or {}).get("kind")  # noqa: E731
        kept = [c["name"] for c in singles if kind(c) == "KEEP"]
        best = next((c for c in r["candidates"] if c["name"] == r.get("best")), None)
        m = measured.get(model)
        best_fix = m["best"]["fix"] if m and m.get("best") else None
        # measure.py names batch-norm folding bn_fold; kopt's automatic form is compile_freezing.
        found = best_fix is not None and any(
            best_fix in (c["name"].split("+")) for c in r["candidates"] if kind(c) == "KEEP"
        )
        bad_keeps = [
            c["name"]
            for c in r["candidates"]
            if kind(c) == "KEEP"
            and ((c.get("correctness") or {}).get("passed") is not True or (c.get("measured_speedup") or 0) <= 1.0)
        ]
        rows.append(
            {
                "model": model,
                "tried": tried,
                "kept": kept,
                "stacks": [(c["name"], kind(c), c.get("measured_speedup")) for c in stacks],
                "best": r.get("best"),
                "best_measured": best and best.get("measured_speedup"),
                "best_predicted": best and best.get("predicted_speedup"),
                "wall_s": int(wall.group(2)) if wall else None,
                "exit": int(wall.group(1)) if wall else None,
                "measured_best_fix": best_fix,
                "measured_best_speedup": m["best"]["speedup"] if m and m.get("best") else None,
                "measured_source": m and m["source"],
                "found_best_fix": found,
                "kept_failing_or_slower": bad_keeps,
                "not_kept": {
                    c["name"]: (c.get("verdict") or {}).get("reason") or c["reason"]
                    for c in singles
                    if c["tried"] and kind(c) != "KEEP"
                },
            }
        )
    fmt = lambda x: "-" if x is None else f"{x:.2f}x"  # noqa: E731
    for row in rows:
        print(
            f"| {row['model']} | {', '.join(row['tried'])} | {', '.join(row['kept']) or 'none'} | "
            f"{row['best'] or 'none'} | {fmt(row['best_measured'])} | {fmt(row['best_predicted'])} | "
            f"{row['wall_s']} s | {row['measured_best_fix']} {fmt(row['measured_best_speedup'])} | "
            f"{'yes' if row['found_best_fix'] else 'no'} |"
        )
    json.dump(rows, open(os.path.join(results, "suite.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
