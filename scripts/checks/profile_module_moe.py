"""profile_module on a seed-000-like MoE routing module (topk + sort + cat,
batch 4), printed as seed 000 prints it. Run on the GPU machine with the
kopt wheel installed:  python3 profile_module_moe.py OUT_DIR
"""

import sys
import time
from pathlib import Path

import kopt

# The same MoE routing module kopt optimize's GPU check uses.
SCRIPT = (Path(__file__).resolve().parent / "optimize" / "moe_routing.py").read_text()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    analysis = kopt.profile_module(
        script_content=SCRIPT,
        module_name="topk_sort",
        gpu_id=0,
        runs_dir=out / "runs",
        db=out / "history.db",
    )
    print(f"profile_module took {time.perf_counter() - started:.1f} s")
    print(f"Primary bottleneck: {analysis.primary_bottleneck_component}")
    print(f"Bottleneck type: {analysis.primary_bottleneck_type}")
    for rec in analysis.recommendations:
        print(f"  - {rec}")
    print()
    print(analysis.to_text(width=160))
    (out / "analysis.json").write_text(analysis.to_json())
    (out / "analysis.html").write_text(analysis._repr_html_())


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "profile-module-out"))
