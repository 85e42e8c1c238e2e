// What CUPTI itself costs per kernel launch on this GPU, without kopt: one
// process alternates loops of 10,000 one-block launches with a CUPTI
// collection off and on (same thread, same core, same clocks), so the paired
// difference is the collection's cost per launch. CFG picks the collection.
//   cupti_floor CFG [pairs] [n]
// It also times the loop before the first enable ("before"), and splits host
// enqueue cost from GPU time per kernel before, while on, and after off.
//   CFG: pure (no CUPTI call at all) | ck (CONCURRENT_KERNEL) | ck_pinned
//        (profiling buffer in pinned host memory) | ck_bigbuf (64 MB device
//        buffers, 6 preallocated) | kernel (KIND_KERNEL, serialising) |
//        api_launch (activity record of cudaLaunchKernel only) | cb_launch
//        (callback API on cudaLaunchKernel, empty callback) | ck_detach (ck,
//        and cuptiFinalize after every "on" loop, re-attaching for the next) | ck_api (what
//        kopt's tracer enables by default: kernels + launch/sync API records)
#include <cuda_runtime.h>
#include <cupti.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x) do { CUptiResult r_ = (x); if (r_ != CUPTI_SUCCESS) { const char* s; cuptiGetResultString(r_, &s); fprintf(stderr, "%s: %s\n", #x, s); exit(2);} } while (0)

__global__ void kopt_noop(int* c) { if (threadIdx.x == 0) c[0] += 1; }
__global__ void kopt_spin(long long ns) {
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}

static size_t g_kernels = 0, g_api = 0;
static void CUPTIAPI buf_req(uint8_t** b, size_t* sz, size_t* max) {
  *sz = 8 << 20; *b = (uint8_t*)aligned_alloc(8, *sz); *max = 0;
}
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t* b, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) g_kernels++;
    else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER) g_api++;
  }
  free(b);
}
static void CUPTIAPI empty_cb(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

static std::string cfg;
static CUpti_SubscriberHandle sub;
static void set_attr(CUpti_ActivityAttribute a, size_t v) { size_t s = sizeof(v); CK(cuptiActivitySetAttribute(a, &s, &v)); }
static void set_attr8(CUpti_ActivityAttribute a, uint8_t v) { size_t s = sizeof(v); CK(cuptiActivitySetAttribute(a, &s, &v)); }

static void setup() {  // before CUDA initialises
  if (cfg == "pure") return;
  if (cfg == "cb_launch") { CK(cuptiSubscribe(&sub, (CUpti_CallbackFunc)empty_cb, nullptr)); return; }
  if (cfg == "ck_pinned") set_attr8(CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, 1);
  if (cfg == "ck_bigbuf") { set_attr(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, 64 << 20); set_attr(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, 6); }
  CK(cuptiActivityRegisterCallbacks(buf_req, buf_done));
}
static void collect(bool on) {
  if (cfg == "pure") return;
  if (cfg == "cb_launch") { CK(cuptiEnableCallback(on, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)); return; }
  if (cfg == "ck_detach" && on) CK(cuptiActivityRegisterCallbacks(buf_req, buf_done));
  auto en = [&](CUpti_ActivityKind k) { if (on) CK(cuptiActivityEnable(k)); else CK(cuptiActivityDisable(k)); };
  if (cfg == "kernel") en(CUPTI_ACTIVITY_KIND_KERNEL);
  if (cfg.rfind("ck", 0) == 0) en(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (cfg == "api_launch" || cfg == "ck_api") {
    CK(cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, on));
    CK(cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, on));
  }
  if (!on) CK(cuptiActivityFlushAll(1));
  if (!on && cfg == "ck_detach") CK(cuptiFinalize());  // detach CUPTI from the process
}

int main(int argc, char** argv) {
  cfg = argc > 1 ? argv[1] : "ck";
  int pairs = argc > 2 ? atoi(argv[2]) : 15, n = argc > 3 ? atoi(argv[3]) : 10000;
  setup();
  int* c; cudaMalloc(&c, 4); cudaMemset(c, 0, 4);
  auto loop = [&] {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; i++) kopt_noop<<<1, 32>>>(c);
    cudaDeviceSynchronize();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
  };
  // Host and GPU apart: launches queued behind a 20 ms spin kernel cost the
  // host only their enqueue; events around them give the GPU's time per kernel.
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto split = [&](double* enq, double* gpu) {
    const int m = 1000;
    kopt_spin<<<1, 1>>>(20000000LL); cudaEventRecord(e0);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < m; i++) kopt_noop<<<1, 32>>>(c);
    *enq = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / m;
    cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); *gpu = ms * 1000.0 / m;
  };
  loop(); double enq_b, gpu_b; split(&enq_b, &gpu_b);
  std::vector<double> before; for (int i = 0; i < 5; i++) before.push_back(loop());
  collect(true); loop(); collect(false); loop();  // warm both paths
  g_kernels = g_api = 0;
  std::vector<double> off, on, diff;
  for (int p = 0; p < pairs; p++) {
    // alternate which comes first so drift does not favour one side
    double a, b;
    if (p % 2 == 0) { a = loop(); collect(true); b = loop(); collect(false); }
    else { collect(true); b = loop(); collect(false); a = loop(); }
    off.push_back(a); on.push_back(b); diff.push_back(b - a);
  }
  double enq_on, gpu_on, enq_off, gpu_off;
  collect(true); split(&enq_on, &gpu_on); collect(false); split(&enq_off, &gpu_off);
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  cudaError_t e = cudaGetLastError();
  uint32_t ver = 0; cuptiGetVersion(&ver);
  printf("{\"cfg\":\"%s\",\"before_us\":%.4f,\"enqueue_us\":[%.4f,%.4f,%.4f],\"gpu_us\":[%.4f,%.4f,%.4f],\"off_us\":%.4f,\"on_us\":%.4f,\"diff_us\":%.4f,\"diff_min\":%.4f,\"diff_max\":%.4f,"
         "\"kernel_records\":%zu,\"api_records\":%zu,\"expected_launches\":%d,\"cupti_api\":%u,\"cuda_error\":\"%s\"}\n",
         cfg.c_str(), med(before), enq_b, enq_on, enq_off, gpu_b, gpu_on, gpu_off, med(off), med(on), med(diff), *std::min_element(diff.begin(), diff.end()),
         *std::max_element(diff.begin(), diff.end()), g_kernels, g_api, pairs * n, ver, cudaGetErrorString(e));
  return 0;
}
