"""kopt.optimize in-process on the MoE routing module (GPU machine, kopt
wheel installed): the report, and the returned callable against eager."""

import importlib.util
import sys
from pathlib import Path

import torch

import kopt

here = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("moe_routing", here / "moe_routing.py")
moe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(moe)

out = Path(sys.argv[1] if len(sys.argv) > 1 else "optimize-python")
model = moe.Model(*moe.get_init_inputs()).cuda().eval()
example = [x.cuda() for x in moe.get_inputs()]
result = kopt.optimize(model, example, runs_dir=out / "runs", db=out / "history.db", journal=out / "OPTIMIZATIONS.md", name="topk_sort")
print(result)
print("best:", result.best, "speed-up:", result.speedup)
x = torch.randn(4, 64, device="cuda")
with torch.inference_mode():
    got = [t.clone() for t in result.optimized(x)]
    want = model(x)
for g, w in zip(got, want):
    assert torch.equal(g, w) if not g.is_floating_point() else torch.allclose(g, w, rtol=1e-5, atol=1e-6), "the optimized callable differs from eager"
print("optimized callable matches eager on a new input")
