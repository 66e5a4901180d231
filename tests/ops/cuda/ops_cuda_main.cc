// Entry point of the CUDA op harness.
//
//   ops_cuda_test                 every case: CudaOps vs the CPU ref oracle
//   ops_cuda_test --filter=SUB    only cases whose name contains SUB
//   ops_cuda_test --perf          perf mode at V4-Flash shapes (ops_cuda_perf.cc), no checks
//   ops_cuda_test --list          case names
// Exit status: 0 all checks passed, 1 a check failed, 77 no usable GPU (CTest: skipped), with
// the reason printed, so CPU-only machines and CI report a skip, not a failure.
#include <cstdio>
#include <cstring>
#include <string>

#include "cuda_test_util.h"

namespace deepinfer::backend::cuda_test {
int run_perf(cuda::CudaOps& gpu, const std::string& filter);
}  // namespace deepinfer::backend::cuda_test

int main(int argc, char** argv) {
  using namespace deepinfer::backend;
  std::string filter;
  bool perf = false, list = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--filter=", 9) == 0) {
      filter = argv[i] + 9;
    } else if (std::strcmp(argv[i], "--perf") == 0) {
      perf = true;
    } else if (std::strcmp(argv[i], "--list") == 0) {
      list = true;
    } else {
      std::fprintf(stderr, "usage: %s [--filter=SUBSTRING] [--perf] [--list]\n", argv[0]);
      return 2;
    }
  }
  if (list) {
    for (const auto& c : cuda_test::registry()) std::printf("%s\n", c.name);
    return 0;
  }
  const deepinfer::Status avail = cuda::cuda_available(0);
  if (!avail.ok()) {
    std::printf("SKIPPED: CUDA op harness not run: %s\n", avail.to_string().c_str());
    return 77;
  }
  auto gpu = cuda::CudaOps::create(0);
  if (!gpu.ok()) {
    std::printf("SKIPPED: %s\n", gpu.status().to_string().c_str());
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s, compute capability %d.%d, %d SMs, %.1f GiB\n", prop.name, prop.major,
              prop.minor, prop.multiProcessorCount,
              static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  if (perf) return cuda_test::run_perf(*gpu.value(), filter);

  auto ref = cpu::make_ref_ops();
  cuda_test::Context ctx;
  ctx.ref = ref.get();
  ctx.gpu = gpu.value().get();
  int cases = 0, failed_cases = 0;
  for (const auto& c : cuda_test::registry()) {
    if (!filter.empty() && std::string(c.name).find(filter) == std::string::npos) continue;
    const int before = ctx.failures, checks_before = ctx.checks;
    std::printf("[ RUN  ] %s\n", c.name);
    std::fflush(stdout);
    c.fn(ctx);
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      std::printf("  FAIL CUDA error after case: %s\n", cudaGetErrorString(e));
      ++ctx.failures;
    }
    ++cases;
    const bool ok = ctx.failures == before;
    failed_cases += ok ? 0 : 1;
    std::printf("[ %s ] %s (%d checks)\n", ok ? " OK " : "FAIL", c.name,
                ctx.checks - checks_before);
    std::fflush(stdout);
  }
  std::printf("%d cases, %d checks, %d failed checks, %d failed cases\n", cases, ctx.checks,
              ctx.failures, failed_cases);
  return ctx.failures == 0 && cases > 0 ? 0 : 1;
}
