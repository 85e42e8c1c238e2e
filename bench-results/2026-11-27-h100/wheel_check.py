"""profile_module from a wheel installed in a fresh venv: does it use the
tracer (a timeline in the report)?  python wheel_check.py OUT_DIR"""
import json
import os
import sys
from pathlib import Path

import kopt

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
pkg = Path(kopt.__file__).resolve().parent
tracer = pkg / "libkopt_tracer.so"
print("kopt", kopt.__version__, "from", pkg, "python", sys.version.split()[0], "prefix", sys.prefix)
print("libkopt_tracer.so in the installed package:", tracer.is_file(),
      tracer.stat().st_size if tracer.is_file() else 0, "bytes")
SCRIPT = (Path(__file__).resolve().parent / "moe_routing.py").read_text()
a = kopt.profile_module(script_content=SCRIPT, module_name="topk_sort", gpu_id=0,
                        runs_dir=out / "runs", db=out / "history.db", profile_top=3)
d = a.to_dict()
print("sources:", [(s.get("path"), s.get("format")) for s in d.get("sources", [])])
print("timeline present:", a.timeline is not None)
if a.timeline is not None:
    print("launch_bound:", a.timeline.launch_bound, "busy_pct:", a.timeline.busy_pct)
    print("verdict:", a.timeline.verdict)
print("primary:", a.primary_bottleneck_component, "/", a.primary_bottleneck_type)
for r in a.recommendations[:3]:
    print("  -", r)
(out / "analysis.json").write_text(a.to_json())
