// Issue 5's planted A/B kernel: a chain of dependent FMAs per thread, so the
// kernel's time is proportional to the work (`--scale` 0.90 = 10% faster,
// 1.03 = 3% slower). Prints one {"kopt_sample_ns": N} line per repetition
// (CUDA events around one launch); with --nvtx each repetition is also an
// NVTX range "step", for kopt bench's GPU timing source.
//   nvcc -O3 -arch=sm_90 vk.cu -o vk && ./vk --scale 0.9 --reps 40 [--nvtx]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

__global__ void fma_chain(float* out, int iters) {
    float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 1e-4f;
    for (int i = 0; i < iters; ++i) {
        a = fmaf(a, b, c);
        b = fmaf(b, 0.99999f, 1e-6f);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a + b;
}

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

int main(int argc, char** argv) {
    double scale = 1.0; int reps = 40; bool nvtx = false; int base_iters = 20000;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--scale") && i + 1 < argc) scale = atof(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) base_iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--nvtx")) nvtx = true;
        else { fprintf(stderr, "usage: vk [--scale S] [--reps N] [--iters N] [--nvtx]\n"); return 2; }
    }
    int iters = (int)(base_iters * scale + 0.5);
    int dev_sms = 0; CK(cudaDeviceGetAttribute(&dev_sms, cudaDevAttrMultiProcessorCount, 0));
    const int blocks = dev_sms * 8, threads = 256;
    float* out; CK(cudaMalloc(&out, sizeof(float) * blocks * threads));
    cudaEvent_t t0, t1; CK(cudaEventCreate(&t0)); CK(cudaEventCreate(&t1));
    for (int w = 0; w < 3; ++w) fma_chain<<<blocks, threads>>>(out, iters);
    CK(cudaDeviceSynchronize());
    for (int r = 0; r < reps; ++r) {
        if (nvtx) nvtxRangePushA("step");
        CK(cudaEventRecord(t0));
        fma_chain<<<blocks, threads>>>(out, iters);
        CK(cudaEventRecord(t1));
        if (nvtx) nvtxRangePop();
        CK(cudaEventSynchronize(t1));
        float ms = 0; CK(cudaEventElapsedTime(&ms, t0, t1));
        printf("{\"kopt_sample_ns\": %.0f}\n", ms * 1e6);
    }
    CK(cudaGetLastError());
    return 0;
}
