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
#   FAKE_BREAKS: the candidate whose failure breaks CUDA's state: the
#     harness stops and asks for a fresh process without it (exit 75)
# Under a tracer ($KOPT_TRACE_OUT set) the profile driver writes a kopt
# trace of its steps (NVTX `kopt_step` ranges): eager launches four kernels
# a step; a variant with graph capture (graph, compile_reduce_overhead, the
# *_graph forms) replays the same four from one cudaGraphLaunch; any other
# variant runs a GEMM and one fused kernel.
#   FAKE_KEPT_FAILS=1: the driver fails when it runs a variant
#   FAKE_TIMES: comma list of candidate=ns overriding the step times below
#   FAKE_HANGS=1: the harness writes a checkpoint (40 rounds), then never ends
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
if os.environ.get("FAKE_BREAKS") in wanted:
    c = os.environ["FAKE_BREAKS"]
    failed = {c: {"description": c, "status": "failed", "phase": "capture",
                  "error": "RuntimeError: operation not permitted when stream is capturing (it left CUDA's state broken: eager then raised RuntimeError: Offset increment outside graph capture; the rest ran in a fresh process)"}}
    json.dump({"restart": True, "candidates": failed, "samples_ns": {}}, open(os.path.join(out, "result.json"), "w"))
    sys.exit(75)
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
if os.environ.get("FAKE_HANGS") == "1":
    # A checkpoint mid-timing, then timing that never ends: kopt stops it.
    result.update(partial=True, rounds=40)
    json.dump(result, open(os.path.join(out, "result.json"), "w"))
    import time
    time.sleep(600)
json.dump(result, open(os.path.join(out, "result.json"), "w"))
PY
    ;;
  *kopt_profile_driver.py)
    case "$6" in variant=*) [ "$FAKE_KEPT_FAILS" = 1 ] && { echo "RuntimeError: CUDA error: fake failure" >&2; exit 1; } ;; esac
    [ -n "$KOPT_TRACE_OUT" ] || exit 0
    exec python3 - "$KOPT_TRACE_OUT" "$4" "$5" "${6:-}" <<'PY'
import json, sys
out, warmup, steps, variant = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
parts = variant[len("variant="):].split("+") if variant.startswith("variant=") else []
graphed = any(p in ("graph", "compile_reduce_overhead", "compile_max_autotune_graph") for p in parts)
# Kernel names as an H100 recorded them (fixtures/graph-replay-h100).
gemm = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
if not parts or graphed:
    kernels = [(gemm, 40_000),
               ("_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_18GeluCUDAKernelImplERNS_18TensorIteratorBaseENS0_8GeluTypeEENKUlvE0_clEvENKUlvE0_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_", 10_000),
               ("_ZN8cublasLt19splitKreduce_kernelILi32ELi16EiffffLb0EfffLb1ELb1ELb0ELb0EEEvNS_18cublasSplitKParamsIT4_EEPKT2_PKT8_PT7_PT3_PKS2_SF_PKT9_S6_PSG_PvlPS2_PiSL_SL_SF_SF_SF_SF_SF_", 8_000),
               ("_ZN2at6native53_GLOBAL__N__21739cd4_20_layer_norm_kernel_cu_9c5ada8a28vectorized_layer_norm_kernelIffLb0EEEviT0_PKT_S6_S6_PS3_S7_PS4_", 12_000)]
else:
    kernels = [(gemm, 40_000), ("triton_per_fused_add_gelu_native_layer_norm_0", 15_000)]
recs = [{"t": "process", "pid": 1}, {"t": "device", "id": 0, "name": "NVIDIA H100 80GB HBM3", "sms": 132, "cc": [9, 0]}]
t, c = 1_000_000, 0
for i in range(warmup + steps):
    recs.append({"t": "range_start", "id": i, "s": t, "tid": 1, "name": "kopt_step", "dom": ""})
    gpu = t + 5_000
    if graphed:
        c += 1
        recs.append({"t": "api", "name": "cudaGraphLaunch_v10000", "s": t + 1_000, "e": t + 4_000, "tid": 1, "c": c})
        for name, ns in kernels:
            recs.append({"t": "kernel", "name": name, "s": gpu, "e": gpu + ns, "dev": 0, "str": 7, "c": c, "graph": 1})
            gpu += ns + 1_000
        t = gpu + 2_000
    else:
        host = t
        for name, ns in kernels:
            c += 1
            recs.append({"t": "api", "name": "cudaLaunchKernel_v7000", "s": host, "e": host + 20_000, "tid": 1, "c": c})
            gpu = max(gpu, host + 25_000)
            recs.append({"t": "kernel", "name": name, "s": gpu, "e": gpu + ns, "dev": 0, "str": 7, "c": c, "graph": 0})
            gpu += ns
            host += 30_000
        t = max(host, gpu) + 2_000
    recs.append({"t": "range_end", "id": i, "s": t - 1_000})
recs.append({"t": "end", "records": len(recs), "dropped": 0, "lost_buffers": 0})
with open(out, "w") as f:
    f.write("".join(json.dumps(r) + "\n" for r in recs))
PY
    ;;
  *) exit 0 ;;
esac
