// The CUDA driver of the op harness (../op_harness.h): every registered op case on CudaOps
// against the CPU ref oracle, the same cases the GoogleTest driver runs on the CPU backends
// (../ops_cases_test.cc). A plain executable with its own output, so it builds on GPU machines
// that have no GoogleTest (the minimal configuration, tools/gpu/run_cuda_ops.sh).
//
//   ops_cuda_test                 every case: CudaOps vs the CPU ref oracle
//   ops_cuda_test --filter=SUB    only cases whose name contains SUB
//   ops_cuda_test --only=NAME     only the case named NAME (run_model_cuda.sh's ops stage runs
//                                 the --list cases this way, several processes at once)
//   ops_cuda_test --perf          perf mode at V4-Flash shapes (ops_cuda_perf.cc), no checks
//   ops_cuda_test --list          case names, with the backends each is for
// Per case: "[ RUN  ] name", each failed check as "  FAIL what: why", then "[  OK  ] name (N
// checks)", "[ FAIL ] name (N checks)" or "[ SKIP ] name: why" (a feature CudaOps lacks, or a
// case for the CPU backends only); last line "N cases, M checks, F failed checks, C failed
// cases, S skipped". Exit status: 0 all checks passed, 1 a check failed, 77 no usable GPU
// (CTest: skipped), with the reason printed, so CPU-only machines report a skip, not a failure.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "op_harness.h"

namespace deepinfer::backend::testing {
int run_perf(cuda::CudaOps& gpu, const std::string& filter);

// CudaOps' own forms, beside the oracle cases: the decode GEMV that act-quantizes x itself
// (1-4 rows, FP8 / FP4 weights, launch_linear_quantized) gives the bits of the quantized copy
// followed by the same GEMV, rounded or not.
void check_fused_act_quant(cuda::CudaOps& gpu, CaseContext& ctx) {
  for (WKind kind : {WKind::kFp8E8m0, WKind::kFp4})
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{1024, 4096}, {37, 256}, {5, 96}}) {
      auto w = test_weight(ctx, kind, n, k);
      for (int64_t M : {1, 2, 3, 4})
        for (bool round : {false, true}) {
          const DBuf x = dev_copy(ctx, random_buf(ctx.rng, M, k, -8.0f, 8.0f));
          DBuf fused = dev_poisoned(ctx, M, n), copy = dev_poisoned(ctx, M, n, 1);
          gpu.set_linear_mma_min_rows(int64_t{1} << 40);  // the GEMV at 2-4 rows too
          gpu.set_fused_act_quant(true);
          gpu.linear(x.cmat(), w->dev.ref, fused.mat(), {.act_quant = true, .round_bf16 = round});
          gpu.set_fused_act_quant(false);  // the default
          gpu.linear(x.cmat(), w->dev.ref, copy.mat(), {.act_quant = true, .round_bf16 = round});
          gpu.set_linear_mma_min_rows(2);
          close(ctx,
                std::string("fused act quant ") + wkind_name(kind) + " M=" + std::to_string(M) +
                    " " + std::to_string(n) + "x" + std::to_string(k) + (round ? " rounded" : ""),
                fused.download(), copy.download(), 0.0);
        }
    }
}
}  // namespace deepinfer::backend::testing

int main(int argc, char** argv) {
  using namespace deepinfer::backend;
  using testing::OpCase;
  std::string filter, only;
  bool perf = false, list = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--filter=", 9) == 0) {
      filter = argv[i] + 9;
    } else if (std::strncmp(argv[i], "--only=", 7) == 0) {
      only = argv[i] + 7;
    } else if (std::strcmp(argv[i], "--perf") == 0) {
      perf = true;
    } else if (std::strcmp(argv[i], "--list") == 0) {
      list = true;
    } else {
      std::fprintf(stderr, "usage: %s [--filter=SUBSTRING | --only=NAME] [--perf] [--list]\n",
                   argv[0]);
      return 2;
    }
  }
  // CudaOps' own case, filtered and reported like the registered ones.
  constexpr const char* kFusedCase = "linear_fused_act_quant_cuda";
  constexpr const char* kStagedSplitCase = "sparse_attention_staged_split_cuda";
  auto selected = [&](const char* name) {
    if (!only.empty()) return only == name;
    return filter.empty() || std::string(name).find(filter) != std::string::npos;
  };
  if (list) {
    for (const OpCase& c : testing::op_cases()) {
      std::printf("%s (%s)\n", c.name, testing::on_backends_name(c.on));
    }
    std::printf("%s (cuda)\n", kFusedCase);
    std::printf("%s (cuda)\n", kStagedSplitCase);
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
  if (perf) return testing::run_perf(*gpu.value(), filter);

  auto ref = cpu::make_ref_ops();
  testing::CaseContext ctx;
  ctx.ops = gpu.value().get();
  ctx.ref = ref.get();
  auto invariant = cuda::CudaOps::create(0, /*batch_invariant=*/true);
  if (!invariant.ok()) {
    std::printf("FAIL: the batch-invariant backend: %s\n", invariant.status().to_string().c_str());
    return 1;
  }
  ctx.invariant_ops = invariant.value().get();
  ctx.on = testing::kOnCuda;
  ctx.report = [](const std::string& msg) { std::printf("  FAIL %s\n", msg.c_str()); };
  int cases = 0, failed_cases = 0, skipped = 0;
  for (const OpCase& c : testing::op_cases()) {
    if (!selected(c.name)) continue;
    if ((c.on & testing::kOnCuda) == 0) {
      std::printf("[ SKIP ] %s: for %s backends only\n", c.name, testing::on_backends_name(c.on));
      ++skipped;
      continue;
    }
    const Feature missing = testing::missing_feature(c, *ctx.ops);
    if (missing != Feature::kCount) {
      std::printf("[ SKIP ] %s: CudaOps does not support %s yet\n", c.name, feature_name(missing));
      ++skipped;
      continue;
    }
    const int failures_before = ctx.failures, checks_before = ctx.checks;
    std::printf("[ RUN  ] %s\n", c.name);
    std::fflush(stdout);
    testing::run_case(c, ctx);
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      std::printf("  FAIL CUDA error after case: %s\n", cudaGetErrorString(e));
      ++ctx.failures;
    }
    ++cases;
    const bool ok = ctx.failures == failures_before;
    failed_cases += ok ? 0 : 1;
    std::printf("[ %s ] %s (%d checks)\n", ok ? " OK " : "FAIL", c.name,
                ctx.checks - checks_before);
    std::fflush(stdout);
  }
  // CudaOps' own cases, beside the registered ones: `run` adds its checks to ctx.
  const auto own_case = [&](const char* name, const std::function<void()>& run) {
    if (!selected(name)) return;
    const int failures_before = ctx.failures, checks_before = ctx.checks;
    std::printf("[ RUN  ] %s\n", name);
    run();
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      std::printf("  FAIL CUDA error after case: %s\n", cudaGetErrorString(e));
      ++ctx.failures;
    }
    ++cases;
    const bool ok = ctx.failures == failures_before && ctx.checks > checks_before;
    failed_cases += ok ? 0 : 1;
    std::printf("[ %s ] %s (%d checks)\n", ok ? " OK " : "FAIL", name,
                ctx.checks - checks_before);
  };
  // The staged sparse attention's split-key form (off by default until its first GPU run:
  // CudaOps::set_sparse_staged_split): the staged op case again with it on.
  own_case(kStagedSplitCase, [&] {
    gpu.value()->set_sparse_staged_split(true);
    for (const OpCase& c : testing::op_cases()) {
      if (std::strcmp(c.name, "sparse_attention_staged") == 0) testing::run_case(c, ctx);
    }
    gpu.value()->set_sparse_staged_split(false);
  });
  own_case(kFusedCase, [&] { testing::check_fused_act_quant(*gpu.value(), ctx); });
  std::printf("%d cases, %d checks, %d failed checks, %d failed cases, %d skipped\n", cases,
              ctx.checks, ctx.failures, failed_cases, skipped);
  return ctx.failures == 0 && cases + skipped > 0 ? 0 : 1;  // (1: a filter that matched nothing)
}
