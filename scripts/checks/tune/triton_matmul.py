"""A Triton matmul (fp16 in, fp32 accumulate) whose tiling comes from the
command line, for `kopt tune`. Prints {"kopt_sample_ns": N} lines (each a
triton.testing.do_bench median) and writes a strided slice of C to --out
for the correctness gate.

  python3 triton_matmul.py --block-m 128 --block-n 128 --block-k 64 \
      --warps 4 --stages 3 --out c.npy
"""

import argparse
import json

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(tl.float16)
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(cm[:, None] < M) & (cn[None, :] < N))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--block-m", type=int, required=True)
    p.add_argument("--block-n", type=int, required=True)
    p.add_argument("--block-k", type=int, required=True)
    p.add_argument("--warps", type=int, required=True)
    p.add_argument("--stages", type=int, required=True)
    p.add_argument("--m", type=int, default=4096)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--samples", type=int, default=10)
    p.add_argument("--rep-ms", type=int, default=25)
    p.add_argument("--out", help=".npy file: C[::16, ::16] as float32")
    a = p.parse_args()
    torch.manual_seed(0)
    m, n, k = a.m, a.n, a.k
    x = torch.randn((m, k), device="cuda", dtype=torch.float16)
    y = torch.randn((k, n), device="cuda", dtype=torch.float16)
    c = torch.empty((m, n), device="cuda", dtype=torch.float16)

    def run():
        grid = (triton.cdiv(m, a.block_m) * triton.cdiv(n, a.block_n),)
        matmul_kernel[grid](x, y, c, m, n, k,
                            x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                            c.stride(0), c.stride(1),
                            BLOCK_M=a.block_m, BLOCK_N=a.block_n, BLOCK_K=a.block_k,
                            GROUP_M=8, num_warps=a.warps, num_stages=a.stages)

    run()
    torch.cuda.synchronize()
    if a.out:
        import numpy as np

        np.save(a.out, c[::16, ::16].float().cpu().numpy())
    for _ in range(a.samples):
        ms = triton.testing.do_bench(run, warmup=5, rep=a.rep_ms)
        print(json.dumps({"kopt_sample_ns": int(ms * 1e6)}), flush=True)


if __name__ == "__main__":
    main()
