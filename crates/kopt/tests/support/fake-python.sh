#!/bin/sh
# A fake Python for `kopt optimize`'s tests (no GPU, no torch): the profile
# driver does nothing; the optimize harness "builds" the candidates, writes
# outputs and CUDA-event samples as the real one would.
#   FAKE_REF / FAKE_BAD: .safetensors outputs (right / wrong)
#   FAKE_WRONG: the candidate whose output is wrong
#   FAKE_FAILS: the candidate that fails to capture
case "$1" in
  *kopt_optimize.py)
    out="$5"
    cp "$FAKE_REF" "$out/reference.safetensors"
    exec python3 - "$out" "$4" <<'PY'
import json, os, random, shutil, sys
out, wanted = sys.argv[1], sys.argv[2].split(",")
rng = random.Random(7)
base = {"graph": 20e3, "compile_reduce_overhead": 99e3, "compile_max_autotune": 100e3, "compile_max_autotune_graph": 18e3}
result = {"device": "Fake GPU", "torch": "0", "candidates": {}, "samples_ns": {"eager": [100e3 * (1 + 0.01 * rng.random()) for _ in range(40)]}}
for c in wanted:
    if c == os.environ.get("FAKE_FAILS"):
        result["candidates"][c] = {"description": c, "status": "failed", "phase": "capture", "error": "RuntimeError: operation not permitted when stream is capturing"}
        continue
    result["candidates"][c] = {"description": c, "status": "ok"}
    src = os.environ["FAKE_BAD"] if c == os.environ.get("FAKE_WRONG") else os.environ["FAKE_REF"]
    shutil.copy(src, os.path.join(out, c + ".safetensors"))
    result["samples_ns"][c] = [base[c] * (1 + 0.01 * rng.random()) for _ in range(40)]
json.dump(result, open(os.path.join(out, "result.json"), "w"))
PY
    ;;
  *) exit 0 ;;
esac
