// Step ranges in the NVTX forms kopt's bare run reads (issue 14), from C++
// (the GPU machine's Python has no `nvtx` package): a wide-string push, a
// domain push with a registered string, start/end. 30 steps of 8 tiny
// kernels with host gaps between launches, so the steps look launch bound.
//   nvcc -o nvtx_forms nvtx_forms.cu && ./nvtx_forms wide|registered|startend
#include <cstring>
#include <unistd.h>
#include <nvtx3/nvToolsExt.h>

__global__ void bump(float *x) { x[threadIdx.x] += 1.0f; }

int main(int argc, char **argv) {
  const char *form = argc > 1 ? argv[1] : "wide";
  float *d;
  cudaMalloc(&d, 256 * sizeof(float));
  nvtxDomainHandle_t dom = nvtxDomainCreateA("kopt_check");
  nvtxStringHandle_t reg = nvtxDomainRegisterStringA(dom, "step");
  for (int i = 0; i < 30; i++) {
    nvtxRangeId_t id = 0;
    if (!strcmp(form, "wide")) {
      nvtxRangePushW(L"step");
    } else if (!strcmp(form, "registered")) {
      nvtxEventAttributes_t a;
      memset(&a, 0, sizeof a);
      a.version = NVTX_VERSION;
      a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
      a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
      a.message.registered = reg;
      nvtxDomainRangePushEx(dom, &a);
    } else {
      id = nvtxRangeStartA("step");
    }
    for (int j = 0; j < 8; j++) {
      bump<<<1, 256>>>(d);
      usleep(20);
    }
    if (!strcmp(form, "wide")) nvtxRangePop();
    else if (!strcmp(form, "registered")) nvtxDomainRangePop(dom);
    else nvtxRangeEnd(id);
  }
  cudaDeviceSynchronize();
  return 0;
}
