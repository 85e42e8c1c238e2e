"""Import + one analyze of a 2,000-kernel capture from Python, against the
CLI on the same file (whole processes, interleaved, medians of N runs).
Goal (issue 11): Python at most 1.2x the CLI.

    python3 scripts/bench/python_vs_cli.py [--runs N] [--kopt target/release/kopt]

Needs the kopt wheel installed in the running interpreter.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KERNELS = 2000


def synthesize(path: Path) -> None:
    """2,000 distinct kernels: the labeled suite's real rows, renamed (as
    crates/kopt/benches/html_report.rs does)."""
    lines = (REPO / "fixtures/labeled-suite-h100/ncu_raw_base.csv").read_text().splitlines()
    header, units, rows = lines[0], lines[1], [l for l in lines[2:] if l]
    with path.open("w") as out:
        out.write(f"{header}\n{units}\n")
        for i in range(KERNELS):
            cells = rows[i % len(rows)][1:-1].split('","')
            cells[0] = str(i)
            cells[4] = f"void ns::kernel_{i}<float, {i % 7}, (int)-1>(const T1 *, T2 &)"
            out.write('"' + '","'.join(cells) + '"\n')


def timed(argv) -> float:
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--kopt", default=str(REPO / "target/release/kopt"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        csv = Path(d) / "kernels2000.csv"
        synthesize(csv)
        cli = [a.kopt, "analyze", str(csv), "--format", "json"]
        py = [sys.executable, "-c", f"import kopt; kopt.analyze({str(csv)!r})"]
        timed(cli), timed(py)  # warm the page cache and the import
        c, p = [], []
        for _ in range(a.runs):
            c.append(timed(cli))
            p.append(timed(py))
    mc, mp = statistics.median(c), statistics.median(p)
    print(f"2,000-kernel capture, {a.runs} runs each, interleaved, whole processes")
    print(f"  kopt analyze (CLI, {a.kopt}): median {mc * 1e3:.1f} ms (min {min(c) * 1e3:.1f})")
    print(f"  python -c 'import kopt; kopt.analyze(...)': median {mp * 1e3:.1f} ms (min {min(p) * 1e3:.1f})")
    print(f"  ratio python / CLI: {mp / mc:.2f}x (goal <= 1.2x)")


if __name__ == "__main__":
    main()
