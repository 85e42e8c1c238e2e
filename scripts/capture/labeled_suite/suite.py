"""kopt's labeled kernel suite: each kernel has one planted bottleneck.

Run on a CUDA machine with CuPy and PyTorch. Custom kernels are compiled by
NVRTC through CuPy (names are extern "C", prefixed `kopt_`); the bf16 GEMM
goes through PyTorch (cuBLAS). Every planted kernel runs `--reps` times so
that kopt's per-kernel roll-up sees several launches.

    python3 suite.py [--reps 2] [--chain 192] [--check]

Planted kernel              expected kopt class
kopt_copy_coalesced         memory (dram, at roofline)
kopt_gather_strided         uncoalesced
kopt_transpose_smem_naive   bank_conflict
kopt_transpose_smem_padded  memory (the fixed twin: no conflicts)
kopt_occupancy_smem         occupancy (limited by shared memory)
kopt_tiny_step x chain      small_grid (one block; launch overhead needs a timeline)
kopt_fma_loop               compute (fp32)
nvjet/cutlass bf16 GEMM     compute (tensor, at roofline)
kopt_gridstride_8blocks     small_grid (8 blocks on 132 SMs)
"""
import argparse
import sys

import cupy as cp
import torch

SRC = r"""
#define TILE 32
#define ROWS 8

extern "C" __global__ void kopt_copy_coalesced(const float4* __restrict__ in,
                                               float4* __restrict__ out, size_t n4) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n4) out[i] = in[i];
}

// Neighbouring threads read elements 33 floats apart: every thread of a warp
// touches its own 32-byte sector (1/8 of each sector is used).
extern "C" __global__ void kopt_gather_strided(const float* __restrict__ in,
                                               float* __restrict__ out,
                                               unsigned n, unsigned stride) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[(unsigned)(((unsigned long long)i * stride) & (n - 1))];
}

// Column reads of an unpadded 32x32 tile: a 32-way shared-memory bank conflict.
extern "C" __global__ void kopt_transpose_smem_naive(const float* __restrict__ in,
                                                     float* __restrict__ out, int n) {
    __shared__ float tile[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) out[(size_t)(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

// The same transpose with one column of padding: conflict-free.
extern "C" __global__ void kopt_transpose_smem_padded(const float* __restrict__ in,
                                                      float* __restrict__ out, int n) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) out[(size_t)(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

// 160 KiB of dynamic shared memory per block: one block (4 warps) per SM,
// 6.25% theoretical occupancy, too few loads in flight to cover DRAM latency.
extern "C" __global__ void kopt_occupancy_smem(const float* __restrict__ in,
                                               float* __restrict__ out, int per_block) {
    extern __shared__ float buf[];
    const float* p = in + (size_t)blockIdx.x * per_block;
    float acc = 0.f;
    for (int i = threadIdx.x; i < per_block; i += blockDim.x) acc += p[i];
    buf[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int i = 0; i < blockDim.x; ++i) s += buf[i];
        out[blockIdx.x] = s;
    }
}

// One block of one warp doing almost nothing: launch-latency bound.
extern "C" __global__ void kopt_tiny_step(int* counter) {
    if (threadIdx.x == 0) counter[0] += 1;
}

// Eight independent FMA chains per thread, all in registers: FP32-pipe bound.
extern "C" __global__ void kopt_fma_loop(float* __restrict__ out, int iters) {
    float a0 = threadIdx.x * 1e-3f, a1 = a0 + 1.f, a2 = a0 + 2.f, a3 = a0 + 3.f;
    float a4 = a0 + 4.f, a5 = a0 + 5.f, a6 = a0 + 6.f, a7 = a0 + 7.f;
    const float b = 0.999f, c = 1e-4f;
    for (int i = 0; i < iters; ++i) {
        a0 = fmaf(a0, b, c); a1 = fmaf(a1, b, c); a2 = fmaf(a2, b, c); a3 = fmaf(a3, b, c);
        a4 = fmaf(a4, b, c); a5 = fmaf(a5, b, c); a6 = fmaf(a6, b, c); a7 = fmaf(a7, b, c);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

// A correct grid-stride loop launched with only 8 blocks: 8 of 132 SMs work.
extern "C" __global__ void kopt_gridstride_8blocks(const float* __restrict__ x,
                                                   float* __restrict__ y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = 2.f * x[i] + 1.f;
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2, help="launches of each planted kernel")
    ap.add_argument("--chain", type=int, default=192, help="one-block kernels in the launch chain")
    ap.add_argument("--check", action="store_true", help="verify every output (adds kernels)")
    args = ap.parse_args()

    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    k = {name: mod.get_function(name) for name in (
        "kopt_copy_coalesced", "kopt_gather_strided", "kopt_transpose_smem_naive",
        "kopt_transpose_smem_padded", "kopt_occupancy_smem", "kopt_tiny_step",
        "kopt_fma_loop", "kopt_gridstride_8blocks")}
    smem_bytes = 160 * 1024
    k["kopt_occupancy_smem"].max_dynamic_shared_size_bytes = smem_bytes

    rng = cp.random.default_rng(1234)
    n = 64 * 1024 * 1024                      # 256 MiB of fp32
    src = rng.random(n, dtype=cp.float32)
    dst = cp.empty_like(src)
    gn = 16 * 1024 * 1024                     # gather over 64 MiB
    gsrc = src[:gn]
    gdst = cp.empty(gn, dtype=cp.float32)
    tn = 8192                                 # 8192^2 fp32 transpose
    tin = src[: tn * tn].reshape(tn, tn)
    tout = cp.empty((tn, tn), dtype=cp.float32)
    occ_blocks, occ_threads = 512, 128
    per_block = (32 * 1024 * 1024) // occ_blocks
    occ_out = cp.empty(occ_blocks, dtype=cp.float32)
    counter = cp.zeros(1, dtype=cp.int32)
    fma_blocks, fma_threads, fma_iters = 132 * 8, 256, 16384
    fma_out = cp.empty(fma_blocks * fma_threads, dtype=cp.float32)
    gs_n = 16 * 1024 * 1024
    gs_out = cp.empty(gs_n, dtype=cp.float32)
    torch.manual_seed(0)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    cp.cuda.Device().synchronize()

    checks = []
    for _ in range(args.reps):
        k["kopt_copy_coalesced"]((n // 4 // 256,), (256,), (src, dst, cp.uint64(n // 4)))
        k["kopt_gather_strided"]((gn // 256,), (256,), (gsrc, gdst, cp.uint32(gn), cp.uint32(33)))
        k["kopt_transpose_smem_naive"]((tn // 32, tn // 32), (32, 8), (tin, tout, cp.int32(tn)))
        if args.check:
            checks.append(("transpose_naive", bool(cp.array_equal(tout, tin.T))))
        k["kopt_transpose_smem_padded"]((tn // 32, tn // 32), (32, 8), (tin, tout, cp.int32(tn)))
        k["kopt_occupancy_smem"]((occ_blocks,), (occ_threads,), (src, occ_out, cp.int32(per_block)),
                                 shared_mem=smem_bytes)
        k["kopt_fma_loop"]((fma_blocks,), (fma_threads,), (fma_out, cp.int32(fma_iters)))
        c = a @ b
        k["kopt_gridstride_8blocks"]((8,), (256,), (src, gs_out, cp.uint64(gs_n)))
    cp.cuda.Device().synchronize()
    for _ in range(args.chain):
        k["kopt_tiny_step"]((1,), (32,), (counter,))
    cp.cuda.Device().synchronize()
    torch.cuda.synchronize()

    if args.check:
        checks.append(("copy", bool(cp.array_equal(dst, src))))
        idx = (cp.arange(gn, dtype=cp.uint64) * 33) & (gn - 1)
        checks.append(("gather", bool(cp.array_equal(gdst, gsrc[idx]))))
        checks.append(("transpose_padded", bool(cp.array_equal(tout, tin.T))))
        ref = src[: occ_blocks * per_block].reshape(occ_blocks, per_block).sum(axis=1)
        checks.append(("occupancy_sum", bool(cp.allclose(occ_out, ref, rtol=1e-3))))
        checks.append(("chain", int(counter.get()[0]) == args.chain))
        checks.append(("fma_finite", bool(cp.isfinite(fma_out).all())))
        checks.append(("gridstride", bool(cp.allclose(gs_out, 2 * src[:gs_n] + 1))))
        ref_c = (a[:256].float() @ b.float())
        err = ((c[:256].float() - ref_c).norm() / ref_c.norm()).item()
        checks.append(("gemm_bf16_rel_l2<1e-2", err < 1e-2))
        bad = [name for name, ok in checks if not ok]
        print("suite check:", "all ok" if not bad else f"FAILED {bad}", checks)
        if bad:
            sys.exit(1)


if __name__ == "__main__":
    main()
