#!/bin/sh
# A fake Python for `kopt optimize`'s tests (no GPU, no torch): the profile
# driver does nothing; the optimize harness "builds" the candidates (and
# stacks of them, joined with "+"), writes outputs and CUDA-event samples
# as the real one would. A stack's time is eager's times each part's ratio.
#   FAKE_REF / FAKE_BAD: .safetensors outputs (right / wrong)
#   FAKE_CLOSE_FILE: outputs off by 1e-3 relative (within TF32's tolerance)
#   FAKE_WRONG: the candidate whose output is wrong (and any stack with it)
#   FAKE_CLOSE: comma list of candidates whose output is FAKE_CLOSE_FILE
#   FAKE_FAILS: the candidate that fails to capture
#   FAKE_SKIP: comma list of candidates the model has nothing for
#   FAKE_TIMES: comma list of candidate=ns overriding the step times below
case "$1" in
  *kopt_optimize.py)
    out="$5"
    cp "$FAKE_REF" "$out/reference.safetensors"
    exec python3 - "$out" "$4" <<'PY'
import json, os, random, shutil, sys
out, wanted = sys.argv[1], sys.argv[2].split(",")
rng = random.Random(7)
base = {"graph": 20e3, "compile": 76e3, "compile_reduce_overhead": 99e3, "compile_max_autotune": 100e3,
        "compile_max_autotune_graph": 18e3, "channels_last": 70e3, "tf32": 50e3,
        "bf16_autocast": 45e3, "sdpa": 60e3, "compile_freezing": 80e3, "cudnn_benchmark": 110e3}
env = lambda k: [x for x in os.environ.get(k, "").split(",") if x]
for kv in env("FAKE_TIMES"):
    k, v = kv.split("=")
    base[k] = float(v)
result = {"device": "Fake GPU", "torch": "0", "candidates": {}, "precision": {"matmul_tf32": False, "cudnn_tf32": True, "uses_cudnn": False},
          "samples_ns": {"eager": [100e3 * (1 + 0.01 * rng.random()) for _ in range(40)]}}
for c in wanted:
    parts = c.split("+")
    if c == os.environ.get("FAKE_FAILS"):
        result["candidates"][c] = {"description": c, "status": "failed", "phase": "capture", "error": "RuntimeError: operation not permitted when stream is capturing"}
        continue
    if any(p in env("FAKE_SKIP") for p in parts):
        result["candidates"][c] = {"description": c, "status": "skipped", "reason": "fake: the model has nothing for it"}
        continue
    result["candidates"][c] = {"description": c, "status": "ok"}
    src = os.environ["FAKE_REF"]
    if any(p in env("FAKE_CLOSE") for p in parts):
        src = os.environ["FAKE_CLOSE_FILE"]
    if os.environ.get("FAKE_WRONG") in parts:
        src = os.environ["FAKE_BAD"]
    shutil.copy(src, os.path.join(out, c + ".safetensors"))
    t = 100e3
    for p in parts:
        t *= base[p] / 100e3
    result["samples_ns"][c] = [t * (1 + 0.01 * rng.random()) for _ in range(40)]
json.dump(result, open(os.path.join(out, "result.json"), "w"))
PY
    ;;
  *) exit 0 ;;
esac
