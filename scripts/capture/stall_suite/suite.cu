// kopt's stall suite: CUDA kernels each slow for ONE known reason (issue #29),
// plus a shared-memory transpose with bank conflicts (issue #23).
//   nvcc -O3 -arch=sm_90 -o suite suite.cu && ./suite [launches]
// Every kernel runs `launches` times (default 3), each launch a few ms, so
// that kopt profile's 99% coverage takes in every one of them.
//
// kernel                 planted cause
// stall_divergent        32-way divergence: one active lane per warp at a time
// stall_barrier          __syncthreads() after every tiny step
// stall_atomic           every thread atomicAdds into 64 addresses (contention)
// stall_xu               __sinf/__expf/rsqrtf loop: the special-function (XU) pipe
// stall_tail             133 blocks on 132 SMs at 1 block/SM: a half-empty last wave
// stall_chase            a pointer chase through DRAM: latency
// stall_transpose_bank   32x32 shared tile without padding: 32-way bank conflicts
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

__constant__ float c_coef[32];

// Lane l does its work only when the loop reaches l: 32 serialized sections,
// each with one active lane. The inner loop's trip count is a run-time value,
// so the compiler branches (it cannot predicate a loop).
__global__ void stall_divergent(float* out, int iters) {
  int lane = threadIdx.x & 31;
  float a = lane, b = lane + 1.f, c = lane + 2.f, d = lane + 3.f;
  for (int l = 0; l < 32; ++l) {
    if (lane == l) {
      float k = c_coef[l];
      for (int i = 0; i < iters; ++i) {
        a = fmaf(a, k, 1.f);
        b = fmaf(b, k, 2.f);
        c = fmaf(c, k, 3.f);
        d = fmaf(d, k, 4.f);
      }
    }
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}

// A barrier after every tiny step: warps spend their time waiting at it.
__global__ void stall_barrier(float* out, int steps) {
  __shared__ float s[1024];
  int t = threadIdx.x;
  float x = t;
  s[t] = x;
  __syncthreads();
  for (int i = 0; i < steps; ++i) {
    x = x * 0.999f + s[(t + i) & (blockDim.x - 1)];
    __syncthreads();
    s[t] = x;
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + t] = x;
}

// Every thread adds into one of 64 counters: thousands of threads per address.
__global__ void stall_atomic(unsigned* bins, int iters) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < iters; ++k) atomicAdd(&bins[(i + k) & 63], 1u);
}

// Transcendentals in a loop: the XU (special-function) pipe, 16 lanes/clk/SM.
__global__ void stall_xu(float* out, int iters) {
  float x = (threadIdx.x + 1) * 1e-3f, y = x + 0.5f, z = x + 1.5f, w = x + 2.5f;
  for (int i = 0; i < iters; ++i) {
    x = __sinf(x) + 1.1f;
    y = __expf(-y) + 0.7f;
    z = rsqrtf(z) + 1.3f;
    w = __cosf(w) + 1.2f;
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = x + y + z + w;
}

// Compute-bound blocks, 1 per SM (launch bounds and shared memory), grid =
// SMs + 1: the last wave holds one block and the kernel takes two waves' time.
__global__ void __launch_bounds__(1024, 1) stall_tail(float* out, int iters) {
  extern __shared__ float big[];
  float a = threadIdx.x, b = a + 1.f, c = a + 2.f, d = a + 3.f;
  for (int i = 0; i < iters; ++i) {
    a = fmaf(a, 0.9999f, 1.f);
    b = fmaf(b, 0.9999f, 2.f);
    c = fmaf(c, 0.9999f, 3.f);
    d = fmaf(d, 0.9999f, 4.f);
  }
  big[threadIdx.x] = a + b;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = big[threadIdx.x ^ 1] + c + d;
}

// Follow a random cycle through a 256 MB array: each load waits for the last.
__global__ void stall_chase(const unsigned* next, unsigned* out, int hops) {
  unsigned p = (blockIdx.x * blockDim.x + threadIdx.x) * 7919u % (64u << 20);
  for (int i = 0; i < hops; ++i) p = next[p];
  out[blockIdx.x * blockDim.x + threadIdx.x] = p;
}

// Transpose through a 32x32 shared tile with no padding: the column read of
// each warp hits one bank 32 times.
__global__ void stall_transpose_bank(const float* in, float* out, int n, int reps) {
  __shared__ float tile[32][32];
  int x = blockIdx.x * 32 + threadIdx.x, y0 = blockIdx.y * 32;
  float acc = 0.f;
  for (int r = 0; r < reps; ++r) {
    for (int j = threadIdx.y; j < 32; j += blockDim.y) tile[j][threadIdx.x] = in[(y0 + j) * n + x];
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += blockDim.y) acc += tile[threadIdx.x][j];
    __syncthreads();
  }
  int tx = blockIdx.y * 32 + threadIdx.x, ty0 = blockIdx.x * 32;
  for (int j = threadIdx.y; j < 32; j += blockDim.y) out[(ty0 + j) * n + tx] = acc + tile[threadIdx.x][j];
}

int main(int argc, char** argv) {
  int launches = argc > 1 ? atoi(argv[1]) : 3;
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  float coef[32];
  for (int i = 0; i < 32; ++i) coef[i] = 0.999f - i * 1e-4f;
  CK(cudaMemcpyToSymbol(c_coef, coef, sizeof coef));

  const size_t big = 64u << 20;  // 64 M elements
  float *f1, *f2;
  unsigned *next, *u1;
  CK(cudaMalloc(&f1, big * sizeof(float)));
  CK(cudaMalloc(&f2, big * sizeof(float)));
  CK(cudaMalloc(&next, big * sizeof(unsigned)));
  CK(cudaMalloc(&u1, 1 << 20));
  CK(cudaMemset(f1, 0, big * sizeof(float)));
  CK(cudaMemset(u1, 0, 1 << 20));
  {  // a random single cycle (Sattolo) over the chase array
    unsigned* h = (unsigned*)malloc(big * sizeof(unsigned));
    for (size_t i = 0; i < big; ++i) h[i] = (unsigned)i;
    unsigned long long s = 88172645463325252ull;
    for (size_t i = big - 1; i > 0; --i) {
      s ^= s << 13; s ^= s >> 7; s ^= s << 17;
      size_t j = s % i;
      unsigned t = h[i]; h[i] = h[j]; h[j] = t;
    }
    CK(cudaMemcpy(next, h, big * sizeof(unsigned), cudaMemcpyHostToDevice));
    free(h);
  }
  const int tail_smem = 150 * 1024;
  CK(cudaFuncSetAttribute(stall_tail, cudaFuncAttributeMaxDynamicSharedMemorySize, tail_smem));
  const int n = 4096;

  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int k = 0; k < 7; ++k) {
    CK(cudaEventRecord(e0));
    for (int r = 0; r < launches; ++r) {
      switch (k) {
        case 0: stall_divergent<<<sms * 8, 256>>>(f2, 800); break;
        case 1: stall_barrier<<<sms * 4, 512>>>(f2, 20000); break;
        case 2: stall_atomic<<<sms * 8, 256>>>(u1, 128); break;
        case 3: stall_xu<<<sms * 8, 256>>>(f2, 4000); break;
        case 4: stall_tail<<<sms + 1, 1024, tail_smem>>>(f2, 50000); break;
        case 5: stall_chase<<<sms, 64>>>(next, u1, 2000); break;
        case 6: stall_transpose_bank<<<dim3(n / 32, n / 32), dim3(32, 8)>>>(f1, f2, n, 16); break;
      }
      CK(cudaGetLastError());
    }
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    static const char* names[] = {"stall_divergent", "stall_barrier", "stall_atomic", "stall_xu",
                                  "stall_tail", "stall_chase", "stall_transpose_bank"};
    printf("%-22s %8.3f ms per launch\n", names[k], ms / launches);
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
